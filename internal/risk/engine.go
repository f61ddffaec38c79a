package risk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/tick"
)

// Config builds an Engine. Loader, Prices, Updates, Executor, Gate and Workers are required.
type Config struct {
	Loader   Loader
	Prices   tick.Prices
	Updates  <-chan tick.Update // the tick engine's Updates(nil) subscription
	Executor Executor
	Gate     Gate
	Alerts   Alerts // nil: margin calls are only logged
	// Workers is how many executor calls may run at once: as many as the executor can make
	// progress on together (see doc.go). They are all started by Run before the first load.
	Workers int
	Log     *slog.Logger
	// Now decides order expiry. Default time.Now.
	Now func() time.Time
	// Observe, when set, receives each close's own time: from the moment the engine received
	// the tick (or began the sweep) that triggered it to the moment a worker hands it to the
	// executor. It is called from worker goroutines, concurrently.
	Observe func(time.Duration)
	// LoadRetryMin and LoadRetryMax bound the wait between failed loads. Defaults 1s and 30s.
	LoadRetryMin, LoadRetryMax time.Duration
	// Dropped, when set, counts the updates the Updates subscription has lost because the engine
	// fell a whole buffer behind (tick.Engine.DroppedFor). When it has grown, the engine sweeps
	// with the reason updates_dropped: a lost tick then delays a stop or a trigger by at most
	// DropCheck, instead of until that symbol quotes again. What a sweep holds the engine for is
	// BenchmarkSweep's figure.
	Dropped func() uint64
	// DropCheck is how often Dropped is read. Default 1s.
	DropCheck time.Duration
	// FirstSweep is the reason of the sweep that follows the load: SweepBoot by default;
	// SweepLeaseRestored where the engine starts because a standby follower took the lease over.
	FirstSweep string
}

// Stats counts what the engine holds and has done.
type Stats struct {
	Loaded                 bool
	Positions, Orders      int
	Accounts, Symbols      int
	Queued                 int    // closes and fills waiting for a worker
	TicksEvaluated         uint64 // ticks on a watched symbol, evaluated
	TicksDropped           uint64 // ticks on a watched symbol, dropped at the gate
	ClosesQueued           uint64
	FillsQueued            uint64
	WorkDropped            uint64 // closes, fills and alerts dropped at the gate
	ExecutorErrors         uint64
	AlreadyClosed          uint64
	MarketRefused          uint64 // closes and fills the executor refused for market state
	StopOutSkips           uint64 // positions stop-out passed over, once per episode and reason
	MarginCalls, StopOuts  uint64
	ExpiredOrdersDiscarded uint64
}

// Engine watches every open position, resting order and margined account of the desk. Create
// it with New on the lease holder; Run loads the view and evaluates ticks.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	work    *queue // closes and fills
	alerts  *queue
	started atomic.Bool
	ready   chan struct{}

	mu     sync.Mutex
	loaded bool
	early  []Change // changes applied before the load finished, replayed onto it
	// The view (state.go), built by installLocked or a ViewBuilder and swapped in whole.
	*view
	due, refs []int32      // scratch: accounts a tick marks, band refs it reached
	fired     []heapEntry  // scratch: the triggers a tick fired
	trailHits []trailHit   // scratch: the trailing stops a tick fired, or a flush moved
	firing    []int32      // scratch: the positions a tick's stops handed off
	passed    []passedOver // scratch: the losers a stop-out pick passed over
	bandTerms []bandTerm   // scratch
	marks     uint64       // accounts marked, for the benchmarks
	gen       uint64       // evaluation generation, for the books' memoised quotes
	gateShut  bool
	warned    map[dropKey]struct{} // drops already warned about in this gap
	outbox    []job                // closes and fills decided, handed to the workers in chunks

	// Workers never take mu: a worker hands the executor's answer back through the queue, and
	// whoever next holds mu (a tick, Apply, Sweep, Stats) applies it. A burst of closes thus
	// never forms a convoy of workers waiting for the tick path, or for each other.
	spare []settlement // the drained batch's array, reused (guarded by mu)

	ticksEvaluated, ticksDropped, closesQueued, fillsQueued atomic.Uint64
	workDropped, execErrors, alreadyClosed                  atomic.Uint64
	marginCalls, stopOuts, expired                          atomic.Uint64
	marketRefused, stopOutSkips                             atomic.Uint64
}

// outboxChunk is how many decided jobs are handed to the workers at once: the first closes of a
// burst start while the tick path is still popping the rest, at one queue lock per chunk.
const outboxChunk = 16

type dropKey struct {
	kind   jobKind
	id     int64
	reason fx.CloseReason
}

// New checks cfg and returns an engine that does nothing until Run.
func New(cfg Config) (*Engine, error) {
	switch {
	case cfg.Loader == nil:
		return nil, errors.New("risk engine: Loader is required")
	case cfg.Prices == nil:
		return nil, errors.New("risk engine: Prices is required")
	case cfg.Updates == nil:
		return nil, errors.New("risk engine: Updates is required (the tick engine's Updates(nil) channel)")
	case cfg.Executor == nil:
		return nil, errors.New("risk engine: Executor is required")
	case cfg.Gate == nil:
		return nil, errors.New("risk engine: Gate is required")
	case cfg.Workers < 1:
		return nil, fmt.Errorf("risk engine: Workers must be at least 1 (the executor calls that can progress at once), got %d", cfg.Workers)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LoadRetryMin <= 0 {
		cfg.LoadRetryMin = time.Second
	}
	if cfg.DropCheck <= 0 {
		cfg.DropCheck = time.Second
	}
	if cfg.FirstSweep == "" {
		cfg.FirstSweep = SweepBoot
	}
	if cfg.LoadRetryMax < cfg.LoadRetryMin {
		cfg.LoadRetryMax = max(30*time.Second, cfg.LoadRetryMin)
	}
	e := &Engine{cfg: cfg, log: cfg.Log.With(slog.String("component", "FX"), slog.String("part", "risk")),
		work: newQueue(), alerts: newQueue(), warned: map[dropKey]struct{}{}, ready: make(chan struct{})}
	e.installLocked(Snapshot{})
	return e, nil
}

// Run starts the workers, loads the view (retrying until it succeeds or ctx ends), evaluates the
// updates that waited meanwhile, runs the first sweep (Config.FirstSweep) and then evaluates
// every update until ctx ends or the channel closes. No tick is evaluated before the load. Work still queued when Run returns is dropped with a warning.
// Run returns an error only when called twice.
func (e *Engine) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("risk engine: Run called twice")
	}
	began := time.Now()
	var wg sync.WaitGroup
	// Every worker exists before the first tick: none is created during a burst.
	for range e.cfg.Workers {
		wg.Go(func() { e.worker(ctx) })
	}
	wg.Go(func() { e.alerter(ctx) })
	defer func() {
		for _, j := range e.work.close() {
			e.warnDropped(context.WithoutCancel(ctx), j, "risk engine stopping")
		}
		for _, j := range e.alerts.close() {
			e.warnDropped(context.WithoutCancel(ctx), j, "risk engine stopping")
		}
		wg.Wait()
	}()

	if !e.load(ctx) {
		return nil
	}
	// Updates lost while loading are covered by the boot sweep, which reads current prices.
	var dropCheck <-chan time.Time
	var dropped uint64
	if e.cfg.Dropped != nil {
		dropped = e.cfg.Dropped()
		t := time.NewTicker(e.cfg.DropCheck)
		defer t.Stop()
		dropCheck = t.C
	}
	e.evaluateBacklog(ctx)
	e.Sweep(ctx, e.cfg.FirstSweep)
	close(e.ready)
	// The line tests and operators wait on: from here on fills are admitted (gate.Watch) and the
	// holder's /readyz is ready. took runs from Run's start: load, retries and first sweep.
	e.log.InfoContext(ctx, "risk engine watching the desk", slog.String("first_sweep", e.cfg.FirstSweep), slog.Duration("took", time.Since(began)))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-dropCheck:
			if n := e.cfg.Dropped(); n != dropped {
				e.log.WarnContext(ctx, "risk engine lost tick updates; sweeping at current prices", slog.Uint64("lost", n-dropped))
				dropped = n
				e.Sweep(ctx, SweepUpdatesDropped)
			}
		case u, ok := <-e.cfg.Updates:
			if !ok {
				e.log.WarnContext(ctx, "risk engine: the tick subscription closed; no more ticks will be evaluated")
				return nil
			}
			e.onTick(ctx, u, time.Now())
		}
	}
}

// read builds a view from the loader, off the lock: part by part as the reads return them where
// the loader streams (StreamLoader), else from its whole Snapshot.
func (e *Engine) read(ctx context.Context) (*view, error) {
	b := newViewBuilder()
	if sl, ok := e.cfg.Loader.(StreamLoader); ok {
		if err := sl.LoadInto(ctx, b); err != nil {
			return nil, err
		}
		return b.e.view, nil
	}
	s, err := e.cfg.Loader.Load(ctx)
	if err != nil {
		return nil, err
	}
	b.e.installLocked(s)
	return b.e.view, nil
}

func (e *Engine) load(ctx context.Context) bool {
	wait := e.cfg.LoadRetryMin
	for {
		start := time.Now()
		v, err := e.read(ctx)
		if err == nil {
			e.mu.Lock()
			e.view = v
			for _, c := range e.early {
				e.applyLocked(ctx, c)
			}
			replayed := len(e.early)
			e.early = nil
			e.loaded = true
			e.mu.Unlock()
			e.log.InfoContext(ctx, "risk view loaded", slog.Int("positions", len(v.posByID)), slog.Int("orders", len(v.ordByID)),
				slog.Int("accounts", len(v.accts)), slog.Int("instruments", len(v.instruments)),
				slog.Int("changes_replayed", replayed), slog.Duration("took", time.Since(start)))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		e.log.ErrorContext(ctx, "risk view load failed; no tick is evaluated until it loads", slog.Any("err", err), slog.Duration("retry_in", wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, e.cfg.LoadRetryMax)
	}
}

// Apply makes the in-memory view follow committed changes. Pass every change of one
// transaction in one call: they are applied together, so no tick sees half of them (a close
// without its balance). Changes applied before the boot load finishes are kept and replayed onto
// the loaded view. Apply never blocks on I/O and is safe for concurrent use.
func (e *Engine) Apply(ctx context.Context, changes ...Change) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drainLocked(ctx)
	if !e.loaded {
		e.early = append(e.early, changes...)
		return
	}
	for _, c := range changes {
		e.applyLocked(ctx, c)
	}
}

// Sweep evaluates every position, order and account against the current prices (LastTick). It
// runs at boot after the load (reason "boot"), on the lease's Restored event (reason
// "lease_restored") and when the tick subscription lost updates (reason "updates_dropped", see
// Config.Dropped). It is dropped with a warning when the lease is not confirmed.
func (e *Engine) Sweep(ctx context.Context, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded {
		e.log.InfoContext(ctx, "risk sweep skipped: the view is not loaded yet; the boot sweep follows the load", slog.String("reason", reason))
		return
	}
	if e.cfg.Gate.Admit(ctx, gate.RiskSweep, slog.String("reason", reason)) != nil {
		e.gateShutLocked(ctx)
		return
	}
	e.gateOpenLocked(ctx)
	e.drainLocked(ctx)
	start := time.Now()
	closes, fills := e.closesQueued.Load(), e.fillsQueued.Load()
	unpriced := 0
	for _, b := range e.books {
		q, ok := e.cfg.Prices.LastTick(b.symbol)
		if !ok {
			unpriced++
			continue
		}
		px := e.pricerLocked(b, q)
		e.fireLocked(ctx, b, &px, start)
	}
	px := e.pricerLocked(nil, tick.Quote{})
	for _, a := range e.accts {
		e.markAccountLocked(ctx, a, &px, start)
	}
	e.flushLocked()
	e.log.InfoContext(ctx, "risk sweep", slog.String("reason", reason), slog.Int("positions", len(e.posByID)),
		slog.Int("orders", len(e.ordByID)), slog.Int("accounts", len(e.accts)), slog.Int("symbols_unpriced", unpriced),
		slog.Uint64("closes_queued", e.closesQueued.Load()-closes), slog.Uint64("fills_queued", e.fillsQueued.Load()-fills),
		slog.Duration("took", time.Since(start)))
}

// Ready is closed once the view is loaded and the boot sweep has run: from then on every tick
// is evaluated.
func (e *Engine) Ready() <-chan struct{} { return e.ready }

// Watching reports, without blocking, whether Ready is closed: the engine watches every position
// and resting order of the desk, and what a fill adds from now on is applied to that view (the
// gate's Watch, and /readyz on the holder).
func (e *Engine) Watching() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// Stats reports counts; safe for concurrent use.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	e.drainLocked(context.Background())
	s := Stats{Loaded: e.loaded, Positions: len(e.posByID), Orders: len(e.ordByID), Accounts: len(e.accts), Symbols: len(e.books)}
	e.mu.Unlock()
	s.Queued = e.work.len()
	s.TicksEvaluated, s.TicksDropped = e.ticksEvaluated.Load(), e.ticksDropped.Load()
	s.ClosesQueued, s.FillsQueued = e.closesQueued.Load(), e.fillsQueued.Load()
	s.WorkDropped, s.ExecutorErrors, s.AlreadyClosed = e.workDropped.Load(), e.execErrors.Load(), e.alreadyClosed.Load()
	s.MarginCalls, s.StopOuts, s.ExpiredOrdersDiscarded = e.marginCalls.Load(), e.stopOuts.Load(), e.expired.Load()
	s.MarketRefused, s.StopOutSkips = e.marketRefused.Load(), e.stopOutSkips.Load()
	return s
}

// ExposedSymbols lists, in symbol order, the symbols of the open positions and resting orders
// the engine watches: what the quote mirror keeps first when it truncates, read from memory
// instead of the database on every publish. ok is false until the view is loaded.
func (e *Engine) ExposedSymbols() (symbols []string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded {
		return nil, false
	}
	e.drainLocked(context.Background())
	for _, b := range e.books {
		if b.watched > 0 {
			symbols = append(symbols, b.symbol)
		}
	}
	slices.Sort(symbols)
	return symbols, true
}
