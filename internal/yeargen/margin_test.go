package yeargen

import (
	"context"
	"testing"
)

// A desk booted on the history starts at the end's prices (its simulator's): no account may be
// in margin call there, or the boot would stop accounts out before anything is measured.
func TestNoMarginCallAtTheEnd(t *testing.T) {
	p, err := newPlan(context.Background(), testDB, Small(), 3, testEnd)
	if err != nil {
		t.Fatal(err)
	}
	p.build(discard())
	margin := make([]float64, len(p.accounts))
	floating := make([]float64, len(p.accounts))
	for _, ps := range p.positions {
		if !ps.open {
			continue
		}
		a := &p.accounts[ps.acct]
		in := &p.ins[ps.sym]
		ccy := currencies[a.ccy]
		margin[ps.acct] += in.contract * float64(ps.lots) / 100 * p.rate(in.base, ccy) / float64(a.leverage)
		sign := int64(1)
		if ps.side == sideSell {
			sign = -1
		}
		closePx := in.points(in.mids[len(in.mids)-1]) - sign*in.halfSpread
		floating[ps.acct] += in.quoteValue(ps.lots, sign*(closePx-ps.openPx)) * p.rate(in.quote, ccy)
	}
	under100, checked := 0, 0
	for i, a := range p.accounts {
		if margin[i] == 0 {
			continue
		}
		checked++
		if lvl := (float64(a.balance)/100 + floating[i]) / margin[i] * 100; lvl < 100 {
			under100++
		}
	}
	if under100 > 0 || checked == 0 {
		t.Errorf("%d of %d accounts with open positions are in margin call at the end", under100, checked)
	}
}
