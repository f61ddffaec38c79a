package invariant

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// The hedge book's invariants (docs/routing.md, «Hedge book»): the venue holds exactly the hedge
// book the desk records after the final reconcile. Hedge orders carry client id "H<id>" (REST
// clientExtensions, FIX ClOrdID, closes "H<id>.c<n>"); the A-book checks leave them to these.

// dbHedge is one row of fx_hedge_position.
type dbHedge struct {
	ID, Order      int64
	Symbol         string
	Units          decimal.Decimal // signed
	TradeID        string
	Status         string
	ClosePrice     decimal.NullDecimal
	ClientPosition int64 // 0: none (the hedger's)
	OpenPrice      decimal.Decimal
	CloseReason    string // "" while open
	RealizedPL     decimal.NullDecimal
}

// dbHedgeOrder is one row of fx_hedge_order.
type dbHedgeOrder struct {
	ID     int64
	Status string
	SentAt time.Time
	Units  decimal.Decimal // signed: what the venue filled (an IOC part), else as sent — what its position opened with, or a reduction closed
	// Reduces is the hedge position a HEDGE share's reduction closed part of; 0 for an open.
	Reduces int64
}

// hedgeOrderOf is the hedge order a venue client id (or a FIX close's ClOrdID) belongs to.
func hedgeOrderOf(clientID string) (order int64, isClose, ok bool) {
	rest, found := strings.CutPrefix(clientID, "H")
	if !found {
		return 0, false, false
	}
	head, _, isClose := strings.Cut(rest, fixCloseMark)
	id, err := strconv.ParseInt(head, 10, 64)
	if err != nil || id <= 0 {
		return 0, false, false
	}
	return id, isClose, true
}

// hedgeNet is the signed units of the open hedge positions per symbol.
func hedgeNet(s *Snapshot) map[string]decimal.Decimal {
	out := map[string]decimal.Decimal{}
	for _, h := range s.Hedges {
		if h.Status == "OPEN" {
			out[h.Symbol] = out[h.Symbol].Add(h.Units)
		}
	}
	return out
}

// venueHedgeBook (REST): every open hedge trade at the venue is one OPEN hedge position of its
// order, of its units; every OPEN hedge position's trade is open at the venue with its units;
// every hedge trade the venue closed was closed in the hedge book at the venue's price.
func checkVenueHedgeBook(s *Snapshot, vs *VenueState) Result {
	r := Result{Name: "venueHedgeBook"}
	byTrade := map[string][]dbHedge{}
	for _, h := range s.Hedges {
		byTrade[h.TradeID] = append(byTrade[h.TradeID], h)
	}
	open, closed := 0, 0
	for _, t := range vs.Trades {
		order, _, ok := hedgeOrderOf(t.ClientID)
		if t.Tag != "fxdesk" || !ok {
			continue
		}
		hs := byTrade[t.ID]
		switch t.State {
		case "OPEN":
			open++
			var live []dbHedge
			for _, h := range hs {
				if h.Status == "OPEN" {
					live = append(live, h)
				}
			}
			switch {
			case len(live) != 1:
				r.Add("", "hedge trade %s (client id %s, %s units) is open at the venue with %d open hedge positions", t.ID, t.ClientID, t.CurrentUnits, len(live))
			case live[0].Order != order || !live[0].Units.Equal(t.CurrentUnits):
				r.Add("", "hedge trade %s (client id %s, %s units) is hedge position %d of order %d with %s units", t.ID, t.ClientID, t.CurrentUnits, live[0].ID, live[0].Order, live[0].Units)
			}
		case "CLOSED":
			closed++
			prices := vs.CloseFills[t.ID]
			if t.AverageClosePrice != nil {
				prices = append(prices, *t.AverageClosePrice)
			}
			if len(hs) == 0 {
				r.Add("", "hedge trade %s (client id %s, %s units) was closed at the venue, but the hedge book never held it", t.ID, t.ClientID, t.InitialUnits)
			}
			for _, h := range hs {
				switch {
				case h.Status != "CLOSED":
					r.Add("", "hedge trade %s is CLOSED at the venue, hedge position %d is %s", t.ID, h.ID, h.Status)
				case !h.ClosePrice.Valid || !slicesHasPrice(prices, h.ClosePrice.Decimal):
					r.Add("", "hedge position %d closed at %s; the venue closed trade %s at %s (average %s)", h.ID, decText(nullDecPtr(h.ClosePrice)), t.ID, decsText(vs.CloseFills[t.ID]), decText(t.AverageClosePrice))
				}
			}
		}
	}
	trades := tradesByID(vs)
	for _, h := range s.Hedges {
		if h.Status != "OPEN" {
			continue
		}
		if t, ok := trades[h.TradeID]; !ok || t.State != "OPEN" || !t.CurrentUnits.Equal(h.Units) {
			r.Add("", "hedge position %d (%s %s units) is open, its venue trade %s is not open with those units (%+v)", h.ID, h.Symbol, h.Units, h.TradeID, t)
		}
	}
	r.Figures = fmt.Sprintf("%d open and %d closed hedge trades at the venue, %d hedge positions", open, closed, len(s.Hedges))
	return r
}

// closedAtTheVenuesAverage is whether hedge position h, of an order that opened opened units,
// was closed by the reconciler at the venue's average over every share it closed: the venue had
// closed a share of the trade itself (the position shrank to what this close of units covered)
// and the desk never had this close's answer, so the close was booked from the venue's state
// (reason VENUE), its realised P&L from that average over the order's units (hedge.Book.BookClose).
func closedAtTheVenuesAverage(h dbHedge, opened, units decimal.Decimal) bool {
	if h.CloseReason != "VENUE" || !h.RealizedPL.Valid || h.Units.Abs().Equal(opened.Abs()) || !h.Units.Equal(units.Neg()) {
		return false
	}
	pl := h.ClosePrice.Decimal.Sub(h.OpenPrice).Mul(opened)
	return pl.Sub(h.RealizedPL.Decimal).Abs().LessThanOrEqual(decimal.New(1, -4))
}

// venueHedgeFills (FIX): every hedge order the venue filled opened one hedge position of the
// units filled; every hedge position's order was filled at the venue; every filled close of a
// hedge trade closed its hedge position at that fill's price — or, where the venue had closed a
// share of it itself and the reconciler booked the close, at the venue's average over every
// share, consistent with its realised P&L (closedAtTheVenuesAverage) — or was a reduction of it
// the hedge book recorded FILLED for those units (a HEDGE share following a partial client close).
func checkVenueHedgeFills(s *Snapshot, vs *VenueState) Result {
	r := Result{Name: "venueHedgeFills"}
	byOrder := map[int64][]dbHedge{}
	for _, h := range s.Hedges {
		byOrder[h.Order] = append(byOrder[h.Order], h)
	}
	sent := map[int64]decimal.Decimal{}
	reduced := map[int64][]decimal.Decimal{} // hedge position → the units of its FILLED reductions
	for _, o := range s.HedgeOrders {
		sent[o.ID] = o.Units
		if o.Reduces != 0 && o.Status == "FILLED" {
			reduced[o.Reduces] = append(reduced[o.Reduces], o.Units.Abs())
		}
	}
	opens := map[int64]bool{}
	n := 0
	for _, o := range vs.Orders {
		id, isClose, ok := hedgeOrderOf(o.ClOrdID)
		if o.Status != "FILLED" || !ok || o.Own || strings.Count(o.ClOrdID, fixCloseMark) > 1 {
			// The last: the reconciler's close of what a hedge close executed past its trade
			// (venueExecutionsBooked's; docs/fix.md, «A close that crosses the venue's own»).
			continue
		}
		n++
		hs := byOrder[id]
		units := o.CumQty
		if o.Side == "SELL" {
			units = units.Neg()
		}
		switch {
		case isClose:
			closedByIt := len(hs) == 1 && hs[0].Status == "CLOSED" && hs[0].ClosePrice.Valid &&
				(hs[0].ClosePrice.Decimal.Equal(o.AvgPx) || closedAtTheVenuesAverage(hs[0], sent[id], units))
			reducedByIt := len(hs) == 1 && slices.ContainsFunc(reduced[hs[0].ID], o.CumQty.Equal)
			if !closedByIt && !reducedByIt {
				r.Add("", "the venue filled hedge close %s at %s; the hedge book holds %d positions of order %d (%+v)", o.ClOrdID, o.AvgPx, len(hs), id, hs)
			}
		default:
			opens[id] = true
			// The position's units shrink by what the venue closed of it itself (a share of a
			// venue-side close); what it opened with is its order's.
			opened, ok := sent[id]
			if !ok && len(hs) == 1 {
				opened = hs[0].Units
			}
			if len(hs) != 1 || !opened.Equal(units) {
				r.Add("", "the venue filled hedge order %s for %s units; the hedge book holds %d positions of it (%+v)", o.ClOrdID, units, len(hs), hs)
			}
		}
	}
	for _, h := range s.Hedges {
		if !opens[h.Order] {
			r.Add("", "hedge position %d (%s %s units, %s) is of order %d, which the venue never filled", h.ID, h.Symbol, h.Units, h.Status, h.Order)
		}
	}
	r.Figures = fmt.Sprintf("%d hedge fills at the venue, %d hedge positions", n, len(s.Hedges))
	return r
}

func nullDecPtr(d decimal.NullDecimal) *decimal.Decimal {
	if !d.Valid {
		return nil
	}
	return &d.Decimal
}

// bBookLots is the desk's side of its B-book per symbol, in lots: the opposite of its traders'
// open INTERNAL positions (traders net long 2 lots: −2), as the hedger counts it.
func bBookLots(s *Snapshot) map[string]decimal.Decimal {
	exec := make(map[int64]string, len(s.Orders))
	for _, o := range s.Orders {
		exec[o.ID] = o.Execution
	}
	out := maps.Clone(s.Prefilled.BookLots) // a pre-filled history's book, outside the scope
	if out == nil {
		out = map[string]decimal.Decimal{}
	}
	for _, p := range s.Positions {
		if p.Status != "OPEN" || exec[p.Order] != "INTERNAL" {
			continue
		}
		v := p.Volume
		if p.Side == "BUY" {
			v = v.Neg()
		}
		out[p.Symbol] = out[p.Symbol].Add(v)
	}
	return out
}

// HedgeLimitsBroken lists the symbols whose net exposure (the B-book's lots × contract size plus
// the hedge book's open units) is past the hedger's limit, with the figures.
func HedgeLimitsBroken(s *Snapshot) []string {
	book, hedged := bBookLots(s), hedgeNet(s)
	var out []string
	for _, sym := range slices.Sorted(maps.Keys(s.HedgeLimits)) {
		size := s.Instruments[sym].Contract
		net := book[sym].Mul(size).Add(hedged[sym])
		if limit := s.HedgeLimits[sym].Mul(size); net.Abs().GreaterThan(limit) {
			out = append(out, fmt.Sprintf("%s: net %s units (B-book %s lots, hedge book %s units), limit %s units", sym, net, book[sym], hedged[sym], limit))
		}
	}
	return out
}

// checkHedgeLimits (end): with the venue up and the desk quiet, the hedger has brought every
// limited symbol's net exposure back inside its limit.
func checkHedgeLimits(s *Snapshot) Result {
	r := Result{Name: "hedgeLimits"}
	for _, line := range HedgeLimitsBroken(s) {
		r.Add("", "%s", line)
	}
	book, hedged := bBookLots(s), hedgeNet(s)
	var parts []string
	for _, sym := range slices.Sorted(maps.Keys(s.HedgeLimits)) {
		parts = append(parts, fmt.Sprintf("%s B-book %s lots, hedged %s units, limit %s lots", sym, book[sym], hedged[sym], s.HedgeLimits[sym]))
	}
	r.Figures = strings.Join(parts, "; ")
	return r
}
