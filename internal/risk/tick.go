package risk

import (
	"context"
	"log/slog"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/tick"
)

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

// evaluateBacklog evaluates, in their order, the updates that waited in the subscription while
// the view loaded. They are older than the prices the boot sweep reads, so they go before it:
// evaluated after it, a quote from before a gap met a trailing stop the sweep had already moved
// to the gapped price, and fired it at a level the market never reached in that order.
func (e *Engine) evaluateBacklog(ctx context.Context) {
	for n := len(e.cfg.Updates); n > 0; n-- {
		u, ok := <-e.cfg.Updates
		if !ok {
			return // Run's loop sees the channel closed
		}
		e.onTick(ctx, u, time.Now())
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
	if in := e.instruments[b.symbol]; in != nil && in.Halted {
		// A HALTED instrument executes nothing (trading refuses its closes and fills): its
		// triggers stay armed, untouched, and fire at the first tick once the halt is lifted,
		// instead of being handed off and refused on every tick of the halt.
		return
	}
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
			e.handOffLocked(job{kind: jobClose, idx: idx, id: p.id, account: e.accts[p.acct].ID, reason: reason, symbol: b.symbol, quote: px.q, arrived: arrived})
		}
	}
	e.fireTrailsLocked(b, px, arrived)
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
func (e *Engine) closeLocked(idx int32, reason fx.CloseReason, q tick.Quote, arrived time.Time, px *pricer, why *StopOut) {
	p := &e.pos[idx]
	e.closingLocked(idx, px)
	p.closing = true
	e.closesQueued.Add(1)
	e.handOffLocked(job{kind: jobClose, idx: idx, id: p.id, account: e.accts[p.acct].ID, reason: reason, symbol: e.books[p.sym].symbol, quote: q, arrived: arrived, stop: why})
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
		e.clearMarginCallLocked(a, 0, arrived)
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
			e.clearMarginCallLocked(a, lvl, arrived)
		}
	}
	// Each round hands one position off, so it cannot run more rounds than the account holds.
	for range len(a.positions) {
		if lvl > a.StopOutLevel {
			e.endEpisodeLocked(a)
			return
		}
		idx := e.largestLoserLocked(ctx, true, a, px, lvl)
		if idx < 0 {
			return
		}
		q, ok := px.book(e.books[e.pos[idx].sym])
		if !ok {
			return
		}
		e.stopOuts.Add(1)
		e.closeLocked(idx, fx.CloseStopOut, q, arrived, px, e.stopOutLocked(a, lvl, px, arrived))
		if lvl, ok = e.levelLocked(a, px); !ok {
			return
		}
	}
}

// clearMarginCallLocked ends a's margin call, if it had one: the end is recorded (Alerts) off
// the tick path, as its start was.
func (e *Engine) clearMarginCallLocked(a *account, lvl float64, arrived time.Time) {
	if !a.marginCalled {
		return
	}
	a.marginCalled = false
	e.alerts.push(job{kind: jobAlert, id: a.ID, level: lvl, arrived: arrived, cleared: true})
}
