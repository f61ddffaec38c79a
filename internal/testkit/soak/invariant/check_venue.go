package invariant

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// The A-book invariants (docs/architecture.md, «A-book execution and the reconciler»), read from
// the venue simulator's control state and the database snapshot. venueNeverResent holds at every
// instant; the others hold once the desk has quiesced and reconciled past
// FXDESK_VENUE_NOT_SENT_AFTER, so they are checked at the end.

// venueNeverResent: the venue received at most one order request per client id. An order whose
// outcome was unknown is resolved by its client id, never sent again. One exception on FIX: a
// reserved close (<trade>.c<n>) a new holder inherited may be sent again under the same ClOrdID
// when the old holder's send has not been reported yet (docs/fix.md, «Reserved closes»); the
// venue refuses each repeat as a duplicate order and executes it once, so a repeat the venue
// refused as a duplicate is allowed for a close, counted in the figures.
func checkVenueNeverResent(vs *VenueState) Result {
	r := Result{Name: "venueNeverResent"}
	total, refused := 0, 0
	ids := make([]string, 0, len(vs.OrderRequests))
	for id, n := range vs.OrderRequests {
		total += n
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := vs.OrderRequests[id]
		if dup := vs.RefusedAsDuplicate[id]; n > 1 && vs.Lane == LaneFIX && strings.Contains(id, fixCloseMark) && n-1 == dup {
			refused += dup
			continue
		}
		if n > 1 {
			r.Add("resent "+id, "client id %s (desk order %s): the venue received %d order requests", id, id, n)
		}
	}
	if vs.Lane == LaneFIX {
		r.Figures = fmt.Sprintf("%d ClOrdIDs, %d NewOrderSingle messages (a resend counted once), %d venue orders, %d repeats of a reserved close refused as duplicates", len(vs.OrderRequests), total, len(vs.Orders), refused)
	} else {
		r.Figures = fmt.Sprintf("%d client ids, %d order requests, %d venue trades", len(vs.OrderRequests), total, len(vs.Trades))
	}
	return r
}

func tradesByID(vs *VenueState) map[string]VenueTrade {
	m := make(map[string]VenueTrade, len(vs.Trades))
	for _, t := range vs.Trades {
		m[t.ID] = t
	}
	return m
}

// venueTradesLinked: every open fxdesk-tagged venue trade is linked to exactly one OPEN desk
// position, the one its client id's order opened; every OPEN linked desk position's trade is
// open at the venue with |currentUnits| = volume × contract size; and every OPEN position an
// EXTERNAL order opened is linked at all (an EXTERNAL fill the desk priced itself is a B-book
// position nobody hedged).
func checkVenueTradesLinked(s *Snapshot, vs *VenueState) Result {
	r := Result{Name: "venueTradesLinked"}
	orders := map[int64]dbOrder{}
	for _, o := range s.Orders {
		orders[o.ID] = o
	}
	byTrade := map[string][]dbPosition{}
	openLinked := 0
	for _, p := range s.Positions {
		if p.VenueTradeID.Valid {
			byTrade[p.VenueTradeID.String] = append(byTrade[p.VenueTradeID.String], p)
			if p.Status == "OPEN" {
				openLinked++
			}
		} else if p.Status == "OPEN" && orders[p.Order].Execution == "EXTERNAL" {
			r.Add("", "position %d (%s %s %s lots, order %d EXTERNAL) is open with no venue trade linked", p.ID, p.Symbol, p.Side, p.Volume, p.Order)
		}
	}
	openTagged := 0
	for _, t := range vs.Trades {
		if _, _, hedge := hedgeOrderOf(t.ClientID); t.State != "OPEN" || t.Tag != "fxdesk" || hedge {
			continue // a hedge trade is venueHedgeBook's
		}
		openTagged++
		var open []dbPosition
		for _, p := range byTrade[t.ID] {
			if p.Status == "OPEN" {
				open = append(open, p)
			}
		}
		o := orders[parseID(t.ClientID)]
		switch {
		case len(open) == 0:
			r.Add("", "venue trade %s (client id %s, %s %s units) is open at the venue, but no open desk position is linked to it (desk order %d: %s; linked positions %s)",
				t.ID, t.ClientID, t.Symbol, t.CurrentUnits, o.ID, orderText(o), positionsText(byTrade[t.ID]))
		case len(open) > 1:
			r.Add("", "venue trade %s is linked to %d open desk positions: %s", t.ID, len(open), positionsText(open))
		case strconv.FormatInt(open[0].Order, 10) != t.ClientID:
			r.Add("", "venue trade %s (client id %s) is linked to position %d of order %d", t.ID, t.ClientID, open[0].ID, open[0].Order)
		}
	}
	trades := tradesByID(vs)
	for _, p := range s.Positions {
		if p.Status != "OPEN" || !p.VenueTradeID.Valid {
			continue
		}
		t, ok := trades[p.VenueTradeID.String]
		in := s.Instruments[p.Symbol]
		want := p.Volume.Mul(in.Contract)
		switch {
		case !ok:
			r.Add("", "position %d (%s %s %s lots) is linked to venue trade %s, which the venue never had", p.ID, p.Symbol, p.Side, p.Volume, p.VenueTradeID.String)
		case t.State != "OPEN":
			r.Add("", "position %d (%s %s %s lots) is open, but its venue trade %s is %s (average close %s)", p.ID, p.Symbol, p.Side, p.Volume, t.ID, t.State, decText(t.AverageClosePrice))
		case !t.CurrentUnits.Abs().Equal(want):
			r.Add("", "position %d (%s %s %s lots = %s units) is linked to venue trade %s with %s units open", p.ID, p.Symbol, p.Side, p.Volume, want, t.ID, t.CurrentUnits)
		}
	}
	r.Figures = fmt.Sprintf("%d open tagged venue trades, %d open linked desk positions", openTagged, openLinked)
	return r
}

// venueClosesBooked: every desk position whose venue trade is CLOSED is CLOSED on the desk, its
// close deals at prices the venue reported (the average close price or one of the trade's close
// fills, plus the group's markup); and every tagged trade the venue closed was booked by the
// desk at all (a closed trade with no desk position is venue P&L the desk's ledger never saw).
func checkVenueClosesBooked(s *Snapshot, vs *VenueState) Result {
	r := Result{Name: "venueClosesBooked"}
	byTrade := map[string][]dbPosition{}
	for _, p := range s.Positions {
		if p.VenueTradeID.Valid {
			byTrade[p.VenueTradeID.String] = append(byTrade[p.VenueTradeID.String], p)
		}
	}
	orders := map[int64]dbOrder{}
	for _, o := range s.Orders {
		orders[o.ID] = o
	}
	closes := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		if d.Type == "PROFIT" && d.Position.Valid && strings.HasPrefix(d.Key, "close:") {
			closes[d.Position.Int64] = append(closes[d.Position.Int64], d)
		}
	}
	closedTrades, deals := 0, 0
	for _, t := range vs.Trades {
		if _, _, hedge := hedgeOrderOf(t.ClientID); t.State != "CLOSED" || t.Tag != "fxdesk" || hedge {
			continue // a hedge trade is venueHedgeBook's
		}
		closedTrades++
		ps := byTrade[t.ID]
		if len(ps) == 0 {
			o := orders[parseID(t.ClientID)]
			r.Add("", "venue trade %s (client id %s, %s %s units, closed at %s) was closed at the venue, but no desk position was ever linked to it (desk order %d: %s)",
				t.ID, t.ClientID, t.Symbol, t.InitialUnits, decText(t.AverageClosePrice), o.ID, orderText(o))
			continue
		}
		var venuePrices []decimal.Decimal
		if t.AverageClosePrice != nil {
			venuePrices = append(venuePrices, *t.AverageClosePrice)
		}
		venuePrices = append(venuePrices, vs.CloseFills[t.ID]...)
		for _, p := range ps {
			if p.Status != "CLOSED" {
				r.Add("", "venue trade %s is CLOSED at the venue (average close %s), but desk position %d (%s %s) is %s with %s lots", t.ID, decText(t.AverageClosePrice), p.ID, p.Symbol, p.Side, p.Status, p.Volume)
				continue
			}
			in := s.Instruments[p.Symbol]
			markup := in.Markup.Mul(in.Point)
			if p.Side == "BUY" {
				markup = markup.Neg() // a long closes by selling: the venue's price less the markup
			}
			for _, d := range closes[p.ID] {
				deals++
				if !d.Price.Valid {
					r.Add("", "position %d close deal %d has no price", p.ID, d.ID)
					continue
				}
				ok := false
				for _, vp := range venuePrices {
					if d.Price.Decimal.Equal(vp.Add(markup)) {
						ok = true
					}
				}
				if !ok {
					r.Add("", "position %d (%s %s) close deal %d (%s lots, %s) at %s: the venue closed trade %s at %s (average %s), markup %s",
						p.ID, p.Symbol, p.Side, d.ID, d.Volume.Decimal, d.Comment, d.Price.Decimal, t.ID, decsText(vs.CloseFills[t.ID]), decText(t.AverageClosePrice), markup)
				}
			}
		}
	}
	r.Figures = fmt.Sprintf("%d tagged trades closed at the venue, %d desk close deals checked against the venue's prices", closedTrades, deals)
	return r
}

// noStaleSending: the soak's settle waited for a reconcile that gathered past NOT_SENT_AFTER after the
// desk went quiet at quiet and planned nothing, so no EXTERNAL order sent before quiet may still
// be SENDING: by then each was past NOT_SENT_AFTER and had to be resolved. quiet is the soak's
// clock and sentAt the database's; they are one host's clock here.
func checkNoStaleSending(s *Snapshot, quiet time.Time) Result {
	r := Result{Name: "noStaleSending"}
	sending, notSent, later := 0, 0, 0
	for _, o := range s.Orders {
		switch o.Status {
		case "NOT_SENT":
			notSent++
		case "SENDING":
			sending++
			switch {
			case !o.SentAt.Valid:
				// No send time to measure (the check before this one did not flag it either).
			case o.SentAt.Time.Before(quiet):
				r.Add("", "order %d (account %d, nonce %s) is SENDING, sent %s before the desk went quiet at %s and the settle's reconciles",
					o.ID, o.Account, o.Nonce.String, quiet.Sub(o.SentAt.Time).Round(time.Millisecond), TimeOfDay(quiet))
			default:
				later++
			}
		}
	}
	hedges := 0
	for _, o := range s.HedgeOrders {
		if o.Status != "SENDING" {
			continue
		}
		hedges++
		if o.SentAt.Before(quiet) {
			r.Add("", "hedge order %d is SENDING, sent %s before the desk went quiet at %s and the settle's reconciles",
				o.ID, quiet.Sub(o.SentAt).Round(time.Millisecond), TimeOfDay(quiet))
		}
	}
	r.Figures = fmt.Sprintf("%d orders SENDING (%d sent after the desk went quiet), %d NOT_SENT; %d hedge orders SENDING", sending, later, notSent, hedges)
	return r
}

// CheckVenueEnd runs the invariants that need a quiesced desk: per trade on REST, per symbol
// and per order on FIX (a netting venue has no trades).
// quiet is when the desk went quiet, as the soak's settle was given it; drops are the moments a
// web process was told the venue no longer held a position's trade (FIX: venueWatched).
func CheckVenueEnd(s *Snapshot, vs *VenueState, quiet time.Time, drops []WatchDrop) []Result {
	if vs.Lane == LaneFIX {
		return []Result{checkVenueNetMatches(s, vs), checkVenueFillsBooked(s, vs), checkVenueHedgeFills(s, vs), checkVenueExecutionsBooked(s, vs),
			checkVenueWatched(s, drops), checkNoStaleSending(s, quiet), checkHedgeLimits(s)}
	}
	return []Result{checkVenueTradesLinked(s, vs), checkVenueClosesBooked(s, vs), checkVenueHedgeBook(s, vs), checkNoStaleSending(s, quiet), checkHedgeLimits(s)}
}

func parseID(s string) int64 {
	id, _ := strconv.ParseInt(s, 10, 64)
	return id
}

func orderText(o dbOrder) string {
	if o.ID == 0 {
		return "not in the database"
	}
	return fmt.Sprintf("%s %s", o.Execution, o.Status)
}

func positionsText(ps []dbPosition) string {
	if len(ps) == 0 {
		return "none"
	}
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d %s %s lots", p.ID, p.Status, p.Volume))
	}
	return strings.Join(out, ", ")
}

func decText(d *decimal.Decimal) string {
	if d == nil {
		return "none"
	}
	return d.String()
}

func decsText(ds []decimal.Decimal) string {
	if len(ds) == 0 {
		return "no close fills"
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return "fills " + strings.Join(out, " ")
}
