package fixvenue

import (
	"fmt"
	"strconv"

	"github.com/shopspring/decimal"
)

// How the venue names the orders it makes itself (Config.OwnClOrdIDs). A real liquidity
// provider's own orders carry its own ClOrdIDs — often plain numbers, which can equal a desk
// order id — or none: the desk must tell its executions from the venue's by its own journal,
// never by a prefix (docs/fix.md, «Whose execution»).
const (
	OwnPrefixed = "prefixed" // "VENUE-n"
	OwnNumeric  = "numeric"  // "n": digits only
	OwnNone     = "none"     // no ClOrdID (11) on the venue's own reports
)

// ownKey is the book's key of one of the venue's own orders: by its OrderID, so that its
// ClOrdID — a number equal to a desk order's, or none — never shadows a desk order's.
func ownKey(orderID string) string { return "own:" + orderID }

// ownClOrdID names a new own order numbered n as the venue's setting says; clOrdID, when not
// nil, names it instead (the control API: a ClOrdID of the caller's choice, such as a desk order
// id).
func (b *book) ownClOrdID(n string, clOrdID *string) string {
	if clOrdID != nil {
		return *clOrdID
	}
	switch b.s.cfg.OwnClOrdIDs {
	case OwnNumeric:
		return n
	case OwnNone:
		return ""
	}
	return "VENUE-" + n
}

// closeVenueSide has the venue close units (nil: all) of symbol's net position with an order of
// its own, reported to the desk unsolicited, named as Config.OwnClOrdIDs says or clOrdID.
func (b *book) closeVenueSide(symbol string, units *decimal.Decimal, clOrdID *string, hold bool) (Order, error) {
	b.mu.Lock()
	p := b.pos[symbol]
	if p == nil {
		b.mu.Unlock()
		return Order{}, fmt.Errorf("no net position in %s", symbol)
	}
	qty := p.units.Abs()
	if units != nil {
		if !units.IsPositive() || units.GreaterThan(qty) {
			b.mu.Unlock()
			return Order{}, fmt.Errorf("units %s must be positive and at most the net %s", units, qty)
		}
		qty = *units
	}
	side := sideSell
	if p.units.IsNegative() {
		side = sideBuy
	}
	b.seq++
	n := strconv.FormatInt(b.seq, 10)
	o := &Order{ClOrdID: b.ownClOrdID(n, clOrdID), OrderID: "V" + b.epoch + "-" + n, Symbol: symbol, Side: side, Qty: qty, Status: statusNew, Time: b.s.cfg.Now(), Own: true}
	key := ownKey(o.OrderID)
	b.orders[key] = o
	b.mu.Unlock()
	if !b.fill(o) {
		return Order{}, fmt.Errorf("no price for %s", symbol)
	}
	if hold {
		b.mu.Lock()
		b.held[HeldKey(*o)] = func() { b.report(o) }
		snap := *o
		b.mu.Unlock()
		return snap, nil
	}
	b.report(o)
	b.mu.Lock()
	defer b.mu.Unlock()
	return *o, nil
}

// HeldKey is what Release names o's held report by: a desk order's ClOrdID, the venue's own
// order's book key (its ClOrdID may be a desk order's, or none).
func HeldKey(o Order) string {
	if o.Own {
		return ownKey(o.OrderID)
	}
	return o.ClOrdID
}
