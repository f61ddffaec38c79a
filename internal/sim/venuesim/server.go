package venuesim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

const (
	// DefaultLatency is a realistic execution latency for a venue run by hand (cmd/venuesim's
	// default); Config.Latency does not default to it.
	DefaultLatency = 130 * time.Millisecond
	// NoLatency in Config.Latency executes at once, as zero does. It stays for callers written
	// when zero meant DefaultLatency.
	NoLatency time.Duration = -1
	// DefaultAccountID is the account the simulator holds when Config.AccountID is empty.
	DefaultAccountID = "101-001-0000001-001"
)

// Config shapes one simulated venue account. The zero value is a working venue with no prices.
type Config struct {
	AccountID string // default DefaultAccountID
	// Token, when set, is the one bearer token the venue accepts; empty accepts any non-empty one.
	Token    string
	Currency string          // the account currency; default USD
	Balance  decimal.Decimal // the opening deposit; default 1,000,000
	Leverage int             // default 50 (a margin rate of 2%)
	// Latency is how long an order or a trade close takes to execute, before its answer is
	// written. Zero or negative (NoLatency) executes at once; DefaultLatency is a realistic one.
	Latency time.Duration
	// Prices quotes the symbols; nil quotes nothing, so every order is cancelled MARKET_HALTED.
	Prices PriceSource
	// Instruments are the symbols (desk form, EURUSD) the account may trade; an order for any
	// other is refused with 400 INSTRUMENT_UNKNOWN and creates nothing. Default
	// DefaultInstruments.
	Instruments []string
	// Now stamps transactions and trades. Default time.Now. Latency, holds and outages run on
	// the real clock: they pace this machine's sockets, not simulated time.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.AccountID == "" {
		c.AccountID = DefaultAccountID
	}
	if c.Currency == "" {
		c.Currency = "USD"
	}
	if c.Balance.IsZero() {
		c.Balance = decimal.NewFromInt(1_000_000)
	}
	if c.Leverage == 0 {
		c.Leverage = 50
	}
	c.Latency = max(c.Latency, 0)
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := fx.CheckAccountCurrency(c.Currency); err != nil {
		return c, fmt.Errorf("venuesim: Currency: %w", err)
	}
	if c.Balance.IsNegative() {
		return c, fmt.Errorf("venuesim: Balance %s must not be negative", c.Balance)
	}
	if c.Leverage < 1 {
		return c, fmt.Errorf("venuesim: Leverage %d must be at least 1", c.Leverage)
	}
	if len(c.Instruments) == 0 {
		c.Instruments = DefaultInstruments
	}
	for _, sym := range c.Instruments {
		if !fx.ValidSymbol(sym) {
			return c, fmt.Errorf("venuesim: Instruments: %q is not six letters like EURUSD", sym)
		}
	}
	return c, nil
}

// faults are the pending injected faults; a new fault of a kind replaces the pending one.
type faults struct {
	fail5xx      int
	timeouts     int
	timeoutAfter time.Duration
	holds        int
	cancels      int
	cancelReason string
	// partials orders still to fill partialPercent of their units (FaultPartial)
	partials, partialPercent int
}

// Server is one simulated venue. Create it with New, bind with Listen (and ListenControl),
// serve with Run.
type Server struct {
	cfg         Config
	log         *slog.Logger
	instruments map[string]bool // cfg.Instruments; read-only

	mu            sync.Mutex
	acct          *account
	latency       time.Duration
	faults        faults
	release       chan struct{} // closed by Release; replaced at once
	held          int
	orderRequests map[string]int // by clientExtensions.id
	requests      map[string]int // by endpoint, "POST /orders"
	conns         map[net.Conn]struct{}
	outageUntil   time.Time // real clock; zero once the trading listener listens again
	trading       *tradingListener
	control       net.Listener
	runCtx        context.Context
	started       bool
	stopped       bool

	accepted atomic.Int64
	wg       sync.WaitGroup // outage timers
}

// New builds a simulator; it does nothing until Listen and Run.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	instruments := make(map[string]bool, len(cfg.Instruments))
	for _, sym := range cfg.Instruments {
		instruments[sym] = true
	}
	return &Server{
		cfg:           cfg,
		log:           log,
		instruments:   instruments,
		acct:          newAccount(cfg, cfg.Now()),
		latency:       cfg.Latency,
		release:       make(chan struct{}),
		orderRequests: make(map[string]int),
		requests:      make(map[string]int),
		conns:         make(map[net.Conn]struct{}),
	}, nil
}

// Listen binds the trading API on addr (e.g. "127.0.0.1:0") and returns the bound address.
func (s *Server) Listen(addr string) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trading != nil {
		return nil, fmt.Errorf("venuesim: listen %s: already listening on %s", addr, s.trading.Addr())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("venuesim: listen %s: %w", addr, err)
	}
	s.trading = newTradingListener(ln)
	return ln.Addr(), nil
}

// ListenControl binds the control API on its own listener, so that an outage of the trading
// listener leaves the control API up.
func (s *Server) ListenControl(addr string) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.control != nil {
		return nil, fmt.Errorf("venuesim: listen control %s: already listening on %s", addr, s.control.Addr())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("venuesim: listen control %s: %w", addr, err)
	}
	s.control = ln
	return ln.Addr(), nil
}

// URL is the trading API's base URL, http://ADDR ("" before Listen): a venue.ClientConfig's BaseURL.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trading == nil {
		return ""
	}
	return "http://" + s.trading.Addr().String()
}

// ControlURL is the control API's base URL, http://ADDR ("" before ListenControl).
func (s *Server) ControlURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.control == nil {
		return ""
	}
	return "http://" + s.control.Addr().String()
}

// AccountID is the account the simulator holds.
func (s *Server) AccountID() string { return s.cfg.AccountID }

// Run serves until ctx ends, then stops both listeners, ends held answers without an answer and
// waits, so the same addresses can be bound again at once. It returns nil after a clean stop.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.trading == nil:
		s.mu.Unlock()
		return errors.New("venuesim: Run before Listen")
	case s.started:
		s.mu.Unlock()
		return errors.New("venuesim: Run called twice")
	}
	s.started = true
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.runCtx = runCtx
	trading, control := s.trading, s.control
	s.mu.Unlock()

	errorLog := slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	servers := []*http.Server{{
		Handler: s.routes(),
		// A client sizes its pool before a burst and keeps the connections open between bursts:
		// the venue must not close them first. The header timeout covers a connection's first
		// request too, so it is generous for the same reason.
		IdleTimeout:       10 * time.Minute,
		ReadHeaderTimeout: time.Minute,
		BaseContext:       func(net.Listener) context.Context { return runCtx },
		ConnState:         s.trackConn,
		ErrorLog:          errorLog,
	}}
	listeners := []net.Listener{trading}
	if control != nil {
		servers = append(servers, &http.Server{
			Handler:           s.controlRoutes(),
			ReadHeaderTimeout: 5 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return runCtx },
			ErrorLog:          errorLog,
		})
		listeners = append(listeners, control)
	}
	serveErr := make(chan error, len(servers))
	for i, hs := range servers {
		go func() { serveErr <- hs.Serve(listeners[i]) }()
	}
	s.log.InfoContext(ctx, "venue simulator listening", slog.String("url", s.URL()),
		slog.String("control", s.ControlURL()), slog.String("account", s.cfg.AccountID),
		slog.Duration("latency", s.cfg.Latency))

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("venuesim: serve: %w", err)
	}
	cancel() // ends held answers, latencies and outage timers
	shutCtx, shutCancel := context.WithTimeout(context.Background(), time.Second)
	defer shutCancel()
	for _, hs := range servers {
		// Shutdown waits five seconds for a connection that never sent a request, and a
		// client that warmed its pool holds such connections: after the grace they are cut.
		if serr := hs.Shutdown(shutCtx); errors.Is(serr, context.DeadlineExceeded) {
			hs.Close()
		} else if serr != nil && err == nil {
			err = fmt.Errorf("venuesim: shutdown: %w", serr)
		}
	}
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wg.Wait()
	s.log.InfoContext(context.WithoutCancel(ctx), "venue simulator stopped")
	return err
}

// trackConn keeps the trading connections, so an outage can cut them.
func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		s.accepted.Add(1)
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}
}

// Connections is the number of trading connections accepted since the simulator started.
func (s *Server) Connections() int64 { return s.accepted.Load() }

// outage closes the trading listener and every trading connection, and listens again on the
// same address after d.
func (s *Server) outage(d time.Duration) error {
	s.mu.Lock()
	if s.runCtx == nil || s.stopped {
		s.mu.Unlock()
		return errors.New("outage: the simulator is not running")
	}
	if !s.outageUntil.IsZero() {
		until := s.outageUntil
		s.mu.Unlock()
		return fmt.Errorf("outage: one is already under way until %s", until.Format(time.TimeOnly))
	}
	s.outageUntil = time.Now().Add(d)
	runCtx := s.runCtx
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	// Joined under mu, before Run can set stopped and Wait.
	s.wg.Add(1)
	s.mu.Unlock()

	if err := s.trading.down(); err != nil {
		s.wg.Done()
		return fmt.Errorf("outage: %w", err)
	}
	for _, c := range conns {
		c.Close()
	}
	s.log.InfoContext(runCtx, "venue simulator: outage", slog.Duration("for", d), slog.Int("connectionsCut", len(conns)))
	go func() {
		defer s.wg.Done()
		s.endOutage(runCtx, d)
	}()
	return nil
}

func (s *Server) endOutage(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	for {
		err := s.trading.up()
		if err == nil || errors.Is(err, net.ErrClosed) {
			break
		}
		// The port can be taken in the meantime; keep trying, the control API says we are down.
		s.log.WarnContext(ctx, "venue simulator: listen again after an outage", slog.Any("error", err))
		t.Reset(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	s.mu.Lock()
	s.outageUntil = time.Time{}
	s.mu.Unlock()
	s.log.InfoContext(ctx, "venue simulator: outage over", slog.String("url", s.URL()))
}

// tradingListener is the trading socket, which an outage closes and opens again on the same
// address while the one http.Server keeps serving it.
type tradingListener struct {
	addr net.Addr

	mu      sync.Mutex
	cur     net.Listener  // nil during an outage
	changed chan struct{} // closed (and replaced) whenever cur changes or the listener closes
	closed  bool
}

func newTradingListener(ln net.Listener) *tradingListener {
	return &tradingListener{addr: ln.Addr(), cur: ln, changed: make(chan struct{})}
}

func (l *tradingListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		cur, changed, closed := l.cur, l.changed, l.closed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if cur == nil {
			<-changed
			continue
		}
		c, err := cur.Accept()
		if err == nil {
			return c, nil
		}
		l.mu.Lock()
		swapped := l.cur != cur || l.closed
		l.mu.Unlock()
		if !swapped {
			return nil, err
		}
	}
}

func (l *tradingListener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	cur := l.cur
	l.cur = nil
	close(l.changed)
	l.mu.Unlock()
	if cur != nil {
		return cur.Close()
	}
	return nil
}

func (l *tradingListener) Addr() net.Addr { return l.addr }

// down closes the socket: new connections are refused until up.
func (l *tradingListener) down() error {
	l.mu.Lock()
	if l.closed || l.cur == nil {
		l.mu.Unlock()
		return errors.New("the trading listener is not open")
	}
	cur := l.cur
	l.cur = nil
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return cur.Close()
}

// up listens again on the same address.
func (l *tradingListener) up() error {
	ln, err := net.Listen("tcp", l.addr.String())
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		ln.Close()
		return net.ErrClosed
	}
	l.cur = ln
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}
