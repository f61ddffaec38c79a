package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/redisname"
	"fxdesk/internal/tick"
)

// Defaults and fixed contracts (docs/architecture.md, «Prices on Redis: the quote mirror and the
// tick stream»; docs/configuration.md).
const (
	DefaultInterval   = 5 * time.Second  // FXDESK_MIRROR_INTERVAL
	DefaultMaxSymbols = 5000             // snapshot cap
	DefaultMaxAge     = 15 * time.Minute // conversion bound while a session is open
	DefaultPinHold    = 24 * time.Hour   // how long a follower keeps asking for a leg after Pin
	PinRefresh        = KeyTTL / 15      // how often a follower rewrites unchanged pins
	// KeyTTL is the TTL of both keys. The follower also reads the snapshot's remaining TTL to learn
	// how long it sat in Redis before being seen, so both halves must agree on it: it is a
	// constant.
	KeyTTL = 15 * time.Minute
)

// QuoteSource is what the snapshot publisher reads: *tick.Engine satisfies it.
type QuoteSource interface {
	tick.Prices
	// Wanted lists the subscribed symbols (sorted, as the engine returns them; unsorted works, slower).
	Wanted() []string
}

// Gate admits or drops lease-guarded work (*gate.Gate): a snapshot is published only while it
// admits gate.MirrorPublish, so a process that no longer holds the lease stops feeding followers.
// A publish that passed the gate but that Redis refused because the stored snapshot carries a
// newer term is reported through Fenced, like a database write the term fence refused.
type Gate interface {
	Admit(ctx context.Context, w gate.Work, attrs ...slog.Attr) error
	Fenced(ctx context.Context, w gate.Work, cause error, attrs ...slog.Attr) error
}

// ErrNewerTerm is the cause PublishOnce reports (through Gate.Fenced, so errors.Is matches
// gate.ErrNotHolder too) when Redis already holds a snapshot of a newer lease term: another
// process holds the lease, and this one's snapshot would overwrite its prices.
var ErrNewerTerm = errors.New("quote mirror snapshot in Redis carries a newer lease term")

// SnapshotPublisherConfig shapes a SnapshotPublisher. Redis, Quotes, SetPinned and Gate are required.
type SnapshotPublisherConfig struct {
	Redis  redis.UniversalClient
	Quotes QuoteSource
	Gate   Gate
	// SetPinned hands the legs followers asked for to the tick engine, which subscribes them on
	// the live socket: func(legs []string) error { return engine.SetSource("pinned", legs) }.
	// It is called from PublishOnce whenever the set of live pins changes (an empty list when the
	// last pin lapses); after an error it is called again on the next cycle.
	SetPinned func(legs []string) error
	// Exposed lists symbols with open positions or resting orders, kept first when the cap bites.
	// Optional; an error is logged and the snapshot is published without that priority.
	Exposed func(ctx context.Context) ([]string, error)
	// Pinned lists legs this process pins itself, kept first like the followers' pins. Optional.
	Pinned func() []string
	// Digits gives the decimals a symbol is quoted in; prices are written with that many.
	// Optional: without it, or for a symbol it answers -1 for, a price is written as the
	// shortest decimal that reads back as the same float. Asked for every symbol of a publish.
	Digits func(symbol string) int
	// Term is the publisher's lease term, written into every snapshot: Redis refuses a publish
	// older than the stored snapshot's term, and a follower a snapshot older than one it has
	// seen. It is read on every publish and must not block (lease.Keeper.Term). Optional:
	// without it the snapshot says term 0, which is not fenced.
	Term func() int64
	// Interval between snapshots. Default DefaultInterval.
	Interval time.Duration
	// MaxSymbols caps a snapshot. Default DefaultMaxSymbols.
	MaxSymbols int
	// Names gives the keys and channel (fx:quote-mirror:… under the default prefix, the zero
	// value); publisher and followers of one install must be given the same.
	Names redisname.Names
	// Now is the leader's clock: publishedAt, and how long a pin has gone unrefreshed (read
	// monotonically, so the follower's clock never enters). Default time.Now.
	Now func() time.Time
}

// SnapshotPublisher writes the leader's quotes to the snapshot key every interval and relays
// followers' pins to the tick engine. Create it with NewSnapshotPublisher; run it only on the
// lease holder of a split install (CRON_MODE=off) — that decision is the caller's.
type SnapshotPublisher struct {
	cfg  SnapshotPublisherConfig
	keys keys
	log  *slog.Logger

	mu        sync.Mutex // serialises cycles and pin reads; guards everything below
	buf       []byte     // the last snapshot written, its room reused
	priority  []string   // this cycle's priority legs, reused
	entries   []entry
	pins      map[string]pinSeen
	live      []string // live pins as last handed to SetPinned (sorted)
	liveSent  bool     // SetPinned accepted live
	lastDrop  int
	lastDropT time.Time
	pinsRead  time.Time // when the pin hash was last read (leader clock)
	status    Status
}

type pinSeen struct {
	stamp  string
	seenAt time.Time // leader clock (monotonic) when this stamp was first read
}

// NewSnapshotPublisher builds a publisher; it does nothing until PublishOnce or Run. It refuses a
// missing dependency.
func NewSnapshotPublisher(cfg SnapshotPublisherConfig, log *slog.Logger) (*SnapshotPublisher, error) {
	if cfg.Redis == nil || cfg.Quotes == nil || cfg.SetPinned == nil || cfg.Gate == nil || log == nil {
		return nil, errors.New("quote mirror publisher: Redis, Quotes, SetPinned, Gate and a logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxSymbols <= 0 {
		cfg.MaxSymbols = DefaultMaxSymbols
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	k := keysOf(cfg.Names)
	return &SnapshotPublisher{cfg: cfg, keys: k, log: log, pins: map[string]pinSeen{},
		status: Status{Mode: Publishing, Key: k.snapshot, IntervalMs: cfg.Interval.Milliseconds()}}, nil
}

// Run publishes at once and then every interval until ctx ends, and reads the pin hash as soon as
// a follower announces a pin, so the leg is subscribed within milliseconds and rides the next
// regular snapshot, and again whenever the subscription comes back after a reconnect. It
// returns nil when ctx ends.
func (p *SnapshotPublisher) Run(ctx context.Context) error {
	p.log.InfoContext(ctx, "fx quote mirror publishing every "+p.cfg.Interval.String(),
		slog.String("key", p.keys.snapshot), slog.Int("maxSymbols", p.cfg.MaxSymbols))
	sub := p.cfg.Redis.Subscribe(ctx, p.keys.pinChannel)
	defer sub.Close()
	// Wait for the subscription to be confirmed, so a pin announced after the first publish is
	// never missed by a subscription still in flight. If Redis is down, the client resubscribes
	// when it returns, and the pins are read then (below); the first publish reads them anyway.
	if _, err := sub.Receive(ctx); err != nil && ctx.Err() == nil {
		p.log.WarnContext(ctx, "quote mirror: pin nudges unavailable until Redis answers", slog.Any("err", err))
	}
	// A resubscription after a reconnect arrives here too: nudges sent while the subscription
	// was down are lost, so the pins are read then as if nudged.
	nudges := sub.ChannelWithSubscriptions()

	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if err := p.PublishOnce(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, gate.ErrNotHolder) {
			p.log.WarnContext(ctx, "quote mirror publish failed", slog.Any("err", err))
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				waiting = false
			case <-nudges:
				if err := p.ReadPins(ctx); err != nil && ctx.Err() == nil {
					p.log.WarnContext(ctx, "quote mirror pin read failed", slog.Any("err", err))
				}
			}
		}
	}
}

// PublishOnce writes one snapshot. Once per PinRefresh it also reads the pin hash, alongside in the
// same round trip, and hands the pins to SetPinned at once; their quotes appear from the next
// snapshot on. A new pin does not wait for that read: the follower announces it on the pin
// channel and Run reads the hash at once (ReadPins), and again after the subscription reconnects.
// The periodic read notices pins that lapsed (the follower rewrites its pins on the same period)
// and is the backstop for an announcement lost some other way.
//
// It publishes nothing, and returns gate.ErrNotHolder, when the gate drops the publish.
func (p *SnapshotPublisher) PublishOnce(ctx context.Context) error {
	if err := p.cfg.Gate.Admit(ctx, gate.MirrorPublish); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.cfg.Now()

	var exposed []string
	if p.cfg.Exposed != nil {
		var err error
		if exposed, err = p.cfg.Exposed(ctx); err != nil {
			p.log.WarnContext(ctx, "quote mirror: exposed symbols unavailable; publishing without their priority", slog.Any("err", err))
		}
	}
	priority := append(append(p.priority[:0], p.live...), exposed...)
	if p.cfg.Pinned != nil {
		priority = append(priority, p.cfg.Pinned()...)
	}
	p.priority = priority
	// The snapshot spells publishedAt to the millisecond; Add keeps the monotonic reading.
	publishedAt := p.cfg.Now()
	publishedAt = publishedAt.Add(-time.Duration(publishedAt.Nanosecond() % int(time.Millisecond)))
	if last := p.status.LastPublishedAt; !publishedAt.After(last) {
		// The follower tells snapshots apart by publishedAt alone; a clock that did not move
		// (or stepped back) must not make a new snapshot look like the old one.
		publishedAt = last.Add(time.Millisecond)
	}
	var term int64
	if p.cfg.Term != nil {
		term = p.cfg.Term()
	}
	entries, dropped := p.entriesOf(priority)
	count := len(entries)
	var err error
	if p.buf, err = appendSnapshot(p.buf[:0], snapshotHead{PublishedAt: stamp(publishedAt), Term: term}, entries, p.cfg.Digits); err != nil {
		return fmt.Errorf("encode quote mirror snapshot: %w", err)
	}
	if dropped > 0 && (dropped != p.lastDrop || start.Sub(p.lastDropT) >= time.Minute) {
		p.log.ErrorContext(ctx, "quote mirror snapshot truncated: symbols dropped beyond the cap; a dropped symbol may be the conversion leg a rollover waits on",
			slog.Int("dropped", dropped), slog.Int("published", count), slog.Int("cap", p.cfg.MaxSymbols))
		p.lastDropT = start
	}
	p.lastDrop = dropped

	// The pin read, when due, goes out on its own connection while the snapshot is written: the
	// pin hash is another key, so under Cluster another slot, and cannot join the snapshot's
	// transaction. The cycle still waits for one round trip. Every cycle, the read cost a publish
	// about a tenth of a plain SET.
	readPins := p.pinsRead.IsZero() || start.Sub(p.pinsRead) >= PinRefresh
	var pins *redis.MapStringStringCmd
	var pinsRead chan struct{}
	if readPins {
		pinsRead = make(chan struct{})
		go func() {
			defer close(pinsRead)
			pins = p.cfg.Redis.HGetAll(ctx, p.keys.pins)
		}()
	}
	newer, serr := p.writeSnapshot(ctx, term)
	if pinsRead != nil {
		<-pinsRead
	}
	took := p.cfg.Now().Sub(start)
	p.status.Cycles++
	if serr != nil {
		p.status.LastError = serr.Error()
		return fmt.Errorf("publish quote mirror snapshot %q: %w", p.keys.snapshot, serr)
	}
	if newer != 0 {
		p.status.TermRefused++
		p.status.LastError = fmt.Sprintf("%v: %d, ours %d", ErrNewerTerm, newer, term)
		return p.cfg.Gate.Fenced(ctx, gate.MirrorPublish, fmt.Errorf("%w: %d, ours %d", ErrNewerTerm, newer, term),
			slog.String("key", p.keys.snapshot), slog.Int64("term", term), slog.Int64("storedTerm", newer))
	}
	p.status.LastError = ""
	p.status.Term = term
	p.status.LastPublishedAt = publishedAt
	p.status.Symbols = count
	p.status.Dropped = dropped
	p.status.Bytes = len(p.buf)
	p.status.LastCycleMs = float64(took.Microseconds()) / 1000
	if !readPins {
		return nil
	}
	if err := pins.Err(); err != nil {
		return fmt.Errorf("read quote mirror pins %q: %w", p.keys.pins, err)
	}
	return p.pinsReadLocked(ctx, start, pins.Val())
}

// writeSnapshot writes p.buf to the snapshot key in one round trip — MULTI, the guard, SET NX
// with the TTL, EXEC — unless the stored snapshot carries a newer term than ours, which it
// returns (0 when written).
func (p *SnapshotPublisher) writeSnapshot(ctx context.Context, term int64) (int64, error) {
	keys := []string{p.keys.snapshot}
	guard := guardScript.EvalSha
	for attempt := 0; ; attempt++ {
		tx := p.cfg.Redis.TxPipeline()
		fence := guard(ctx, tx, keys, term)
		set := tx.SetArgs(ctx, p.keys.snapshot, p.buf, redis.SetArgs{Mode: "NX", TTL: KeyTTL})
		tx.Exec(ctx) // each command's own result is read below
		newer, err := fence.Int64()
		switch {
		case redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0:
			// Redis restarted or flushed its scripts; the key was left as it was (or, if it was
			// missing, written with nothing to fence against). EVAL loads the script again.
			guard = guardScript.Eval
			continue
		case err != nil:
			return 0, fmt.Errorf("term guard: %w", err)
		case newer != 0:
			return newer, nil
		}
		if err := set.Err(); err != nil {
			return 0, err
		}
		return 0, nil
	}
}

// pinsReadLocked applies a read of the pin hash made at at. Only a read that SetPinned accepted
// counts as the last read: after a failure the next publish reads again.
func (p *SnapshotPublisher) pinsReadLocked(ctx context.Context, at time.Time, fields map[string]string) error {
	if err := p.applyPinsLocked(ctx, fields); err != nil {
		return err
	}
	p.pinsRead = at
	return nil
}

// ReadPins reads the pin hash alone and hands changed pins to SetPinned.
func (p *SnapshotPublisher) ReadPins(ctx context.Context) error {
	fields, err := p.cfg.Redis.HGetAll(ctx, p.keys.pins).Result()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		// The nudge that asked for this read is spent: the next publish reads alongside.
		p.pinsRead = time.Time{}
		return fmt.Errorf("read quote mirror pins %q: %w", p.keys.pins, err)
	}
	return p.pinsReadLocked(ctx, p.cfg.Now(), fields)
}

// QuoteWalker is implemented by a quote source that can walk its wanted quotes in symbol order
// without a look-up per symbol (tick.Engine). The publisher then collects them in one pass.
type QuoteWalker interface {
	EachWantedQuote(fn func(symbol string, q *tick.Quote))
}

// entriesOf gathers the quotes to publish, sorted by symbol, and how many the cap dropped. The
// usual cycle — the engine's sorted wanted quotes, no priority leg outside them, no truncation —
// takes the engine's walk as it comes; anything else (and a source that cannot walk its quotes)
// goes through collect.
func (p *SnapshotPublisher) entriesOf(priority []string) ([]entry, int) {
	if w, ok := p.cfg.Quotes.(QuoteWalker); ok {
		entries := p.entries[:0]
		w.EachWantedQuote(func(symbol string, q *tick.Quote) {
			if fx.ValidSymbol(symbol) && publishable(q) {
				entries = append(entries, entry{symbol: symbol, q: *q})
			}
		})
		p.entries = entries
		if len(entries) <= p.cfg.MaxSymbols && p.walkHoldsPriority(entries, priority) {
			return entries, 0
		}
	}
	return p.collect(p.cfg.Quotes.Wanted(), priority)
}

// walkHoldsPriority reports whether the walk's entries are the whole snapshot although priority
// legs were given. Under the cap their priority changes nothing, so they are — unless a leg the
// walk did not offer still has a quote in the source (a symbol no longer wanted), which collect
// adds.
func (p *SnapshotPublisher) walkHoldsPriority(entries []entry, priority []string) bool {
	for _, s := range priority {
		_, held := slices.BinarySearchFunc(entries, s, func(e entry, s string) int { return strings.Compare(e.symbol, s) })
		if !held && fx.ValidSymbol(s) {
			if _, ok := p.cfg.Quotes.LastTick(s); ok {
				return false
			}
		}
	}
	return true
}

// collect reads the quotes to publish, sorted by symbol. Over the cap, priority symbols are kept
// first and the rest fill the remaining room in symbol order.
func (p *SnapshotPublisher) collect(wanted, priority []string) ([]entry, int) {
	entries := p.entries[:0]
	for _, s := range wanted {
		if q, ok := p.cfg.Quotes.LastTick(s); ok && fx.ValidSymbol(s) && publishable(&q) {
			entries = append(entries, entry{symbol: s, q: q})
		}
	}
	wantedSorted := slices.IsSorted(wanted)
	sorted := wantedSorted
	for _, s := range priority { // legs not (yet) among the wanted, if the engine has them anyway
		if _, found := slices.BinarySearch(wanted, s); found && wantedSorted {
			continue
		}
		if q, ok := p.cfg.Quotes.LastTick(s); ok && fx.ValidSymbol(s) && publishable(&q) {
			entries = append(entries, entry{symbol: s, q: q})
			sorted = false
		}
	}
	if !sorted {
		entries = sortEntries(entries)
	}
	p.entries = entries
	max := p.cfg.MaxSymbols
	if len(entries) <= max {
		return entries, 0
	}
	dropped := len(entries) - max
	first := make(map[string]bool, len(priority))
	for _, s := range priority {
		first[s] = true
	}
	kept := make([]entry, 0, max)
	for _, e := range entries {
		if first[e.symbol] && len(kept) < max {
			kept = append(kept, e)
		}
	}
	for _, e := range entries {
		if len(kept) == max {
			break
		}
		if !first[e.symbol] {
			kept = append(kept, e)
		}
	}
	return sortEntries(kept), dropped
}

// applyPinsLocked updates which pins are live and tells the engine when that set changes. A pin
// is live while its stamp keeps changing: a stamp unchanged for KeyTTL on the leader's own clock
// has lapsed (its follower stopped asking). Judging by change rather than by the stamp's value
// keeps the follower's clock out of it.
func (p *SnapshotPublisher) applyPinsLocked(ctx context.Context, fields map[string]string) error {
	now := p.cfg.Now()
	for s := range p.pins {
		if _, ok := fields[s]; !ok {
			delete(p.pins, s)
		}
	}
	var live []string
	for s, stamp := range fields {
		if !fx.ValidSymbol(s) {
			continue
		}
		seen, ok := p.pins[s]
		if !ok || seen.stamp != stamp {
			seen = pinSeen{stamp: stamp, seenAt: now}
			p.pins[s] = seen
		}
		if now.Sub(seen.seenAt) < KeyTTL {
			live = append(live, s)
		}
	}
	slices.Sort(live)
	if len(live) > p.cfg.MaxSymbols {
		live = live[:p.cfg.MaxSymbols]
	}
	if p.liveSent && slices.Equal(live, p.live) {
		return nil
	}
	if err := p.cfg.SetPinned(slices.Clone(live)); err != nil {
		p.liveSent = false
		return fmt.Errorf("subscribe pinned legs %v: %w", live, err)
	}
	changed := !slices.Equal(live, p.live)
	p.live, p.liveSent = live, true
	p.status.Pinned = slices.Clone(live)
	if changed {
		p.log.InfoContext(ctx, "quote mirror pinned legs changed; the tick engine subscribes them", slog.Any("pinned", live))
	}
	return nil
}

// Status reports the publisher for the desk page.
func (p *SnapshotPublisher) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.status
	st.Pinned = slices.Clone(st.Pinned)
	if !st.LastPublishedAt.IsZero() {
		st.AgeMs = p.cfg.Now().Sub(st.LastPublishedAt).Milliseconds()
	}
	return st
}
