package venue

import (
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Burst collects the own times of the calls made since its owner was last idle, so that a burst
// (a gap's closes) is summarised in one "venue burst" log line once it is over — never on the
// path being measured. The REST executor and the FIX session each keep one.
type Burst struct {
	mu      sync.Mutex
	own     []time.Duration
	decided []time.Duration // the desk's share of own: from the trigger to the hand-off to the session (FIX)
	started time.Time
	opened  int64 // the owner's connections opened when the burst started
}

// minBurst is the fewest calls a burst summary is logged for; single orders are left to the
// fxdesk_venue_own_time_seconds histogram.
const minBurst = 20

// Observe records one call's own time; opened is how many connections the owner has opened so
// far (its count, not a difference).
func (b *Burst) Observe(d time.Duration, opened int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.own) == 0 {
		b.started, b.opened = time.Now(), opened
	}
	b.own = append(b.own, d)
}

// ObserveDecided records one call's decision time: its own time up to the moment the desk hands
// the message to the library (FIX: memory claim, identity, the message built), so that a burst's
// line says how much of its own time is the desk's and how much the library's write.
func (b *Burst) ObserveDecided(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.decided = append(b.decided, d)
}

// Idle ends the current burst: with enough calls in it, one line says what it cost — own time
// p50/p95/max, its wall time and the connections opened during it (opened is the owner's count
// now).
func (b *Burst) Idle(log *slog.Logger, opened int64, workers int) {
	b.mu.Lock()
	own, decided, started, before := b.own, b.decided, b.started, b.opened
	b.own, b.decided = nil, nil
	b.mu.Unlock()
	if len(own) < minBurst {
		return
	}
	pct := func(ds []time.Duration, p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	slices.Sort(own)
	attrs := []any{slog.Int("calls", len(own)), slog.Duration("own_p50", pct(own, 0.50)), slog.Duration("own_p95", pct(own, 0.95)),
		slog.Duration("own_max", own[len(own)-1]), slog.Duration("wall", time.Since(started)),
		slog.Int64("connections_opened", opened-before), slog.Int("workers", workers)}
	if len(decided) > 0 {
		slices.Sort(decided)
		attrs = append(attrs, slog.Duration("decided_p50", pct(decided, 0.50)), slog.Duration("decided_p95", pct(decided, 0.95)))
	}
	log.Info("venue burst", attrs...)
}
