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
	"time"

	"github.com/coder/websocket"
)

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
		return false, fmt.Errorf("dial provider %s: %w", redactURL(e.cfg.URL), withoutURLSecrets(err))
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
