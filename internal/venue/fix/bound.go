package fix

import (
	"time"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/field"
	"github.com/quickfixgo/fix44/newordersingle"
	"github.com/quickfixgo/quickfix"
)

// newOrderSingle is o as the FIX 4.4 NewOrderSingle the desk sends: no repeating group (so a
// resend is safe from the library's double-checksum defect).
//
// An order is MARKET (OrdType=1) unless it carries a price bound: then it is a LIMIT (OrdType=2)
// at the bound, which is how FIX says "no worse than this price" (docs/orders.md, «Price bound»).
// Either is immediate: fill or kill by default — the venue fills all of it now or nothing, never
// a part (a part could be units the desk's four-place lots cannot book exactly, and desk and
// venue would disagree for ever) — or, for a trader's IOC order, immediate or cancel: the venue
// fills what it can now and cancels the rest, and the desk books the part (docs/orders.md, «IOC
// and FOK», says which parts a venue may fill).
func newOrderSingle(o order, account string) *quickfix.Message {
	ordType := enum.OrdType_MARKET
	if o.Limit != nil {
		ordType = enum.OrdType_LIMIT
	}
	nos := newordersingle.New(field.NewClOrdID(o.ClOrdID), field.NewSide(enum.Side(o.Side)),
		field.NewTransactTimeWithPrecision(time.Now().UTC(), quickfix.Millis), field.NewOrdType(ordType))
	nos.SetAccount(account)
	nos.SetSymbol(o.Symbol)
	nos.SetOrderQty(o.Qty, max(0, -o.Qty.Exponent()))
	if o.Limit != nil {
		nos.SetPrice(*o.Limit, max(0, -o.Limit.Exponent()))
	}
	tif := enum.TimeInForce_FILL_OR_KILL
	if o.IOC {
		tif = enum.TimeInForce_IMMEDIATE_OR_CANCEL
	}
	nos.SetTimeInForce(tif)
	return nos.ToMessage()
}
