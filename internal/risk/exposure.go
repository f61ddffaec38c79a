package risk

import (
	"math"
)

// exposeLocked adds (sign +1) or removes (sign −1) p's lots from its account's aggregate.
func (e *Engine) exposeLocked(p *position, sign float64) {
	a := e.accts[p.acct]
	e.exposeAtLocked(a, a.exposureOf(p.sym), p, sign)
}

// exposeAtLocked is exposeLocked for a caller that has found p's exposure i already (−1: none).
func (e *Engine) exposeAtLocked(a *account, i int, p *position, sign float64) {
	e.markStaleLocked(a) // a dependency added below is listed by addDepLocked
	if i < 0 {
		if sign < 0 {
			return
		}
		i = len(a.exposures)
		if a.exposures == nil { // room for a few symbols at once: one allocation per slice, not three
			a.syms, a.exposures, a.info = make([]int32, 0, 4), make([]exposure, 0, 4), make([]exposureInfo, 0, 4)
		}
		a.syms = append(a.syms, p.sym)
		a.exposures = append(a.exposures, exposure{bk: e.books[p.sym]})
		a.info = append(a.info, exposureInfo{deps: noDeps})
		e.addDepsLocked(a, i)
	}
	x := &a.exposures[i]
	v := sign * p.volume
	if p.side == Buy {
		x.buyLots += v
		x.buyOpen += v * p.open
	} else {
		x.sellLots += v
		x.sellOpen += v * p.open
	}
	if sign > 0 {
		a.info[i].n++
		return
	}
	if a.info[i].n--; a.info[i].n > 0 {
		return
	}
	e.removeDepsLocked(a, i)
	last := len(a.exposures) - 1
	if i != last {
		a.syms[i], a.exposures[i], a.info[i] = a.syms[last], a.exposures[last], a.info[last]
	}
	a.exposures[last], a.info[last] = exposure{}, exposureInfo{}
	a.syms, a.exposures, a.info = a.syms[:last], a.exposures[:last], a.info[:last]
}

// depsOf lists the books whose quotes move an account's marks on a symbol: the symbol itself
// and, when its quote currency is not the account's, the USD-hub legs of both currencies
// (a EUR account holding USDJPY: USDJPY, and EURUSD).
func (e *Engine) depsOf(a *account, sym int32) [3]int32 {
	d := noDeps
	d[0] = sym
	in := e.instruments[e.books[sym].symbol]
	if in == nil || in.Quote == a.Currency {
		return d
	}
	if l, ok := e.legs[in.Quote]; ok && in.Quote != "USD" {
		d[1] = e.bookFor(l.symbol).idx
	}
	if l, ok := e.legs[a.Currency]; ok && a.Currency != "USD" {
		d[2] = e.bookFor(l.symbol).idx
	}
	return d
}

// addDepsLocked copies the instrument's terms (its account group's where it has its own) into exposure i and gives the account a band on
// every symbol its marks there depend on.
func (e *Engine) addDepsLocked(a *account, i int) {
	x, info := &a.exposures[i], &a.info[i]
	a.aref = e.refFor(a.Currency)
	in := e.instruments[e.books[a.syms[i]].symbol]
	x.priced = in != nil
	if in != nil {
		x.qref = e.refFor(in.Quote)
		x.same = in.Quote == a.Currency
		markup, leverage := in.Markup, in.LeverageMax
		if t, ok := e.groupTerms[a.Group][in.Symbol]; ok {
			markup, leverage = t.Markup, t.LeverageMax // the account group's own terms
		}
		x.contract, x.markup, x.hedged = in.ContractSize, markup, in.HedgedMarginRate
		x.perLot = in.ContractSize / effectiveLeverage(a, leverage)
	}
	info.deps = e.depsOf(a, a.syms[i])
	for _, s := range info.deps {
		if s >= 0 {
			e.addDepLocked(a, s)
		}
	}
}

func (e *Engine) removeDepsLocked(a *account, i int) {
	info := &a.info[i]
	for _, s := range info.deps {
		if s >= 0 {
			e.removeDepLocked(a, s)
		}
	}
	info.deps = noDeps
}

func (e *Engine) addDepLocked(a *account, sym int32) {
	for k := range a.deps {
		if a.deps[k].sym == sym {
			a.deps[k].n++
			return
		}
	}
	id := takeIndex(&e.bands, &e.bandFree, &e.bandSlots, 2)
	be := &e.bands[id]
	be.acct, be.sym, be.live = a.idx, sym, true
	// An edge that never fires until the account is marked: a new dependency always comes with
	// a change that makes the account stale.
	b := e.books[sym]
	b.lo.push(2*id, math.Inf(-1))
	b.hi.push(2*id+1, math.Inf(1))
	if a.deps == nil {
		a.deps = make([]acctDep, 0, 4)
	}
	a.deps = append(a.deps, acctDep{sym: sym, n: 1, band: id})
	if a.stale {
		e.queueStaleLocked(id)
	}
}

func (e *Engine) removeDepLocked(a *account, sym int32) {
	for k := range a.deps {
		d := &a.deps[k]
		if d.sym != sym {
			continue
		}
		if d.n--; d.n > 0 {
			return
		}
		b := e.books[sym]
		b.lo.remove(2 * d.band)
		b.hi.remove(2*d.band + 1)
		// Its stale list keeps the id; takeStaleLocked skips it there unless it is listed again.
		e.bands[d.band] = bandEntry{}
		e.bandFree = append(e.bandFree, d.band)
		last := len(a.deps) - 1
		a.deps[k] = a.deps[last]
		a.deps = a.deps[:last]
		return
	}
}

// redepLocked recomputes an account's dependencies after its currency or the instruments
// changed.
func (e *Engine) redepLocked(a *account) {
	for i := range a.exposures {
		e.removeDepsLocked(a, i)
		e.addDepsLocked(a, i)
	}
	e.markStaleLocked(a)
}
