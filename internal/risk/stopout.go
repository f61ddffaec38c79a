package risk

import (
	"context"
	"log/slog"
	"math"
	"time"

	"fxdesk/internal/tick"
)

// Stop-out picks, among an account's open positions, the largest loser that can be closed now
// (doc.go, "Stop-out"). A position that cannot is passed over, noted once per episode, and stays
// under watch.

// skipReason is why stop-out passed a position over.
type skipReason uint8

const (
	skipNone       skipReason = iota
	skipHalted                // its instrument is HALTED
	skipClosed                // its market is closed (calendar or provider)
	skipNotQuoting            // its symbol is not quoting (never quoted, or the quote is stale)
	skipRefused               // the executor refused its close for market state; waits for a tick
)

func (r skipReason) String() string {
	switch r {
	case skipHalted:
		return "instrument halted"
	case skipClosed:
		return "market closed"
	case skipNotQuoting:
		return "symbol not quoting"
	case skipRefused:
		return "close refused for market state; retried at the symbol's next tick"
	}
	return "none"
}

// closableLocked is why p cannot be closed now, or skipNone when it can: the same rule the
// executor applies (an instrument not HALTED, a QUOTING symbol), read from the engine's own view
// and the prices' SymbolState, plus the executor's last refusal until the symbol ticks again.
func (e *Engine) closableLocked(p *position, px *pricer) skipReason {
	b := e.books[p.sym]
	if in := e.instruments[b.symbol]; in != nil && in.Halted {
		return skipHalted
	}
	switch px.state(b) {
	case tick.Quoting:
	case tick.MarketClosed:
		return skipClosed
	default:
		return skipNotQuoting
	}
	if p.refused && p.refusedAt == b.ticks {
		return skipRefused
	}
	return skipNone
}

// largestLoserLocked is the index of a's open position with the lowest floating profit (the
// lower id on a tie) among those that can be closed now, or −1. With note, each position it
// passes over for a larger loss is noted (noteSkipLocked), at margin level lvl.
func (e *Engine) largestLoserLocked(ctx context.Context, note bool, a *account, px *pricer, lvl float64) int32 {
	worst := int32(-1)
	worstPnL := math.Inf(1)
	e.passed = e.passed[:0]
	for _, idx := range a.positions {
		p := &e.pos[idx]
		if p.closing {
			continue
		}
		pnl, ok := e.pnlLocked(a, p, px)
		if !ok {
			continue
		}
		if !(pnl < worstPnL || (pnl == worstPnL && worst >= 0 && p.id < e.pos[worst].id)) {
			continue // closable or not, it would not be picked
		}
		if why := e.closableLocked(p, px); why != skipNone {
			if note {
				e.passed = append(e.passed, passedOver{idx: idx, pnl: pnl, why: why})
			}
			continue
		}
		worst, worstPnL = idx, pnl
	}
	for _, s := range e.passed {
		if s.pnl < worstPnL || worst < 0 {
			e.noteSkipLocked(ctx, a, s.idx, s.why, lvl)
		}
	}
	return worst
}

// passedOver is a loser stop-out could not close, kept while the pick is decided.
type passedOver struct {
	idx int32
	pnl float64
	why skipReason
}

// noteSkipLocked records that stop-out passed position idx over for why, and logs it the first
// time in this episode (or when the reason changes).
func (e *Engine) noteSkipLocked(ctx context.Context, a *account, idx int32, why skipReason, lvl float64) {
	p := &e.pos[idx]
	if p.skip == why {
		return
	}
	if p.skip == skipNone {
		a.skips++
	}
	p.skip = why
	e.stopOutSkips.Add(1)
	e.log.WarnContext(ctx, "stop-out passed over a position it cannot close now; it stays watched and is retried when its market reopens",
		slog.Int64("account_id", a.ID), slog.Int64("position_id", p.id), slog.String("symbol", e.books[p.sym].symbol),
		slog.String("why", why.String()), slog.Float64("margin_level", lvl))
}

// endEpisodeLocked forgets a's skip notes once its level is above the stop-out level: the next
// episode logs its skips again.
func (e *Engine) endEpisodeLocked(a *account) {
	if a.skips == 0 {
		return
	}
	for _, idx := range a.positions {
		e.pos[idx].skip = skipNone
	}
	a.skips = 0
}

// stopOutLocked is the record of stopping a out at margin level lvl, before the position it
// picked is handed off: its figures at px and the terms it was marked with. It costs one
// re-mark and one allocation per stop-out close, never anything on a tick that stops nobody out.
func (e *Engine) stopOutLocked(a *account, lvl float64, px *pricer, arrived time.Time) *StopOut {
	equity, used, _ := e.marksLocked(a, px)
	why := &StopOut{DecidedAt: arrived, MarginLevel: lvl, Equity: equity, UsedMargin: used, Group: a.Group,
		StopOutLevel: a.StopOutLevel, Symbols: make([]SymbolMark, 0, len(a.exposures))}
	for i := range a.exposures {
		x := &a.exposures[i]
		lev := 0
		if x.perLot > 0 {
			lev = int(math.Round(x.contract / x.perLot))
		}
		why.Symbols = append(why.Symbols, SymbolMark{Symbol: x.bk.symbol, Leverage: lev, Markup: x.markup})
	}
	return why
}
