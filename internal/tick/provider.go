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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// ErrKeyRefused is what Run returns when the provider refused the key KeyRefusals sessions in
// a row.
var ErrKeyRefused = errors.New("the provider refused the key")

// WebsocketOptions shapes a provider-websocket source. Zero fields take the defaults of the
// same-named Config fields.
type WebsocketOptions struct {
	// SilenceAfter is how long a connected socket may deliver no accepted quote, while some
	// wanted symbol's session is open, before the source reconnects. Default 30s.
	SilenceAfter time.Duration
	// BackoffMin and BackoffMax bound the reconnect delay, which doubles per failed attempt and
	// is jittered to between half and all of the current step. Defaults 250ms and 15s.
	BackoffMin, BackoffMax time.Duration
	// DialTimeout and HandshakeTimeout bound connecting and authenticating. Default 5s each.
	DialTimeout, HandshakeTimeout time.Duration
	// ReadLimit caps one provider frame. Default 16 MiB.
	ReadLimit int64
	// KeyRefusals is how many sessions in a row the provider may refuse the key before Run
	// gives up with ErrKeyRefused. Default 3.
	KeyRefusals int
}

func (o WebsocketOptions) withDefaults() WebsocketOptions {
	if o.SilenceAfter <= 0 {
		o.SilenceAfter = 30 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 250 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(15*time.Second, o.BackoffMin)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 16 << 20
	}
	if o.KeyRefusals <= 0 {
		o.KeyRefusals = 3
	}
	return o
}

// NewWebsocketSource builds a source on a provider websocket (Massive/Polygon forex quote
// protocol, as the bundled simulator speaks it): its own connection, subscriptions, capped
// jittered back-off, and a reconnect when the stream goes silent. An empty key sends
// "anonymous". The URL is checked when Run starts.
func NewWebsocketSource(name, url, key string, opts WebsocketOptions) Source {
	if key == "" {
		key = "anonymous"
	}
	return &wsSource{name: name, url: url, key: key, opts: opts.withDefaults()}
}

// wsSource is the provider websocket behind the Source interface.
type wsSource struct {
	name, url, key string
	opts           WebsocketOptions

	connects         atomic.Uint64
	silentReconnects atomic.Uint64
	lastDataAt       atomic.Int64 // engine clock, Unix ns; current session's last accepted quote
}

func (w *wsSource) Name() string { return w.name }

// Run holds the provider connection until ctx ends, reconnecting with capped, jittered
// exponential backoff. It returns nil when ctx ends, and an error if the URL is unusable or the
// provider refused the key KeyRefusals sessions in a row (ErrKeyRefused). Its feed must be the
// engine's (a websocket source decodes straight into the engine's slots).
func (w *wsSource) Run(ctx context.Context, feed Feed) error {
	s, ok := feed.(*srcState)
	if !ok {
		return errors.New("websocket source: feed is not a tick engine's")
	}
	if w.url == "" {
		return errors.New("tick engine: no provider URL configured")
	}
	if _, err := url.Parse(w.url); err != nil {
		return fmt.Errorf("tick engine: provider URL: %w", err)
	}
	e := s.e
	e.log.InfoContext(ctx, "price source started", slog.String("source", w.name),
		slog.String("provider", redactURL(w.url)), slog.Int("wanted", len(e.Wanted())))
	backoff := w.opts.BackoffMin
	refused := 0
	for {
		gotData, err := w.session(ctx, s)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, ErrKeyRefused) {
			refused = 0
		} else if refused++; refused >= w.opts.KeyRefusals {
			return fmt.Errorf("tick engine: %d sessions in a row: %w (check FXDESK_FEED_KEY)", refused, err)
		}
		msg := err.Error()
		s.lastErr.Store(&msg)
		if gotData {
			// The provider worked until it did not: start over from the shortest delay.
			backoff = w.opts.BackoffMin
		}
		delay := backoff/2 + rand.N(backoff/2+1)
		e.log.WarnContext(ctx, "provider connection ended; reconnecting", slog.String("source", w.name),
			slog.Any("error", err), slog.Duration("retryIn", delay))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, w.opts.BackoffMax)
	}
}

// errSilent ends a session whose stream went quiet while it should have been quoting.
var errSilent = errors.New("provider stream silent")

// session runs one connection from dial to failure. gotData reports whether any quote was
// accepted, which is what resets the backoff.
func (w *wsSource) session(ctx context.Context, s *srcState) (gotData bool, err error) {
	e := s.e
	dctx, cancel := context.WithTimeout(ctx, w.opts.DialTimeout)
	conn, _, err := websocket.Dial(dctx, w.url, nil)
	cancel()
	if err != nil {
		return false, fmt.Errorf("dial provider %s: %w", redactURL(w.url), withoutURLSecrets(err))
	}
	defer conn.CloseNow()
	conn.SetReadLimit(w.opts.ReadLimit)

	var dec Decoder
	if err := w.authenticate(ctx, conn, &dec); err != nil {
		return false, err
	}

	w.lastDataAt.Store(e.cfg.Now().UnixNano())
	s.SetConnected(true, nil)
	w.connects.Add(1)
	e.log.InfoContext(ctx, "provider connected", slog.String("source", w.name), slog.String("provider", redactURL(w.url)))

	sctx, scancel := context.WithCancelCause(ctx)
	defer scancel(nil)
	var wg sync.WaitGroup
	wg.Go(func() { w.syncSubscriptions(sctx, scancel, conn, s) })
	wg.Go(func() { w.watchSilence(sctx, scancel, e) })
	accepted, err := w.readLoop(sctx, conn, &dec, s)
	scancel(err)
	wg.Wait()
	if cause := context.Cause(sctx); cause != nil && ctx.Err() == nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	s.SetConnected(false, nil) // Run records err once it knows the context did not end
	return accepted > 0, err
}

func (w *wsSource) authenticate(ctx context.Context, conn *websocket.Conn, dec *Decoder) error {
	hctx, cancel := context.WithTimeout(ctx, w.opts.HandshakeTimeout)
	defer cancel()
	auth := fmt.Appendf(nil, `{"action":"auth","params":%q}`, w.key)
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
func (w *wsSource) syncSubscriptions(ctx context.Context, fail context.CancelCauseFunc, conn *websocket.Conn, s *srcState) {
	onSocket := map[string]bool{}
	sync := func() error {
		want := s.Wanted()
		wantPairs := make(map[string]bool, len(want))
		var add, del []string
		for _, sym := range want {
			pair, _ := ProviderPair(sym)
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
			s.e.log.DebugContext(ctx, "provider subscriptions changed", slog.String("source", w.name),
				slog.String("action", change.action), slog.String("pairs", strings.Join(change.params, ",")))
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
		case <-s.WantedChanged():
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
func (w *wsSource) watchSilence(ctx context.Context, fail context.CancelCauseFunc, e *Engine) {
	period := min(max(w.opts.SilenceAfter/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := e.cfg.Now()
		quiet := now.Sub(time.Unix(0, w.lastDataAt.Load()))
		if quiet <= w.opts.SilenceAfter || !e.anyWantedOpen(now) {
			continue
		}
		w.silentReconnects.Add(1)
		e.log.WarnContext(ctx, "provider stream silent; reconnecting", slog.String("source", w.name),
			slog.Duration("quietFor", quiet), slog.Duration("silenceAfter", w.opts.SilenceAfter))
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
func (w *wsSource) readLoop(ctx context.Context, conn *websocket.Conn, dec *Decoder, s *srcState) (uint64, error) {
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
		recv := s.e.cfg.Now()
		n := s.ingest(ctx, dec, buf.Bytes(), recv)
		if n > 0 {
			w.lastDataAt.Store(recv.UnixNano())
		}
		accepted += uint64(n)
	}
}

// ingest applies one frame received at recv through the primary source; tests and benchmarks
// use it.
func (e *Engine) ingest(ctx context.Context, dec *Decoder, frame []byte, recv time.Time) int {
	return e.srcs[0].ingest(ctx, dec, frame, recv)
}

// ingest applies one frame of source s received at recv and returns the number of valid quotes
// for wanted symbols in it (accepted: offered to selection and the filter).
func (s *srcState) ingest(ctx context.Context, dec *Decoder, frame []byte, recv time.Time) int {
	e := s.e
	evs, err := dec.Decode(frame)
	if err != nil {
		e.rejected[counterMalformed].Add(1)
		e.log.DebugContext(ctx, "provider frame rejected", slog.String("source", s.name), slog.String("reason", "malformed"), slog.Any("error", err))
		return 0
	}
	idx := e.slots.Load()
	stored := 0
	e.subsMu.RLock()
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case EventQuote:
			if r := Validate(ev); r != RejectNone {
				e.rejected[r].Add(1)
				if e.log.Enabled(ctx, slog.LevelDebug) {
					e.log.DebugContext(ctx, "quote rejected", slog.String("source", s.name), slog.String("pair", string(ev.Pair)), slog.String("reason", r.String()))
				}
				continue
			}
			sl := idx.byPair[string(ev.Pair)]
			if sl == nil {
				e.rejected[counterUnknownPair].Add(1)
				continue
			}
			e.offer(s, sl, ev.Bid, ev.Ask, time.UnixMilli(ev.TimeMs), recv)
			stored++
		case EventStatus:
			s.applyStatus(ctx, idx, ev)
		}
	}
	e.subsMu.RUnlock()
	if stored > 0 {
		e.accepted.Add(uint64(stored))
		e.lastTickAt.Store(recv.UnixNano())
	}
	return stored
}

func (s *srcState) applyStatus(ctx context.Context, idx *slotIndex, ev *Event) {
	switch string(ev.Status) {
	case "market_closed", "market_open":
		sl := idx.byPair[string(ev.Message)]
		if sl == nil {
			return
		}
		s.SetMarketOpen(sl.symbol, string(ev.Status) == "market_open")
	case "error", "auth_failed":
		s.e.log.WarnContext(ctx, "provider reported an error", slog.String("source", s.name), slog.String("status", string(ev.Status)),
			slog.String("message", string(ev.Message)))
	}
}

// redactURL drops credentials and query (where some providers put keys) before logging.
// withoutURLSecrets rewrites a failed request's error so that it names the URL as redactURL
// does: net/http prints the URL it failed to get, query and all, and a provider key often rides
// in the query. The error is logged and shown on the status page. Its text is rebuilt, since
// every wrapping layer copied the URL into its own message when it was made.
func withoutURLSecrets(err error) error {
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return err
	}
	clean := redactURL(ue.URL)
	msg := strings.ReplaceAll(err.Error(), strconv.Quote(ue.URL), strconv.Quote(clean))
	return &redactedError{msg: strings.ReplaceAll(msg, ue.URL, clean), err: err}
}

// redactedError is an error with a credential taken out of its text; errors.Is and As still see
// the original chain.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
