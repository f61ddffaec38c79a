package invariant

import (
	"testing"

	"github.com/shopspring/decimal"
)

// withHedges adds to a venue fixture the hedge book: hedge order 7's open long of 50,000 EURUSD
// (trade H7T), hedge order 8's short the desk closed at 1.10030 (trade H8T).
func withHedges(v *abook) *abook {
	v.s.Hedges = []dbHedge{
		{ID: 70, Order: 7, Symbol: "EURUSD", Units: dec("50000"), TradeID: "H7T", Status: "OPEN", ClientPosition: 12},
		{ID: 80, Order: 8, Symbol: "EURUSD", Units: dec("-30000"), TradeID: "H8T", Status: "CLOSED", ClosePrice: ndec("1.10030")},
	}
	v.s.HedgeOrders = []dbHedgeOrder{{ID: 7, Status: "FILLED", SentAt: at(5)}, {ID: 8, Status: "FILLED", SentAt: at(6)}}
	closed := dec("1.10030")
	v.vs.Trades = append(v.vs.Trades,
		VenueTrade{ID: "H7T", Symbol: "EUR_USD", State: "OPEN", ClientID: "H7", Tag: "fxdesk", InitialUnits: dec("50000"), CurrentUnits: dec("50000")},
		VenueTrade{ID: "H8T", Symbol: "EUR_USD", State: "CLOSED", ClientID: "H8", Tag: "fxdesk", InitialUnits: dec("-30000"), AverageClosePrice: &closed})
	return v
}

func hedgeFixture() *abook { return withHedges(venueFixture()) }

func TestVenueHedgeBookCheckFlagsAHedgeTheVenueAndTheDeskDisagreeOn(t *testing.T) {
	runCases(t, hedgeFixture, func(v *abook) Result { return checkVenueHedgeBook(v.s, v.vs) }, []checkCase[*abook]{
		{"an open hedge trade with no hedge position", func(v *abook) { v.s.Hedges = v.s.Hedges[1:] },
			"hedge trade H7T (client id H7, 50000 units) is open at the venue with 0 open hedge positions"},
		{"units that disagree", func(v *abook) { v.vs.Trades[3].CurrentUnits = dec("40000") },
			"hedge trade H7T (client id H7, 40000 units) is hedge position 70 of order 7 with 50000 units"},
		{"a hedge position whose trade the venue closed", func(v *abook) { v.vs.Trades[3].State = "CLOSED" },
			"hedge trade H7T is CLOSED at the venue, hedge position 70 is OPEN"},
		{"a hedge closed at a price the venue never reported", func(v *abook) { v.s.Hedges[1].ClosePrice = ndec("1.10000") },
			"hedge position 80 closed at 1.1; the venue closed trade H8T"},
		{"a hedge trade the venue closed that the hedge book never held", func(v *abook) { v.s.Hedges[1].TradeID = "other" },
			"hedge trade H8T (client id H8, -30000 units) was closed at the venue, but the hedge book never held it"},
		{"an open hedge position with no trade at the venue", func(v *abook) { v.s.Hedges[0].TradeID = "gone" },
			"hedge position 70 (EURUSD 50000 units) is open, its venue trade gone is not open"},
	})
}

// The A-book checks leave hedge trades alone: the fixture with its hedges holds for them.
func TestTheABookChecksLeaveHedgeTradesToTheHedgeBook(t *testing.T) {
	v := hedgeFixture()
	expect(t, checkVenueTradesLinked(v.s, v.vs), "")
	expect(t, checkVenueClosesBooked(v.s, v.vs), "")
}

func TestNoStaleSendingCheckFlagsAHedgeOrderStillSending(t *testing.T) {
	quiet := at(50)
	runCases(t, hedgeFixture, func(v *abook) Result { return checkNoStaleSending(v.s, quiet) }, []checkCase[*abook]{
		{"a hedge order sent before the desk went quiet", func(v *abook) { v.s.HedgeOrders[0].Status = "SENDING" },
			"hedge order 7 is SENDING, sent 45s before the desk went quiet"},
		{"a hedge order sent after", func(v *abook) { v.s.HedgeOrders[0].Status, v.s.HedgeOrders[0].SentAt = "SENDING", at(51) }, ""},
	})
}

// withFIXHedges adds to the FIX fixture hedge order 7's open long of 50,000 EURUSD and hedge
// order 8's short closed by its own close H8.c1 at 1.10030; the venue's net counts the first.
func fixHedgeFixture() *abook {
	v := fixFixture()
	v.s.Hedges = []dbHedge{
		{ID: 70, Order: 7, Symbol: "EURUSD", Units: dec("50000"), TradeID: "31", Status: "OPEN"},
		{ID: 80, Order: 8, Symbol: "EURUSD", Units: dec("-30000"), TradeID: "32", Status: "CLOSED", ClosePrice: ndec("1.10030")},
	}
	v.vs.Orders = append(v.vs.Orders,
		VenueOrder{ClOrdID: "H7", Symbol: "EURUSD", Side: "BUY", Status: "FILLED", Qty: dec("50000"), CumQty: dec("50000"), AvgPx: dec("1.10020")},
		VenueOrder{ClOrdID: "H8", Symbol: "EURUSD", Side: "SELL", Status: "FILLED", Qty: dec("30000"), CumQty: dec("30000"), AvgPx: dec("1.10000")},
		VenueOrder{ClOrdID: "H8.c1", Symbol: "EURUSD", Side: "BUY", Status: "FILLED", Qty: dec("30000"), CumQty: dec("30000"), AvgPx: dec("1.10030")})
	v.vs.Net["EURUSD"] = v.vs.Net["EURUSD"].Add(dec("50000"))
	return v
}

func TestVenueHedgeFillsCheckFlagsAHedgeFillTheHedgeBookDidNotRecord(t *testing.T) {
	runCases(t, fixHedgeFixture, func(v *abook) Result { return checkVenueHedgeFills(v.s, v.vs) }, []checkCase[*abook]{
		{"a filled hedge order with no hedge position", func(v *abook) { v.s.Hedges = v.s.Hedges[1:] },
			"the venue filled hedge order H7 for 50000 units; the hedge book holds 0 positions of it"},
		{"a hedge close at another price", func(v *abook) { v.s.Hedges[1].ClosePrice = ndec("1.2") },
			"the venue filled hedge close H8.c1 at 1.1003"},
		{"a hedge position the venue never filled", func(v *abook) { v.s.Hedges[0].Order = 9 },
			"hedge position 70 (EURUSD 50000 units, OPEN) is of order 9, which the venue never filled"},
		{"a partial close of a hedge trade the hedge book did not record", func(v *abook) {
			v.vs.Orders = append(v.vs.Orders, VenueOrder{ClOrdID: "H7.c1", Symbol: "EURUSD", Side: "SELL", Status: "FILLED", Qty: dec("20000"), CumQty: dec("20000"), AvgPx: dec("1.10000")})
			v.s.HedgeOrders = append(v.s.HedgeOrders, dbHedgeOrder{ID: 9, Status: "FILLED", SentAt: at(7), Units: dec("-10000"), Reduces: 70})
		}, "the venue filled hedge close H7.c1 at 1.1"},
	})
	// A HEDGE share's reduction: the venue's partial close of H7's trade is the FILLED reduction
	// of its hedge position for those units.
	v := fixHedgeFixture()
	v.vs.Orders = append(v.vs.Orders, VenueOrder{ClOrdID: "H7.c1", Symbol: "EURUSD", Side: "SELL", Status: "FILLED", Qty: dec("20000"), CumQty: dec("20000"), AvgPx: dec("1.10000")})
	v.s.HedgeOrders = append(v.s.HedgeOrders, dbHedgeOrder{ID: 9, Status: "FILLED", SentAt: at(7), Units: dec("-20000"), Reduces: 70})
	expect(t, checkVenueHedgeFills(v.s, v.vs), "")
	v = fixHedgeFixture()
	expect(t, checkVenueFillsBooked(v.s, v.vs), "")
}

// Hedge order 8's short of 30,000: the venue closed 20,000 of it itself, then H8.c1 bought the
// last 10,000 at 1.10030 and its answer was lost; the reconciler closed the position at the
// venue's average over the 30,000, 1.10010, realising (1.10010 − 1.10000) × −30000 = −3.
func venueShareFixture() *abook {
	v := fixHedgeFixture()
	v.s.HedgeOrders = []dbHedgeOrder{{ID: 7, Status: "FILLED", Units: dec("50000")}, {ID: 8, Status: "FILLED", Units: dec("-30000")}}
	v.vs.Orders[len(v.vs.Orders)-1].Qty, v.vs.Orders[len(v.vs.Orders)-1].CumQty = dec("10000"), dec("10000")
	h := &v.s.Hedges[1]
	h.Units, h.OpenPrice, h.ClosePrice, h.CloseReason, h.RealizedPL = dec("-10000"), dec("1.10000"), ndec("1.10010"), "VENUE", ndec("-3")
	return v
}

func TestVenueHedgeFillsTakesTheVenuesAverageAfterAShareItClosedItself(t *testing.T) {
	runCases(t, venueShareFixture, func(v *abook) Result { return checkVenueHedgeFills(v.s, v.vs) }, []checkCase[*abook]{
		{"the reconciler's close at the venue's average", func(*abook) {}, ""},
		{"a realised P&L the average does not give", func(v *abook) { v.s.Hedges[1].RealizedPL = ndec("-2") },
			"the venue filled hedge close H8.c1 at 1.1003"},
		{"the desk's own close at another price", func(v *abook) { v.s.Hedges[1].CloseReason = "DESK" },
			"the venue filled hedge close H8.c1 at 1.1003"},
		{"a close that did not cover what was left", func(v *abook) { v.s.Hedges[1].Units = dec("-15000") },
			"the venue filled hedge close H8.c1 at 1.1003"},
		{"no share closed by the venue", func(v *abook) {
			v.s.Hedges[1].Units = dec("-30000")
			v.vs.Orders[len(v.vs.Orders)-1].CumQty = dec("30000")
		},
			"the venue filled hedge close H8.c1 at 1.1003"},
	})
}

func TestVenueNetMatchesCountsTheHedgeBook(t *testing.T) {
	runCases(t, fixHedgeFixture, func(v *abook) Result { return checkVenueNetMatches(v.s, v.vs) }, []checkCase[*abook]{
		{"the venue's net without the hedge", func(v *abook) { v.vs.Net["EURUSD"] = dec("10000") },
			"EURUSD: the venue's net is 10000 units, the desk's open linked positions add up to 10000 (10 OPEN 0.1 lots), its hedge book to 50000"},
		{"a hedge the desk closed that the venue still holds", func(v *abook) { v.s.Hedges[0].Status = "CLOSED" },
			"EURUSD: the venue's net is 60000 units, the desk's open linked positions add up to 10000"},
	})
}

func hedgeLimitFixture() *Snapshot {
	return &Snapshot{
		Orders: []dbOrder{{ID: 1, Execution: "INTERNAL"}, {ID: 2, Execution: "INTERNAL"}, {ID: 3, Execution: "EXTERNAL"}},
		Positions: []dbPosition{
			{ID: 10, Order: 1, Symbol: "EURUSD", Side: "BUY", Volume: dec("3"), Status: "OPEN"},
			{ID: 11, Order: 2, Symbol: "EURUSD", Side: "SELL", Volume: dec("0.5"), Status: "OPEN"},
			{ID: 12, Order: 3, Symbol: "EURUSD", Side: "BUY", Volume: dec("9"), Status: "OPEN"}, // the venue carries it
			{ID: 13, Order: 1, Symbol: "EURUSD", Side: "BUY", Volume: dec("4"), Status: "CLOSED"},
		},
		Hedges:      []dbHedge{{ID: 1, Symbol: "EURUSD", Units: dec("100000"), Status: "OPEN"}, {ID: 2, Symbol: "EURUSD", Units: dec("50000"), Status: "CLOSED"}},
		HedgeLimits: map[string]decimal.Decimal{"EURUSD": dec("2")},
		Instruments: map[string]dbInstrument{"EURUSD": {Contract: dec("100000")}},
	}
}

func TestHedgeLimitsHoldsInsideTheLimit(t *testing.T) {
	// Traders net long 2.5 lots on the desk: −250000 units, hedged +100000: −150000 inside 200000.
	if r := checkHedgeLimits(hedgeLimitFixture()); len(r.Violations) > 0 {
		t.Fatalf("violations: %v", r.Violations)
	}
}

func TestHedgeLimitsFlagsANetPastItsLimit(t *testing.T) {
	runCases(t, hedgeLimitFixture, checkHedgeLimits, []checkCase[*Snapshot]{
		{"the hedge closed", func(s *Snapshot) { s.Hedges[0].Status = "CLOSED" }, "EURUSD: net -250000 units (B-book -2.5 lots, hedge book 0 units), limit 200000 units"},
		{"a tighter limit", func(s *Snapshot) { s.HedgeLimits["EURUSD"] = dec("1") }, "EURUSD: net -150000 units"},
		{"over-hedged the other way", func(s *Snapshot) { s.Hedges[0].Units = dec("500000") }, "EURUSD: net 250000 units"},
	})
}
