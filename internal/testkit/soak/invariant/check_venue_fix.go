package invariant

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// The A-book invariants of the FIX lane. A FIX venue nets: it holds one position per symbol and
// knows orders, not the desk's trades, so the venue can be held against the desk per symbol and
// per order, never per trade (which trade a venue-side close reduced is the desk's own journal's
// choice, fx_fix_allocation; checking it against that journal would check the desk against
// itself). venueNeverResent holds on FIX as on REST: OrderRequests counts the NewOrderSingle
// messages that carried each ClOrdID (a library resend keeps its message's number).

// fixCloseMark separates a close's trade from its suffix: <opening order id>.c<n>.
const fixCloseMark = ".c"

// fixOrderOf is the desk order a venue order belongs to: its own id for an open, the opening
// order's before fixCloseMark for a close; ok is false for the venue's own orders, told by the
// venue's word (Own), never by their ClOrdID — a liquidity provider numbers its own as it likes,
// a number equal to a desk order id among them.
func fixOrderOf(o VenueOrder) (order int64, isClose, ok bool) {
	if o.Own {
		return 0, false, false
	}
	head, _, isClose := strings.Cut(o.ClOrdID, fixCloseMark)
	id, err := strconv.ParseInt(head, 10, 64)
	if err != nil {
		return 0, false, false
	}
	return id, isClose, true
}

// signedUnits is a desk position's volume in units, positive long.
func signedUnits(s *Snapshot, p dbPosition) decimal.Decimal {
	u := p.Volume.Mul(s.Instruments[p.Symbol].Contract)
	if p.Side == "SELL" {
		return u.Neg()
	}
	return u
}

// venueNetMatches: in every symbol, the venue's net equals the signed units of the desk's OPEN
// linked positions (what the desk holds is hedged, no more and no less, venue-side closes
// included), and no OPEN position of an EXTERNAL order is unlinked.
func checkVenueNetMatches(s *Snapshot, vs *VenueState) Result {
	r := Result{Name: "venueNetMatches"}
	orders := map[int64]dbOrder{}
	for _, o := range s.Orders {
		orders[o.ID] = o
	}
	desk := map[string]decimal.Decimal{}
	bySymbol := map[string][]dbPosition{}
	linked := 0
	for _, p := range s.Positions {
		if p.Status != "OPEN" {
			continue
		}
		if !p.VenueTradeID.Valid {
			if orders[p.Order].Execution == "EXTERNAL" {
				r.Add("", "position %d (%s %s %s lots, order %d EXTERNAL) is open with no venue trade linked", p.ID, p.Symbol, p.Side, p.Volume, p.Order)
			}
			continue
		}
		linked++
		desk[p.Symbol] = desk[p.Symbol].Add(signedUnits(s, p))
		bySymbol[p.Symbol] = append(bySymbol[p.Symbol], p)
	}
	// The venue nets the hedge book in with the A-book.
	hedges := hedgeNet(s)
	for sym, u := range hedges {
		desk[sym] = desk[sym].Add(u)
	}
	symbols := map[string]bool{}
	for sym := range desk {
		symbols[sym] = true
	}
	for sym := range vs.Net {
		symbols[sym] = true
	}
	names := make([]string, 0, len(symbols))
	for sym := range symbols {
		names = append(names, sym)
	}
	sort.Strings(names)
	var nets []string
	for _, sym := range names {
		nets = append(nets, sym+" "+vs.Net[sym].String())
		if !vs.Net[sym].Equal(desk[sym]) {
			ps := bySymbol[sym]
			more := ""
			if len(ps) > 8 {
				ps, more = ps[:8], fmt.Sprintf(" and %d more", len(bySymbol[sym])-8)
			}
			hedge := ""
			if !hedges[sym].IsZero() {
				hedge = fmt.Sprintf(", its hedge book to %s", hedges[sym])
			}
			r.Add("net "+sym, "%s: the venue's net is %s units, the desk's open linked positions add up to %s (%s%s)%s",
				sym, vs.Net[sym], desk[sym].Sub(hedges[sym]), positionsText(ps), more, hedge)
		}
	}
	if len(nets) == 0 {
		nets = []string{"flat"}
	}
	r.Figures = fmt.Sprintf("venue net %s; %d open linked desk positions", strings.Join(nets, ", "), linked)
	return r
}

// venueFillsBooked: every opening order the venue filled for the desk opened one desk position,
// linked, of the units filled; every linked position's order was filled at the venue; every
// close deal of a linked position is at a price the venue filled a close of its trade at (its
// own close orders, or a venue-side close in its symbol on the other side), plus the group's
// markup; and every close order the venue filled was booked on its trade's position at its price.
//
// A close filled in several executions has two documented bookings (docs/fix.md, «Fills in
// several executions», «Shares booked over two runs»): the send's answer books it once at the
// order's average price, and the reconciler — the answer lost, or the venue's own order — books
// each execution as a share of its own at that execution's price. Either is the close booked; a
// price is a fill's when it is the order's average or one of its executions'.
func checkVenueFillsBooked(s *Snapshot, vs *VenueState) Result {
	r := Result{Name: "venueFillsBooked"}
	byOrder := map[int64][]dbPosition{}
	for _, p := range s.Positions {
		byOrder[p.Order] = append(byOrder[p.Order], p)
	}
	closes := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		if d.Type == "PROFIT" && d.Position.Valid && strings.HasPrefix(d.Key, "close:") {
			closes[d.Position.Int64] = append(closes[d.Position.Int64], d)
		}
	}
	pastTrade := closesPastTheirTrade(s)
	markup := func(p dbPosition) decimal.Decimal {
		in := s.Instruments[p.Symbol]
		m := in.Markup.Mul(in.Point)
		if p.Side == "BUY" {
			m = m.Neg() // a long closes by selling: the venue's price less the markup
		}
		return m
	}
	opens := map[int64]VenueOrder{}        // by desk order: the venue's filled open
	closeFills := map[int64][]VenueOrder{} // by opening desk order: its filled closes
	venueSide := map[string][]VenueOrder{} // by symbol and side: the venue's own filled orders
	opened, closed, deals := 0, 0, 0
	for _, o := range vs.Orders {
		if _, _, hedge := hedgeOrderOf(o.ClOrdID); hedge && !o.Own {
			continue // a hedge order is venueHedgeFills'
		}
		if o.Status != "FILLED" {
			// The desk sends fill-or-kill: an order the venue did not fill whole executed
			// nothing the desk may book (a FOK the venue could fill only in part is cancelled).
			if id, isClose, ok := fixOrderOf(o); ok && !isClose && o.Status != "NEW" && o.Status != "PARTIAL" {
				for _, p := range byOrder[id] {
					if p.VenueTradeID.Valid {
						r.Add("", "the venue did not fill desk order %s (%s, %s of %s units executed), but its position %d (%s %s lots, %s) is booked", o.ClOrdID, o.Status, o.CumQty, o.Qty, p.ID, p.Side, p.OpenVolume, p.Status)
					}
				}
			}
			continue
		}
		id, isClose, ok := fixOrderOf(o)
		switch {
		case !ok:
			venueSide[o.Symbol+" "+o.Side] = append(venueSide[o.Symbol+" "+o.Side], o)
		case isClose:
			closed++
			closeFills[id] = append(closeFills[id], o)
		default:
			opened++
			opens[id] = o
			ps := byOrder[id]
			switch {
			case len(ps) == 0:
				r.Add("", "the venue filled desk order %s (%s %s %s units at %s), but no desk position of that order exists", o.ClOrdID, o.Symbol, o.Side, o.CumQty, o.AvgPx)
			case len(ps) > 1:
				r.Add("", "the venue filled desk order %s once, but %d desk positions are of it: %s", o.ClOrdID, len(ps), positionsText(ps))
			case !ps[0].VenueTradeID.Valid:
				r.Add("", "the venue filled desk order %s (%s %s units), but its position %d (%s) is not linked to a venue trade", o.ClOrdID, o.Side, o.CumQty, ps[0].ID, ps[0].Status)
			case !ps[0].OpenVolume.Mul(s.Instruments[ps[0].Symbol].Contract).Equal(o.CumQty):
				r.Add("", "the venue filled desk order %s for %s units, its position %d opened %s lots", o.ClOrdID, o.CumQty, ps[0].ID, ps[0].OpenVolume)
			}
		}
	}
	for _, p := range s.Positions {
		if !p.VenueTradeID.Valid {
			continue
		}
		if _, ok := opens[p.Order]; !ok {
			r.Add("", "position %d (%s %s %s lots, %s) is linked to venue trade %s, but the venue filled no order %d", p.ID, p.Symbol, p.Side, p.OpenVolume, p.Status, p.VenueTradeID.String, p.Order)
			continue
		}
		other := "SELL"
		if p.Side == "SELL" {
			other = "BUY"
		}
		var prices []decimal.Decimal
		for _, o := range closeFills[p.Order] {
			prices = append(prices, fillPrices(o)...)
		}
		for _, o := range venueSide[p.Symbol+" "+other] {
			prices = append(prices, fillPrices(o)...)
		}
		m := markup(p)
		for _, d := range closes[p.ID] {
			deals++
			if !d.Price.Valid {
				r.Add("", "position %d close deal %d has no price", p.ID, d.ID)
				continue
			}
			if !slicesHasPrice(prices, d.Price.Decimal.Sub(m)) {
				r.Add("", "position %d (%s %s) close deal %d (%s lots, %s) at %s: no fill of the venue closes it at that price less the markup %s (its closes %s, venue-side %s %s)",
					p.ID, p.Symbol, p.Side, d.ID, d.Volume.Decimal, d.Comment, d.Price.Decimal, m, fillsText(closeFills[p.Order]), other, fillsText(venueSide[p.Symbol+" "+other]))
			}
		}
		for _, o := range closeFills[p.Order] {
			if o.Side == p.Side {
				// A close on the position's own side is no close of it: the reconciler's
				// repair of a trade a venue-side close and the desk's own close both
				// took to zero, which the second carried past it.
				continue
			}
			if pastTrade[o.ClOrdID] {
				// Executed wholly past its trade: the venue's own close, journaled first, had
				// closed the trade, and the reconciler booked the position at that close's price
				// (docs/fix.md, «A close that crosses the venue's own»).
				continue
			}
			if !closeBooked(o, closes[p.ID], m) {
				r.Add("", "the venue filled close %s (%s %s units at %s), but position %d (%s, %s lots left) has no close deal at that price plus the markup %s",
					o.ClOrdID, o.Side, o.CumQty, o.AvgPx, p.ID, p.Status, p.Volume, m)
			}
		}
	}
	r.Figures = fmt.Sprintf("%d opens and %d closes the venue filled for the desk, %d desk close deals checked against the venue's prices", opened, closed, deals)
	return r
}

// closesPastTheirTrade are the desk closes whose executions the journal allocated wholly past
// their trade, to a trade of their own (keyed by the close's ClOrdID).
func closesPastTheirTrade(s *Snapshot) map[string]bool {
	orderOf := make(map[int64]string, len(s.FIXExecutions))
	for _, e := range s.FIXExecutions {
		orderOf[e.ID] = e.ClOrdID
	}
	past, within := map[string]bool{}, map[string]bool{}
	for _, a := range s.FIXAllocations {
		o := orderOf[a.Execution]
		if !strings.Contains(o, fixCloseMark) {
			continue
		}
		if a.Trade == o {
			past[o] = true
		} else {
			within[o] = true
		}
	}
	for o := range within {
		delete(past, o)
	}
	return past
}

// fillPrices are the prices a venue order's fill may be booked at: its average, and each of its
// executions' when it filled in more than one.
func fillPrices(o VenueOrder) []decimal.Decimal {
	out := []decimal.Decimal{o.AvgPx}
	if len(o.Executions) > 1 {
		for _, e := range o.Executions {
			out = append(out, e.Px)
		}
	}
	return out
}

// closeBooked says whether close order o is booked among a position's close deals (their prices
// less markup m): one deal at its average price, the send's answer; or, filled in several
// executions, a deal at each execution's price, the reconciler's shares — as many deals at a
// price as executions at it, so that a close booked in part is not taken for booked.
func closeBooked(o VenueOrder, deals []dbDeal, m decimal.Decimal) bool {
	at := map[string]int{}
	for _, d := range deals {
		if d.Price.Valid {
			at[d.Price.Decimal.Sub(m).String()]++
		}
	}
	if at[o.AvgPx.String()] > 0 {
		return true
	}
	if len(o.Executions) < 2 {
		return false
	}
	for _, e := range o.Executions {
		k := e.Px.String()
		if at[k] == 0 {
			return false
		}
		at[k]--
	}
	return true
}

func slicesHasPrice(ps []decimal.Decimal, want decimal.Decimal) bool {
	for _, p := range ps {
		if p.Equal(want) {
			return true
		}
	}
	return false
}

func fillsText(orders []VenueOrder) string {
	if len(orders) == 0 {
		return "none"
	}
	var out []string
	for _, o := range orders {
		f := fmt.Sprintf("%s %s@%s", o.ClOrdID, o.CumQty, o.AvgPx)
		if len(o.Executions) > 1 {
			var es []string
			for _, e := range o.Executions {
				es = append(es, fmt.Sprintf("%s@%s", e.Qty, e.Px))
			}
			f += " in " + strings.Join(es, " + ")
		}
		out = append(out, f)
	}
	return strings.Join(out, " ")
}
