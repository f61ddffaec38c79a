package tick

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/session"
)

// DefaultStaleAfter is fxTradingQuoteStaleSecondsFx's default: a quote older than this, while its
// session is open, no longer prices trades.
const DefaultStaleAfter = 30 * time.Second

// Config shapes an Engine. Sources (or URL) is required; every other field has a default beside
// it.
type Config struct {
	// Sources are the price sources in priority order: the first is the primary.
	Sources []Source
	// URL is a shorthand for one provider websocket source named "primary" (used when Sources is
	// empty), e.g. ws://127.0.0.1:PORT/forex for the bundled simulator. Key, SilenceAfter,
	// Backoff*, DialTimeout, HandshakeTimeout, ReadLimit and KeyRefusals shape that source.
	URL string
	// Key authenticates to the provider. Empty sends "anonymous", which the simulator accepts
	// (it refuses only an empty key) and a real provider will refuse.
	Key string
	// Now is the engine's clock for ReceivedAt, staleness, silence and calendars. Default time.Now.
	Now func() time.Time
	// CalendarFor returns a symbol's session calendar; nil (or a nil result) means always open.
	CalendarFor func(symbol string) *session.Calendar
	// StaleAfter is read on every state check, so a settings change applies at once.
	// Default DefaultStaleAfter.
	StaleAfter func() time.Duration
	// SilenceAfter is how long a connected socket may deliver no accepted quote, while some
	// wanted symbol's session is open, before the engine reconnects. Default 30s.
	SilenceAfter time.Duration
	// BackoffMin and BackoffMax bound the reconnect delay, which doubles per failed attempt and
	// is jittered to between half and all of the current step. Defaults 250ms and 15s.
	BackoffMin, BackoffMax time.Duration
	// DialTimeout and HandshakeTimeout bound connecting and authenticating. Default 5s each.
	DialTimeout, HandshakeTimeout time.Duration
	// UpdateBuffer is each Updates subscriber's channel capacity. Default 1024.
	UpdateBuffer int
	// ReadLimit caps one provider frame. Default 16 MiB (bursts batch many events per frame).
	ReadLimit int64
	// KeyRefusals is how many sessions in a row the provider may refuse the key before Run gives
	// up with ErrKeyRefused: a wrong key does not heal by reconnecting, and a holder that cannot
	// quote should stop loudly rather than warn for ever. A refusal or two in a row is still
	// retried (a provider may refuse while it restarts). Default 3.
	KeyRefusals int
	// PipSize is a symbol's pip (10^-(digits-1) from the instrument). Default DefaultPipSize.
	PipSize func(symbol string) float64
	// Filter shapes the spike filter; Failover shapes per-symbol source selection.
	Filter   FilterConfig
	Failover FailoverConfig
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.StaleAfter == nil {
		c.StaleAfter = func() time.Duration { return DefaultStaleAfter }
	}
	if c.UpdateBuffer <= 0 {
		c.UpdateBuffer = 1024
	}
	if c.PipSize == nil {
		c.PipSize = DefaultPipSize
	}
	c.Filter = c.Filter.withDefaults()
	c.Failover = c.Failover.withDefaults()
	return c
}

func (f FilterConfig) withDefaults() FilterConfig {
	if f.Window <= 0 {
		f.Window = 32
	}
	f.Window = min(f.Window, 256)
	if f.MinMoves <= 0 {
		f.MinMoves = 8
	}
	f.MinMoves = min(f.MinMoves, f.Window)
	if f.K <= 0 {
		f.K = 12
	}
	if f.FloorPips <= 0 {
		f.FloorPips = 30
	}
	if f.BandPips <= 0 {
		f.BandPips = 30
	}
	if f.ConfirmAfter <= 0 {
		f.ConfirmAfter = time.Second
	}
	if f.RejectedRing <= 0 {
		f.RejectedRing = 1000
	}
	return f
}

func (f FailoverConfig) withDefaults() FailoverConfig {
	if f.SilentFactor <= 0 {
		f.SilentFactor = 10
	}
	if f.SilentMin <= 0 {
		f.SilentMin = time.Second
	}
	if f.SilentMax < f.SilentMin {
		f.SilentMax = max(10*time.Second, f.SilentMin)
	}
	if f.HoldDown <= 0 {
		f.HoldDown = 10 * time.Second
	}
	if f.Sweep <= 0 {
		f.Sweep = 100 * time.Millisecond
	}
	return f
}

// Engine holds the price sources, selects one per symbol, filters spikes and keeps the
// published quotes. Create it with New; Run connects.
type Engine struct {
	cfg Config
	log *slog.Logger

	srcs []*srcState // priority order

	slots atomic.Pointer[slotIndex]
	// wantedSlots is the wanted set's slots in symbol order, republished with the wanted set, so
	// a reader can walk every wanted quote without a map look-up per symbol.
	wantedSlots atomic.Pointer[[]*slot]

	mu       sync.Mutex // guards wantSets, wanted and index replacement
	wantSets map[string][]string
	wanted   []string // sorted union of wantSets

	subsMu sync.RWMutex // write: add/remove subscriber; read: publishing
	subs   map[*subscriber]struct{}

	swMu   sync.Mutex
	swSubs map[chan Switch]struct{}
	ring   rejectRing

	running        atomic.Bool
	accepted       atomic.Uint64
	rejected       [rejectCounters]atomic.Uint64
	lastTickAt     atomic.Int64 // Config.Now, Unix ns; 0 = never
	updatesDropped atomic.Uint64

	// sweptNs is when the sweep last ran (Config.Now, Unix ns; 0 until Run's sweep starts), and
	// pausedNs the time the engine is known not to have run: every gap in the sweep past
	// pauseAfter (notePause). Silence is judged on the time the engine ran (srcSym.age).
	sweptNs  atomic.Int64
	pausedNs atomic.Int64
}

// Counter slots beyond the Reject values.
const (
	counterMalformed = iota + 4
	counterUnknownPair
	rejectCounters
)

// New builds an engine; it does nothing until Run. Config.Sources must have unique names (New
// panics otherwise: it is a wiring mistake).
func New(cfg Config, log *slog.Logger) *Engine {
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:      cfg,
		log:      log,
		wantSets: make(map[string][]string),
		subs:     make(map[*subscriber]struct{}),
		swSubs:   make(map[chan Switch]struct{}),
	}
	e.ring.size = cfg.Filter.RejectedRing
	sources := cfg.Sources
	if len(sources) == 0 {
		sources = []Source{NewWebsocketSource("primary", cfg.URL, cfg.Key, WebsocketOptions{
			SilenceAfter: cfg.SilenceAfter, BackoffMin: cfg.BackoffMin, BackoffMax: cfg.BackoffMax,
			DialTimeout: cfg.DialTimeout, HandshakeTimeout: cfg.HandshakeTimeout, ReadLimit: cfg.ReadLimit,
			KeyRefusals: cfg.KeyRefusals,
		})}
	}
	for i, src := range sources {
		name := src.Name()
		for _, o := range e.srcs {
			if o.name == name {
				panic(fmt.Sprintf("tick.New: two price sources named %q", name))
			}
		}
		e.srcs = append(e.srcs, &srcState{e: e, i: i, name: name, src: src, wantedCh: make(chan struct{}, 1)})
	}
	e.slots.Store(&slotIndex{bySymbol: map[string]*slot{}, byPair: map[string]*slot{}})
	return e
}

// Run runs every source and the selection sweep until ctx ends, then returns nil. A source
// whose Run fails is logged and stays disconnected; when every source has failed, Run returns
// the first failure (with one source: its error, e.g. ErrKeyRefused).
func (e *Engine) Run(ctx context.Context) error {
	if len(e.cfg.Sources) == 0 {
		if e.cfg.URL == "" {
			return errors.New("tick engine: no provider URL configured")
		}
		if _, err := url.Parse(e.cfg.URL); err != nil {
			return fmt.Errorf("tick engine: provider URL: %w", err)
		}
	}
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("tick engine: Run called while already running")
	}
	defer e.running.Store(false)
	names := make([]string, len(e.srcs))
	for i, s := range e.srcs {
		names[i] = s.name
	}
	e.log.InfoContext(ctx, "tick engine started", slog.Any("sources", names), slog.Int("wanted", len(e.Wanted())))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { e.runSweep(sctx) })
	errs := make(chan error, len(e.srcs))
	for _, s := range e.srcs {
		go func() {
			err := s.src.Run(sctx, s)
			if err != nil && ctx.Err() == nil {
				msg := err.Error()
				s.lastErr.Store(&msg)
				s.SetConnected(false, err)
				e.log.ErrorContext(ctx, "price source stopped", slog.String("source", s.name), slog.Any("error", err))
			}
			errs <- err
		}()
	}
	var first error
	for range e.srcs {
		err := <-errs
		if err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
	}
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		e.log.InfoContext(context.WithoutCancel(ctx), "tick engine stopped")
		return nil
	}
	return first
}

// Rejections counts what was not stored, by reason.
type Rejections struct {
	Malformed   uint64 // frames that were not valid JSON of the expected shape (whole frame)
	Undated     uint64 // quotes without a usable provider time
	NonPositive uint64 // quotes with a missing, zero, negative or non-finite bid or ask
	Crossed     uint64 // quotes with bid > ask
	UnknownPair uint64 // valid quotes for a pair the engine never wanted
}

// Status is the engine's health at a glance.
type Status struct {
	Connected        bool
	ConnectedSince   time.Time // zero when not connected
	Connects         uint64    // authenticated sessions since Run started
	SilentReconnects uint64    // sessions abandoned because the stream went silent
	LastError        string    // why the last session ended ("" if none has)
	Wanted           int
	Quoting          int
	Halted           int
	Closed           int
	LastTickAt       time.Time     // zero if no quote was ever accepted
	LastTickAge      time.Duration // Config.Now − LastTickAt; 0 if none
	Accepted         uint64
	Rejected         Rejections
	UpdatesDropped   uint64 // updates lost by slow Updates subscribers
}

// Status snapshots the engine. With several sources, Connected means any is connected and
// ConnectedSince, LastError are the first connected (else the first failed) source's.
func (e *Engine) Status() Status {
	now := e.cfg.Now()
	st := Status{
		Accepted:       e.accepted.Load(),
		UpdatesDropped: e.updatesDropped.Load(),
		Rejected: Rejections{
			Malformed:   e.rejected[counterMalformed].Load(),
			Undated:     e.rejected[RejectUndated].Load(),
			NonPositive: e.rejected[RejectNonPositive].Load(),
			Crossed:     e.rejected[RejectCrossed].Load(),
			UnknownPair: e.rejected[counterUnknownPair].Load(),
		},
	}
	for _, s := range e.srcs {
		if w, ok := s.src.(*wsSource); ok {
			st.Connects += w.connects.Load()
			st.SilentReconnects += w.silentReconnects.Load()
		}
		if s.connected.Load() && !st.Connected {
			st.Connected = true
			st.ConnectedSince = time.Unix(0, s.connectedSince.Load())
		}
		if p := s.lastErr.Load(); p != nil && st.LastError == "" && !s.connected.Load() {
			st.LastError = *p
			if len(e.srcs) > 1 {
				st.LastError = s.name + ": " + *p
			}
		}
	}
	if st.LastError == "" {
		if p := e.srcs[0].lastErr.Load(); p != nil {
			st.LastError = *p
		}
	}
	if ns := e.lastTickAt.Load(); ns != 0 {
		st.LastTickAt = time.Unix(0, ns)
		st.LastTickAge = now.Sub(st.LastTickAt)
	}
	stale := e.cfg.StaleAfter()
	for _, s := range e.Wanted() {
		st.Wanted++
		switch e.stateAt(s, now, stale) {
		case Quoting:
			st.Quoting++
		case QuotingHalted:
			st.Halted++
		case MarketClosed:
			st.Closed++
		}
	}
	return st
}
