package risk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
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
	Prices   Prices
	Updates  <-chan tick.Update // the tick engine's Updates(nil) subscription
	Executor Executor
	Gate     Gate
	Alerts   Alerts // nil: margin calls are only logged
	// Workers is how many executor calls may run at once: the executor's database connection
	// pool size (see doc.go). They are all started by Run before the first load.
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
	// DropCheck, instead of until that symbol quotes again. A sweep holds the engine for about
	// 5 ms at 100,000 positions and 7 ms at 1,000,000 (BenchmarkSweep).
	Dropped func() uint64
	// DropCheck is how often Dropped is read. Default 1s.
	DropCheck time.Duration
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
	// The view (state.go): slices addressed by int32 indexes, one id → index map per kind.
	pos         []position
	posSlots    []int32 // SL and TP heap slots, 2 per position
	posFree     []int32
	posByID     map[int64]int32
	ord         []order
	ordSlots    []int32
	ordFree     []int32
	ordByID     map[int64]int32
	accts       []*account
	acctByID    map[int64]int32
	books       []*book
	bookBySym   map[string]int32
	bands       []bandEntry // margin bands (band.go)
	bandSlots   []int32     // lo and hi heap slots, 2 per band
	bandFree    []int32
	instruments map[string]*Instrument
	legs        map[string]leg
	due, refs   []int32      // scratch: accounts a tick marks, band refs it reached
	fired       []heapEntry  // scratch: the triggers a tick fired
	firing      []int32      // scratch: the positions a tick's stops handed off
	passed      []passedOver // scratch: the losers a stop-out pick passed over
	bandTerms   []bandTerm   // scratch
	marks       uint64       // accounts marked, for the benchmarks
	gen         uint64       // evaluation generation, for the books' memoised quotes
	gateShut    bool
	warned      map[dropKey]struct{} // drops already warned about in this gap
	outbox      []job                // closes and fills decided, handed to the workers in chunks

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
		return nil, fmt.Errorf("risk engine: Workers must be at least 1 (the executor's database pool size), got %d", cfg.Workers)
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
	if cfg.LoadRetryMax < cfg.LoadRetryMin {
		cfg.LoadRetryMax = max(30*time.Second, cfg.LoadRetryMin)
	}
	e := &Engine{cfg: cfg, log: cfg.Log.With(slog.String("component", "FX"), slog.String("part", "risk")),
		work: newQueue(), alerts: newQueue(), warned: map[dropKey]struct{}{}, ready: make(chan struct{})}
	e.installLocked(Snapshot{})
	return e, nil
}

// Run starts the workers, loads the view (retrying until it succeeds or ctx ends), runs the
// boot sweep and then evaluates every update until ctx ends or the channel closes. No tick is
// evaluated before the load. Work still queued when Run returns is dropped with a warning.
// Run returns an error only when called twice.
func (e *Engine) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("risk engine: Run called twice")
	}
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
	e.Sweep(ctx, SweepBoot)
	close(e.ready)
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

func (e *Engine) load(ctx context.Context) bool {
	wait := e.cfg.LoadRetryMin
	for {
		start := time.Now()
		s, err := e.cfg.Loader.Load(ctx)
		if err == nil {
			e.mu.Lock()
			e.installLocked(s)
			for _, c := range e.early {
				e.applyLocked(ctx, c)
			}
			replayed := len(e.early)
			e.early = nil
			e.loaded = true
			e.mu.Unlock()
			e.log.InfoContext(ctx, "risk view loaded", slog.Int("positions", len(s.Positions)), slog.Int("orders", len(s.Orders)),
				slog.Int("accounts", len(s.Accounts)), slog.Int("instruments", len(s.Instruments)),
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

// ---- the tick path ----

// onTick evaluates one update: the triggers on its symbol, then the margin level of every
// account its quote moves that could have crossed a level (band.go). It never performs I/O and
// never waits for a worker.
func (e *Engine) onTick(ctx context.Context, u tick.Update, arrived time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drainLocked(ctx)
	bi, ok := e.bookBySym[u.Symbol]
	if !ok || !e.loaded {
		return
	}
	b := e.books[bi]
	defer e.flushLocked()
	px := e.pricerLocked(b, u.Quote)
	if e.cfg.Gate.Admit(ctx, gate.RiskTick) != nil {
		e.ticksDropped.Add(1)
		e.gateShutLocked(ctx)
		e.warnTickLocked(ctx, b, &px)
		return
	}
	e.gateOpenLocked(ctx)
	e.ticksEvaluated.Add(1)
	b.ticks++ // a close refused for market state may be tried again (closableLocked)
	e.fireLocked(ctx, b, &px, arrived)
	for _, ai := range e.dueLocked(b, u.Quote, px.gen, true) {
		e.markAccountLocked(ctx, e.accts[ai], &px, arrived)
	}
}

// fireLocked hands every trigger the quote reaches to the workers.
//
// Fired stops are handed off first and their bookkeeping (the heaps, the account's aggregates and
// pending profit) follows: a close's own time ends when a worker hands it to the executor, and
// the workers start on the first chunk while this goroutine still un-indexes the rest. No answer
// can see a close whose bookkeeping has not run, because answers are settled only under mu
// (drainLocked), which this tick holds until it has run for every one.
func (e *Engine) fireLocked(ctx context.Context, b *book, px *pricer, arrived time.Time) {
	bid, ask := px.q.Bid, px.q.Ask
	e.firing = e.firing[:0]
	for _, f := range [...]struct {
		h     *triggerHeap
		price float64
	}{{&b.buySL, bid}, {&b.buyTP, bid}, {&b.sellSL, ask}, {&b.sellTP, ask}} {
		e.fired = f.h.takeFired(e.fired[:0], f.price)
		for _, it := range e.fired {
			reason := fx.CloseSL // ref 2·index
			if it.ref&1 == 1 {
				reason = fx.CloseTP // ref 2·index+1
			}
			idx := it.ref >> 1
			p := &e.pos[idx]
			if p.closing {
				continue // its other stop fired on the same quote: one close
			}
			p.closing = true
			e.firing = append(e.firing, idx)
			e.closesQueued.Add(1)
			e.handOffLocked(job{kind: jobClose, idx: idx, id: p.id, reason: reason, symbol: b.symbol, quote: px.q, arrived: arrived})
		}
	}
	e.flushLocked()
	for _, idx := range e.firing {
		e.closingLocked(idx, px)
	}
	for _, f := range [...]struct {
		h     *triggerHeap
		price float64
	}{{&b.buyLimit, ask}, {&b.buyStop, ask}, {&b.sellLimit, bid}, {&b.sellStop, bid}} {
		e.fired = f.h.takeFired(e.fired[:0], f.price)
		for _, it := range e.fired {
			e.fillLocked(ctx, it.ref, px.q, arrived)
		}
	}
}

// closeLocked marks p closing and queues its close. The account's marks then read as if the
// close had committed at this quote: p leaves the aggregates and its profit joins pending.
func (e *Engine) closeLocked(idx int32, reason fx.CloseReason, q tick.Quote, arrived time.Time, px *pricer) {
	p := &e.pos[idx]
	e.closingLocked(idx, px)
	p.closing = true
	e.closesQueued.Add(1)
	e.handOffLocked(job{kind: jobClose, idx: idx, id: p.id, reason: reason, symbol: e.books[p.sym].symbol, quote: q, arrived: arrived})
}

// closingLocked is the bookkeeping of a close being handed off: p leaves the trigger heaps and
// its account's aggregates, and its profit at px joins the account's pending.
func (e *Engine) closingLocked(idx int32, px *pricer) {
	p := &e.pos[idx]
	a := e.accts[p.acct]
	e.unindexPositionLocked(idx)
	i := a.exposureOf(p.sym)
	est, _ := e.pnlAtLocked(a, i, p, px) // before the exposure it reads goes
	e.exposeAtLocked(a, i, p, -1)
	p.est = est
	a.pending += est
}

func (e *Engine) handOffLocked(j job) {
	e.outbox = append(e.outbox, j)
	if len(e.outbox) >= outboxChunk {
		e.flushLocked()
	}
}

func (e *Engine) flushLocked() {
	if len(e.outbox) > 0 {
		e.work.pushAll(e.outbox)
		clear(e.outbox)
		e.outbox = e.outbox[:0]
	}
}

func (e *Engine) fillLocked(ctx context.Context, idx int32, q tick.Quote, arrived time.Time) {
	o := &e.ord[idx]
	symbol := e.books[o.sym].symbol
	if o.expired(e.cfg.Now()) {
		// The account reconcile marks it EXPIRED in the database; here it only stops watching.
		e.expired.Add(1)
		e.log.InfoContext(ctx, "resting order past its expiry not filled", slog.Int64("order_id", o.id),
			slog.String("symbol", symbol), slog.Time("expires_at", o.expiresAt()))
		e.removeOrderLocked(idx)
		return
	}
	o.filling = true
	e.fillsQueued.Add(1)
	e.handOffLocked(job{kind: jobFill, idx: idx, id: o.id, symbol: symbol, quote: q, arrived: arrived})
}

// markAccountLocked marks a (checkAccountLocked) and sets its band at the same prices.
func (e *Engine) markAccountLocked(ctx context.Context, a *account, px *pricer, arrived time.Time) {
	e.marks++
	e.checkAccountLocked(ctx, a, px, arrived)
	e.setBandLocked(a, px)
}

// checkAccountLocked raises the margin call once per crossing and stops the account out:
// largest loser that can be closed now first (stopout.go), recomputing after each hand-off,
// until the level is above the stop-out level or nothing closable is left open.
func (e *Engine) checkAccountLocked(ctx context.Context, a *account, px *pricer, arrived time.Time) {
	if !a.known || len(a.exposures) == 0 {
		a.marginCalled = false
		return
	}
	lvl, ok := e.levelLocked(a, px)
	if !ok {
		return
	}
	if a.MarginCallLevel > 0 {
		if lvl < a.MarginCallLevel {
			if !a.marginCalled {
				a.marginCalled = true
				e.marginCalls.Add(1)
				e.alerts.push(job{kind: jobAlert, id: a.ID, level: lvl, arrived: arrived})
			}
		} else {
			a.marginCalled = false
		}
	}
	// Each round hands one position off, so it cannot run more rounds than the account holds.
	for range len(a.positions) {
		if lvl > a.StopOutLevel {
			e.endEpisodeLocked(a)
			return
		}
		idx := e.largestLoserLocked(ctx, a, px, lvl)
		if idx < 0 {
			return
		}
		q, ok := px.book(e.books[e.pos[idx].sym])
		if !ok {
			return
		}
		e.stopOuts.Add(1)
		e.closeLocked(idx, fx.CloseStopOut, q, arrived, px)
		if lvl, ok = e.levelLocked(a, px); !ok {
			return
		}
	}
}

// ---- marks ----

// pricer reads the ticked symbol from the tick itself and every other symbol from LastTick,
// once per evaluation (generation gen) and symbol.
type pricer struct {
	prices Prices
	gen    uint64
	bk     *book // the ticked book, nil in a sweep's account pass
	q      tick.Quote
}

func (e *Engine) pricerLocked(bk *book, q tick.Quote) pricer {
	e.gen++
	return pricer{prices: e.cfg.Prices, gen: e.gen, bk: bk, q: q}
}

func (p *pricer) book(b *book) (tick.Quote, bool) {
	if b == p.bk {
		return p.q, true
	}
	if b.qgen != p.gen {
		b.q, b.qok = p.prices.LastTick(b.symbol)
		b.qgen = p.gen
	}
	return b.q, b.qok
}

// state is b's SymbolState, read once per evaluation.
func (p *pricer) state(b *book) tick.State {
	if b.stgen != p.gen {
		b.st = p.prices.SymbolState(b.symbol)
		b.stgen = p.gen
	}
	return b.st
}

func (p *pricer) toUSD(r legRef) (float64, bool) {
	switch {
	case r.usd:
		return 1, true
	case !r.ok:
		return 0, false
	}
	q, ok := p.book(r.b)
	m := q.Mid()
	if !ok || !(m > 0) {
		return 0, false
	}
	if r.inv {
		return 1 / m, true
	}
	return m, true
}

// levelLocked is equity ÷ used margin × 100, +Inf when no margin is used. Equity = balance +
// pending (closes handed off) + floating profit at the close price (a buy at bid − markup, a sell
// at ask + markup); margin per symbol = (net lots + hedged lots × 2 × hedged rate) × contract ×
// mid ÷ effective leverage, in the quote currency; both converted to the account currency
// through the USD hub. ok is false when a symbol or leg has no price: no decision is made then.
func (e *Engine) levelLocked(a *account, px *pricer) (float64, bool) {
	equity := a.Balance + a.pending
	used := 0.0
	accountUSD := 0.0
	for i := range a.exposures {
		x := &a.exposures[i]
		if !x.priced {
			return 0, false
		}
		q, ok := px.book(x.bk)
		if !ok {
			return 0, false
		}
		f := 1.0
		if !x.same {
			quoteUSD, ok := px.toUSD(x.qref)
			if !ok {
				return 0, false
			}
			if accountUSD == 0 {
				if accountUSD, ok = px.toUSD(a.aref); !ok {
					return 0, false
				}
			}
			f = quoteUSD / accountUSD
		}
		pnl := ((q.Bid-x.markup)*x.buyLots - x.buyOpen) + (x.sellOpen - (q.Ask+x.markup)*x.sellLots)
		equity += pnl * x.contract * f
		used += x.marginLots() * x.perLot * q.Mid() * f
	}
	if !(used > 1e-9) {
		return math.Inf(1), true
	}
	return equity / used * 100, true
}

func effectiveLeverage(a *account, in *Instrument) float64 {
	l := a.Leverage
	if a.GroupLeverage > 0 && (l <= 0 || a.GroupLeverage < l) {
		l = a.GroupLeverage
	}
	if in.LeverageMax > 0 && (l <= 0 || in.LeverageMax < l) {
		l = in.LeverageMax
	}
	return float64(max(l, 1))
}

// pnlLocked is p's floating profit in its account currency, priced like its account's marks
// (p must still be in a's aggregates).
func (e *Engine) pnlLocked(a *account, p *position, px *pricer) (float64, bool) {
	return e.pnlAtLocked(a, a.exposureOf(p.sym), p, px)
}

// pnlAtLocked is pnlLocked for a caller that has found p's exposure i already.
func (e *Engine) pnlAtLocked(a *account, i int, p *position, px *pricer) (float64, bool) {
	if i < 0 || !a.exposures[i].priced {
		return 0, false
	}
	x := &a.exposures[i]
	q, ok := px.book(x.bk)
	if !ok {
		return 0, false
	}
	diff := p.open - (q.Ask + x.markup)
	if p.side == Buy {
		diff = (q.Bid - x.markup) - p.open
	}
	f := 1.0
	if !x.same {
		quoteUSD, ok := px.toUSD(x.qref)
		if !ok {
			return 0, false
		}
		accountUSD, ok := px.toUSD(a.aref)
		if !ok {
			return 0, false
		}
		f = quoteUSD / accountUSD
	}
	return diff * p.volume * x.contract * f, true
}

// ---- the gate ----

func (e *Engine) gateShutLocked(ctx context.Context) {
	if !e.gateShut {
		e.gateShut = true
		e.log.WarnContext(ctx, "lease not confirmed; risk evaluation suspended — every triggered close, fill and alert is dropped until the lease_restored sweep")
	}
}

func (e *Engine) gateOpenLocked(context.Context) {
	if e.gateShut {
		e.gateShut = false
		clear(e.warned)
	}
}

// warnTickLocked names, once per gap, each close, fill, stop-out and alert this tick would
// have started, without marking or removing anything: the lease_restored sweep re-derives them
// from the state then current.
func (e *Engine) warnTickLocked(ctx context.Context, b *book, px *pricer) {
	bid, ask := px.q.Bid, px.q.Ask
	for i, f := range [...]struct {
		h     *triggerHeap
		price float64
	}{{&b.buySL, bid}, {&b.buyTP, bid}, {&b.sellSL, ask}, {&b.sellTP, ask},
		{&b.buyLimit, ask}, {&b.buyStop, ask}, {&b.sellLimit, bid}, {&b.sellStop, bid}} {
		e.refs = f.h.appendFired(e.refs[:0], f.price)
		for _, ref := range e.refs {
			switch {
			case i >= 4: // the order heaps
				e.warnOnceLocked(ctx, job{kind: jobFill, id: e.ord[ref].id, symbol: b.symbol, quote: px.q})
			case ref&1 == 0:
				e.warnOnceLocked(ctx, job{kind: jobClose, id: e.pos[ref>>1].id, reason: fx.CloseSL, symbol: b.symbol, quote: px.q})
			default:
				e.warnOnceLocked(ctx, job{kind: jobClose, id: e.pos[ref>>1].id, reason: fx.CloseTP, symbol: b.symbol, quote: px.q})
			}
		}
	}
	// Only the accounts a confirmed tick would mark can have anything to warn about.
	for _, ai := range e.dueLocked(b, px.q, px.gen, false) {
		a := e.accts[ai]
		if !a.known || len(a.exposures) == 0 {
			continue
		}
		lvl, ok := e.levelLocked(a, px)
		if !ok {
			continue
		}
		if a.MarginCallLevel > 0 && lvl < a.MarginCallLevel && !a.marginCalled {
			e.warnOnceLocked(ctx, job{kind: jobAlert, id: a.ID, level: lvl})
		}
		if lvl <= a.StopOutLevel {
			if idx := e.largestLoserLocked(nil, a, px, lvl); idx >= 0 {
				p := &e.pos[idx]
				q, _ := px.book(e.books[p.sym])
				e.warnOnceLocked(ctx, job{kind: jobClose, id: p.id, reason: fx.CloseStopOut, symbol: e.books[p.sym].symbol, quote: q, level: lvl})
			}
		}
	}
}

func (e *Engine) warnOnceLocked(ctx context.Context, j job) {
	k := dropKey{kind: j.kind, id: j.id, reason: j.reason}
	if _, done := e.warned[k]; done {
		return
	}
	e.warned[k] = struct{}{}
	e.workDropped.Add(1)
	e.warnDropped(ctx, j, "lease not confirmed")
}

func (e *Engine) warnDropped(ctx context.Context, j job, why string) {
	switch j.kind {
	case jobClose:
		e.log.WarnContext(ctx, why+"; close not executed", slog.Int64("position_id", j.id), slog.String("reason", string(j.reason)),
			slog.String("symbol", j.symbol), slog.Float64("bid", j.quote.Bid), slog.Float64("ask", j.quote.Ask))
	case jobFill:
		e.log.WarnContext(ctx, why+"; fill not executed", slog.Int64("order_id", j.id),
			slog.String("symbol", j.symbol), slog.Float64("bid", j.quote.Bid), slog.Float64("ask", j.quote.Ask))
	case jobAlert:
		e.log.WarnContext(ctx, why+"; margin call alert not raised", slog.Int64("account_id", j.id), slog.Float64("margin_level", j.level))
	}
}

// admit passes job j through the gate, naming it as warnDropped does.
func (e *Engine) admit(ctx context.Context, j job) error {
	switch {
	case j.kind == jobAlert:
		return e.cfg.Gate.Admit(ctx, gate.MarginCall, slog.Int64("account_id", j.id), slog.Float64("margin_level", j.level))
	case j.kind == jobFill:
		return e.cfg.Gate.Admit(ctx, gate.RiskFill, slog.Int64("order_id", j.id),
			slog.String("symbol", j.symbol), slog.Float64("bid", j.quote.Bid), slog.Float64("ask", j.quote.Ask))
	}
	w := gate.RiskClose
	if j.reason == fx.CloseStopOut {
		w = gate.StopOut
	}
	return e.cfg.Gate.Admit(ctx, w, slog.Int64("position_id", j.id), slog.String("reason", string(j.reason)),
		slog.String("symbol", j.symbol), slog.Float64("bid", j.quote.Bid), slog.Float64("ask", j.quote.Ask))
}

// ---- workers ----

var errDropped = errors.New("dropped at the gate")

func (e *Engine) worker(ctx context.Context) {
	var last settlement
	had := false
	for {
		j, ok := e.work.next(last, had)
		if !ok {
			return
		}
		last, had = settlement{j: j, err: e.execute(ctx, j)}, true
	}
}

// execute runs one close or fill and returns the executor's answer. The gate is checked right
// before the executor is called.
func (e *Engine) execute(ctx context.Context, j job) error {
	if e.admit(ctx, j) != nil {
		e.workDropped.Add(1)
		return errDropped
	}
	switch j.kind {
	case jobClose:
		if e.cfg.Observe != nil {
			e.cfg.Observe(time.Since(j.arrived))
		}
		return e.cfg.Executor.Close(ctx, j.id, j.reason, j.quote)
	case jobFill:
		return e.cfg.Executor.Fill(ctx, j.id, j.quote)
	}
	return nil
}

// drainLocked applies the executor answers reported since the last drain.
func (e *Engine) drainLocked(ctx context.Context) {
	batch := e.work.takeSettled(e.spare)
	for _, s := range batch {
		e.settleLocked(ctx, s.j, s.err)
	}
	clear(batch)
	e.spare = batch[:0]
}

// settle follows the executor's answer. A commit or "already closed" ends the watch (the
// executor's Apply usually got there first); a drop or any other failure puts the item back
// under watch, so a later tick or sweep decides it again from the state then current — nothing
// is replayed.
func (e *Engine) settleLocked(ctx context.Context, j job, err error) {
	already := errors.Is(err, ErrAlreadyClosed)
	if already {
		e.alreadyClosed.Add(1)
	}
	refused := !already && errors.Is(err, ErrMarketUnavailable)
	if refused {
		e.marketRefused.Add(1)
		if j.reason != fx.CloseStopOut { // a stop-out refusal is logged as its skip, below
			what, key := "close refused for market state; the position stays under watch", "position_id"
			if j.kind == jobFill {
				what, key = "fill refused for market state; the order stays under watch", "order_id"
			}
			e.log.InfoContext(ctx, what, slog.Int64(key, j.id), slog.String("reason", string(j.reason)), slog.Any("err", err))
		}
	}
	if err != nil && !already && !refused && !errors.Is(err, errDropped) {
		e.execErrors.Add(1)
		what, key := "close failed; the position stays under watch", "position_id"
		if j.kind == jobFill {
			what, key = "fill failed; the order stays under watch", "order_id"
		}
		e.log.ErrorContext(ctx, what, slog.Int64(key, j.id), slog.String("reason", string(j.reason)), slog.Any("err", err))
	}
	switch j.kind {
	case jobClose:
		p := e.positionAt(j.idx, j.id)
		if p == nil || !p.closing {
			return
		}
		a := e.accts[p.acct]
		switch {
		case err == nil:
			// Committed, and the executor has not applied it yet: fold the estimate into the
			// balance until its exact balance arrives.
			a.Balance += p.est
			e.removePositionLocked(j.idx)
		case already:
			e.log.InfoContext(ctx, "position already closed by another transaction", slog.Int64("position_id", j.id), slog.String("reason", string(j.reason)))
			e.removePositionLocked(j.idx)
		default:
			a.pending -= p.est
			p.closing, p.est = false, 0
			e.exposeLocked(p, 1)
			e.indexPositionLocked(j.idx)
			if refused {
				p.refused, p.refusedAt = true, e.books[p.sym].ticks
				if j.reason == fx.CloseStopOut && !e.gateShut {
					// Go on to the account's next loser now rather than at its next band
					// crossing: re-mark it at current prices, this one passed over.
					px := e.pricerLocked(nil, tick.Quote{})
					lvl, _ := e.levelLocked(a, &px)
					e.noteSkipLocked(ctx, a, j.idx, skipRefused, lvl)
					e.markAccountLocked(ctx, a, &px, time.Now())
					e.flushLocked()
				}
			}
		}
	case jobFill:
		o := e.orderAt(j.idx, j.id)
		if o == nil || !o.filling {
			return
		}
		if err == nil || already {
			e.removeOrderLocked(j.idx)
			return
		}
		o.filling = false
		e.indexOrderLocked(j.idx)
	}
}

func (e *Engine) alerter(ctx context.Context) {
	for {
		j, ok := e.alerts.pop()
		if !ok {
			return
		}
		e.raise(ctx, j)
		e.alerts.done()
	}
}

func (e *Engine) raise(ctx context.Context, j job) {
	rearm := func() {
		e.mu.Lock()
		if i, ok := e.acctByID[j.id]; ok {
			a := e.accts[i]
			a.marginCalled = false
			e.markStaleLocked(a) // its band assumed the alert was raised
		}
		e.mu.Unlock()
	}
	if e.admit(ctx, j) != nil {
		e.workDropped.Add(1)
		rearm()
		return
	}
	e.log.WarnContext(ctx, "margin call", slog.Int64("account_id", j.id), slog.Float64("margin_level", j.level))
	if e.cfg.Alerts == nil {
		return
	}
	if err := e.cfg.Alerts.MarginCall(ctx, j.id, j.level); err != nil {
		e.log.ErrorContext(ctx, "margin call alert failed; raised again on the next evaluation", slog.Int64("account_id", j.id), slog.Any("err", err))
		rearm()
	}
}
