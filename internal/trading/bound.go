package trading

import (
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/venue"
)

// A price bound and a fill policy on MARKET orders (docs/orders.md, «Price bound», «IOC and
// FOK»). The bound is on the price the trader is booked at — the desk's fill price, markup
// included: a BUY fills at or below it, a SELL at or above it.
//
// On the B-book the desk fills whole at its own quote, so a bound is judged on the batch's
// quote and a fill past it is refused (ECONFLICT, nothing written); IOC and FOK both mean "all
// of it now or nothing", which is what every desk fill already is.
//
// At the venue (EXTERNAL) the venue decides, since its price is the one booked: the bound goes
// with the order (OANDA's priceBound, a LIMIT price over FIX) less the group's markup, so that
// the venue's price plus markup stays within the trader's bound; a venue that cannot fill
// within it cancels the order and it is REJECTED like any venue cancel. FOK (the default, as
// today) never books a part. IOC books the part the venue filled: a position of that part, the
// order FILLED with filledVolume = the part and volume what was asked; the rest is cancelled.

// checkMarketPolicy checks the price bound and time in force of MARKET order r (timeInForce
// "" is stored GTC, today's meaning: FOK at the venue).
func checkMarketPolicy(in catalog.Instrument, r *OrderRequest) error {
	switch r.TimeInForce {
	case fx.GTC, fx.IOC, fx.FOK:
	default:
		return fx.Errorf(fx.EINVALID, "A MARKET order fills at once: its timeInForce is IOC or FOK (or none); GTD, DAY and expiresAt apply to resting orders.")
	}
	if r.ExpiresAt != nil {
		return fx.Errorf(fx.EINVALID, "A MARKET order fills at once: expiresAt applies to GTD orders only.")
	}
	if r.PriceBound != nil {
		return checkPrice("priceBound", in, *r.PriceBound)
	}
	return nil
}

// checkRestingPolicy refuses on a resting order what only a MARKET order takes.
func checkRestingPolicy(r *OrderRequest) error {
	if r.PriceBound != nil {
		return fx.Errorf(fx.EINVALID, "priceBound applies to MARKET orders only: a %s order's price is its bound.", r.Type)
	}
	if r.TimeInForce == fx.IOC || r.TimeInForce == fx.FOK {
		return fx.Errorf(fx.EINVALID, "timeInForce %s applies to MARKET orders only; a %s order is GTC, GTD or DAY.", r.TimeInForce, r.Type)
	}
	return nil
}

// checkBound refuses a desk fill at price (markup included) past the trader's bound.
func checkBound(in catalog.Instrument, side fx.Side, price decimal.Decimal, bound *decimal.Decimal) error {
	if bound == nil {
		return nil
	}
	digits := int32(in.Digits)
	if side == fx.Buy && price.GreaterThan(*bound) {
		return fx.Errorf(fx.ECONFLICT, "Not filled: the buy price %s (the ask with the desk's markup) is above your priceBound %s; nothing was booked.",
			price.StringFixed(digits), bound.StringFixed(digits))
	}
	if side == fx.Sell && price.LessThan(*bound) {
		return fx.Errorf(fx.ECONFLICT, "Not filled: the sell price %s (the bid less the desk's markup) is below your priceBound %s; nothing was booked.",
			price.StringFixed(digits), bound.StringFixed(digits))
	}
	return nil
}

// marketInsert is the INSERT of a desk-filled MARKET order o: orderInsertSQL, with its price
// bound in the same statement when it has one (a second statement per bounded order would cost
// the bound a round of the batch's work: docs/orders.md, «Price bound», has the figures).
func marketInsert(o book.Order) (string, []any) {
	args := []any{o.AccountID, o.Symbol, o.Side, o.Type, o.Volume, o.Price, o.SL, o.TP, o.TimeInForce, o.ExpiresAt, o.Status, o.RequestNonce, o.RequestHash,
		o.FillPrice, o.RouteRuleID, o.HedgePercent}
	if o.PriceBound == nil {
		return orderInsertSQL, args
	}
	return boundedInsertSQL, append(args, *o.PriceBound)
}

// boundedInsertSQL is orderInsertSQL with the price bound.
var boundedInsertSQL = strings.Replace(strings.Replace(orderInsertSQL, "`hedgePercent`)", "`hedgePercent`, `priceBound`)", 1), "?)", "?, ?)", 1)

// venueMarketOrder is EXTERNAL order o as sent to the venue: its units, its fill policy, and
// its bound as the venue's price (the trader's less the markup the desk adds to the venue's
// price: venueFillPrice).
func venueMarketOrder(in catalog.Instrument, o book.Order) venue.MarketOrder {
	m := venue.MarketOrder{ClientID: ClientID(o.ID), Symbol: o.Symbol, Units: venueUnits(in, o.Side, o.Volume), TimeInForce: venue.FOK}
	if o.TimeInForce == fx.IOC {
		m.TimeInForce = venue.IOC
	}
	if o.PriceBound != nil {
		markup := in.Group.MarkupPoints.Mul(in.Point)
		b := o.PriceBound.Sub(markup)
		if o.Side == fx.Sell {
			b = o.PriceBound.Add(markup)
		}
		m.PriceBound = &b
	}
	return m
}

// partFilled is the lots an IOC order filled when the venue filled part of it (nil: the whole
// order, or an order that is not IOC, whose fill is booked as the venue made it).
func partFilled(o *book.Order, lots decimal.Decimal) *decimal.Decimal {
	if o.TimeInForce != fx.IOC || !lots.LessThan(o.Volume) {
		return nil
	}
	return &lots
}

// filledLots is the lots a fill of o opens: the part an IOC filled at the venue, else all of it.
func filledLots(o book.Order) decimal.Decimal {
	if o.FilledVolume != nil {
		return *o.FilledVolume
	}
	return o.Volume
}
