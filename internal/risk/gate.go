package risk

import (
	"context"
	"log/slog"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
)

// gateShutLocked records that the gate dropped this engine's work; the gate itself logged and
// counted the drop. gateOpenLocked, on the first admitted work after it, lets warnOnceLocked
// name again what a later gap would have done.
func (e *Engine) gateShutLocked(context.Context) { e.gateShut = true }

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
			if idx := e.largestLoserLocked(ctx, false, a, px, lvl); idx >= 0 {
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
		if j.cleared {
			e.log.WarnContext(ctx, why+"; margin call end not recorded", slog.Int64("account_id", j.id), slog.Float64("margin_level", j.level))
			return
		}
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
