package fixvenue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/quickfix/config"
	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/venuesim"
)

// Defaults of a Config's session identity: the desk's session file names the same two.
const (
	DefaultVenueCompID = "FXVENUE"
	DefaultDeskCompID  = "FXDESK"
	// DefaultLatency is a realistic execution latency for a venue run by hand.
	DefaultLatency = 5 * time.Millisecond
)

// Config shapes one simulated FIX venue. The zero value is a working venue with no prices.
type Config struct {
	// VenueCompID and DeskCompID are the session's SenderCompID and TargetCompID as the venue
	// sees them (defaults DefaultVenueCompID, DefaultDeskCompID).
	VenueCompID, DeskCompID string
	// Latency is how long an order takes to execute before its report is written; zero executes
	// at once.
	Latency time.Duration
	// Prices quotes the symbols (the REST simulator's sources: venuesim.FeedPrices,
	// venuesim.FeedControlPrices); nil quotes nothing, so every order is rejected (exchange
	// closed).
	Prices venuesim.PriceSource
	// Instruments are the symbols (desk form, EURUSD) the venue lists; an order for any other is
	// rejected with OrdRejReason 1 (unknown symbol). Default venuesim.DefaultInstruments, the
	// REST simulator's list.
	Instruments []string
	// Username and Password, when Password is set, are the credentials the venue requires on the
	// desk's Logon (Username 553, Password 554): a Logon without them or with others is refused
	// with a Logout saying why, as an LP refuses a bad password.
	Username, Password string
	// Now stamps executions. Default time.Now.
	Now func() time.Time
	// OwnClOrdIDs names the orders the venue makes itself (venue-side closes) on their reports
	// (own.go): OwnPrefixed (default, "VENUE-n"), OwnNumeric (digits only, as many LPs number
	// their orders) or OwnNone (no ClOrdID at all).
	OwnClOrdIDs string
	// PositionReports shapes the answers to RequestForPositions (positions.go): PositionsTQ
	// (default, one NoPositions entry, TQ, per symbol), PositionsTQSOD (one report per symbol with
	// two entries, TQ then SOD) or PositionsSplit (one report per entry: a TQ report and an SOD
	// report per symbol).
	PositionReports string
	// RequireParties refuses a RequestForPositions without the Parties component FIX 4.4 marks
	// required, with a session Reject (35=3, SessionRejectReason 1, RefTagID 453).
	RequireParties bool
	// MDVenueCompID and MDDeskCompID are the market-data session's SenderCompID and TargetCompID
	// as the venue sees them (defaults DefaultMDVenueCompID, DefaultMDDeskCompID): market data
	// has its own session, as at most liquidity providers (md.go).
	MDVenueCompID, MDDeskCompID string
	// MarketDataInterval is how often the venue reads its prices for subscribed symbols' changes
	// (default DefaultMarketDataInterval).
	MarketDataInterval time.Duration
	// Executions, above 1, fills every order that meets no fault in that many executions, each
	// reported (split.go; at most maxExecutions); 0 or 1 fills each in one.
	Executions int
	// PartStep, when positive, is the increment a partial fill (FaultPartial) of an IOC order
	// comes in: the fault's units rounded down to it, and an order whose part rounds to nothing
	// is cancelled whole — a venue whose lot step the desk's lots can hold (cmd/fixvenue: 1,000
	// units; docs/orders.md, «IOC and FOK»). Zero: the fault's units as given.
	PartStep decimal.Decimal
}

// Server is one running FIX venue: the acceptor behind a TCP proxy the control API can cut, and
// the book of orders and net positions.
type Server struct {
	cfg       Config
	log       *slog.Logger
	sessionID quickfix.SessionID
	acceptor  *quickfix.Acceptor
	proxy     *proxy
	control   *http.Server
	controlLn net.Listener
	book      *book
	// mdSessionID is the market-data session (md.go); md its subscriptions.
	mdSessionID quickfix.SessionID
	md          *marketData
	// instruments is Config.Instruments as a set.
	instruments map[string]bool

	mu         sync.Mutex
	loggedOn   bool
	mdLoggedOn bool
	// logonsRefused counts the desk's Logons refused for their credentials (checkLogon).
	logonsRefused int
}

// New builds a venue; Listen starts it.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.VenueCompID == "" {
		cfg.VenueCompID = DefaultVenueCompID
	}
	if cfg.DeskCompID == "" {
		cfg.DeskCompID = DefaultDeskCompID
	}
	if cfg.MDVenueCompID == "" {
		cfg.MDVenueCompID = DefaultMDVenueCompID
	}
	if cfg.MDDeskCompID == "" {
		cfg.MDDeskCompID = DefaultMDDeskCompID
	}
	if cfg.MDVenueCompID == cfg.VenueCompID && cfg.MDDeskCompID == cfg.DeskCompID {
		return nil, fmt.Errorf("fixvenue: the market-data session %s/%s must differ from the trade session", cfg.MDVenueCompID, cfg.MDDeskCompID)
	}
	if cfg.MarketDataInterval < 0 {
		return nil, fmt.Errorf("fixvenue: MarketDataInterval %s must not be negative", cfg.MarketDataInterval)
	}
	if cfg.MarketDataInterval == 0 {
		cfg.MarketDataInterval = DefaultMarketDataInterval
	}
	if cfg.Latency < 0 {
		return nil, fmt.Errorf("fixvenue: Latency %s must not be negative", cfg.Latency)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch cfg.OwnClOrdIDs {
	case "", OwnPrefixed, OwnNumeric, OwnNone:
	default:
		return nil, fmt.Errorf("fixvenue: OwnClOrdIDs %q must be %s, %s or %s", cfg.OwnClOrdIDs, OwnPrefixed, OwnNumeric, OwnNone)
	}
	if cfg.Executions < 0 || cfg.Executions > maxExecutions {
		return nil, fmt.Errorf("fixvenue: Executions %d must be between 0 and %d", cfg.Executions, maxExecutions)
	}
	switch cfg.PositionReports {
	case "", PositionsTQ, PositionsTQSOD, PositionsSplit:
	default:
		return nil, fmt.Errorf("fixvenue: PositionReports %q must be %s, %s or %s", cfg.PositionReports, PositionsTQ, PositionsTQSOD, PositionsSplit)
	}
	if cfg.Username != "" && cfg.Password == "" {
		return nil, errors.New("fixvenue: a Username without a Password requires nothing; set both")
	}
	if len(cfg.Instruments) == 0 {
		cfg.Instruments = venuesim.DefaultInstruments
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log,
		sessionID: quickfix.SessionID{BeginString: quickfix.BeginStringFIX44, SenderCompID: cfg.VenueCompID, TargetCompID: cfg.DeskCompID}}
	s.mdSessionID = quickfix.SessionID{BeginString: quickfix.BeginStringFIX44, SenderCompID: cfg.MDVenueCompID, TargetCompID: cfg.MDDeskCompID}
	s.book = newBook(s)
	s.md = newMarketData(s)
	s.instruments = make(map[string]bool, len(cfg.Instruments))
	for _, sym := range cfg.Instruments {
		s.instruments[sym] = true
	}
	return s, nil
}

// Listen starts the acceptor and its proxy; addr is where the desk connects (port 0 picks one).
// The acceptor itself listens on a loopback port of its own that only the proxy uses, so that
// the control API can cut the session's TCP connection as a network would.
func (s *Server) Listen(addr string) (string, error) {
	inner, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	settings := quickfix.NewSettings()
	g := settings.GlobalSettings()
	g.Set(config.SocketAcceptHost, "127.0.0.1")
	g.Set(config.SocketAcceptPort, strconv.Itoa(inner))
	ss := quickfix.NewSessionSettings()
	ss.Set(config.BeginString, quickfix.BeginStringFIX44)
	ss.Set(config.SenderCompID, s.cfg.VenueCompID)
	ss.Set(config.TargetCompID, s.cfg.DeskCompID)
	// The desk decides when the session is up (only its lease holder logs on), at any hour: no
	// StartTime/EndTime, whose daily range would reset the session at midnight.
	if _, err := settings.AddSession(ss); err != nil {
		return "", fmt.Errorf("fixvenue: session settings: %w", err)
	}
	// The market-data session on the same port: the Logon's comp ids pick it. Market data is
	// never replayed, so each logon starts at sequence number 1 on both sides.
	md := quickfix.NewSessionSettings()
	md.Set(config.BeginString, quickfix.BeginStringFIX44)
	md.Set(config.SenderCompID, s.cfg.MDVenueCompID)
	md.Set(config.TargetCompID, s.cfg.MDDeskCompID)
	md.Set(config.ResetOnLogon, "Y")
	if _, err := settings.AddSession(md); err != nil {
		return "", fmt.Errorf("fixvenue: market-data session settings: %w", err)
	}
	stores := mdStores{md: s.mdSessionID, mem: quickfix.NewMemoryStoreFactory()}
	s.acceptor, err = quickfix.NewAcceptor(s, stores, settings, logFactory{s.log})
	if err != nil {
		return "", fmt.Errorf("fixvenue: acceptor: %w", err)
	}
	if err := s.acceptor.Start(); err != nil {
		return "", fmt.Errorf("fixvenue: start acceptor on 127.0.0.1:%d: %w", inner, err)
	}
	p, err := listenProxy(addr, net.JoinHostPort("127.0.0.1", strconv.Itoa(inner)), s.log)
	if err != nil {
		s.acceptor.Stop()
		return "", err
	}
	s.proxy = p
	s.md.start(s.cfg.MarketDataInterval)
	return p.Addr(), nil
}

// Addr is where the desk connects (host:port), once Listen returned.
func (s *Server) Addr() string { return s.proxy.Addr() }

// ListenControl starts the control API on addr (loopback only; port 0 picks one).
func (s *Server) ListenControl(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("fixvenue: control listen %s: %w", addr, err)
	}
	s.controlLn = ln
	s.control = &http.Server{Handler: s.ControlHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.control.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("fixvenue control API stopped", slog.Any("err", err))
		}
	}()
	return s.ControlURL(), nil
}

// ControlURL is the control API's base URL ("" before ListenControl).
func (s *Server) ControlURL() string {
	if s.controlLn == nil {
		return ""
	}
	return "http://" + s.controlLn.Addr().String()
}

// Run serves until ctx ends, then stops.
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
	s.Stop()
	return nil
}

// Stop logs the session out, closes the listeners and releases held reports' goroutines.
func (s *Server) Stop() {
	if s.control != nil {
		_ = s.control.Close()
	}
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.acceptor != nil {
		s.acceptor.Stop()
	}
	s.md.halt()
	s.book.stop()
}

// MarketData is the market-data session's state now: logged on, subscriptions, counts.
func (s *Server) MarketData() MarketDataState {
	s.mu.Lock()
	up := s.mdLoggedOn
	s.mu.Unlock()
	return s.md.state(up)
}

// MDSessionID is the market-data session as the venue names it (its SenderCompID first).
func (s *Server) MDSessionID() quickfix.SessionID { return s.mdSessionID }

// LoggedOn is whether the desk's session is logged on now.
func (s *Server) LoggedOn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loggedOn
}

// Drop cuts the session's TCP connection, as a network fault would; the desk reconnects.
func (s *Server) Drop() int { return s.proxy.Drop(0) }

// DropFor cuts the session's TCP connection and, for d, every reconnect as soon as it is
// accepted: the session stays down for d, as in a network outage.
func (s *Server) DropFor(d time.Duration) int { return s.proxy.Drop(d) }

// NetPosition is the venue's signed net units of symbol and their average price.
func (s *Server) NetPosition(symbol string) (units, avgPx decimal.Decimal) {
	return s.book.net(symbol)
}

// freeLoopbackPort picks a free loopback port for the inner acceptor, which the library binds
// itself (it does not take a listener). Only the proxy ever dials it.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("fixvenue: pick a port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("fixvenue: pick a port: %w", err)
	}
	return port, nil
}

// logFactory sends the library's session events to slog at debug level; messages are not
// logged (a burst would flood the log).
type logFactory struct{ log *slog.Logger }

func (f logFactory) Create() (quickfix.Log, error) { return fixLog(f), nil }
func (f logFactory) CreateSessionLog(id quickfix.SessionID) (quickfix.Log, error) {
	return fixLog{f.log.With(slog.String("session", id.String()))}, nil
}

type fixLog struct{ log *slog.Logger }

func (l fixLog) OnIncoming([]byte) {}

// OnOutgoing yields the thread after each message the session handed to its writer: QuickFIX/Go
// v0.9.10 retries that hand-over in a tight loop while the writer is busy, which on one Go thread
// (the venue inside fxdesk-web) held it for a time slice per report (as in internal/venue/fix).
func (l fixLog) OnOutgoing([]byte)           { runtime.Gosched() }
func (l fixLog) OnEvent(s string)            { l.log.Debug("fix session", slog.String("event", s)) }
func (l fixLog) OnEventf(f string, a ...any) { l.OnEvent(fmt.Sprintf(f, a...)) }
