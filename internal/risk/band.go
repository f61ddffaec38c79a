package risk

import (
	"math"
	"slices"

	"fxdesk/internal/tick"
)

// Margin bands: which accounts a tick must re-mark.
//
// Marking an account decides two things: whether its level is below the margin-call level
// (alert once per crossing, re-arm above it) and whether it is at or below the stop-out level.
// After each mark the engine computes the account's band δ: a relative move such that, while
// the bid and ask of every symbol the account depends on stay inside [lower × (1−δ), higher ×
// (1+δ)] of the quote that mark read, no mark could decide anything different. It then sets
// those edges in each dependency's lo and hi heaps. A tick re-marks only the accounts whose edge
// it reaches, plus those changed since their last mark (stale); an account far from both levels
// costs a tick nothing.
//
// The bound holds for all symbols moving at once, in any direction: with T a level in percent,
// the level is at or above T exactly when g_T = equity − T/100 × used margin is ≥ 0, and g_T is a
// sum over exposures of f × (α·bid + β·ask + c₀), with f the conversion to the account currency.
// Interval arithmetic over the box gives g_T's least and greatest value; δ is the widest step of
// bandSteps for which every decision keeps its sign, with a relative slack of 1e-9 for rounding.
// A mark that could not be computed (a price missing), or whose account would act again at these
// very prices, gets δ < 0: its edges fire on every tick, as every exposed account did before
// bands.

// bandSteps are the moves tried, widest first: 50 % down to about 0.001 %, in steps of √2.
var bandSteps = func() (s [32]float64) {
	for k := range s {
		s[k] = 0.5 * math.Pow(2, -float64(k)/2)
	}
	return s
}()

// legBox is a currency's value in USD over a band: 1 for USD, a leg's mid, or its inverse.
type legBox struct {
	lo, hi   float64 // the leg's lower and higher quote at the mark
	inv, one bool
}

func (l legBox) at(d float64) (lo, hi float64) {
	if l.one {
		return 1, 1
	}
	lo, hi = l.lo*(1-d), l.hi*(1+d)
	if l.inv {
		return 1 / hi, 1 / lo
	}
	return lo, hi
}

// bandTerm is one exposure's part of g_T: f × (α_T·bid + β_T·ask + c0).
type bandTerm struct {
	lo, hi             float64 // the symbol's lower and higher quote at the mark
	q                  legBox  // the quote currency → USD
	same               bool    // quoted in the account currency
	aMC, bMC, aSO, bSO float64
	c0                 float64
}

func legBoxOf(px *pricer, r legRef) (legBox, bool) {
	switch {
	case r.usd:
		return legBox{one: true}, true
	case !r.ok:
		return legBox{}, false
	}
	q, ok := px.book(r.b)
	lo, hi := min(q.Bid, q.Ask), max(q.Bid, q.Ask)
	if !ok || !(lo > 0) || math.IsInf(hi, 0) {
		return legBox{}, false
	}
	return legBox{lo: lo, hi: hi, inv: r.inv}, true
}

// bandLocked is a's band δ at the prices px read: +Inf when no price can change a decision (an
// undescribed account, or one without margin), −1 when every tick must re-mark it.
func (e *Engine) bandLocked(a *account, px *pricer) float64 {
	if !a.known || len(a.exposures) == 0 {
		return math.Inf(1)
	}
	terms := e.bandTerms[:0]
	acc := legBox{one: true}
	converted, marginless := false, true
	for i := range a.exposures {
		x := &a.exposures[i]
		if !x.priced {
			return -1
		}
		q, ok := px.book(x.bk)
		t := bandTerm{lo: min(q.Bid, q.Ask), hi: max(q.Bid, q.Ask), same: x.same, q: legBox{one: true}}
		if !ok || !(t.lo > 0) || math.IsInf(t.hi, 0) {
			return -1
		}
		if !x.same {
			if t.q, ok = legBoxOf(px, x.qref); !ok {
				return -1
			}
			converted = true
		}
		k := x.marginLots() * x.perLot / 100 // used margin per unit of mid, per level percent
		if k != 0 {
			marginless = false
		}
		c := x.contract
		t.aMC, t.bMC = c*x.buyLots-a.MarginCallLevel*k/2, -c*x.sellLots-a.MarginCallLevel*k/2
		t.aSO, t.bSO = c*x.buyLots-a.StopOutLevel*k/2, -c*x.sellLots-a.StopOutLevel*k/2
		t.c0 = c * (x.sellOpen - x.buyOpen - x.markup*(x.buyLots+x.sellLots))
		terms = append(terms, t)
	}
	e.bandTerms = terms
	if converted {
		var ok bool
		if acc, ok = legBoxOf(px, a.aref); !ok {
			return -1
		}
	}
	if marginless {
		// The level is +Inf at any price: only a pending re-arm is left to do.
		if a.MarginCallLevel > 0 && a.marginCalled {
			return -1
		}
		return math.Inf(1)
	}
	return widestBand(func(d float64) bool { return bandHolds(a, terms, acc, d) }, a.band)
}

// widestBand is the widest of bandSteps for which holds is true, −1 when none is. holds must be
// monotone — true for a step, true for every narrower one — which bandHolds is: a narrower box
// only raises the least and lowers the greatest value of every g_T.
//
// prev, the account's last band, is tried first: an account re-marked because a tick crossed
// its edge usually ends up a step or none from where it was, so two evaluations settle it where
// a search from scratch takes six. Without a usable prev, the widest step is tried first, as
// most accounts are far from both levels.
func widestBand(holds func(d float64) bool, prev float64) float64 {
	lo, hi := 0, len(bandSteps) // the answer's index is in [lo, hi]; hi == len means none
	if k := slices.Index(bandSteps[:], prev); k >= 0 {
		if holds(bandSteps[k]) {
			if k == 0 || !holds(bandSteps[k-1]) {
				return bandSteps[k]
			}
			hi = k - 1
		} else {
			lo = k + 1
		}
	} else if holds(bandSteps[0]) {
		return bandSteps[0]
	} else {
		lo = 1
	}
	for lo < hi {
		m := (lo + hi) / 2
		if holds(bandSteps[m]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == len(bandSteps) {
		return -1
	}
	return bandSteps[lo]
}

// bandHolds reports whether, with every quote anywhere in its box for move d, the next mark of a
// would find it where this one left it: above the stop-out level, and on the side of the
// margin-call level that a.marginCalled records.
func bandHolds(a *account, terms []bandTerm, acc legBox, d float64) bool {
	alo, ahi := acc.at(d)
	base := a.Balance + a.pending
	soMin, mcMin, mcMax := base, base, base
	scale := math.Abs(a.Balance) + math.Abs(a.pending)
	mc := a.MarginCallLevel > 0
	for i := range terms {
		t := &terms[i]
		lo, hi := t.lo*(1-d), t.hi*(1+d)
		flo, fhi := 1.0, 1.0
		if !t.same {
			qlo, qhi := t.q.at(d)
			flo, fhi = qlo/ahi, qhi/alo
		}
		soMin += scaledMin(t.c0+min(t.aSO*lo, t.aSO*hi)+min(t.bSO*lo, t.bSO*hi), flo, fhi)
		if mc {
			mcMin += scaledMin(t.c0+min(t.aMC*lo, t.aMC*hi)+min(t.bMC*lo, t.bMC*hi), flo, fhi)
			mcMax += scaledMax(t.c0+max(t.aMC*lo, t.aMC*hi)+max(t.bMC*lo, t.bMC*hi), flo, fhi)
		}
		scale += fhi * (math.Abs(t.c0) + (math.Abs(t.aMC)+math.Abs(t.bMC)+math.Abs(t.aSO)+math.Abs(t.bSO))*hi)
	}
	slack := 1e-9 * scale
	if !(soMin > slack) {
		return false
	}
	if !mc {
		return true
	}
	if a.marginCalled {
		return mcMax < -slack
	}
	return mcMin > slack
}

// scaledMin is the least of f × h for f in [flo, fhi] (f > 0).
func scaledMin(h, flo, fhi float64) float64 {
	if h >= 0 {
		return flo * h
	}
	return fhi * h
}

func scaledMax(h, flo, fhi float64) float64 {
	if h >= 0 {
		return fhi * h
	}
	return flo * h
}

// setBandLocked computes a's band at the prices px read and moves its edges on every symbol it
// depends on. The account is no longer stale.
func (e *Engine) setBandLocked(a *account, px *pricer) {
	d := e.bandLocked(a, px)
	a.band, a.stale = d, false
	for _, dep := range a.deps {
		b := e.books[dep.sym]
		lo, hi := math.Inf(-1), math.Inf(1) // never
		switch {
		case d < 0:
			lo, hi = math.Inf(1), math.Inf(-1) // every tick
		case !math.IsInf(d, 1):
			q, _ := px.book(b)
			lo, hi = min(q.Bid, q.Ask)*(1-d), max(q.Bid, q.Ask)*(1+d)
		}
		b.lo.set(2*dep.band, lo)
		b.hi.set(2*dep.band+1, hi)
	}
}

// dueLocked lists the accounts a tick on b at q must mark: those stale on b, then those whose
// band q leaves, each once. consume takes them off the stale list (a gated tick only looks).
func (e *Engine) dueLocked(b *book, q tick.Quote, gen uint64, consume bool) []int32 {
	due := e.takeStaleLocked(e.due[:0], b, gen, consume)
	e.refs = b.lo.appendFired(e.refs[:0], min(q.Bid, q.Ask))
	e.refs = b.hi.appendFired(e.refs, max(q.Bid, q.Ask))
	for _, ref := range e.refs {
		if a := e.accts[e.bands[ref>>1].acct]; a.seen != gen {
			a.seen = gen
			due = append(due, a.idx)
		}
	}
	e.due = due
	return due
}
