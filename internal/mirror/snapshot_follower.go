package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/alert"
	"fxdesk/internal/fx"
	"fxdesk/internal/redisname"
	"fxdesk/internal/session"
	"fxdesk/internal/tick"
)

// Alert codes the follower raises and resolves.
const (
	AlertUnavailable = "quote-mirror-unavailable"
	AlertStale       = "quote-mirror-stale"
)

// AlertInbox is where the follower reports; *alert.Inbox satisfies it.
type AlertInbox interface {
	// Raise records that code's condition holds now (deduplicated while unresolved).
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	// Resolve closes code's unresolved alert, if any.
	Resolve(ctx context.Context, code string) error
}

// SnapshotFollowerConfig shapes a Follower. Redis is required.
type SnapshotFollowerConfig struct {
	Redis redis.UniversalClient
	// Interval between polls; the snapshot is "not advancing" after two. Default DefaultInterval.
	Interval time.Duration
	// MaxAge refuses a mid older than this while its session is open. Deliberately its own
	// setting, far above the trading staleness (30 s): converting a fee is a weaker question than
	// pricing a trade. Default DefaultMaxAge.
	MaxAge time.Duration
	// CalendarFor returns a symbol's session calendar; nil (or a nil result) means always open.
	CalendarFor func(symbol string) *session.Calendar
	// Alerts receives quote-mirror-unavailable and quote-mirror-stale. Nil: no alerts.
	Alerts AlertInbox
	// HasExposure says whether the desk has open positions or resting orders; unavailable is
	// raised only then. Nil means always exposed. An error skips raising for that poll.
	HasExposure func(ctx context.Context) (bool, error)
	// PinHold is how long the follower keeps asking for a leg after the last Pin of it.
	// Default DefaultPinHold.
	PinHold time.Duration
	// Names gives the keys and channel, as PublisherConfig.Names: the same as the publisher's.
	Names redisname.Names
	// Now is the follower's clock; ages are measured on its monotonic reading. Default time.Now.
	Now func() time.Time
}

// SnapshotFollower reads the leader's snapshot every interval and answers LastTick from it.
// Create it with NewSnapshotFollower; run it only in fxdesk-cron — that decision is the
// caller's.
type SnapshotFollower struct {
	cfg  SnapshotFollowerConfig
	keys keys
	log  *slog.Logger

	view atomic.Pointer[view] // read lock-free by LastTick

	mu          sync.Mutex // serialises polls; guards everything below
	pins        map[string]time.Time
	pinSeq      uint64
	pinsWritten []string  // the pins the last successful refresh wrote
	pinsAt      time.Time // when (follower clock)
	unavailable alertState
	stale       alertState
	status      Status
	// fence refuses a snapshot older than the newest term served. It forgets that term when
	// the key is found missing (expired, or Redis restarted empty): its holder has not
	// published for KeyTTL.
	fence       termFence
	refusedAt   time.Time // publishedAt of the last snapshot refused for its term
	refusingNow bool      // the last poll refused: the episode is logged once
}

// view is one snapshot as the follower first saw it. It is never changed once stored, so
// LastTick reads it without a lock.
type view struct {
	snap *snapshot
	// base is how old publishedAt already was when this snapshot was first seen: the time it had
	// sat in Redis (KeyTTL minus its remaining TTL, counted by the Redis server). firstSeen is the
	// follower's clock at that moment. A quote's age follows the one rule (receivedHere).
	base      time.Duration
	firstSeen time.Time
}

// receivedAt is q's receipt on this process's clock.
func (v *view) receivedAt(q heldQuote) time.Time {
	return receivedHere(q.receivedAt, v.snap.publishedAt, v.base, v.firstSeen)
}

type alertState uint8

const (
	alertUnknown alertState = iota // as after a restart: a previous process may have raised it
	alertRaised
	alertClear
)

// NewSnapshotFollower builds a follower; it knows nothing until the first PollOnce. It refuses a
// missing dependency.
func NewSnapshotFollower(cfg SnapshotFollowerConfig, log *slog.Logger) (*SnapshotFollower, error) {
	if cfg.Redis == nil || log == nil {
		return nil, errors.New("quote mirror follower: Redis and a logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.PinHold <= 0 {
		cfg.PinHold = DefaultPinHold
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	k := keysOf(cfg.Names)
	return &SnapshotFollower{cfg: cfg, keys: k, log: log, pins: map[string]time.Time{},
		status: Status{Mode: Following, Key: k.snapshot, IntervalMs: cfg.Interval.Milliseconds()}}, nil
}

// Run polls at once and then every interval until ctx ends. It returns nil when ctx ends.
func (f *SnapshotFollower) Run(ctx context.Context) error {
	f.log.InfoContext(ctx, "fx quote mirror following the lease holder's snapshot",
		slog.String("key", f.keys.snapshot), slog.Duration("interval", f.cfg.Interval), slog.Duration("maxAge", f.cfg.MaxAge))
	t := time.NewTicker(f.cfg.Interval)
	defer t.Stop()
	for {
		if err := f.PollOnce(ctx); err != nil && ctx.Err() == nil {
			f.log.WarnContext(ctx, "quote mirror poll failed", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// LastTick returns symbol's last mid from the mirror, with the engine's signature so conversion
// code does not care which process it runs in. The quote's ReceivedAt is expressed on this
// process's clock (now − age), so time.Since(q.ReceivedAt) is the skew-free age. A symbol absent
// from the snapshot, or older than MaxAge while its session is open, answers false; while its
// session is closed the last mid serves, however old.
func (f *SnapshotFollower) LastTick(symbol string) (tick.Quote, bool) {
	v := f.view.Load()
	if v == nil {
		return tick.Quote{}, false
	}
	q, ok := v.snap.quotes[symbol]
	if !ok {
		return tick.Quote{}, false
	}
	now := f.cfg.Now()
	age := ageAt(v.receivedAt(q), now)
	if age > f.cfg.MaxAge && f.sessionOpen(symbol, now) {
		return tick.Quote{}, false
	}
	// The mirror does not carry the provider's own stamp: ProviderTime stays zero.
	return tick.Quote{Bid: q.bid, Ask: q.ask, ReceivedAt: now.Add(-age)}, true
}

// SymbolState is the mirror seen as the desk's price view (tick.Prices): a mid LastTick serves
// is quoting, and a symbol it refuses (absent, or too old while its session is open) has no
// price here.
func (f *SnapshotFollower) SymbolState(symbol string) tick.State {
	if _, ok := f.LastTick(symbol); ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

func (f *SnapshotFollower) sessionOpen(symbol string, now time.Time) bool {
	if f.cfg.CalendarFor == nil {
		return true
	}
	cal := f.cfg.CalendarFor(symbol)
	return cal == nil || cal.IsOpen(now)
}

// Pin asks the leader to subscribe legs this process lacks; they appear in a later snapshot.
// The follower keeps asking (rewriting the pin every PinRefresh) for PinHold after the last Pin
// of a leg. Every symbol must be a desk symbol; if one is not, nothing is pinned.
func (f *SnapshotFollower) Pin(ctx context.Context, symbols ...string) error {
	for _, s := range symbols {
		if !fx.ValidSymbol(s) {
			return fmt.Errorf("pin %q: not six upper-case letters like EURUSD", s)
		}
	}
	if len(symbols) == 0 {
		return nil
	}
	f.mu.Lock()
	now := f.cfg.Now()
	for _, s := range symbols {
		f.pins[s] = now
	}
	stamp := f.stampLocked(now)
	f.mu.Unlock()

	pipe := f.cfg.Redis.Pipeline()
	f.writePins(ctx, pipe, symbols, stamp)
	pipe.Publish(ctx, f.keys.pinChannel, strings.Join(symbols, ","))
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("pin %v in %q: %w", symbols, f.keys.pins, err)
	}
	return nil
}

// stampLocked is a pin value that differs from every earlier one: the leader treats an unchanged
// stamp as a follower that stopped asking. Readable by an operator: follower ms, sequence.
func (f *SnapshotFollower) stampLocked(now time.Time) string {
	f.pinSeq++
	return strconv.FormatInt(now.UnixMilli(), 10) + "-" + strconv.FormatUint(f.pinSeq, 10)
}

// writePins adds to pipe the write of symbols with stamp, and returns a check of that write's
// result once the pipeline has run (a pipeline's own error may be another command's).
func (f *SnapshotFollower) writePins(ctx context.Context, pipe redis.Pipeliner, symbols []string, stamp string) (written func() bool) {
	args := make([]any, 0, 2*len(symbols))
	for _, s := range symbols {
		args = append(args, s, stamp)
	}
	hset := pipe.HSet(ctx, f.keys.pins, args...)
	pexpire := pipe.PExpire(ctx, f.keys.pins, KeyTTL)
	return func() bool { return hset.Err() == nil && pexpire.Err() == nil }
}

// PollOnce reads the snapshot (and its remaining TTL) and refreshes this process's pins in one
// round trip, then evaluates the alerts. It returns the Redis or format error, if any, after
// evaluating alerts on what it knows.
func (f *SnapshotFollower) PollOnce(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := f.cfg.Now()

	var held []string
	for s, at := range f.pins {
		if start.Sub(at) > f.cfg.PinHold {
			delete(f.pins, s)
			continue
		}
		held = append(held, s)
	}
	slices.Sort(held)

	pipe := f.cfg.Redis.Pipeline()
	get := pipe.Get(ctx, f.keys.snapshot)
	ttl := pipe.PTTL(ctx, f.keys.snapshot)
	// The pins are rewritten when the set changed or PinRefresh has passed: the leader lets a
	// pin go only once its stamp has stood still for KeyTTL, fifteen refreshes away.
	refresh := len(held) > 0 && (!slices.Equal(held, f.pinsWritten) || start.Sub(f.pinsAt) >= PinRefresh)
	var written func() bool
	if refresh {
		written = f.writePins(ctx, pipe, held, f.stampLocked(start))
	}
	_, execErr := pipe.Exec(ctx)
	if refresh && written() { // even when the GET found no snapshot yet (redis.Nil)
		f.pinsWritten, f.pinsAt = held, start
	}

	now := f.cfg.Now()
	var pollErr error
	raw, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		// No snapshot: keep serving the last one seen; ages keep growing.
		f.fence.forget()
		f.refusingNow = false
	case err != nil:
		pollErr = fmt.Errorf("read quote mirror snapshot %q: %w", f.keys.snapshot, err)
	default:
		snap, err := parseSnapshot(raw)
		if err != nil {
			pollErr = fmt.Errorf("decode quote mirror snapshot %q: %w", f.keys.snapshot, err)
			break
		}
		if f.refuseTermLocked(ctx, snap) {
			break
		}
		if cur := f.view.Load(); cur == nil || !cur.snap.publishedAt.Equal(snap.publishedAt) {
			var base time.Duration
			if left, err := ttl.Result(); err == nil && left > 0 && left <= KeyTTL {
				base = KeyTTL - left
			}
			f.view.Store(&view{snap: snap, base: base, firstSeen: now})
		}
	}
	if pollErr == nil && execErr != nil && !errors.Is(execErr, redis.Nil) {
		pollErr = fmt.Errorf("refresh quote mirror pins %q: %w", f.keys.pins, execErr)
	}

	v := f.view.Load()
	advancing := v != nil && now.Sub(v.firstSeen) <= 2*f.cfg.Interval
	var refused []string
	var oldest map[string]time.Duration
	if v != nil {
		for s, q := range v.snap.quotes {
			if age := ageAt(v.receivedAt(q), now); age > f.cfg.MaxAge && f.sessionOpen(s, now) {
				refused = append(refused, s)
				if oldest == nil {
					oldest = map[string]time.Duration{}
				}
				oldest[s] = age
			}
		}
		slices.Sort(refused)
	}
	f.evaluateUnavailable(ctx, v, advancing, now, pollErr)
	f.evaluateStale(ctx, refused, oldest)

	st := &f.status
	st.Advancing, st.Refused, st.Pinned = advancing, refused, held
	st.LastCycleMs = float64(now.Sub(start).Microseconds()) / 1000
	st.Cycles++
	st.LastError = ""
	if pollErr != nil {
		st.LastError = pollErr.Error()
	}
	if v != nil {
		st.LastPublishedAt, st.Symbols, st.Bytes, st.Term = v.snap.publishedAt, len(v.snap.quotes), v.snap.bytes, v.snap.term
	}
	return pollErr
}

// refuseTermLocked reports whether snap must not be served because the term fence refuses it: it
// was written by a process that lost the lease (a write that passed Redis before the newer
// holder's first publish, or a Redis without the publish script's check). The last accepted
// snapshot keeps serving. A refused snapshot is counted once and a run of refusals logged once.
func (f *SnapshotFollower) refuseTermLocked(ctx context.Context, snap *snapshot) bool {
	if f.fence.admit(snap.term) {
		if f.refusingNow {
			f.refusingNow = false
			f.log.InfoContext(ctx, "quote mirror snapshot of the current lease term again", slog.Int64("term", snap.term))
		}
		return false
	}
	if !snap.publishedAt.Equal(f.refusedAt) {
		f.refusedAt = snap.publishedAt
		f.status.TermRefused++
	}
	if !f.refusingNow {
		f.refusingNow = true
		f.log.ErrorContext(ctx, "quote mirror snapshot refused: its lease term is older than one already seen, so it comes from a process that lost the lease; the last snapshot of the newer term keeps serving",
			slog.String("key", f.keys.snapshot), slog.Int64("term", snap.term), slog.Int64("newestTerm", f.fence.newest),
			slog.Time("publishedAt", snap.publishedAt))
	}
	return true
}

func (f *SnapshotFollower) evaluateUnavailable(ctx context.Context, v *view, advancing bool, now time.Time, pollErr error) {
	if advancing {
		if f.unavailable != alertClear && f.cfg.Alerts != nil {
			if err := f.cfg.Alerts.Resolve(ctx, AlertUnavailable); err != nil {
				f.log.WarnContext(ctx, "quote mirror: cannot resolve alert", slog.String("code", AlertUnavailable), slog.Any("err", err))
				return
			}
		}
		if f.unavailable == alertRaised {
			f.log.InfoContext(ctx, "quote mirror advancing again", slog.Time("publishedAt", v.snap.publishedAt))
		}
		f.unavailable = alertClear
		return
	}
	exposed := true
	if f.cfg.HasExposure != nil {
		var err error
		if exposed, err = f.cfg.HasExposure(ctx); err != nil {
			f.log.WarnContext(ctx, "quote mirror: cannot tell whether the desk has exposure; alert not evaluated", slog.Any("err", err))
			return
		}
	}
	if !exposed {
		return
	}
	details := map[string]any{"snapshotKey": f.keys.snapshot, "intervalMs": f.cfg.Interval.Milliseconds()}
	var what string
	if v == nil {
		what = "finds no snapshot at " + f.keys.snapshot
		details["reason"] = "no snapshot"
	} else {
		same := now.Sub(v.firstSeen).Round(time.Second)
		what = fmt.Sprintf("has seen the same snapshot (published %s, leader clock) for %s", v.snap.publishedAt.UTC().Format(time.RFC3339), same)
		details["reason"] = "not advancing"
		details["lastPublishedAt"] = v.snap.publishedAt.UTC()
		details["unchangedForMs"] = same.Milliseconds()
	}
	if pollErr != nil {
		details["error"] = pollErr.Error()
	}
	msg := "The quote mirror is unavailable: fxdesk-cron " + what + " while the desk has open positions or resting orders, " +
		"so swaps and equity cannot be converted. The two real causes: (1) the web process is not running with CRON_MODE=off, " +
		"which is the only signal that arms the publisher on the lease holder; (2) the two processes do not share the same Redis " +
		"(compare FXDESK_REDIS_URL, database number included, and FXDESK_REDIS_PREFIX on both)."
	if f.cfg.Alerts != nil {
		if err := f.cfg.Alerts.Raise(ctx, AlertUnavailable, alert.Critical, msg, details); err != nil {
			f.log.WarnContext(ctx, "quote mirror: cannot raise alert", slog.String("code", AlertUnavailable), slog.Any("err", err))
			return
		}
	}
	if f.unavailable != alertRaised {
		f.log.ErrorContext(ctx, "quote mirror unavailable while the desk has exposure", slog.String("detail", what))
	}
	f.unavailable = alertRaised
}

func (f *SnapshotFollower) evaluateStale(ctx context.Context, refused []string, ages map[string]time.Duration) {
	if f.cfg.Alerts == nil {
		return
	}
	if len(refused) == 0 {
		if f.stale != alertClear {
			if err := f.cfg.Alerts.Resolve(ctx, AlertStale); err != nil {
				f.log.WarnContext(ctx, "quote mirror: cannot resolve alert", slog.String("code", AlertStale), slog.Any("err", err))
				return
			}
			f.stale = alertClear
		}
		return
	}
	const named = 50
	parts := make([]string, 0, min(len(refused), named))
	for _, s := range refused[:min(len(refused), named)] {
		parts = append(parts, s+" ("+ages[s].Round(time.Second).String()+")")
	}
	list := strings.Join(parts, ", ")
	if len(refused) > named {
		list += fmt.Sprintf(" and %d more", len(refused)-named)
	}
	msg := fmt.Sprintf("The quote mirror refuses %d symbol(s) for age while their session is open (older than %s): %s. "+
		"Conversions through them (swaps, equity) wait until the lease holder quotes them again.", len(refused), f.cfg.MaxAge, list)
	agesMs := make(map[string]int64, len(ages))
	for s, a := range ages {
		agesMs[s] = a.Milliseconds()
	}
	details := map[string]any{"symbols": refused, "ageMs": agesMs, "maxAgeMs": f.cfg.MaxAge.Milliseconds()}
	if err := f.cfg.Alerts.Raise(ctx, AlertStale, alert.Warning, msg, details); err != nil {
		f.log.WarnContext(ctx, "quote mirror: cannot raise alert", slog.String("code", AlertStale), slog.Any("err", err))
		return
	}
	if f.stale != alertRaised {
		f.log.WarnContext(ctx, "quote mirror refuses symbols for age", slog.Any("symbols", refused))
	}
	f.stale = alertRaised
}

// Status reports the follower for the desk page.
func (f *SnapshotFollower) Status() Status {
	f.mu.Lock()
	st := f.status
	st.Refused, st.Pinned = slices.Clone(st.Refused), slices.Clone(st.Pinned)
	f.mu.Unlock()
	if v := f.view.Load(); v != nil {
		st.AgeMs = (v.base + f.cfg.Now().Sub(v.firstSeen)).Milliseconds()
	}
	return st
}

// Pinned lists the legs this follower keeps asking for.
func (f *SnapshotFollower) Pinned() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.pins))
}
