package feedsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"fxdesk/internal/session"
)

// Config shapes one simulator. The zero value is a working simulator with the default symbols
// and the real session calendars.
type Config struct {
	// Instruments to simulate; nil means DefaultInstruments().
	Instruments []Instrument
	// Calendars resolves Instrument.Calendar; nil means session.DefaultRegistry(). An unknown
	// name falls back to "forex".
	Calendars *session.Registry
	// AlwaysOpen ignores the calendars (FXDESK_CALENDAR=always-open).
	AlwaysOpen bool
	// WalkInterval is the mean time between two random-walk quotes of one symbol (each interval
	// is drawn uniformly from half to one and a half of it). Default 300ms.
	WalkInterval time.Duration
	// DisableWalk stops the random walk, so that only the control API produces quotes (benchmarks
	// and tests that count ticks).
	DisableWalk bool
	// MaxBatch caps the events in one frame. Default 500.
	MaxBatch int
	// ClientQueue is the number of frames queued per client before walk frames are dropped.
	// Default 1024.
	ClientQueue int
	// Seed makes the walk reproducible; 0 seeds randomly.
	Seed uint64
	// MarketSeed, when not 0, replaces the random walk by a market: each symbol's mid is a
	// deterministic function of (MarketSeed, symbol, wall-clock step), so two simulators with the
	// same MarketSeed and WalkInterval quote the same prices at the same moment — the primary and
	// backup a desk expects to agree. SetQuote and Shift move this simulator's market only.
	MarketSeed uint64
	// Now is the simulator's clock for provider timestamps, silences and calendars.
	// Default time.Now.
	Now func() time.Time
	// Key, when set, is the one key the simulator accepts, as a real provider accepts only the
	// account's key; empty accepts any non-empty key.
	Key string
}

func (c Config) withDefaults() Config {
	if c.Instruments == nil {
		c.Instruments = DefaultInstruments()
	}
	if c.Calendars == nil {
		c.Calendars = session.DefaultRegistry()
	}
	if c.WalkInterval <= 0 {
		c.WalkInterval = 300 * time.Millisecond
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 500
	}
	if c.ClientQueue <= 0 {
		c.ClientQueue = 1024
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// symbolState is one simulated symbol; every field is guarded by Server.mu.
type symbolState struct {
	inst           Instrument
	pair           string // wire form, "EUR/USD"
	cal            *session.Calendar
	bid, ask       float64
	providerClosed bool
	silencedUntil  time.Time
	nextWalk       time.Time // real clock: pacing, not simulated time
	sent           uint64
	symHash        uint64    // market-seed mode: the symbol's part of every knot's hash
	shift          float64   // market-seed mode: SetQuote/Shift's move from the seeded market, in price
	offsetPips     float64   // Offset: quoted this many pips off the price, until set back to 0
	spikeUntil     time.Time // real clock: the walk leaves the symbol alone while a spike is out
}

// Server is one simulated provider. Create it with New, bind with Listen, serve with Run.
type Server struct {
	cfg Config
	log *slog.Logger

	mu               sync.Mutex
	symbols          map[string]*symbolState // by desk symbol
	byPair           map[string]*symbolState // by wire pair
	order            []*symbolState
	rng              *rand.Rand
	silenceAllUntil  time.Time
	clients          map[*client]struct{}
	nextClientID     int
	activeBursts     int
	walkScratch      []quoteEntry
	ln               net.Listener
	runCtx           context.Context
	started, stopped bool

	accepted atomic.Int64
	wg       sync.WaitGroup // websocket handlers, their writers, bursts, the walk
}

// New builds a simulator; it does nothing until Listen and Run.
func New(cfg Config, log *slog.Logger) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:     cfg,
		log:     log,
		symbols: make(map[string]*symbolState, len(cfg.Instruments)),
		byPair:  make(map[string]*symbolState, len(cfg.Instruments)),
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		clients: make(map[*client]struct{}),
	}
	for _, inst := range cfg.Instruments {
		s.addSymbolLocked(inst)
	}
	return s
}

// addSymbolLocked registers inst; the caller holds s.mu (or owns s exclusively, in New).
func (s *Server) addSymbolLocked(inst Instrument) *symbolState {
	cal, ok := s.cfg.Calendars.Lookup(inst.Calendar)
	if !ok {
		cal, ok = s.cfg.Calendars.Lookup("forex")
	}
	if !ok {
		cal = session.Forex()
	}
	if s.cfg.AlwaysOpen {
		cal = session.AlwaysOpen()
	}
	st := &symbolState{inst: inst, pair: wirePair(inst.Symbol), cal: cal, symHash: symbolHash(inst.Symbol)}
	st.bid, st.ask = quoteAround(inst.Mid, inst.Spread, inst.Digits)
	if s.cfg.MarketSeed != 0 {
		st.bid, st.ask = quoteAround(s.marketMidLocked(st, s.cfg.Now()), inst.Spread, inst.Digits)
	}
	st.nextWalk = time.Now().Add(s.walkDelayLocked())
	s.symbols[inst.Symbol] = st
	s.byPair[st.pair] = st
	s.order = append(s.order, st)
	return st
}

// Listen binds addr (e.g. "127.0.0.1:0") and returns the bound address. Binding is separate from
// Run so that a caller learns the port before anything connects.
func (s *Server) Listen(addr string) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil, fmt.Errorf("feedsim: listen %s: already listening on %s", addr, s.ln.Addr())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("feedsim: listen %s: %w", addr, err)
	}
	s.ln = ln
	return ln.Addr(), nil
}

// Addr is the bound address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// URL is the provider websocket URL clients dial, ws://ADDR/forex ("" before Listen).
func (s *Server) URL() string {
	a := s.Addr()
	if a == nil {
		return ""
	}
	return "ws://" + a.String() + "/forex"
}

// Run serves until ctx ends, then closes the listener and every client socket and waits for its
// goroutines, so the same address can be bound again at once. It returns nil after a clean stop.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.ln == nil:
		s.mu.Unlock()
		return errors.New("feedsim: Run before Listen")
	case s.started:
		s.mu.Unlock()
		return errors.New("feedsim: Run called twice")
	}
	s.started = true
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.runCtx = runCtx
	ln := s.ln
	s.mu.Unlock()

	hs := &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return runCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	if !s.cfg.DisableWalk {
		s.wg.Go(func() { s.walk(runCtx) })
	}
	s.log.InfoContext(ctx, "feed simulator listening", slog.String("url", s.URL()),
		slog.Int("symbols", len(s.order)), slog.Bool("alwaysOpen", s.cfg.AlwaysOpen))

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("feedsim: serve: %w", err)
	}
	cancel() // ends every client context, the walk and bursts
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer shutCancel()
	if serr := hs.Shutdown(shutCtx); serr != nil && err == nil {
		err = fmt.Errorf("feedsim: shutdown: %w", serr)
	}
	// Hijacked websocket connections are not the http.Server's to close.
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	for _, c := range s.clientConns() {
		c.CloseNow()
	}
	s.wg.Wait()
	s.log.InfoContext(context.WithoutCancel(ctx), "feed simulator stopped")
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /forex", s.handleForex)
	s.controlRoutes(mux)
	return mux
}

// client is one connected websocket. authed, all and subs are guarded by Server.mu.
type client struct {
	id      int
	remote  string
	conn    *websocket.Conn
	out     chan []byte
	ctx     context.Context
	authed  bool
	all     bool
	subs    map[string]bool
	dropped atomic.Uint64
}

func (c *client) wants(pair string) bool { return c.authed && (c.all || c.subs[pair]) }

// enqueue hands a frame to the client's writer. A blocking enqueue waits (back-pressure for
// bursts, control pushes); a non-blocking one drops and counts (random walk).
func (c *client) enqueue(frame []byte, block bool) bool {
	if block {
		select {
		case c.out <- frame:
			return true
		case <-c.ctx.Done():
			return false
		}
	}
	select {
	case c.out <- frame:
		return true
	default:
		c.dropped.Add(1)
		return false
	}
}

func (s *Server) handleForex(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.WarnContext(r.Context(), "feed simulator: websocket accept failed", slog.Any("error", err))
		return // Accept has answered the request
	}
	s.accepted.Add(1)
	ctx, cancel := context.WithCancel(s.runCtx)
	c := &client{
		remote: r.RemoteAddr,
		conn:   conn,
		out:    make(chan []byte, s.cfg.ClientQueue),
		ctx:    ctx,
		subs:   make(map[string]bool),
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		cancel()
		conn.CloseNow()
		return
	}
	s.nextClientID++
	c.id = s.nextClientID
	s.clients[c] = struct{}{}
	// The handler and its writer join the wait group under mu, before Run can set stopped and
	// Wait, so a stop never returns while one of them still runs.
	s.wg.Add(2)
	s.mu.Unlock()
	s.log.DebugContext(ctx, "feed simulator: client connected", slog.Int("client", c.id), slog.String("remote", c.remote))

	defer func() {
		defer s.wg.Done()
		s.mu.Lock()
		delete(s.clients, c)
		s.mu.Unlock()
		cancel()
		conn.CloseNow()
		s.log.DebugContext(context.WithoutCancel(ctx), "feed simulator: client gone", slog.Int("client", c.id))
	}()
	go func() {
		defer s.wg.Done()
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case frame := <-c.out:
				if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
					return
				}
			}
		}
	}()

	c.enqueue(statusFrame(statusEvent{"connected", "Connected Successfully"}), true)
	conn.SetReadLimit(1 << 20)
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			return
		}
		s.handleAction(c, msg)
	}
}

// walk moves every due symbol one random step and sends the moves to subscribers. In
// market-seed mode every symbol moves at the start of each wall-clock step instead, so twins
// quote each step within a millisecond or so of each other.
func (s *Server) walk(ctx context.Context) {
	period := min(s.cfg.WalkInterval/4, 50*time.Millisecond)
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		// Pacing runs on the real clock so a frozen test clock still walks; whether a symbol may
		// be quoted, and the timestamps, follow Config.Now.
		wall, now := time.Now(), s.cfg.Now()
		if s.cfg.MarketSeed != 0 {
			t.Reset(time.Until(s.nextStep(wall)))
		} else {
			t.Reset(period)
		}
		moved := s.walkScratch[:0]
		for _, st := range s.order {
			if wall.Before(st.spikeUntil) || (s.cfg.MarketSeed == 0 && wall.Before(st.nextWalk)) {
				continue
			}
			st.nextWalk = wall.Add(s.walkDelayLocked())
			if !s.quotableLocked(st, now) {
				continue
			}
			s.stepLocked(st, now)
			moved = append(moved, st.entry())
		}
		s.walkScratch = moved
		outs := s.quoteFramesLocked(moved, now)
		s.mu.Unlock()
		for _, o := range outs {
			o.c.enqueue(o.frame, false)
		}
	}
}

func (s *Server) walkDelayLocked() time.Duration {
	iv := s.cfg.WalkInterval
	return iv/2 + time.Duration(s.rng.Int64N(int64(iv)))
}

// quotableLocked: the provider only quotes a symbol it has not closed, has not been told to keep
// quiet about, and whose session is open.
func (s *Server) quotableLocked(st *symbolState, now time.Time) bool {
	return !st.providerClosed &&
		!now.Before(st.silencedUntil) &&
		!now.Before(s.silenceAllUntil) &&
		st.cal.IsOpen(now)
}

// stepLocked moves one symbol: to the seeded market's price at now in market-seed mode,
// otherwise a Gaussian step with a slight pull back to its starting level, so a simulator left
// running for days still quotes plausible prices.
func (s *Server) stepLocked(st *symbolState, now time.Time) {
	if s.cfg.MarketSeed != 0 {
		st.bid, st.ask = quoteAround(s.marketMidLocked(st, now)+st.shift, s.marketSpreadLocked(st, now), st.inst.Digits)
		st.sent++
		return
	}
	mid := (st.bid + st.ask) / 2
	mid *= 1 + st.inst.Volatility*s.rng.NormFloat64()
	mid += (st.inst.Mid - mid) * 0.001
	spread := st.inst.Spread
	if s.rng.IntN(20) == 0 {
		spread *= 1 + 2*s.rng.Float64() // the occasional wide quote
	}
	st.bid, st.ask = quoteAround(mid, spread, st.inst.Digits)
	st.sent++
}

// quoteAround returns a positive, uncrossed bid/ask pair rounded to digits around mid.
func quoteAround(mid, spread float64, digits int) (bid, ask float64) {
	point := math.Pow10(-digits)
	scale := math.Pow10(digits)
	bid = math.Round((mid-spread/2)*scale) / scale
	if bid < point {
		bid = point
	}
	ask = math.Round((bid+math.Max(spread, point))*scale) / scale
	return bid, ask
}

type outgoing struct {
	c     *client
	frame []byte
}

// quoteEntry is one quote to encode, captured when it was drawn.
type quoteEntry struct {
	pair     string
	bid, ask float64
	digits   int
}

// entry is the quote as sent: the price moved by the symbol's offset, if any.
func (st *symbolState) entry() quoteEntry {
	bid, ask := st.quoted()
	return quoteEntry{pair: st.pair, bid: bid, ask: ask, digits: st.inst.Digits}
}

// quoted is the price the provider quotes: the walk's price moved by the offset.
func (st *symbolState) quoted() (bid, ask float64) {
	if st.offsetPips == 0 {
		return st.bid, st.ask
	}
	return moved(st.bid, st.ask, st.offsetPips, st.inst.Digits)
}

// moved returns bid/ask moved by pips, rounded to digits and kept positive.
func moved(bid, ask, pips float64, digits int) (float64, float64) {
	d := pips * PipSize(digits)
	return quoteAround((bid+ask)/2+d, ask-bid, digits)
}

// quoteFramesLocked encodes entries for every client that wants them, in frames of at most
// MaxBatch events. Frames are built under mu so they see a consistent set of subscriptions.
func (s *Server) quoteFramesLocked(entries []quoteEntry, now time.Time) []outgoing {
	if len(entries) == 0 {
		return nil
	}
	ms := now.UnixMilli()
	var outs []outgoing
	for c := range s.clients {
		var frame []byte
		n := 0
		for _, e := range entries {
			if !c.wants(e.pair) {
				continue
			}
			if n == s.cfg.MaxBatch {
				outs = append(outs, outgoing{c, append(frame, ']')})
				frame, n = nil, 0
			}
			if n == 0 {
				frame = append(make([]byte, 0, 80*min(len(entries), s.cfg.MaxBatch)+2), '[')
			} else {
				frame = append(frame, ',')
			}
			frame = appendQuote(frame, e.pair, e.bid, e.ask, ms, e.digits)
			n++
		}
		if n > 0 {
			outs = append(outs, outgoing{c, append(frame, ']')})
		}
	}
	return outs
}

// wirePair maps a six-letter desk symbol to the provider's "EUR/USD". Anything else passes
// through unchanged (the control API validates symbols before they get here).
func wirePair(symbol string) string {
	if len(symbol) != 6 {
		return symbol
	}
	return symbol[:3] + "/" + symbol[3:]
}

// Connections is the number of websocket connections accepted since the simulator started.
func (s *Server) Connections() int64 { return s.accepted.Load() }

// lookupSymbolLocked finds a desk symbol; "" and "*" are not symbols.
func (s *Server) lookupSymbolLocked(symbol string) (*symbolState, error) {
	st, ok := s.symbols[strings.ToUpper(symbol)]
	if !ok {
		return nil, fmt.Errorf("unknown symbol %q", symbol)
	}
	return st, nil
}
