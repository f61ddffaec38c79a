package tick

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"fxdesk/internal/session"
)

// DefaultStaleAfter is fxTradingQuoteStaleSecondsFx's default: a quote older than this, while its
// session is open, no longer prices trades.
const DefaultStaleAfter = 30 * time.Second

// Config shapes an Engine. URL is required; every other field has a default beside it.
type Config struct {
	// URL is the provider websocket, e.g. ws://127.0.0.1:PORT/forex for the bundled simulator.
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

// Quote is a symbol's last accepted price.
type Quote struct {
	Bid, Ask     float64
	ReceivedAt   time.Time // engine clock when the frame carrying it arrived
	ProviderTime time.Time // the provider's own timestamp (millisecond precision)
}

// Mid is the midpoint of bid and ask.
func (q Quote) Mid() float64 { return (q.Bid + q.Ask) / 2 }

// slot is one symbol's cell in the quote map. q and providerClosed are written only by the
// reader goroutine (and cleared at session start), read by anyone.
type slot struct {
	symbol         string
	pair           string
	q              atomic.Pointer[Quote]
	providerClosed atomic.Bool
}

// slotIndex is immutable once published; adding a symbol publishes a new index.
type slotIndex struct {
	bySymbol map[string]*slot
	byPair   map[string]*slot
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

// SetSource replaces the symbols wanted by one named source ("instruments", "exposed",
// "pinned", …); the engine subscribes the union of all sources. Changes go out on the live
// socket without reconnecting. Every symbol must be a desk symbol; if one is not, nothing
// changes and the error names it. An empty list removes the source.
func (e *Engine) SetSource(name string, symbols []string) error {
	if err := checkSymbols(symbols); err != nil {
		return fmt.Errorf("set source %q: %w", name, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSourceLocked(name, slices.Clone(symbols))
	return nil
}

// SetWanted replaces the engine's own source, for callers that compute the whole set themselves.
func (e *Engine) SetWanted(symbols []string) error { return e.SetSource("wanted", symbols) }

// adhocSource holds what Subscribe and Unsubscribe change.
const adhocSource = "adhoc"

// Subscribe adds symbols to the ad-hoc source.
func (e *Engine) Subscribe(symbols ...string) error {
	if err := checkSymbols(symbols); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSourceLocked(adhocSource, append(slices.Clone(e.sources[adhocSource]), symbols...))
	return nil
}

// Unsubscribe removes symbols from the ad-hoc source; a symbol another source wants stays
// subscribed.
func (e *Engine) Unsubscribe(symbols ...string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSourceLocked(adhocSource, slices.DeleteFunc(slices.Clone(e.sources[adhocSource]), func(s string) bool {
		return slices.Contains(symbols, s)
	}))
	return nil
}

func checkSymbols(symbols []string) error {
	for _, s := range symbols {
		if !ValidSymbol(s) {
			return fmt.Errorf("symbol %q is not six upper-case letters like EURUSD", s)
		}
	}
	return nil
}

func (e *Engine) setSourceLocked(name string, symbols []string) {
	if len(symbols) == 0 {
		delete(e.sources, name)
	} else {
		e.sources[name] = symbols
	}
	e.recomputeLocked()
}

// Wanted returns the sorted union of all sources.
func (e *Engine) Wanted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.wanted)
}

func (e *Engine) recomputeLocked() {
	var all []string
	for _, syms := range e.sources {
		all = append(all, syms...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if slices.Equal(all, e.wanted) {
		return
	}
	e.wanted = all
	// New symbols get a slot now, so quotes arriving right after the subscribe have a home.
	idx := e.slots.Load()
	var missing []string
	for _, s := range all {
		if _, ok := idx.bySymbol[s]; !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		next := &slotIndex{
			bySymbol: make(map[string]*slot, len(idx.bySymbol)+len(missing)),
			byPair:   make(map[string]*slot, len(idx.byPair)+len(missing)),
		}
		for k, v := range idx.bySymbol {
			next.bySymbol[k] = v
		}
		for k, v := range idx.byPair {
			next.byPair[k] = v
		}
		for _, s := range missing {
			pair, _ := ProviderPair(s) // validated by SetSource
			sl := &slot{symbol: s, pair: pair}
			next.bySymbol[s] = sl
			next.byPair[pair] = sl
		}
		e.slots.Store(next)
		idx = next
	}
	ordered := make([]*slot, len(all))
	for i, s := range all {
		ordered[i] = idx.bySymbol[s]
	}
	e.wantedSlots.Store(&ordered)
	select {
	case e.wantedCh <- struct{}{}:
	default: // a change is already pending; the syncer reads the latest set
	}
}

// LastTick returns symbol's last accepted quote. It takes no lock and allocates nothing.
func (e *Engine) LastTick(symbol string) (Quote, bool) {
	sl := e.slots.Load().bySymbol[symbol]
	if sl == nil {
		return Quote{}, false
	}
	q := sl.q.Load()
	if q == nil {
		return Quote{}, false
	}
	return *q, true
}

// EachWantedQuote calls fn for every wanted symbol that has a quote, in symbol order. It takes no
// lock and looks nothing up: the quote mirror walks 5,000 symbols with it on every publish. The
// quote passed to fn is the stored one; it is never modified and must not be.
func (e *Engine) EachWantedQuote(fn func(symbol string, q *Quote)) {
	p := e.wantedSlots.Load()
	if p == nil {
		return
	}
	for _, sl := range *p {
		if q := sl.q.Load(); q != nil {
			fn(sl.symbol, q)
		}
	}
}

// State is a symbol's tradability.
type State string

const (
	// Quoting: the session is open and the last quote is fresh.
	Quoting State = "QUOTING"
	// QuotingHalted: the session is open but the symbol was never quoted or its last quote is
	// older than StaleAfter. Trading must refuse it.
	QuotingHalted State = "QUOTING_HALTED"
	// MarketClosed: the calendar says closed, or the provider announced the symbol closed.
	MarketClosed State = "MARKET_CLOSED"
)

// SymbolState decides symbol's state at Config.Now.
func (e *Engine) SymbolState(symbol string) State {
	return e.stateAt(symbol, e.cfg.Now(), e.cfg.StaleAfter())
}

func (e *Engine) stateAt(symbol string, now time.Time, staleAfter time.Duration) State {
	if cal := e.calendar(symbol); cal != nil && !cal.IsOpen(now) {
		return MarketClosed
	}
	sl := e.slots.Load().bySymbol[symbol]
	if sl == nil {
		return QuotingHalted
	}
	if sl.providerClosed.Load() {
		return MarketClosed
	}
	q := sl.q.Load()
	if q == nil || now.Sub(q.ReceivedAt) > staleAfter {
		return QuotingHalted
	}
	return Quoting
}

func (e *Engine) calendar(symbol string) *session.Calendar {
	if e.cfg.CalendarFor == nil {
		return nil
	}
	return e.cfg.CalendarFor(symbol)
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

// ErrKeyRefused is what Run returns when the provider refused the key KeyRefusals sessions in
// a row.
var ErrKeyRefused = errors.New("the provider refused the key")

// Run holds the provider connection until ctx ends, reconnecting with capped, jittered
// exponential backoff. It returns nil when ctx ends, and an error if it cannot start or the
// provider refused the key KeyRefusals sessions in a row (ErrKeyRefused).
func (e *Engine) Run(ctx context.Context) error {
	if e.cfg.URL == "" {
		return errors.New("tick engine: no provider URL configured")
	}
	if _, err := url.Parse(e.cfg.URL); err != nil {
		return fmt.Errorf("tick engine: provider URL: %w", err)
	}
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("tick engine: Run called while already running")
	}
	defer e.running.Store(false)

	e.log.InfoContext(ctx, "tick engine started", slog.String("provider", redactURL(e.cfg.URL)),
		slog.Int("wanted", len(e.Wanted())))
	backoff := e.cfg.BackoffMin
	refused := 0
	for {
		gotData, err := e.session(ctx)
		if ctx.Err() != nil {
			e.log.InfoContext(context.WithoutCancel(ctx), "tick engine stopped")
			return nil
		}
		if !errors.Is(err, ErrKeyRefused) {
			refused = 0
		} else if refused++; refused >= e.cfg.KeyRefusals {
			return fmt.Errorf("tick engine: %d sessions in a row: %w (check FXDESK_FEED_KEY)", refused, err)
		}
		msg := err.Error()
		e.lastErr.Store(&msg)
		if gotData {
			// The provider worked until it did not: start over from the shortest delay.
			backoff = e.cfg.BackoffMin
		}
		delay := backoff/2 + rand.N(backoff/2+1)
		e.log.WarnContext(ctx, "provider connection ended; reconnecting",
			slog.Any("error", err), slog.Duration("retryIn", delay))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			e.log.InfoContext(context.WithoutCancel(ctx), "tick engine stopped")
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, e.cfg.BackoffMax)
	}
}

// errSilent ends a session whose stream went quiet while it should have been quoting.
var errSilent = errors.New("provider stream silent")

// session runs one connection from dial to failure. gotData reports whether any quote was
// accepted, which is what resets the backoff.
func (e *Engine) session(ctx context.Context) (gotData bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
	conn, _, err := websocket.Dial(dctx, e.cfg.URL, nil)
	cancel()
	if err != nil {
		return false, fmt.Errorf("dial provider %s: %w", redactURL(e.cfg.URL), err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(e.cfg.ReadLimit)

	var dec Decoder
	if err := e.authenticate(ctx, conn, &dec); err != nil {
		return false, err
	}

	now := e.cfg.Now()
	// A new session starts with no provider announcements: the provider repeats a closure on
	// subscribe, and an old one must not outlive the connection that carried it.
	for _, sl := range e.slots.Load().bySymbol {
		sl.providerClosed.Store(false)
	}
	e.lastDataAt.Store(now.UnixNano())
	e.connectedSince.Store(now.UnixNano())
	e.connected.Store(true)
	e.connects.Add(1)
	defer e.connected.Store(false)
	e.log.InfoContext(ctx, "provider connected", slog.String("provider", redactURL(e.cfg.URL)))

	sctx, scancel := context.WithCancelCause(ctx)
	defer scancel(nil)
	var wg sync.WaitGroup
	wg.Go(func() { e.syncSubscriptions(sctx, scancel, conn) })
	wg.Go(func() { e.watchSilence(sctx, scancel) })
	accepted, err := e.readLoop(sctx, conn, &dec)
	scancel(err)
	wg.Wait()
	if cause := context.Cause(sctx); cause != nil && ctx.Err() == nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return accepted > 0, err
}

func (e *Engine) authenticate(ctx context.Context, conn *websocket.Conn, dec *Decoder) error {
	hctx, cancel := context.WithTimeout(ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	auth := fmt.Appendf(nil, `{"action":"auth","params":%q}`, e.cfg.Key)
	if err := conn.Write(hctx, websocket.MessageText, auth); err != nil {
		return fmt.Errorf("send auth: %w", err)
	}
	for {
		_, msg, err := conn.Read(hctx)
		if err != nil {
			return fmt.Errorf("await auth: %w", err)
		}
		evs, err := dec.Decode(msg)
		if err != nil {
			return fmt.Errorf("await auth: %w", err)
		}
		for i := range evs {
			if evs[i].Kind != EventStatus {
				continue
			}
			switch string(evs[i].Status) {
			case "auth_success":
				return nil
			case "auth_failed":
				return fmt.Errorf("%w: %s", ErrKeyRefused, evs[i].Message)
			}
		}
	}
}

// syncSubscriptions keeps the socket's subscriptions equal to the wanted set: everything at
// session start (the resubscribe after a reconnect), then each change as a live delta.
func (e *Engine) syncSubscriptions(ctx context.Context, fail context.CancelCauseFunc, conn *websocket.Conn) {
	onSocket := map[string]bool{}
	sync := func() error {
		want := e.Wanted()
		wantPairs := make(map[string]bool, len(want))
		var add, del []string
		for _, s := range want {
			pair, _ := ProviderPair(s)
			wantPairs[pair] = true
			if !onSocket[pair] {
				add = append(add, "C."+pair)
			}
		}
		for pair := range onSocket {
			if !wantPairs[pair] {
				del = append(del, "C."+pair)
			}
		}
		slices.Sort(del)
		for _, change := range []struct {
			action string
			params []string
		}{{"subscribe", add}, {"unsubscribe", del}} {
			if len(change.params) == 0 {
				continue
			}
			msg := fmt.Appendf(nil, `{"action":%q,"params":%q}`, change.action, strings.Join(change.params, ","))
			if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
				return fmt.Errorf("%s %d pairs: %w", change.action, len(change.params), err)
			}
			e.log.DebugContext(ctx, "provider subscriptions changed", slog.String("action", change.action),
				slog.String("pairs", strings.Join(change.params, ",")))
		}
		onSocket = wantPairs
		return nil
	}
	if err := sync(); err != nil {
		fail(err)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.wantedCh:
			if err := sync(); err != nil {
				fail(err)
				return
			}
		}
	}
}

// watchSilence ends the session when no quote has been accepted for SilenceAfter while at least
// one wanted symbol is open. It polls on the real clock but judges on Config.Now, so a test can
// move time instead of waiting for it.
func (e *Engine) watchSilence(ctx context.Context, fail context.CancelCauseFunc) {
	period := min(max(e.cfg.SilenceAfter/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := e.cfg.Now()
		quiet := now.Sub(time.Unix(0, e.lastDataAt.Load()))
		if quiet <= e.cfg.SilenceAfter || !e.anyWantedOpen(now) {
			continue
		}
		e.silentReconnects.Add(1)
		e.log.WarnContext(ctx, "provider stream silent; reconnecting", slog.Duration("quietFor", quiet),
			slog.Duration("silenceAfter", e.cfg.SilenceAfter))
		fail(fmt.Errorf("%w: no quote for %s", errSilent, quiet.Round(time.Millisecond)))
		return
	}
}

func (e *Engine) anyWantedOpen(now time.Time) bool {
	idx := e.slots.Load()
	for _, s := range e.Wanted() {
		if cal := e.calendar(s); cal != nil && !cal.IsOpen(now) {
			continue
		}
		if sl := idx.bySymbol[s]; sl != nil && sl.providerClosed.Load() {
			continue
		}
		return true
	}
	return false
}

// readLoop reads frames until the socket or ctx fails, reusing one buffer.
func (e *Engine) readLoop(ctx context.Context, conn *websocket.Conn, dec *Decoder) (uint64, error) {
	var buf bytes.Buffer
	var accepted uint64
	for {
		_, r, err := conn.Reader(ctx)
		if err != nil {
			return accepted, fmt.Errorf("read provider frame: %w", err)
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return accepted, fmt.Errorf("read provider frame: %w", err)
		}
		accepted += uint64(e.ingest(ctx, dec, buf.Bytes(), e.cfg.Now()))
	}
}

// ingest applies one frame received at recv and returns the number of quotes stored.
func (e *Engine) ingest(ctx context.Context, dec *Decoder, frame []byte, recv time.Time) int {
	evs, err := dec.Decode(frame)
	if err != nil {
		e.rejected[counterMalformed].Add(1)
		e.log.DebugContext(ctx, "provider frame rejected", slog.String("reason", "malformed"), slog.Any("error", err))
		return 0
	}
	idx := e.slots.Load()
	stored := 0
	e.subsMu.RLock()
	publish := len(e.subs) > 0
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case EventQuote:
			if r := Validate(ev); r != RejectNone {
				e.rejected[r].Add(1)
				if e.log.Enabled(ctx, slog.LevelDebug) {
					e.log.DebugContext(ctx, "quote rejected", slog.String("pair", string(ev.Pair)), slog.String("reason", r.String()))
				}
				continue
			}
			sl := idx.byPair[string(ev.Pair)]
			if sl == nil {
				e.rejected[counterUnknownPair].Add(1)
				continue
			}
			q := &Quote{Bid: ev.Bid, Ask: ev.Ask, ReceivedAt: recv, ProviderTime: time.UnixMilli(ev.TimeMs)}
			sl.q.Store(q)
			stored++
			if publish {
				e.publishLocked(sl.symbol, q)
			}
		case EventStatus:
			e.applyStatus(ctx, idx, ev)
		}
	}
	e.subsMu.RUnlock()
	if stored > 0 {
		e.accepted.Add(uint64(stored))
		e.lastTickAt.Store(recv.UnixNano())
		e.lastDataAt.Store(recv.UnixNano())
	}
	return stored
}

func (e *Engine) applyStatus(ctx context.Context, idx *slotIndex, ev *Event) {
	switch string(ev.Status) {
	case "market_closed", "market_open":
		sl := idx.byPair[string(ev.Message)]
		if sl == nil {
			return
		}
		closed := string(ev.Status) == "market_closed"
		if sl.providerClosed.Swap(closed) != closed {
			e.log.InfoContext(ctx, "provider changed a symbol's session", slog.String("symbol", sl.symbol),
				slog.Bool("open", !closed))
		}
	case "error", "auth_failed":
		e.log.WarnContext(ctx, "provider reported an error", slog.String("status", string(ev.Status)),
			slog.String("message", string(ev.Message)))
	}
}

// redactURL drops credentials and query (where some providers put keys) before logging.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
