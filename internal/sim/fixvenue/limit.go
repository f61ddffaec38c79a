package fixvenue

import (
	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"
)

// ordLimit is OrdType (40) LIMIT. The venue rests nothing: a LIMIT is immediate (IOC or FOK
// as its TimeInForce says), executed at the venue's price when that is at its limit or better
// and cancelled whole otherwise — how a desk sends a trader's price bound over FIX.
const ordLimit = "2"

// limitOf reads a LIMIT order's Price (44); the text is why it cannot be executed ("" : fine).
func limitOf(msg *quickfix.Message, ordType string) (*decimal.Decimal, string) {
	if ordType != ordLimit {
		return nil, ""
	}
	text, err := msg.Body.GetString(tag.Price)
	if err != nil {
		return nil, "a LIMIT order (OrdType=2) needs Price (44)"
	}
	px, perr := decimal.NewFromString(text)
	if perr != nil || !px.IsPositive() {
		return nil, "Price (44) must be a positive number"
	}
	return &px, ""
}

// withinLimit is true when o may execute now: a MARKET order always, a LIMIT when the price it
// would execute at (a buy at the ask, a sell at the bid) is at its limit or better. Otherwise o
// is cancelled whole, nothing executed (OrdStatus=4), and its report sent. A symbol with no
// price is execute's to reject.
func (b *book) withinLimit(o *Order) bool {
	if o.Limit == nil || b.s.cfg.Prices == nil {
		return true
	}
	bid, ask, ok := b.s.cfg.Prices.Quote(o.Symbol)
	if !ok || !bid.IsPositive() {
		return true
	}
	px, beyond := bid, bid.LessThan(*o.Limit)
	if o.Side == sideBuy {
		px, beyond = ask, ask.GreaterThan(*o.Limit)
	}
	if !beyond {
		return true
	}
	b.mu.Lock()
	o.Status, o.Text, o.Time = statusCanceled, "BOUNDS_VIOLATION: the price "+px.String()+" is beyond the limit "+o.Limit.String(), b.s.cfg.Now()
	o.Reported = true
	snap := *o
	b.mu.Unlock()
	b.s.sendReport(snap, execCanceled)
	return false
}
