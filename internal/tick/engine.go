package tick

import (
	"log/slog"
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
	if c.Key == "" {
		c.Key = "anonymous"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.StaleAfter == nil {
		c.StaleAfter = func() time.Duration { return DefaultStaleAfter }
	}
	if c.SilenceAfter <= 0 {
		c.SilenceAfter = 30 * time.Second
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 250 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(15*time.Second, c.BackoffMin)
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.KeyRefusals <= 0 {
		c.KeyRefusals = 3
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.UpdateBuffer <= 0 {
		c.UpdateBuffer = 1024
	}
	if c.ReadLimit <= 0 {
		c.ReadLimit = 16 << 20
	}
	return c
}

// Engine holds the provider socket and the quote map. Create it with New; Run connects.
type Engine struct {
	cfg Config
	log *slog.Logger

	slots atomic.Pointer[slotIndex]
	// wantedSlots is the wanted set's slots in symbol order, republished with the wanted set, so
	// a reader can walk every wanted quote without a map look-up per symbol.
	wantedSlots atomic.Pointer[[]*slot]

	mu       sync.Mutex // guards sources, wanted and index replacement
	sources  map[string][]string
	wanted   []string      // sorted union of sources
	wantedCh chan struct{} // "the wanted set changed"; capacity 1, coalescing

	subsMu sync.RWMutex // write: add/remove subscriber; read: publishing one frame
	subs   map[*subscriber]struct{}

	running          atomic.Bool
	connected        atomic.Bool
	connectedSince   atomic.Int64 // Config.Now, Unix ns
	connects         atomic.Uint64
	silentReconnects atomic.Uint64
	accepted         atomic.Uint64
	rejected         [rejectCounters]atomic.Uint64
	lastTickAt       atomic.Int64 // Config.Now, Unix ns; 0 = never
	lastDataAt       atomic.Int64 // Config.Now, Unix ns; current session's last accepted quote
	updatesDropped   atomic.Uint64
	lastErr          atomic.Pointer[string]
}

// Counter slots beyond the Reject values.
const (
	counterMalformed = iota + 4
	counterUnknownPair
	rejectCounters
)

// New builds an engine; it does nothing until Run.
func New(cfg Config, log *slog.Logger) *Engine {
	e := &Engine{
		cfg:      cfg.withDefaults(),
		log:      log,
		sources:  make(map[string][]string),
		wantedCh: make(chan struct{}, 1),
		subs:     make(map[*subscriber]struct{}),
	}
	e.slots.Store(&slotIndex{bySymbol: map[string]*slot{}, byPair: map[string]*slot{}})
	return e
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

// Status snapshots the engine.
func (e *Engine) Status() Status {
	now := e.cfg.Now()
	st := Status{
		Connected:        e.connected.Load(),
		Connects:         e.connects.Load(),
		SilentReconnects: e.silentReconnects.Load(),
		Accepted:         e.accepted.Load(),
		UpdatesDropped:   e.updatesDropped.Load(),
		Rejected: Rejections{
			Malformed:   e.rejected[counterMalformed].Load(),
			Undated:     e.rejected[RejectUndated].Load(),
			NonPositive: e.rejected[RejectNonPositive].Load(),
			Crossed:     e.rejected[RejectCrossed].Load(),
			UnknownPair: e.rejected[counterUnknownPair].Load(),
		},
	}
	if p := e.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	if st.Connected {
		st.ConnectedSince = time.Unix(0, e.connectedSince.Load())
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
