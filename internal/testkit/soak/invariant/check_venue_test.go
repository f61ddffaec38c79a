package invariant

import (
	"testing"

	"github.com/shopspring/decimal"
)

// abook is the fixture of the A-book checks: the venue's state beside the desk's snapshot.
type abook struct {
	s  *Snapshot
	vs *VenueState
}

// venueFixture is one EXTERNAL order whose trade is open and linked, and one whose trade the
// venue closed at 1.10000 and the desk booked less the group's 2-point markup.
func venueFixture() *abook {
	closedAt := dec("1.10000")
	return &abook{
		s: &Snapshot{
			Taken: at(100),
			Orders: []dbOrder{
				{ID: 100, Account: 1, Nonce: nstr("t3-order-1"), Status: "FILLED", Execution: "EXTERNAL", SentAt: ntime(at(1))},
				{ID: 101, Account: 1, Nonce: nstr("t3-order-2"), Status: "FILLED", Execution: "EXTERNAL", SentAt: ntime(at(2))},
				{ID: 102, Account: 2, Nonce: nstr("t1-order-1"), Status: "FILLED", Execution: "INTERNAL"},
			},
			Positions: []dbPosition{
				{ID: 10, Account: 1, Order: 100, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("0.1"), Volume: dec("0.1"), Status: "OPEN", VenueTradeID: nstr("T1")},
				{ID: 11, Account: 1, Order: 101, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("0.2"), Volume: dec("0"), Status: "CLOSED", VenueTradeID: nstr("T2")},
				{ID: 12, Account: 2, Order: 102, Symbol: "EURUSD", Side: "SELL", OpenVolume: dec("1"), Volume: dec("1"), Status: "OPEN"},
			},
			Deals: []dbDeal{
				{ID: 20, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:0.2", Volume: ndec("0.2"), Price: ndec("1.09998"), Comment: "venue close"},
			},
			Instruments: map[string]dbInstrument{
				"EURUSD": {Contract: dec("100000"), Point: dec("0.00001"), Markup: dec("2"), Quote: "USD"},
			},
		},
		vs: &VenueState{
			OrderRequests: map[string]int{"100": 1, "101": 1},
			Trades: []VenueTrade{
				{ID: "T1", Symbol: "EUR_USD", State: "OPEN", ClientID: "100", Tag: "fxdesk", InitialUnits: dec("10000"), CurrentUnits: dec("10000")},
				{ID: "T2", Symbol: "EUR_USD", State: "CLOSED", ClientID: "101", Tag: "fxdesk", InitialUnits: dec("20000"), AverageClosePrice: &closedAt},
				{ID: "T9", Symbol: "EUR_USD", State: "OPEN", ClientID: "x", Tag: "someone-else", CurrentUnits: dec("5")},
			},
			CloseFills: map[string][]decimal.Decimal{"T2": {dec("1.10000")}},
		},
	}
}

func TestVenueNeverResentCheckFlagsAClientIDTheVenueReceivedTwice(t *testing.T) {
	runCases(t, venueFixture, func(v *abook) Result { return checkVenueNeverResent(v.vs) }, []checkCase[*abook]{
		{"an order sent twice", func(v *abook) { v.vs.OrderRequests["101"] = 2 }, "client id 101 (desk order 101): the venue received 2 order requests"},
	})
}

func TestVenueTradesLinkedCheckFlagsAnOpenTradeOrPositionWithoutItsCounterpart(t *testing.T) {
	runCases(t, venueFixture, func(v *abook) Result { return checkVenueTradesLinked(v.s, v.vs) }, []checkCase[*abook]{
		{"an open EXTERNAL position with no trade linked", func(v *abook) { v.s.Positions[0].VenueTradeID.Valid = false },
			"position 10 (EURUSD BUY 0.1 lots, order 100 EXTERNAL) is open with no venue trade linked"},
		{"an open tagged trade with no open position", func(v *abook) { v.s.Positions[0].Status = "CLOSED" },
			"venue trade T1 (client id 100, EUR_USD 10000 units) is open at the venue, but no open desk position is linked to it (desk order 100: EXTERNAL FILLED"},
		{"two open positions on one trade", func(v *abook) { v.s.Positions[2].VenueTradeID = nstr("T1") },
			"venue trade T1 is linked to 2 open desk positions"},
		{"a trade linked to another order's position", func(v *abook) { v.vs.Trades[0].ClientID = "101" },
			"venue trade T1 (client id 101) is linked to position 10 of order 100"},
		{"a position linked to a trade the venue never had", func(v *abook) { v.s.Positions[0].VenueTradeID = nstr("T7") },
			"position 10 (EURUSD BUY 0.1 lots) is linked to venue trade T7, which the venue never had"},
		{"an open position whose trade is closed", func(v *abook) { v.s.Positions[1].Status, v.s.Positions[1].Volume = "OPEN", dec("0.2") },
			"position 11 (EURUSD BUY 0.2 lots) is open, but its venue trade T2 is CLOSED (average close 1.1)"},
		{"units that disagree", func(v *abook) { v.vs.Trades[0].CurrentUnits = dec("-5000") },
			"position 10 (EURUSD BUY 0.1 lots = 10000 units) is linked to venue trade T1 with -5000 units open"},
		{"a short whose units are negative", func(v *abook) { v.vs.Trades[0].CurrentUnits = dec("-10000") }, ""},
	})
}

func TestVenueClosesBookedCheckFlagsAVenueCloseTheDeskDidNotBookAtTheVenuesPrice(t *testing.T) {
	runCases(t, venueFixture, func(v *abook) Result { return checkVenueClosesBooked(v.s, v.vs) }, []checkCase[*abook]{
		{"a trade closed at the venue with no desk position", func(v *abook) { v.s.Positions[1].VenueTradeID.Valid = false },
			"venue trade T2 (client id 101, EUR_USD 20000 units, closed at 1.1) was closed at the venue, but no desk position was ever linked to it"},
		{"the desk position is still open", func(v *abook) { v.s.Positions[1].Status = "OPEN" },
			"venue trade T2 is CLOSED at the venue (average close 1.1), but desk position 11 (EURUSD BUY) is OPEN"},
		{"a close booked at a price the venue never reported", func(v *abook) { v.s.Deals[0].Price = ndec("1.09990") },
			"position 11 (EURUSD BUY) close deal 20 (0.2 lots, venue close) at 1.0999: the venue closed trade T2 at fills 1.1 (average 1.1), markup -0.00002"},
		{"a close booked without the markup", func(v *abook) { v.s.Deals[0].Price = ndec("1.10000") }, "close deal 20"},
		{"a close deal with no price", func(v *abook) { v.s.Deals[0].Price = decimal.NullDecimal{} }, "position 11 close deal 20 has no price"},
		{"a close at one of the trade's partial fills", func(v *abook) {
			v.vs.CloseFills["T2"] = []decimal.Decimal{dec("1.09950"), dec("1.10100")}
			v.s.Deals[0].Price = ndec("1.09948")
		}, ""},
	})
}

func TestNoStaleSendingCheckFlagsAnOrderStillSendingAfterTheSettle(t *testing.T) {
	quiet := at(50)
	check := func(v *abook) Result { return checkNoStaleSending(v.s, quiet) }
	runCases(t, venueFixture, check, []checkCase[*abook]{
		{"an order sent before the desk went quiet is still SENDING", func(v *abook) { v.s.Orders[0].Status = "SENDING" },
			"order 100 (account 1, nonce t3-order-1) is SENDING, sent 49s before the desk went quiet at 12:00:50.000"},
		{"an order sent after the desk went quiet is SENDING", func(v *abook) {
			v.s.Orders[0].Status, v.s.Orders[0].SentAt = "SENDING", ntime(at(51))
		}, ""},
		{"an order resolved NOT_SENT", func(v *abook) { v.s.Orders[0].Status = "NOT_SENT" }, ""},
	})
}
