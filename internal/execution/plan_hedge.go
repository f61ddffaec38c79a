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
// client order is, and never re-sent. A reduction (a partial close the hedge book sent, with no
// client id of its own at the venue) is resolved from its hedge position's trade instead.

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
		if o.Reduces != 0 {
			if o.Status == hedge.StatusSending {
				p.sendingReduction(o, now, cfg)
			}
			continue
		}
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

// sendingReduction resolves a SENDING reduction (a partial close the hedge book sent, which
// carries no client id at the venue) from its hedge position's trade: closed in the hedge book,
// or reduced at the venue to what it leaves or less: FILLED, the position booked down with it;
// still larger past the threshold: NOT_SENT, and the next HEDGE sweep decides again. A trade
// the venue closed is booked by hedgePositions first; the order is resolved the cycle after.
func (p *planner) sendingReduction(o HedgeOrder, now time.Time, cfg Config) {
	i := slices.IndexFunc(p.d.HedgePositions, func(h HedgePosition) bool { return h.PositionID == o.Reduces })
	if i < 0 {
		p.add(Action{Kind: ResolveHedgeReduce, OrderID: o.OrderID, PositionID: o.Reduces, Symbol: o.Symbol,
			Reason: "the hedge position it reduces is closed"})
		return
	}
	pos := p.d.HedgePositions[i]
	j := slices.IndexFunc(p.v.OpenTrades, func(t venue.Trade) bool { return t.ID == pos.TradeID })
	if j < 0 {
		return
	}
	t := p.v.OpenTrades[j]
	if t.CurrentUnits.Sign() == pos.Units.Sign() && t.CurrentUnits.Abs().LessThanOrEqual(o.Leave.Abs()) {
		if detail, ok := p.v.Trades[t.ID]; ok {
			t = detail
		}
		units := t.CurrentUnits
		a := Action{Kind: ResolveHedgeReduce, OrderID: o.OrderID, PositionID: pos.PositionID, TradeID: t.ID, Symbol: o.Symbol, Units: &units,
			Reason: "the venue reduced the hedge trade as the reduction asked"}
		if units.Abs().LessThan(pos.Units.Abs()) {
			price, tx, ok := closeOf(t)
			if !ok {
				return
			}
			a.Price, a.TransactionID = price, tx
		}
		p.add(a)
		return
	}
	if now.Sub(o.SentAt) >= cfg.NotSentAfter {
		p.add(Action{Kind: MarkHedgeNotSent, OrderID: o.OrderID, PositionID: pos.PositionID, Symbol: o.Symbol,
			Reason: "the hedge trade still holds more than the reduction leaves past the threshold; it is not re-sent"})
	}
}

// hedgePositions closes, at the venue's price, every hedge position whose venue trade the
// venue closed, and books the share of one the venue reduced on its own (a reduction of the
// hedge book's own in flight books it, sendingReduction).
func (p *planner) hedgePositions() {
	open := make(map[string]venue.Trade, len(p.v.OpenTrades))
	for _, t := range p.v.OpenTrades {
		open[t.ID] = t
	}
	reducing := map[int64]bool{}
	for _, o := range p.d.HedgeOrders {
		if o.Reduces != 0 && o.Status == hedge.StatusSending {
			reducing[o.Reduces] = true
		}
	}
	for _, pos := range p.d.HedgePositions {
		if t, ok := open[pos.TradeID]; ok {
			if !reducing[pos.PositionID] {
				p.hedgeReduced(pos, t)
			}
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
// allocates its own close to the desk's trades, hedge trades among them. The desk books its own
// reductions with their fill, or resolves them (sendingReduction), so a trade smaller than its
// position with no reduction in flight was reduced by the venue.
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
