package trading

import (
	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
)

// The checks a resting order passes against the market, at placement (PlaceOrder,
// placeResting) and again at each modify in place (ModifyOrder): one home, so a modify can never
// leave an order that placement would have refused.

// checkRestingLevels checks a resting order's price against the quote q before any row is
// locked: limits wait for a better price, stops for a worse one, both measured on the price the
// order would fill at (the ask for a buy, the bid for a sell); SL and TP against the order's own
// price, at which its position opens.
func checkRestingLevels(in catalog.Instrument, side fx.Side, typ fx.OrderType, price decimal.Decimal, q book.Quote, sl, tp *decimal.Decimal) error {
	if err := checkRestingPrice(in, OrderRequest{Side: side, Type: typ, Price: &price}, q); err != nil {
		return err
	}
	return checkStops(in, side, price, sl, tp)
}

// checkRestingFits checks, on the locked account a and its open exposures exps, that a resting
// order of volume lots on side may rest under the account group's terms t: the group's trade
// mode and volume limits (checkOpen), no margin call in force, and — as MT5-class servers do at
// placement — that filled now at the quote q, commission included, it would leave free margin ≥ 0
// (fillCheck). See placeResting for why other pending orders are not added up.
func checkRestingFits(m *book.Market, cat *catalog.Catalog, t catalog.Terms, a book.Account, exps []book.Exposure, side fx.Side, volume decimal.Decimal, q book.Quote) error {
	if err := checkOpen(t, volume); err != nil {
		return err
	}
	in, g := t.Instrument, cat.AccountGroup(a.Group)
	before, ok := m.Metrics(a, g, a.Balance, exps)
	if !ok {
		return book.ErrPricing()
	}
	if before.MarginLevel != nil && before.MarginLevel.LessThan(g.MarginCallLevel) {
		return fx.Errorf(fx.ECONFLICT, "New orders are refused while the margin level (%s%%) is below the margin-call level (%s%%).",
			before.MarginLevel.StringFixed(2), g.MarginCallLevel.StringFixed(2))
	}
	_, _, err := fillCheck(m, cat, in, a, exps, side, volume, book.FillPrice(in, q, side))
	return err
}
