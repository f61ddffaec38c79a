package yeargen

import "slices"

// The end of day, as the desk's freeze would have written it at each weekday rollover
// (internal/eod): one row per (symbol, account currency) with the day's figures from the desk's
// side — read over the trading day [previous weekday rollover, this one) as the dealer's P&L
// reads them — and the clients' net open lots at the close, and one row per account with its
// balance and last deal after the rollover's swaps, its open positions marked at the close.

// deskFigures is one (day, symbol, currency) row's figures: cents, and lots in hundredths.
type deskFigures struct {
	realised, markup, commission, swaps int64
	net                                 int64
	used                                bool
}

// accountDay is one account's snapshot row of one day.
type accountDay struct {
	cut                     int32
	acct                    int32
	balance, equity, margin int64
	floating                int64
	openPositions, pending  int32
	throughDeal             int64
}

type endOfDay struct {
	frozen   int             // the first frozen days: cuts[:frozen]
	desk     [][]deskFigures // [cut][sym*len(currencies)+ccy]
	accounts []accountDay    // by cut, then account
	perDay   []int           // account rows per cut
}

func (p *plan) endOfDay() *endOfDay {
	e := &endOfDay{}
	for e.frozen < len(p.cuts) && p.cuts[e.frozen]+freezeMS <= p.end {
		e.frozen++
	}
	keys := len(p.ins) * len(currencies)
	e.desk = make([][]deskFigures, e.frozen)
	for c := range e.desk {
		e.desk[c] = make([]deskFigures, keys)
	}
	key := func(sym uint8, acct int32) int { return int(sym)*len(currencies) + int(p.accounts[acct].ccy) }
	for _, d := range p.deals {
		if d.pos < 0 {
			continue
		}
		c := p.cutAfter(d.t)
		if c >= e.frozen {
			continue
		}
		ps := &p.positions[d.pos]
		f := &e.desk[c][key(ps.sym, d.acct)]
		f.used = true
		switch d.typ {
		case dealProfit:
			f.realised -= d.amount
			f.markup += ps.markupClose
		case dealCommission:
			f.commission -= d.amount
		case dealSwap:
			f.swaps -= d.amount
		}
	}
	for k := range p.positions {
		ps := &p.positions[k]
		if c := p.cutAfter(ps.openAt); c < e.frozen {
			f := &e.desk[c][key(ps.sym, ps.acct)]
			f.used = true
			f.markup += ps.markupOpen
		}
	}

	// Per account: positions by opening, resting orders, the deals in id order.
	posOf := make([][]int32, len(p.accounts))
	for k := range p.positions {
		a := p.positions[k].acct
		posOf[a] = append(posOf[a], int32(k))
	}
	restOf := make([][]int32, len(p.accounts))
	for k, o := range p.orders {
		if o.typ != orderMarket {
			restOf[o.acct] = append(restOf[o.acct], int32(k))
		}
	}
	snapFrom := 0
	if p.size.AccountDays > 0 {
		snapFrom = max(0, e.frozen-p.size.AccountDays)
	}
	e.perDay = make([]int, e.frozen)
	byCut := make([][]accountDay, e.frozen)
	for ai := range p.accounts {
		a := &p.accounts[ai]
		ccy := currencies[a.ccy]
		mine := posOf[ai]
		slices.SortFunc(mine, func(x, y int32) int { return int(p.positions[x].openAt - p.positions[y].openAt) })
		deals := p.dealsOf[ai]
		next, di := 0, -1
		var active []int32
		for c := 0; c < e.frozen; c++ {
			cut := p.cuts[c]
			if a.created >= cut {
				continue
			}
			for next < len(mine) && p.positions[mine[next]].openAt < cut {
				active = append(active, mine[next])
				next++
			}
			active = slices.DeleteFunc(active, func(k int32) bool {
				ps := &p.positions[k]
				return !ps.open && ps.closeAt <= cut
			})
			snap := c >= snapFrom
			var floating, margin int64
			for _, k := range active {
				ps := &p.positions[k]
				sign := int64(1)
				if ps.side == sideSell {
					sign = -1
				}
				e.desk[c][key(ps.sym, ps.acct)].net += sign * int64(ps.lots)
				e.desk[c][key(ps.sym, ps.acct)].used = true
				if !snap {
					continue
				}
				in := &p.ins[ps.sym]
				mid := p.mid(ps.sym, cut)
				closePx := in.points(mid) - sign*in.halfSpread
				floating += cents(in.quoteValue(ps.lots, sign*(closePx-ps.openPx)) * p.rate(in.quote, ccy))
				margin += cents(in.contract * float64(ps.lots) / 100 * p.rate(in.base, ccy) / float64(a.leverage))
			}
			if !snap {
				continue
			}
			for di+1 < len(deals) && p.deals[deals[di+1]].t <= cut+freezeMS {
				di++
			}
			row := accountDay{cut: int32(c), acct: int32(ai), floating: floating, margin: margin, openPositions: int32(len(active))}
			if di >= 0 {
				d := &p.deals[deals[di]]
				row.balance, row.throughDeal = d.after, d.id
			}
			row.equity = row.balance + floating
			for _, k := range restOf[ai] {
				o := &p.orders[k]
				if o.createdAt < cut && (o.status == statusPending || o.done > cut) {
					row.pending++
				}
			}
			byCut[c] = append(byCut[c], row)
		}
	}
	for c, rows := range byCut {
		e.perDay[c] = len(rows)
		e.accounts = append(e.accounts, rows...)
	}
	return e
}
