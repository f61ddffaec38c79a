package fixvenue

import "github.com/shopspring/decimal"

// TimeInForce (59) value the venue honours on a partial fill (FaultPartial).
const tifFOK = "4" // fill or kill: all of it now, or nothing

// fillPart executes units of o (FaultPartial), as a venue that can fill only that much now:
// a FOK order is cancelled whole with nothing executed, as FIX 4.4 says of fill-or-kill; any
// other (IOC, or none) executes them, rounded down to Config.PartStep, and the rest is
// cancelled (all of it when the part rounds to nothing). Units at or above the order's fill it
// whole.
func (b *book) fillPart(o *Order, units decimal.Decimal, tif string) bool {
	if !units.LessThan(o.Qty) {
		return b.fill(o)
	}
	if step := b.s.cfg.PartStep; step.IsPositive() {
		units = units.Div(step).Floor().Mul(step)
	}
	if tif != tifFOK && units.IsPositive() {
		return b.fillUnits(o, units)
	}
	text := "fill or kill: only " + units.String() + " could be filled"
	if tif != tifFOK {
		text = "INSUFFICIENT_LIQUIDITY: less than one lot step could be filled"
	}
	b.mu.Lock()
	o.Status, o.Text, o.Time = statusCanceled, text, b.s.cfg.Now()
	o.Reported = true
	snap := *o
	b.mu.Unlock()
	b.s.sendReport(snap, execCanceled)
	return false
}
