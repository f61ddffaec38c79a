package risk

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

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
		if j.stop != nil {
			return e.cfg.Executor.StopOut(ctx, j.id, j.account, j.quote, *j.stop)
		}
		if tc, ok := e.cfg.Executor.(TrailCloser); ok && j.reason == fx.CloseTrailingStop {
			return tc.CloseTrailing(ctx, j.id, j.account, j.level, j.quote)
		}
		return e.cfg.Executor.Close(ctx, j.id, j.account, j.reason, j.quote)
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
	// A modify won the order's row lock first (docs/orders.md, «Modify a resting order»): not a
	// failure, the order goes back under watch at its new price.
	modified := !already && errors.Is(err, ErrOrderModified)
	if modified {
		e.log.InfoContext(ctx, "fill dropped: the order was modified after its trigger; it stays under watch", slog.Int64("order_id", j.id))
	}
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
	if err != nil && !already && !refused && !modified && !errors.Is(err, errDropped) {
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
	// rearm undoes what the account's view assumed was recorded, so the next evaluation records
	// it again.
	rearm := func() {
		e.mu.Lock()
		if i, ok := e.acctByID[j.id]; ok {
			a := e.accts[i]
			a.marginCalled = j.cleared
			e.markStaleLocked(a) // its band assumed the alert was raised
		}
		e.mu.Unlock()
	}
	if e.admit(ctx, j) != nil {
		e.workDropped.Add(1)
		rearm()
		return
	}
	if j.cleared {
		e.log.InfoContext(ctx, "margin call ended", slog.Int64("account_id", j.id), slog.Float64("margin_level", j.level))
		if e.cfg.Alerts == nil {
			return
		}
		if err := e.cfg.Alerts.MarginCallCleared(ctx, j.id, j.level); err != nil {
			e.log.ErrorContext(ctx, "margin call end not recorded; recorded again on the next evaluation", slog.Int64("account_id", j.id), slog.Any("err", err))
			rearm()
		}
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
