package invariant

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// fixFixture is the FIX lane's evidence: in EURUSD an open linked long and a long the desk
// closed with its own close order at 1.10000 (booked less the 2-point markup); in GBPUSD a short
// the venue reduced itself by half at 1.20000 (booked plus the markup) with an order of its own
// whose ClOrdID is a number equal to a desk order id (101: only the venue's word, Own, tells it
// from the desk's open 101); a rejected order; an INTERNAL position the venue never sees.
func fixFixture() *abook {
	return &abook{
		s: &Snapshot{
			Taken: at(100),
			Orders: []dbOrder{
				{ID: 100, Account: 1, Nonce: nstr("t3-order-1"), Status: "FILLED", Execution: "EXTERNAL", SentAt: ntime(at(1))},
				{ID: 101, Account: 1, Nonce: nstr("t3-order-2"), Status: "FILLED", Execution: "EXTERNAL", SentAt: ntime(at(2))},
				{ID: 102, Account: 2, Nonce: nstr("t1-order-1"), Status: "FILLED", Execution: "INTERNAL"},
				{ID: 103, Account: 1, Nonce: nstr("t3-order-3"), Status: "FILLED", Execution: "EXTERNAL", SentAt: ntime(at(3))},
				{ID: 104, Account: 1, Nonce: nstr("t3-order-4"), Status: "REJECTED", Execution: "EXTERNAL", SentAt: ntime(at(4))},
			},
			Positions: []dbPosition{
				{ID: 10, Account: 1, Order: 100, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("0.1"), Volume: dec("0.1"), Status: "OPEN", VenueTradeID: nstr("5")},
				{ID: 11, Account: 1, Order: 101, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("0.2"), Volume: dec("0"), Status: "CLOSED", VenueTradeID: nstr("6")},
				{ID: 12, Account: 2, Order: 102, Symbol: "EURUSD", Side: "SELL", OpenVolume: dec("1"), Volume: dec("1"), Status: "OPEN"},
				{ID: 13, Account: 1, Order: 103, Symbol: "GBPUSD", Side: "SELL", OpenVolume: dec("0.1"), Volume: dec("0.05"), Status: "OPEN", VenueTradeID: nstr("8")},
			},
			Deals: []dbDeal{
				{ID: 20, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:0.2", Volume: ndec("0.2"), Price: ndec("1.09998"), Comment: "close"},
				{ID: 21, Account: 1, Type: "PROFIT", Position: nid(13), Key: "close:13:0.05", Volume: ndec("0.05"), Price: ndec("1.20002"), Comment: "venue close"},
			},
			Instruments: map[string]dbInstrument{
				"EURUSD": {Contract: dec("100000"), Point: dec("0.00001"), Markup: dec("2"), Quote: "USD"},
				"GBPUSD": {Contract: dec("100000"), Point: dec("0.00001"), Markup: dec("2"), Quote: "USD"},
			},
		},
		vs: &VenueState{
			Lane:          LaneFIX,
			OrderRequests: map[string]int{"100": 1, "101": 1, "101.c1": 1, "103": 1, "104": 1},
			Orders: []VenueOrder{
				{ClOrdID: "100", Symbol: "EURUSD", Side: "BUY", Status: "FILLED", Qty: dec("10000"), CumQty: dec("10000"), AvgPx: dec("1.10010")},
				{ClOrdID: "101", Symbol: "EURUSD", Side: "BUY", Status: "FILLED", Qty: dec("20000"), CumQty: dec("20000"), AvgPx: dec("1.10020")},
				{ClOrdID: "101.c1", Symbol: "EURUSD", Side: "SELL", Status: "FILLED", Qty: dec("20000"), CumQty: dec("20000"), AvgPx: dec("1.10000")},
				{ClOrdID: "103", Symbol: "GBPUSD", Side: "SELL", Status: "FILLED", Qty: dec("10000"), CumQty: dec("10000"), AvgPx: dec("1.25000")},
				{ClOrdID: "104", Symbol: "GBPUSD", Side: "BUY", Status: "REJECTED", Qty: dec("10000")},
				{ClOrdID: "101", OrderID: "V-k-9", Own: true, Symbol: "GBPUSD", Side: "BUY", Status: "FILLED", Qty: dec("5000"), CumQty: dec("5000"), AvgPx: dec("1.20000")},
			},
			Net: map[string]decimal.Decimal{"EURUSD": dec("10000"), "GBPUSD": dec("-5000")},
		},
	}
}

func TestVenueNeverResentCheckFlagsAClOrdIDTwoMessagesCarried(t *testing.T) {
	runCases(t, fixFixture, func(v *abook) Result { return checkVenueNeverResent(v.vs) }, []checkCase[*abook]{
		{"a close sent twice", func(v *abook) { v.vs.OrderRequests["101.c1"] = 2 }, "client id 101.c1 (desk order 101.c1): the venue received 2 order requests"},
		// A new holder's send of an inherited reservation is refused as a duplicate: executed once.
		{"a reserved close sent again by a new holder, refused as a duplicate", func(v *abook) {
			v.vs.OrderRequests["101.c1"], v.vs.RefusedAsDuplicate = 2, map[string]int{"101.c1": 1}
		}, ""},
		{"an open sent twice, refused as a duplicate", func(v *abook) {
			v.vs.OrderRequests["101"], v.vs.RefusedAsDuplicate = 2, map[string]int{"101": 1}
		}, "client id 101 (desk order 101): the venue received 2 order requests"},
		{"a close sent three times, one repeat not refused", func(v *abook) {
			v.vs.OrderRequests["101.c1"], v.vs.RefusedAsDuplicate = 3, map[string]int{"101.c1": 1}
		}, "client id 101.c1 (desk order 101.c1): the venue received 3 order requests"},
	})
}

func TestVenueNetMatchesCheckFlagsASymbolWhereTheVenueHoldsOtherUnitsThanTheDesk(t *testing.T) {
	runCases(t, fixFixture, func(v *abook) Result { return checkVenueNetMatches(v.s, v.vs) }, []checkCase[*abook]{
		{"the venue holds more than the desk", func(v *abook) { v.vs.Net["EURUSD"] = dec("15000") },
			"EURUSD: the venue's net is 15000 units, the desk's open linked positions add up to 10000 (10 OPEN 0.1 lots)"},
		{"a venue-side close the desk did not book", func(v *abook) { v.s.Positions[3].Volume = dec("0.1") },
			"GBPUSD: the venue's net is -5000 units, the desk's open linked positions add up to -10000"},
		{"the venue is flat where the desk holds", func(v *abook) { delete(v.vs.Net, "EURUSD") },
			"EURUSD: the venue's net is 0 units, the desk's open linked positions add up to 10000"},
		{"the venue holds where the desk is flat", func(v *abook) { v.vs.Net["USDJPY"] = dec("1000") },
			"USDJPY: the venue's net is 1000 units, the desk's open linked positions add up to 0 (none)"},
		// "desk and venue units equal per symbol" is this check (docs/soak.md): units compared
		// exactly, never as lots.
		{"an odd-unit fill the desk rounded to lots", func(v *abook) {
			v.vs.Net["EURUSD"] = dec("12345")
			v.s.Positions[0].Volume = dec("0.1235")
		}, "EURUSD: the venue's net is 12345 units, the desk's open linked positions add up to 12350"},
		{"an open EXTERNAL position with no trade linked", func(v *abook) { v.s.Positions[0].VenueTradeID.Valid = false },
			"position 10 (EURUSD BUY 0.1 lots, order 100 EXTERNAL) is open with no venue trade linked"},
	})
}

func TestVenueFillsBookedCheckFlagsAFillTheDeskDidNotBookAtTheVenuesPrice(t *testing.T) {
	runCases(t, fixFixture, func(v *abook) Result { return checkVenueFillsBooked(v.s, v.vs) }, []checkCase[*abook]{
		{"an open the venue filled with no desk position", func(v *abook) {
			v.vs.Orders = append(v.vs.Orders, VenueOrder{ClOrdID: "106", Symbol: "EURUSD", Side: "SELL", Status: "FILLED", Qty: dec("1000"), CumQty: dec("1000"), AvgPx: dec("1.1")})
		}, "the venue filled desk order 106 (EURUSD SELL 1000 units at 1.1), but no desk position of that order exists"},
		{"a filled open whose position is unlinked", func(v *abook) { v.s.Positions[1].VenueTradeID.Valid = false },
			"the venue filled desk order 101 (BUY 20000 units), but its position 11 (CLOSED) is not linked to a venue trade"},
		{"units that disagree", func(v *abook) { v.s.Positions[1].OpenVolume = dec("0.3") },
			"the venue filled desk order 101 for 20000 units, its position 11 opened 0.3 lots"},
		{"a linked position the venue never filled", func(v *abook) { v.vs.Orders = v.vs.Orders[1:] },
			"position 10 (EURUSD BUY 0.1 lots, OPEN) is linked to venue trade 5, but the venue filled no order 100"},
		{"a linked position whose order the venue rejected", func(v *abook) { v.vs.Orders[0].Status = "REJECTED" },
			"position 10 (EURUSD BUY 0.1 lots, OPEN) is linked to venue trade 5, but the venue filled no order 100"},
		{"a close booked at a price the venue never filled", func(v *abook) { v.s.Deals[0].Price = ndec("1.09990") },
			"position 11 (EURUSD BUY) close deal 20 (0.2 lots, close) at 1.0999: no fill of the venue closes it at that price less the markup -0.00002 (its closes 101.c1 20000@1.1, venue-side SELL none)"},
		{"a close booked without the markup", func(v *abook) { v.s.Deals[0].Price = ndec("1.10000") }, "close deal 20"},
		{"a venue-side close booked at a venue-side fill of the same side", func(v *abook) { v.vs.Orders[5].Side = "SELL" }, "position 13 (GBPUSD SELL) close deal 21"},
		{"a close the venue filled that the desk never booked", func(v *abook) { v.s.Deals = v.s.Deals[1:] },
			"the venue filled close 101.c1 (SELL 20000 units at 1.1), but position 11 (CLOSED, 0 lots left) has no close deal at that price plus the markup -0.00002"},
		{"a close deal with no price", func(v *abook) { v.s.Deals[0].Price = decimal.NullDecimal{} }, "position 11 close deal 20 has no price"},
		{"the venue's own order read as a desk order by its numeric ClOrdID", func(v *abook) { v.vs.Orders[5].Own = false },
			"the venue filled desk order 101 for 5000 units, its position 11 opened 0.2 lots"},
		// A fill-or-kill order the venue could fill only in odd units is cancelled whole: the
		// desk books nothing of it.
		{"a FOK order the venue cancelled, booked in part", func(v *abook) {
			v.vs.Orders = append(v.vs.Orders, VenueOrder{ClOrdID: "105", Symbol: "EURUSD", Side: "BUY", Status: "CANCELED", Qty: dec("20000")})
			v.s.Positions = append(v.s.Positions, dbPosition{ID: 15, Account: 1, Order: 105, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("0.12345"), Volume: dec("0.12345"), Status: "OPEN", VenueTradeID: nstr("9")})
		}, "the venue did not fill desk order 105 (CANCELED, 0 of 20000 units executed), but its position 15 (BUY 0.12345 lots, OPEN) is booked"},
	})
}

func TestVenueEndChecksPickTheLanesInvariants(t *testing.T) {
	f := fixFixture()
	var names []string
	for _, r := range CheckVenueEnd(f.s, f.vs, at(50), nil) {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "venueNetMatches,venueFillsBooked,venueHedgeFills,venueExecutionsBooked,venueWatched,noStaleSending,hedgeLimits" {
		t.Fatalf("FIX lane end checks %v", names)
	}
	f.vs.Lane = LaneREST
	if r := CheckVenueEnd(f.s, f.vs, at(50), nil); r[0].Name != "venueTradesLinked" {
		t.Fatalf("REST lane end checks start with %s", r[0].Name)
	}
}

// A venue-side close and the desk's own close of one trade both took it to zero, the second
// past it; the reconciler closed the excess with a close on the position's own side, which no
// desk position books.
func TestVenueFillsBookedCheckLeavesTheRepairOfAFlippedTradeUnbooked(t *testing.T) {
	v := fixFixture()
	v.vs.Orders = append(v.vs.Orders, VenueOrder{ClOrdID: "101.c2", Symbol: "EURUSD", Side: "BUY", Status: "FILLED", Qty: dec("20000"), CumQty: dec("20000"), AvgPx: dec("1.10005")})
	if r := checkVenueFillsBooked(v.s, v.vs); len(r.Violations) > 0 {
		t.Fatalf("violations: %v", r.Violations)
	}
}

// fixSharesFixture is fixFixture with both closes filled in several executions and booked by the
// reconciler one share per execution, each at its execution's price (docs/fix.md, «Shares
// booked over two runs», «Hedging positions over a netting venue»): the desk's close 101.c1 in
// three executions (6,666 + 6,667 + 6,667 units, booked 0.0666 + 0.0667 + 0.0667 lots) whose
// answer was lost, and the venue's own close in GBPUSD in two. Soak seed 208021063337241 flagged
// about 220 closes booked so, as if only the order's average price were a fill's.
func fixSharesFixture() *abook {
	f := fixFixture()
	f.vs.Orders[2].AvgPx = dec("1.0999966667")
	f.vs.Orders[2].Executions = []VenueExecution{
		{ExecID: "E-1", Qty: dec("6666"), Px: dec("1.09991")},
		{ExecID: "E-2", Qty: dec("6667"), Px: dec("1.10004")},
		{ExecID: "E-3", Qty: dec("6667"), Px: dec("1.10004")},
	}
	f.vs.Orders[5].Executions = []VenueExecution{
		{ExecID: "E-4", Qty: dec("2500"), Px: dec("1.19990")},
		{ExecID: "E-5", Qty: dec("2500"), Px: dec("1.20010")},
	}
	f.s.Deals = []dbDeal{
		{ID: 20, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:0.2", Volume: ndec("0.0666"), Price: ndec("1.09989"), Comment: "close venue"},
		{ID: 21, Account: 1, Type: "PROFIT", Position: nid(13), Key: "close:13:0.1", Volume: ndec("0.025"), Price: ndec("1.19992"), Comment: "close venue"},
		{ID: 22, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:0.1334", Volume: ndec("0.0667"), Price: ndec("1.10002"), Comment: "close venue"},
		{ID: 23, Account: 1, Type: "PROFIT", Position: nid(13), Key: "close:13:0.075", Volume: ndec("0.025"), Price: ndec("1.20012"), Comment: "close venue"},
		{ID: 24, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:0.0667", Volume: ndec("0.0667"), Price: ndec("1.10002"), Comment: "close venue"},
	}
	return f
}

func TestVenueFillsBookedCheckTakesACloseBookedOneShareAnExecution(t *testing.T) {
	runCases(t, fixSharesFixture, func(v *abook) Result { return checkVenueFillsBooked(v.s, v.vs) }, []checkCase[*abook]{
		{"a share at a price no execution filled", func(v *abook) { v.s.Deals[2].Price = ndec("1.09995") },
			"position 11 (EURUSD BUY) close deal 22 (0.0667 lots, close venue) at 1.09995: no fill of the venue closes it at that price less the markup -0.00002 (its closes 101.c1 20000@1.0999966667 in 6666@1.09991 + 6667@1.10004 + 6667@1.10004"},
		{"a venue-side share at a price none of its executions filled", func(v *abook) { v.s.Deals[3].Price = ndec("1.20005") },
			"position 13 (GBPUSD SELL) close deal 23"},
		// Two executions at one price need two shares at it: one share is a close booked in part.
		{"one execution's share missing", func(v *abook) { v.s.Deals = v.s.Deals[:4] },
			"the venue filled close 101.c1 (SELL 20000 units at 1.0999966667), but position 11 (CLOSED, 0 lots left) has no close deal at that price plus the markup -0.00002"},
		{"the shares booked without the markup", func(v *abook) {
			v.s.Deals[0].Price, v.s.Deals[2].Price, v.s.Deals[4].Price = ndec("1.09991"), ndec("1.10004"), ndec("1.10004")
		}, "close deal 20"},
		// The send's answer books the whole order once at its average: still booked.
		{"the close booked whole at its average price", func(v *abook) {
			v.s.Deals = []dbDeal{v.s.Deals[1], v.s.Deals[3],
				{ID: 25, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:0.2", Volume: ndec("0.2"), Price: ndec("1.0999766667"), Comment: "close sl"}}
		}, ""},
	})
}
