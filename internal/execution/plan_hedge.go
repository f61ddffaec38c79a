package execution

import (
	"maps"
	"slices"
	"time"

	"fxdesk/internal/hedge"
	"fxdesk/internal/venue"
)

// The plan's part for the desk's hedge book (internal/hedge): trades whose client id is a hedge
// order's ("H<id>"). They are the desk's own risk, not a mirror of a client position, so the
// plan never closes one (an unexplained one is reported) and never adopts one for a client
// order; a hedge order whose outcome is unknown is resolved by the lookup by its client id, as a
// client order is, and never re-sent.

// isHedge reports whether a venue client id is a hedge order's.
func isHedge(clientID string) bool {
	_, ok := hedge.OrderOfClientID(clientID)
	return ok
}

// hedgeTrade adopts an open tagged hedge trade no open hedge position explains for the hedge
// order that sent it, or reports it.
func (p *planner) hedgeTrade(t venue.Trade) {
	o, ok := p.d.HedgeOrders[t.ClientID]
	switch {
	case ok && o.PositionID != 0 && o.LastVenueTx > p.v.AsOf:
		// The desk booked its close after the venue was read: the listing is the past.
	case !ok || o.PositionID != 0:
		units := t.CurrentUnits
		p.add(Action{Kind: ReportHedge, OrderID: o.OrderID, TradeID: t.ID, Symbol: t.Symbol, Units: &units,
			Reason: "a hedge-book trade the desk's hedge book does not explain; the reconciler never closes it"})
	case p.adoptedOrders[t.ClientID] || p.adoptedTrades[t.ID]:
		// A second trade for one hedge order: reported once the first is adopted.
	default:
		p.adoptHedge(o, t)
	}
}

// adoptHedge books open trade t into the hedge book for hedge order o.
func (p *planner) adoptHedge(o HedgeOrder, t venue.Trade) {
	p.adoptedOrders[o.ClientID], p.adoptedTrades[t.ID] = true, true
	units := t.CurrentUnits
	p.add(Action{Kind: AdoptHedge, OrderID: o.OrderID, TradeID: t.ID, Symbol: t.Symbol, Units: &units, Price: t.Price,
		TransactionID: openTransaction(t), OpenedAt: t.OpenTime, VenueOrderID: p.venueOrderID(o.ClientID),
		Reason: "the venue opened the trade for the hedge order; adopted into the hedge book, not reopened"})
}

// sendingHedgeOrders resolves every SENDING hedge order no open trade listed by the venue
// carries, from the lookups by its client id; a miss never leads to a send.
func (p *planner) sendingHedgeOrders(now time.Time, cfg Config) {
	carried := make(map[string]bool, len(p.v.OpenTrades))
	for _, t := range p.v.OpenTrades {
		if t.Tag == venue.Tag {
			carried[t.ClientID] = true
		}
	}
	for _, clientID := range slices.Sorted(maps.Keys(p.d.HedgeOrders)) {
		o := p.d.HedgeOrders[clientID]
		if o.Status != hedge.StatusSending || carried[clientID] || p.adoptedOrders[clientID] {
			continue
		}
		lookup, ok := p.v.ByClientID[clientID]
		switch {
		case !ok:
			// Not looked up this cycle: nothing is known about it.
		case lookup.Trade != nil:
			p.sendingHedgeWithTrade(o, *lookup.Trade)
		case lookup.Order != nil:
			if lookup.Order.State == venue.OrderCancelled {
				p.add(Action{Kind: MarkHedgeRejected, OrderID: o.OrderID, Symbol: o.Symbol, Reason: cancelledBecause(*lookup.Order)})
			}
		case now.Sub(o.SentAt) >= cfg.NotSentAfter:
			p.add(Action{Kind: MarkHedgeNotSent, OrderID: o.OrderID, Symbol: o.Symbol,
				Reason: "the venue has no trace of the hedge order past the threshold; it is not re-sent"})
		}
	}
}

// sendingHedgeWithTrade resolves a SENDING hedge order whose trade the lookup found.
func (p *planner) sendingHedgeWithTrade(o HedgeOrder, t venue.Trade) {
	if t.Tag != venue.Tag || t.ClientID != o.ClientID || p.linked[t.ID] || p.adoptedTrades[t.ID] {
		return
	}
	switch t.State {
	case venue.TradeOpen:
		p.adoptHedge(o, t)
	case venue.TradeClosed:
		price, closeTx, ok := closeOf(t)
		if !ok {
			return
		}
		p.adoptedOrders[o.ClientID], p.adoptedTrades[t.ID] = true, true
		units := t.InitialUnits
		a := Action{Kind: AdoptHedgeClosed, OrderID: o.OrderID, TradeID: t.ID, Symbol: t.Symbol, Units: &units, Price: t.Price,
			TransactionID: openTransaction(t), OpenedAt: t.OpenTime, VenueOrderID: p.venueOrderID(o.ClientID),
			ClosePrice: price, CloseTransactionID: closeTx, Reason: "the venue opened and closed the hedge trade while the desk did not know"}
		if t.CloseTime != nil {
			a.ClosedAt = *t.CloseTime
		}
		p.add(a)
	}
}

// hedgePositions closes, at the venue's price, every hedge position whose venue trade the
// venue closed. A trade the venue only reduced is left to the hedge monitor's view (the hedge
// book does not book partial closes).
func (p *planner) hedgePositions() {
	open := make(map[string]venue.Trade, len(p.v.OpenTrades))
	for _, t := range p.v.OpenTrades {
		open[t.ID] = t
	}
	for _, pos := range p.d.HedgePositions {
		if t, ok := open[pos.TradeID]; ok {
			p.hedgeReduced(pos, t)
			continue
		}
		t, ok := p.v.Trades[pos.TradeID]
		if !ok || t.Tag != venue.Tag || t.State != venue.TradeClosed {
			continue
		}
		price, closeTx, ok := closeOf(t)
		if !ok {
			continue
		}
		a := Action{Kind: CloseHedgeSide, OrderID: pos.OrderID, PositionID: pos.PositionID, TradeID: t.ID, Symbol: pos.Symbol,
			Price: price, TransactionID: closeTx, Reason: "the venue closed the hedge trade"}
		if t.CloseTime != nil {
			a.ClosedAt = *t.CloseTime
		}
		p.add(a)
	}
}

// hedgeReduced books the share of an open hedge trade the venue closed itself: a netting venue
// allocates its own close to the desk's trades, hedge trades among them. The desk closes a hedge
// position only whole, so a trade smaller than its position was reduced by the venue.
func (p *planner) hedgeReduced(pos HedgePosition, t venue.Trade) {
	if t.Tag != venue.Tag || t.CurrentUnits.Sign() != pos.Units.Sign() || !t.CurrentUnits.Abs().LessThan(pos.Units.Abs()) {
		return
	}
	if detail, ok := p.v.Trades[t.ID]; ok {
		t = detail
	}
	price, tx, ok := closeOf(t)
	if !ok {
		return
	}
	units := t.CurrentUnits
	p.add(Action{Kind: BookHedgePartial, OrderID: pos.OrderID, PositionID: pos.PositionID, TradeID: t.ID, Symbol: pos.Symbol,
		Units: &units, Price: price, TransactionID: tx, Reason: "the venue closed part of the hedge trade"})
}
