package fixvenue

import (
	"fmt"

	"github.com/shopspring/decimal"
)

// An order filled in several executions (FaultSplit): what a real liquidity provider does with
// an order larger than one price level holds. Each execution is its own ExecutionReport
// (ExecType=F, OrdStatus=1 partially filled, the last one OrdStatus=2), with its own ExecID and
// LastQty/LastPx, and CumQty/AvgPx of the order so far; each is netted as it executes.

// Config.Executions makes the same split the venue's standing behaviour: every order it receives
// that meets no fault fills in that many executions, as a venue whose book is thin at every
// level does (cmd/fixvenue -executions).

// Execution is one execution of an order, as /control/state lists it.
type Execution struct {
	ExecID string          `json:"execId"`
	Qty    decimal.Decimal `json:"qty"`
	Px     decimal.Decimal `json:"px"`
}

// statusPartial is OrdStatus=1, partially filled.
const statusPartial = "1"

// maxExecutions bounds a FaultSplit's executions.
const maxExecutions = 100

// checkExecutions refuses an Executions the fault cannot honour.
func (f Fault) checkExecutions() error {
	switch {
	case f.Executions < 0 || f.Executions > maxExecutions:
		return fmt.Errorf("executions %d must be between 0 and %d", f.Executions, maxExecutions)
	case f.Executions != 0 && f.Kind != FaultSplit:
		return fmt.Errorf("executions is for a %q fault, not %q", FaultSplit, f.Kind)
	}
	return nil
}

// executions is how many executions a FaultSplit order fills in.
func (f Fault) executions() int {
	if f.Executions == 0 {
		return 2
	}
	return f.Executions
}

// splitQty cuts qty into n parts of whole units, the rest in the last (fewer parts when qty has
// fewer whole units than n; one part when it has none).
func splitQty(qty decimal.Decimal, n int) []decimal.Decimal {
	part := qty.Div(decimal.NewFromInt(int64(n))).Truncate(0)
	if !part.IsPositive() {
		if n = int(qty.IntPart()); n < 2 {
			return []decimal.Decimal{qty}
		}
		part = decimal.NewFromInt(1)
	}
	out := make([]decimal.Decimal, 0, n)
	rest := qty
	for range n - 1 {
		out = append(out, part)
		rest = rest.Sub(part)
	}
	return append(out, rest)
}

// fillSplit executes o in n executions, reporting each.
func (b *book) fillSplit(o *Order, n int) {
	for _, q := range splitQty(o.Qty, n) {
		if !b.execute(o, q) {
			return
		}
		b.report(o)
	}
}

// execute executes qty more of o at the current price (a buy at the ask, a sell at the bid) and
// nets it; o is filled once all of it executed. Without a price the order is rejected (what
// executed stands).
func (b *book) execute(o *Order, qty decimal.Decimal) bool {
	var bid, ask decimal.Decimal
	ok := false
	if b.s.cfg.Prices != nil {
		bid, ask, ok = b.s.cfg.Prices.Quote(o.Symbol)
	}
	if !ok || !bid.IsPositive() || ask.LessThan(bid) {
		b.reject(o, RejectMarketClosed, "MARKET_HALTED: no price for "+o.Symbol)
		return false
	}
	px := bid
	signed := qty.Neg()
	if o.Side == sideBuy {
		px, signed = ask, qty
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cum := o.CumQty.Add(qty)
	o.AvgPx = o.CumQty.Mul(o.AvgPx).Add(qty.Mul(px)).Div(cum).Round(10)
	o.CumQty, o.LastQty, o.LastPx, o.ExecID, o.Time = cum, qty, px, b.nextID("E"), b.s.cfg.Now()
	o.Executions = append(o.Executions, Execution{ExecID: o.ExecID, Qty: qty, Px: px})
	o.Status = statusPartial
	if cum.GreaterThanOrEqual(o.Qty) {
		o.Status = statusFilled
	}
	b.netLocked(o.Symbol, signed, px)
	return true
}
