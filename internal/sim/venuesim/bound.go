package venuesim

import (
	"github.com/shopspring/decimal"

	"fxdesk/internal/venue"
)

// partStep is the increment a partial fill (FaultPartial) comes in: 1,000 units, the lot step
// of most FX liquidity (0.01 lots of a 100,000 contract). The desk books a part as lots, and a
// part in whole thousands is always lots it can hold exactly (docs/orders.md, «IOC and FOK»).
var partStep = decimal.NewFromInt(1000)

// parseBound reads an order's priceBound ("" : none); the text is why it is refused.
func parseBound(text string) (*decimal.Decimal, string) {
	if text == "" {
		return nil, ""
	}
	b, err := decimal.NewFromString(text)
	if err != nil || !b.IsPositive() {
		return nil, "priceBound " + text + " must be a positive decimal."
	}
	return &b, ""
}

func (r marketRequest) timeInForce() string {
	if r.ioc {
		return venue.IOC
	}
	return venue.FOK
}

func (r marketRequest) boundText() string {
	if r.bound == nil {
		return ""
	}
	return r.bound.String()
}

// policyCancel is why the order cannot fill at q under its own terms, as OANDA says it (""
// : it fills): BOUNDS_VIOLATION when the price it would fill at (a buy at the ask, a sell at
// the bid) is beyond its priceBound; INSUFFICIENT_LIQUIDITY when a partial fault leaves only a
// part and the order is FOK (it never fills a part), or when the part rounds to nothing.
func (r marketRequest) policyCancel(q quote) string {
	if r.bound != nil {
		if r.units.IsPositive() && q.ask.GreaterThan(*r.bound) || r.units.IsNegative() && q.bid.LessThan(*r.bound) {
			return venue.ReasonBoundsViolation
		}
	}
	if r.fillPercent > 0 && (!r.ioc || r.filled().IsZero()) {
		return venue.ReasonInsufficientLiquidity
	}
	return ""
}
