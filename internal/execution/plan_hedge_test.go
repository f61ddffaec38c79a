package execution

import (
	"testing"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/hedge"
	"fxdesk/internal/venue"
)

// The plan's cases for the desk's hedge book: trades with client id "H<hedge order id>".

func sendingHedge(orderID int64, units string, sentAt time.Time) HedgeOrder {
	return HedgeOrder{OrderID: orderID, ClientID: hedge.ClientID(orderID), Symbol: "EURUSD", Units: dec(units), Status: hedge.StatusSending, SentAt: sentAt}
}

func hedgePosition(positionID, orderID int64, tradeID, units string) HedgePosition {
	return HedgePosition{PositionID: positionID, OrderID: orderID, Symbol: "EURUSD", Units: dec(units), TradeID: tradeID}
}

func TestHedgeBookTradeIsNeverAnOrphan(t *testing.T) {
	t.Parallel()
	// An open hedge trade that its hedge position explains needs nothing, whatever the client
	// side of the desk holds; one that nothing explains is reported, never closed; one whose
	// hedge position the desk closed after the venue was read is the listing's past.
	t.Run("linked", func(t *testing.T) {
		t.Parallel()
		d, v := newDesk(), newVenue()
		d.HedgePositions = []HedgePosition{hedgePosition(31, 12, "5003", "100000")}
		v.OpenTrades = []venue.Trade{openTagged("5003", "H12", "100000")}
		requireActions(t, Plan(v, d, now, cfg))
	})
	t.Run("unexplained", func(t *testing.T) {
		t.Parallel()
		d, v := newDesk(), newVenue()
		v.OpenTrades = []venue.Trade{openTagged("5004", "H77", "-50000")}
		requireActions(t, Plan(v, d, now, cfg), Action{Kind: ReportHedge, TradeID: "5004", Symbol: "EURUSD", Units: decPtr("-50000"),
			Reason: "a hedge-book trade the desk's hedge book does not explain; the reconciler never closes it"})
	})
	t.Run("closed by the desk after the snapshot", func(t *testing.T) {
		t.Parallel()
		d, v := newDesk(), newVenue()
		o := sendingHedge(12, "100000", now.Add(-time.Hour))
		o.Status, o.PositionID, o.TradeID, o.LastVenueTx = hedge.StatusFilled, 31, "5003", v.AsOf+3
		d.HedgeOrders["H12"] = o
		v.OpenTrades = []venue.Trade{openTagged("5003", "H12", "100000")}
		requireActions(t, Plan(v, d, now, cfg))
	})
}

func TestHedgeTradeIsNeverAdoptedAsAClients(t *testing.T) {
	t.Parallel()
	// Client order 12 and hedge order 12 are both SENDING; the venue holds the hedge's trade
	// (client id H12), and the lookups by "12" find nothing yet. The trade goes to the hedge
	// book; client order 12 waits (its row is young).
	d, v := newDesk(), newVenue()
	d.Orders["12"] = sending(12, "12", now.Add(-10*time.Second))
	d.HedgeOrders["H12"] = sendingHedge(12, "100000", now.Add(-10*time.Second))
	v.OpenTrades = []venue.Trade{openTagged("5005", "H12", "100000")}
	v.ByClientID["12"] = ClientLookup{}
	v.ByClientID["H12"] = ClientLookup{Order: &venue.OrderInfo{ID: "5004", ClientID: "H12", Tag: venue.Tag, State: venue.OrderFilled}}
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: AdoptHedge, OrderID: 12, TradeID: "5005", Symbol: "EURUSD", Units: decPtr("100000"),
		Price: dec("1.08512"), TransactionID: 5005, OpenedAt: now.Add(-time.Hour), VenueOrderID: "5004",
		Reason: "the venue opened the trade for the hedge order; adopted into the hedge book, not reopened"})

	// A lookup by a client order's id that returned a hedge trade (a venue mixing them up) is
	// not adopted for the client order.
	d, v = newDesk(), newVenue()
	d.Orders["12"] = sending(12, "12", now.Add(-10*time.Second))
	tr := openTagged("5005", "H12", "100000")
	v.ByClientID["12"] = ClientLookup{Trade: &tr}
	requireActions(t, Plan(v, d, now, cfg))
}

func TestSendingHedgeOrderIsResolvedByClientIDNeverResent(t *testing.T) {
	t.Parallel()
	closedTrade := closedAt(openTagged("5006", "H14", "-100000"), "1.08400", 5010)
	closeTime := now.Add(-time.Minute)
	closedTrade.CloseTime = &closeTime
	openTrade := openTagged("5006", "H14", "-100000")
	for _, tc := range []struct {
		name   string
		sentAt time.Time
		lookup *ClientLookup
		want   []Action
	}{
		{"trade open", now.Add(-time.Hour), &ClientLookup{Trade: &openTrade}, []Action{{Kind: AdoptHedge, OrderID: 14, TradeID: "5006", Symbol: "EURUSD",
			Units: decPtr("-100000"), Price: dec("1.08512"), TransactionID: 5006, OpenedAt: now.Add(-time.Hour),
			Reason: "the venue opened the trade for the hedge order; adopted into the hedge book, not reopened"}}},
		{"trade closed", now.Add(-time.Hour), &ClientLookup{Trade: &closedTrade}, []Action{{Kind: AdoptHedgeClosed, OrderID: 14, TradeID: "5006", Symbol: "EURUSD",
			Units: decPtr("-100000"), Price: dec("1.08512"), TransactionID: 5006, OpenedAt: now.Add(-time.Hour), ClosePrice: dec("1.084"),
			CloseTransactionID: 5010, ClosedAt: closeTime, Reason: "the venue opened and closed the hedge trade while the desk did not know"}}},
		{"order cancelled", now.Add(-time.Hour), &ClientLookup{Order: &venue.OrderInfo{ID: "5006", ClientID: "H14", State: venue.OrderCancelled, CancelReason: "INSUFFICIENT_MARGIN"}},
			[]Action{{Kind: MarkHedgeRejected, OrderID: 14, Symbol: "EURUSD", Reason: "INSUFFICIENT_MARGIN"}}},
		{"no trace past the threshold", now.Add(-cfg.NotSentAfter), &ClientLookup{}, []Action{{Kind: MarkHedgeNotSent, OrderID: 14, Symbol: "EURUSD",
			Reason: "the venue has no trace of the hedge order past the threshold; it is not re-sent"}}},
		{"no trace yet", now.Add(-cfg.NotSentAfter + time.Second), &ClientLookup{}, nil},
		{"filled, trade not visible yet", now.Add(-time.Hour), &ClientLookup{Order: &venue.OrderInfo{ID: "5005", ClientID: "H14", State: venue.OrderFilled}}, nil},
		{"not looked up", now.Add(-time.Hour), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			d.HedgeOrders["H14"] = sendingHedge(14, "-100000", tc.sentAt)
			if tc.lookup != nil {
				v.ByClientID["H14"] = *tc.lookup
			}
			requireActions(t, Plan(v, d, now, cfg), tc.want...)
		})
	}
}

func TestHedgePositionTheVenueClosedIsClosedAtTheVenuesPrice(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	d.HedgePositions = []HedgePosition{hedgePosition(33, 15, "5007", "100000")}
	tr := closedAt(openTagged("5007", "H15", "100000"), "1.09000", 5040, 5050)
	closeTime := now.Add(-2 * time.Minute)
	tr.CloseTime = &closeTime
	v.Trades["5007"] = tr
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseHedgeSide, OrderID: 15, PositionID: 33, TradeID: "5007", Symbol: "EURUSD",
		Price: dec("1.09"), TransactionID: 5050, ClosedAt: closeTime, Reason: "the venue closed the hedge trade"})

	// Not found at the venue, or found open after all: nothing is booked without the venue's price.
	d, v = newDesk(), newVenue()
	d.HedgePositions = []HedgePosition{hedgePosition(33, 15, "5007", "100000")}
	requireActions(t, Plan(v, d, now, cfg))
	v.Trades["5007"] = openTagged("5007", "H15", "100000")
	requireActions(t, Plan(v, d, now, cfg))
}

func TestClientAndHedgeRepairsTogether(t *testing.T) {
	t.Parallel()
	// One cycle with a client orphan, a client adoption and a hedge adoption: each book gets its
	// own, and the hedge trade is never in the client's actions.
	d, v := newDesk(), newVenue()
	d.Orders["20"] = DeskOrder{OrderID: 20, AccountID: 7, ClientID: "20", Symbol: "EURUSD", Side: fx.Sell, Volume: dec("1"), Status: fx.OrderSending, SentAt: now.Add(-time.Hour)}
	d.HedgeOrders["H21"] = sendingHedge(21, "50000", now.Add(-time.Hour))
	v.OpenTrades = []venue.Trade{openTagged("6001", "20", "-100000"), openTagged("6002", "H21", "50000"), openTagged("6003", "999", "10000")}
	got := Plan(v, d, now, cfg)
	kinds := map[ActionKind]string{}
	for _, a := range got {
		kinds[a.Kind] = a.TradeID
	}
	if len(got) != 3 || kinds[Adopt] != "6001" || kinds[AdoptHedge] != "6002" || kinds[CloseOrphan] != "6003" {
		t.Fatalf("plan = %v; want the client's adoption of 6001, the hedge book's of 6002, and 6003 closed as an orphan", got)
	}
	for _, a := range got {
		if a.Kind.Hedge() != (a.TradeID == "6002") {
			t.Errorf("%s on trade %s: Hedge() = %v", a.Kind, a.TradeID, a.Kind.Hedge())
		}
	}
}

func TestHedgeTradeTheVenueReducedIsBookedAsItsShare(t *testing.T) {
	t.Parallel()
	// A netting venue's own close took 13,500 of the hedge trade's 50,000 short units: the hedge
	// position keeps what the venue still holds, its P&L from the venue's average close price.
	d, v := newDesk(), newVenue()
	d.HedgePositions = []HedgePosition{hedgePosition(33, 15, "5007", "-50000")}
	tr := openTagged("5007", "H15", "-36500")
	tr.InitialUnits, tr.AverageClosePrice, tr.ClosingTransactionIDs = dec("-50000"), decPtr("1.08400"), []int64{5060}
	v.OpenTrades = []venue.Trade{tr}
	v.Trades["5007"] = tr
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: BookHedgePartial, OrderID: 15, PositionID: 33, TradeID: "5007", Symbol: "EURUSD",
		Units: decPtr("-36500"), Price: dec("1.084"), TransactionID: 5060, Reason: "the venue closed part of the hedge trade"})

	// Without the venue's price, or with the units equal: nothing.
	d.HedgePositions = []HedgePosition{hedgePosition(33, 15, "5007", "-50000")}
	tr.AverageClosePrice = nil
	v.OpenTrades, v.Trades["5007"] = []venue.Trade{tr}, tr
	requireActions(t, Plan(v, d, now, cfg))
	d.HedgePositions = []HedgePosition{hedgePosition(33, 15, "5007", "-36500")}
	requireActions(t, Plan(v, d, now, cfg))
}
