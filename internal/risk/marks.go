package risk

import (
	"math"

	"fxdesk/internal/tick"
)

// pricer reads the ticked symbol from the tick itself and every other symbol from LastTick,
// once per evaluation (generation gen) and symbol.
type pricer struct {
	prices tick.Prices
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
	equity, used, ok := e.marksLocked(a, px)
	if !ok {
		return 0, false
	}
	if !(used > 1e-9) {
		return math.Inf(1), true
	}
	return equity / used * 100, true
}

// marksLocked is a's equity and used margin in its currency, as levelLocked describes them.
func (e *Engine) marksLocked(a *account, px *pricer) (equity, used float64, ok bool) {
	equity = a.Balance + a.pending
	accountUSD := 0.0
	for i := range a.exposures {
		x := &a.exposures[i]
		if !x.priced {
			return 0, 0, false
		}
		q, ok := px.book(x.bk)
		if !ok {
			return 0, 0, false
		}
		f := 1.0
		if !x.same {
			quoteUSD, ok := px.toUSD(x.qref)
			if !ok {
				return 0, 0, false
			}
			if accountUSD == 0 {
				if accountUSD, ok = px.toUSD(a.aref); !ok {
					return 0, 0, false
				}
			}
			f = quoteUSD / accountUSD
		}
		pnl := ((q.Bid-x.markup)*x.buyLots - x.buyOpen) + (x.sellOpen - (q.Ask+x.markup)*x.sellLots)
		equity += pnl * x.contract * f
		used += x.marginLots() * x.perLot * q.Mid() * f
	}
	return equity, used, true
}

// effectiveLeverage is the least of the account's, its group's and the symbol's cap
// (symbolMax: the instrument's, or the account group's own on it; 0 = none).
func effectiveLeverage(a *account, symbolMax int) float64 {
	l := a.Leverage
	if a.GroupLeverage > 0 && (l <= 0 || a.GroupLeverage < l) {
		l = a.GroupLeverage
	}
	if symbolMax > 0 && (l <= 0 || symbolMax < l) {
		l = symbolMax
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
