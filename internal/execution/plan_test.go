package execution

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/venue"
)

var (
	now = time.Date(2026, 12, 1, 14, 30, 0, 0, time.UTC)
	cfg = Config{NotSentAfter: time.Minute}
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func decPtr(s string) *decimal.Decimal {
	d := dec(s)
	return &d
}

// newDesk is a desk with nothing booked that knows EURUSD's contract size.
func newDesk() DeskState {
	return DeskState{
		Orders:               map[string]DeskOrder{},
		HedgeOrders:          map[string]HedgeOrder{},
		ContractSize:         map[string]decimal.Decimal{"EURUSD": dec("100000")},
		AppliedTransactionID: 4990,
	}
}

// newVenue is a venue snapshot with nothing open, taken after everything the desk applied.
func newVenue() VenueState {
	return VenueState{AsOf: 5100, Trades: map[string]venue.Trade{}, ByClientID: map[string]ClientLookup{}, Fills: map[int64]venue.Transaction{}}
}

// openTagged is an open EURUSD trade the desk's order clientID opened.
func openTagged(id, clientID, units string) venue.Trade {
	return venue.Trade{ID: id, Symbol: "EURUSD", Price: dec("1.08512"), OpenTime: now.Add(-time.Hour), State: venue.TradeOpen,
		InitialUnits: dec(units), CurrentUnits: dec(units), ClientID: clientID, Tag: venue.Tag}
}

// closedAt is t closed at price by the closing transactions given.
func closedAt(t venue.Trade, price string, closingTx ...int64) venue.Trade {
	t.State, t.CurrentUnits, t.AverageClosePrice, t.ClosingTransactionIDs = venue.TradeClosed, decimal.Zero, decPtr(price), closingTx
	return t
}

// fill is a venue fill transaction id that closed units (signed as the fill) of trade at price.
func fill(id int64, trade, units, price string) venue.Transaction {
	return venue.Transaction{ID: id, Type: "ORDER_FILL", Units: dec(units), Price: dec(price),
		Changes: []venue.TradeChange{{TradeID: trade, Units: dec(units), Price: dec(price)}}}
}

func sending(orderID int64, clientID string, sentAt time.Time) DeskOrder {
	return DeskOrder{OrderID: orderID, AccountID: 7, ClientID: clientID, Symbol: "EURUSD", Side: fx.Buy,
		Volume: dec("1"), Status: fx.OrderSending, SentAt: sentAt}
}

func position(positionID, orderID int64, tradeID, lots string) DeskPosition {
	return DeskPosition{PositionID: positionID, OrderID: orderID, AccountID: 7, Symbol: "EURUSD", Side: fx.Buy,
		Volume: dec(lots), TradeID: tradeID}
}

// describe renders an action with its decimals by value, so that 1.50 and 1.5 compare equal.
func describe(a Action) string {
	units := "nil"
	if a.Units != nil {
		units = a.Units.String()
	}
	return fmt.Sprintf("%s order=%d position=%d trade=%q symbol=%q volume=%s units=%s price=%s tx=%d openedAt=%s venueOrder=%q closePrice=%s closeTx=%d closedAt=%s reason=%q",
		a.Kind, a.OrderID, a.PositionID, a.TradeID, a.Symbol, a.Volume, units, a.Price, a.TransactionID, a.OpenedAt.Format(time.RFC3339Nano),
		a.VenueOrderID, a.ClosePrice, a.CloseTransactionID, a.ClosedAt.Format(time.RFC3339Nano), a.Reason)
}

func requireActions(t *testing.T, got []Action, want ...Action) {
	t.Helper()
	g, w := make([]string, len(got)), make([]string, len(want))
	for i, a := range got {
		g[i] = describe(a)
	}
	for i, a := range want {
		w[i] = describe(a)
	}
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("plan:\n\t%s\nwant:\n\t%s", strings.Join(g, "\n\t"), strings.Join(w, "\n\t"))
	}
}

func TestTaggedVenueTradeWithoutDeskLinkIsAdoptedNotReopened(t *testing.T) {
	t.Parallel()
	// Whatever the desk wrote about the order, a trade at the venue that carries its id and no
	// position is booked from the venue's trade: the desk never sends it again.
	for _, status := range []string{fx.OrderSending, fx.OrderNotSent, fx.OrderRejected, fx.OrderFilled} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			o := sending(101, "101", now.Add(-time.Hour))
			o.Status = status
			d.Orders["101"] = o
			v.OpenTrades = []venue.Trade{openTagged("5001", "101", "-150000")}
			// The order lookup gives the venue's order id; the position opens when the trade did.
			v.ByClientID["101"] = ClientLookup{Order: &venue.OrderInfo{ID: "5000", ClientID: "101", Tag: venue.Tag, State: venue.OrderFilled}}
			requireActions(t, Plan(v, d, now, cfg), Action{Kind: Adopt, OrderID: 101, TradeID: "5001", Symbol: "EURUSD",
				Volume: dec("1.5"), Units: decPtr("-150000"), Price: dec("1.08512"), TransactionID: 5001,
				OpenedAt: now.Add(-time.Hour), VenueOrderID: "5000",
				Reason: "the venue opened the trade for the desk order; adopted, not reopened"})
		})
	}
}

func TestSendingRowWithoutTradeIDIsResolvedByTag(t *testing.T) {
	t.Parallel()
	// The trade opened after the open-trades listing was taken: the lookup by client id finds it.
	d, v := newDesk(), newVenue()
	d.Orders["101"] = sending(101, "101", now.Add(-5*time.Second))
	trade := openTagged("5001", "101", "100000")
	v.ByClientID["101"] = ClientLookup{Trade: &trade}
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: Adopt, OrderID: 101, TradeID: "5001", Symbol: "EURUSD",
		Volume: dec("1"), Units: decPtr("100000"), Price: dec("1.08512"), TransactionID: 5001, OpenedAt: now.Add(-time.Hour),
		Reason: "the venue opened the trade for the desk order; adopted, not reopened"})
}

func TestSendingRowWhoseTradeClosedAtVenueIsAdoptedClosed(t *testing.T) {
	t.Parallel()
	// The trade opened and closed (in two fills) before the desk learned of either: the order is
	// booked open at the open price and closed at the average close price, in one action.
	d, v := newDesk(), newVenue()
	d.Orders["101"] = sending(101, "101", now.Add(-10*time.Minute))
	trade := closedAt(openTagged("5001", "101", "-200000"), "1.08107", 5010, 5012)
	v.ByClientID["101"] = ClientLookup{Trade: &trade, Order: &venue.OrderInfo{ID: "5000", ClientID: "101", Tag: venue.Tag,
		State: venue.OrderFilled, FillingTransactionID: 5001, TradeOpenedID: "5001"}}
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: AdoptClosed, OrderID: 101, TradeID: "5001", Symbol: "EURUSD",
		Volume: dec("2"), Units: decPtr("-200000"), Price: dec("1.08512"), TransactionID: 5001,
		OpenedAt: now.Add(-time.Hour), VenueOrderID: "5000", ClosePrice: dec("1.08107"), CloseTransactionID: 5012,
		Reason: "the venue opened and closed the trade while the desk did not know"})
}

func TestSendingRowMissingAtVenuePastThresholdIsMarkedNotSentNeverResent(t *testing.T) {
	t.Parallel()
	// Both targeted lookups missed, at or past the threshold: the order ends NOT_SENT, and nothing
	// in the plan sends it.
	for _, age := range []time.Duration{time.Minute, time.Hour} {
		t.Run(age.String(), func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			d.Orders["101"] = sending(101, "101", now.Add(-age))
			v.ByClientID["101"] = ClientLookup{}
			requireActions(t, Plan(v, d, now, cfg), Action{Kind: MarkNotSent, OrderID: 101, Symbol: "EURUSD",
				Reason: "the venue has no trace of the order past the threshold; it is not re-sent"})
		})
	}
}

func TestSendingRowMissingRightAfterSendWaits(t *testing.T) {
	t.Parallel()
	// A miss right after the send means "not visible yet".
	for _, age := range []time.Duration{0, 5 * time.Second, time.Minute - time.Nanosecond} {
		t.Run(age.String(), func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			d.Orders["101"] = sending(101, "101", now.Add(-age))
			v.ByClientID["101"] = ClientLookup{}
			requireActions(t, Plan(v, d, now, cfg))
		})
	}
}

func TestSendingRowNotLookedUpIsLeftAlone(t *testing.T) {
	t.Parallel()
	// No lookup this cycle is not a miss: an old SENDING row is not marked NOT_SENT on no evidence.
	d, v := newDesk(), newVenue()
	d.Orders["101"] = sending(101, "101", now.Add(-time.Hour))
	requireActions(t, Plan(v, d, now, cfg))
}

func TestFilledSendingOrderWhoseTradeIsNotVisibleYetWaits(t *testing.T) {
	t.Parallel()
	// The venue says it filled the order, and the trade it opened is not visible yet: not a miss.
	d, v := newDesk(), newVenue()
	d.Orders["101"] = sending(101, "101", now.Add(-time.Hour))
	v.ByClientID["101"] = ClientLookup{Order: &venue.OrderInfo{ID: "5000", ClientID: "101", Tag: venue.Tag,
		State: venue.OrderFilled, FillingTransactionID: 5001, TradeOpenedID: "5001"}}
	requireActions(t, Plan(v, d, now, cfg))
}

func TestCancelledSendingOrderIsMarkedRejected(t *testing.T) {
	t.Parallel()
	// The venue accepted the request and cancelled it; an old row is rejected, not NOT_SENT.
	d, v := newDesk(), newVenue()
	d.Orders["101"] = sending(101, "101", now.Add(-time.Hour))
	v.ByClientID["101"] = ClientLookup{Order: &venue.OrderInfo{ID: "5000", ClientID: "101", Tag: venue.Tag,
		State: venue.OrderCancelled, CancelReason: venue.ReasonInsufficientMargin}}
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: MarkRejected, OrderID: 101, Symbol: "EURUSD",
		Reason: venue.ReasonInsufficientMargin})
}

func TestUntrackedTaggedOrphanIsClosed(t *testing.T) {
	t.Parallel()
	closedOnDesk := sending(101, "101", now.Add(-time.Hour))
	closedOnDesk.Status, closedOnDesk.PositionID = fx.OrderFilled, 77
	linkedElsewhere := closedOnDesk
	linkedElsewhere.PositionOpen, linkedElsewhere.TradeID = true, "4999"
	tests := []struct {
		name   string
		orders map[string]DeskOrder
		want   int64 // the order the close names
	}{
		{"no desk order names it", map[string]DeskOrder{}, 0},
		{"its order's position was closed on the desk", map[string]DeskOrder{"101": closedOnDesk}, 101},
		{"its order's open position is another trade", map[string]DeskOrder{"101": linkedElsewhere}, 101},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			d.Orders = tt.orders
			v.OpenTrades = []venue.Trade{openTagged("5001", "101", "100000")}
			requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseOrphan, OrderID: tt.want, TradeID: "5001",
				Symbol: "EURUSD", Reason: "a tagged venue trade that no open desk position explains"})
		})
	}
}

// What a FIX close executed past its trade (the venue's own order had closed the trade first) is a
// trade keyed by the close's ClOrdID (docs/fix.md, «A close that crosses the venue's own»): no
// desk order and no hedge order is named so, and the plan closes it as an orphan — never
// adopts it, never reports it as another desk's hedge trade and leaves it.
func TestWhatACloseExecutedPastItsTradeIsClosedAsAnOrphan(t *testing.T) {
	t.Parallel()
	for _, client := range []string{"101.c1", "H7.c2"} {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			filled := sending(101, "101", now.Add(-time.Hour))
			filled.Status, filled.PositionID = fx.OrderFilled, 77
			d.Orders["101"] = filled
			v.OpenTrades = []venue.Trade{openTagged("5003", client, "-100000")}
			requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseOrphan, TradeID: "5003",
				Symbol: "EURUSD", Reason: "a tagged venue trade that no open desk position explains"})
		})
	}
}

// A close the desk booked whole on its position executed past the trade (the venue's own close
// crossed it; ClosedPast): the fills nobody booked close more than the position holds by just
// that, and the position's lots are closed at them, oldest first, cut to what it holds. Before,
// the plan waited for fills that add up to the position, which never came (soak seed 74061369:
// position 167069 OPEN with 0.37 lots for ever, its trade closed at the venue).
func TestACloseBookedPastItsTradeLeavesThePositionToTheVenuesFills(t *testing.T) {
	t.Parallel()
	t.Run("the venue closed all of the trade", func(t *testing.T) {
		t.Parallel()
		d, v := newDesk(), newVenue()
		pos := position(77, 101, "5001", "0.37")
		pos.Booked = []int64{5030} // the desk's close of 0.36, all of it past the trade
		d.Positions = []DeskPosition{pos}
		trade := closedAt(openTagged("5001", "101", "73000"), "1.2524", 5021)
		trade.ClosedPast = map[int64]decimal.Decimal{5030: dec("36000")}
		v.Trades["5001"] = trade
		v.Fills[5021] = fill(5021, "5001", "-73000", "1.2524")
		requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseDeskSide, OrderID: 101, PositionID: 77, TradeID: "5001",
			Symbol: "EURUSD", Volume: dec("0.37"), Price: dec("1.2524"), TransactionID: 5021, Reason: "closed at the venue"})
	})
	t.Run("the venue closed most of it in two fills", func(t *testing.T) {
		t.Parallel()
		d, v := newDesk(), newVenue()
		pos := position(77, 101, "5001", "0.04")
		pos.Booked = []int64{5030} // the desk's close of 0.06: 3,000 within the trade, 3,000 past it
		d.Positions = []DeskPosition{pos}
		trade := closedAt(openTagged("5001", "101", "10000"), "1.079", 5020, 5021, 5030)
		trade.ClosedPast = map[int64]decimal.Decimal{5030: dec("3000")}
		v.Trades["5001"] = trade
		v.Fills[5020] = fill(5020, "5001", "-5000", "1.0780")
		v.Fills[5021] = fill(5021, "5001", "-2000", "1.0795")
		requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseDeskSide, OrderID: 101, PositionID: 77, TradeID: "5001",
			Symbol: "EURUSD", Volume: dec("0.04"), Price: dec("1.078"), TransactionID: 5020, Reason: "closed at the venue"})
	})
	t.Run("fills that do not add up still wait", func(t *testing.T) {
		t.Parallel()
		d, v := newDesk(), newVenue()
		pos := position(77, 101, "5001", "0.37")
		pos.Booked = []int64{5030}
		d.Positions = []DeskPosition{pos}
		trade := closedAt(openTagged("5001", "101", "73000"), "1.2524", 5021)
		trade.ClosedPast = map[int64]decimal.Decimal{5030: dec("30000")}
		v.Trades["5001"] = trade
		v.Fills[5021] = fill(5021, "5001", "-73000", "1.2524")
		requireActions(t, Plan(v, d, now, cfg))
	})
}

func TestTradeLinkedThroughItsOrderIsNotAnOrphan(t *testing.T) {
	t.Parallel()
	// The order says its open position is linked to the trade, though the position is not in the
	// list: the trade is explained, and closing it would close a trader's hedge.
	d, v := newDesk(), newVenue()
	o := sending(101, "101", now.Add(-time.Hour))
	o.Status, o.PositionID, o.PositionOpen, o.TradeID = fx.OrderFilled, 77, true, "5001"
	d.Orders["101"] = o
	v.OpenTrades = []venue.Trade{openTagged("5001", "101", "100000")}
	requireActions(t, Plan(v, d, now, cfg))
}

func TestDeskPositionWhoseTradeClosedAtVenueIsClosedAtVenuePrice(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	d.Positions = []DeskPosition{position(77, 101, "5001", "1.5")}
	v.Trades["5001"] = closedAt(openTagged("5001", "101", "150000"), "1.07950", 5021)
	v.Fills[5021] = fill(5021, "5001", "-150000", "1.07950")
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseDeskSide, OrderID: 101, PositionID: 77, TradeID: "5001",
		Symbol: "EURUSD", Volume: dec("1.5"), Price: dec("1.0795"), TransactionID: 5021, Reason: "closed at the venue"})
}

// The venue closed a trade in two fills the desk never booked (a close whose answer was lost,
// then a venue stop-out): each share is booked at its own fill's price, the last one closing the
// position.
func TestTradeClosedAtVenueInTwoFillsBooksEachAtItsPrice(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	d.Positions = []DeskPosition{position(77, 101, "5001", "1.5")}
	v.Trades["5001"] = closedAt(openTagged("5001", "101", "150000"), "1.07900", 5020, 5021)
	v.Fills[5020] = fill(5020, "5001", "-50000", "1.07800")
	v.Fills[5021] = fill(5021, "5001", "-100000", "1.07950")
	requireActions(t, Plan(v, d, now, cfg),
		Action{Kind: BookPartial, OrderID: 101, PositionID: 77, TradeID: "5001", Symbol: "EURUSD", Volume: dec("0.5"),
			Price: dec("1.078"), TransactionID: 5020, Reason: "the venue closed part of the trade and the desk did not book it"},
		Action{Kind: CloseDeskSide, OrderID: 101, PositionID: 77, TradeID: "5001", Symbol: "EURUSD", Volume: dec("1"),
			Price: dec("1.0795"), TransactionID: 5021, Reason: "closed at the venue"})
}

// A close the venue filled in three executions of odd units (3,333 + 3,333 + 3,334 of 0.1 lots)
// and whose answer the desk lost: the shares' lots are the running total rounded to the book's
// four places (0.0333, 0.0667, 0.1000), so they add up to the 0.1 lots closed. Rounding each alone (0.0333 three times)
// left the position 10 units off the venue for ever (soak seed 9, position 701).
func TestSharesOfOddUnitsBookLotsThatAddUpToTheUnitsClosed(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	d.Positions = []DeskPosition{position(701, 101, "5001", "0.3")}
	trade := openTagged("5001", "101", "30000")
	trade.CurrentUnits = dec("20000")
	trade.AverageClosePrice, trade.ClosingTransactionIDs = decPtr("1.0795"), []int64{5020, 5021, 5022}
	v.OpenTrades = []venue.Trade{trade}
	v.Trades["5001"] = trade
	v.Fills[5020] = fill(5020, "5001", "-3333", "1.07950")
	v.Fills[5021] = fill(5021, "5001", "-3333", "1.07950")
	v.Fills[5022] = fill(5022, "5001", "-3334", "1.07950")
	why := "the venue closed part of the trade and the desk did not book it"
	requireActions(t, Plan(v, d, now, cfg),
		Action{Kind: BookPartial, OrderID: 101, PositionID: 701, TradeID: "5001", Symbol: "EURUSD", Volume: dec("0.0333"), Price: dec("1.0795"), TransactionID: 5020, Reason: why},
		Action{Kind: BookPartial, OrderID: 101, PositionID: 701, TradeID: "5001", Symbol: "EURUSD", Volume: dec("0.0334"), Price: dec("1.0795"), TransactionID: 5021, Reason: why},
		Action{Kind: BookPartial, OrderID: 101, PositionID: 701, TradeID: "5001", Symbol: "EURUSD", Volume: dec("0.0333"), Price: dec("1.0795"), TransactionID: 5022, Reason: why})
}

// The desk booked one partial close itself at its fill's price; the venue then closed another
// share whose answer never came. The unbooked share is booked at its own fill's price — not at
// the trade's average close price, which mixes in the share the desk booked (found by the soak:
// position 58, 0.16 lots booked at the average of 0.32 @ 1.15988 and 0.16 @ 1.15998).
func TestUnbookedShareIsBookedAtItsFillNotTheAverage(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	pos := position(58, 101, "5085", "0.33") // 0.65 lots opened, 0.32 booked by the desk
	pos.Side, pos.Booked = fx.Sell, []int64{5090}
	d.Positions = []DeskPosition{pos}
	trade := openTagged("5085", "101", "-65000")
	trade.CurrentUnits = dec("-17000")
	trade.AverageClosePrice, trade.ClosingTransactionIDs = decPtr("1.159913"), []int64{5090, 5095}
	v.OpenTrades = []venue.Trade{trade}
	v.Trades["5085"] = trade
	v.Fills[5095] = fill(5095, "5085", "16000", "1.15998")
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: BookPartial, OrderID: 101, PositionID: 58, TradeID: "5085",
		Symbol: "EURUSD", Volume: dec("0.16"), Price: dec("1.15998"), TransactionID: 5095,
		Reason: "the venue closed part of the trade and the desk did not book it"})
}

// A share whose fill the gather could not read, or fills that do not add up to what the desk
// and the venue differ by, wait for a later run: the plan never guesses a price or a size.
func TestUnbookedShareWithoutItsFillWaits(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	d.Positions = []DeskPosition{position(77, 101, "5001", "1.5")}
	v.Trades["5001"] = closedAt(openTagged("5001", "101", "150000"), "1.07900", 5020, 5021)
	v.Fills[5021] = fill(5021, "5001", "-100000", "1.07950") // 5020 missing
	requireActions(t, Plan(v, d, now, cfg))
	v.Fills[5020] = fill(5020, "5001", "-40000", "1.07800") // 140000 of 150000
	requireActions(t, Plan(v, d, now, cfg))
}

func TestDeskPositionWhoseTradeIsNotFoundWaits(t *testing.T) {
	t.Parallel()
	// The trade is neither open nor found by id: without the venue's price, nothing is booked.
	d, v := newDesk(), newVenue()
	d.Positions = []DeskPosition{position(77, 101, "5001", "1.5")}
	requireActions(t, Plan(v, d, now, cfg))
}

func TestUnbookedPartialCloseBooksTheSameShare(t *testing.T) {
	t.Parallel()
	// The venue closed half a lot of a 1.5-lot trade, long or short, and nobody booked it.
	for _, units := range []string{"100000", "-100000"} {
		t.Run(units, func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			d.Positions = []DeskPosition{position(77, 101, "5001", "1.5")}
			trade := openTagged("5001", "101", units)
			trade.InitialUnits = trade.InitialUnits.Mul(dec("1.5"))
			v.OpenTrades = []venue.Trade{trade}
			trade.AverageClosePrice, trade.ClosingTransactionIDs = decPtr("1.08900"), []int64{5031}
			v.Trades["5001"] = trade
			closing := "-50000"
			if units[0] == '-' {
				closing = "50000"
			}
			v.Fills[5031] = fill(5031, "5001", closing, "1.08900")
			requireActions(t, Plan(v, d, now, cfg), Action{Kind: BookPartial, OrderID: 101, PositionID: 77,
				TradeID: "5001", Symbol: "EURUSD", Volume: dec("0.5"), Price: dec("1.089"), TransactionID: 5031,
				Reason: "the venue closed part of the trade and the desk did not book it"})
		})
	}
}

func TestUnbookedPartialCloseWithoutTheVenuesPriceWaits(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	d.Positions = []DeskPosition{position(77, 101, "5001", "1.5")}
	v.OpenTrades = []venue.Trade{openTagged("5001", "101", "100000")}
	requireActions(t, Plan(v, d, now, cfg))
}

func TestVenueLargerThanDeskClosesTheExcess(t *testing.T) {
	t.Parallel()
	// The desk booked a close of half a lot the venue did not do; the close takes a positive count
	// of units whatever the trade's side.
	for _, units := range []string{"150000", "-150000"} {
		t.Run(units, func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			d.Positions = []DeskPosition{position(77, 101, "5001", "1")}
			v.OpenTrades = []venue.Trade{openTagged("5001", "101", units)}
			requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseOrphan, OrderID: 101, PositionID: 77,
				TradeID: "5001", Symbol: "EURUSD", Units: decPtr("50000"),
				Reason: "the venue holds more units than the desk position; the excess is closed"})
		})
	}
}

func TestUntaggedVenueTradeIsNeverTouched(t *testing.T) {
	t.Parallel()
	// Untagged trades that look like the desk's in every other way: an unexplained one, one naming
	// a desk order, one a desk position is linked to (with other units), and one a lookup returned
	// for a SENDING order. Each open one is reported; nothing else happens to any of them.
	d, v := newDesk(), newVenue()
	d.Orders["101"] = sending(101, "101", now.Add(-5*time.Second))
	d.Orders["102"] = sending(102, "102", now.Add(-5*time.Second))
	d.Positions = []DeskPosition{position(77, 100, "5003", "2")}
	manual := openTagged("5001", "", "100000")
	named := openTagged("5002", "101", "100000")
	linked := openTagged("5003", "100", "100000")
	lookedUp := openTagged("5004", "102", "100000")
	for _, tr := range []*venue.Trade{&manual, &named, &linked, &lookedUp} {
		tr.Tag = ""
	}
	named.Tag = "manual"
	v.OpenTrades = []venue.Trade{linked, named, manual}
	reduced := linked
	reduced.AverageClosePrice, reduced.ClosingTransactionIDs = decPtr("1.09"), []int64{5040}
	v.Trades["5003"] = reduced
	v.ByClientID["102"] = ClientLookup{Trade: &lookedUp}
	alert := func(tr venue.Trade) Action {
		return Action{Kind: AlertUntagged, TradeID: tr.ID, Symbol: "EURUSD", Units: decPtr("100000"),
			Reason: "an untagged trade is open at the venue; the desk does not touch it"}
	}
	requireActions(t, Plan(v, d, now, cfg), alert(manual), alert(named), alert(linked))
}

func TestDroppedWorkIsNotReplayed(t *testing.T) {
	t.Parallel()
	// While the desk was unsure it dropped work: a send it never made (NOT_SENT, no trace at the
	// venue), a close it booked on the desk and then made at the venue, an order the venue
	// cancelled and the desk already rejected. Now the two states agree, so there is nothing to do:
	// the plan reads no history to replay.
	d, v := newDesk(), newVenue()
	notSent := sending(101, "101", now.Add(-time.Hour))
	notSent.Status = fx.OrderNotSent
	closed := sending(102, "102", now.Add(-time.Hour))
	closed.Status, closed.PositionID = fx.OrderFilled, 78
	rejected := sending(103, "103", now.Add(-time.Hour))
	rejected.Status = fx.OrderRejected
	open := sending(104, "104", now.Add(-time.Hour))
	open.Status, open.PositionID, open.PositionOpen, open.TradeID = fx.OrderFilled, 79, true, "5004"
	d.Orders = map[string]DeskOrder{"101": notSent, "102": closed, "103": rejected, "104": open}
	d.Positions = []DeskPosition{position(79, 104, "5004", "1.5")}
	v.OpenTrades = []venue.Trade{openTagged("5004", "104", "150000")}
	v.Trades["5002"] = closedAt(openTagged("5002", "102", "100000"), "1.08", 5050)
	v.ByClientID["101"] = ClientLookup{}
	v.ByClientID["103"] = ClientLookup{Order: &venue.OrderInfo{ID: "5060", ClientID: "103", Tag: venue.Tag,
		State: venue.OrderCancelled, CancelReason: venue.ReasonMarketHalted}}
	requireActions(t, Plan(v, d, now, cfg))
}

func TestSnapshotOlderThanAppliedTransactionIsIgnored(t *testing.T) {
	t.Parallel()
	// An orphan in the snapshot: planned from a snapshot as new as the desk, ignored from an older
	// one (the desk may already have booked what the snapshot does not show yet).
	d, v := newDesk(), newVenue()
	v.OpenTrades = []venue.Trade{openTagged("5001", "", "100000")}
	d.AppliedTransactionID, v.AsOf = 5100, 5100
	if got := Plan(v, d, now, cfg); len(got) != 1 || got[0].Kind != CloseOrphan {
		t.Fatalf("plan of a current snapshot: %v, want one CloseOrphan", got)
	}
	v.AsOf = 5099
	if got := Plan(v, d, now, cfg); got != nil {
		t.Fatalf("plan of a stale snapshot: %v, want nil", got)
	}
}

func TestActionsAreSortedByKindThenIDs(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	d.Orders["102"] = sending(102, "102", now.Add(-time.Hour))
	d.Orders["101"] = sending(101, "101", now.Add(-time.Hour))
	d.Positions = []DeskPosition{position(79, 0, "5009", "1"), position(78, 0, "5008", "1")}
	untagged := openTagged("5007", "", "1")
	untagged.Tag = ""
	v.OpenTrades = []venue.Trade{openTagged("5009", "", "200000"), untagged, openTagged("5008", "", "300000"),
		openTagged("5006", "", "100000"), openTagged("5005", "", "100000")}
	v.ByClientID["102"], v.ByClientID["101"] = ClientLookup{}, ClientLookup{}
	var got []string
	for _, a := range Plan(v, d, now, cfg) {
		got = append(got, fmt.Sprintf("%s/%d/%d/%s", a.Kind, a.OrderID, a.PositionID, a.TradeID))
	}
	want := []string{"alert_untagged/0/0/5007", "close_orphan/0/0/5005", "close_orphan/0/0/5006",
		"close_orphan/0/78/5008", "close_orphan/0/79/5009", "mark_not_sent/101/0/", "mark_not_sent/102/0/"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("plan order:\n\t%v\nwant:\n\t%v", got, want)
	}
}

// randomStates draws n venue and desk states from small pools of ids, symbols and prices, so that
// trades, orders, positions and lookups collide often: tagged and untagged trades naming the same
// orders, positions linked to closed, missing and untagged trades, stale snapshots, a symbol
// without a contract size.
func randomStates(r *rand.Rand, n int) []struct {
	v VenueState
	d DeskState
} {
	symbols := []string{"EURUSD", "GBPUSD", "XAUUSD"} // XAUUSD has no contract size
	prices := []string{"1.08512", "1.27001", "1.1", "2350.5"}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	units := func() decimal.Decimal {
		u := decimal.NewFromInt(int64(1+r.IntN(4)) * 50000)
		if r.IntN(2) == 0 {
			return u.Neg()
		}
		return u
	}
	clientID := func() string { return strconv.Itoa(100 + r.IntN(6)) }
	tradeID := func() string { return strconv.Itoa(5000 + r.IntN(10)) }
	orderID := func(clientID string) int64 { id, _ := strconv.ParseInt(clientID, 10, 64); return id }

	states := make([]struct {
		v VenueState
		d DeskState
	}, n)
	for i := range states {
		d := DeskState{Orders: map[string]DeskOrder{}, AppliedTransactionID: int64(r.IntN(20)),
			ContractSize: map[string]decimal.Decimal{"EURUSD": dec("100000"), "GBPUSD": dec("100000")}}
		v := VenueState{AsOf: int64(r.IntN(20) + 5), Trades: map[string]venue.Trade{}, ByClientID: map[string]ClientLookup{},
			Fills: map[int64]venue.Transaction{}}
		var all []venue.Trade
		for _, id := range r.Perm(10)[:r.IntN(8)] { // a trade id names one trade
			t := venue.Trade{ID: strconv.Itoa(5000 + id), Symbol: pick(symbols), Price: dec(pick(prices)), State: venue.TradeOpen,
				InitialUnits: units(), ClientID: clientID(), Tag: pick([]string{venue.Tag, venue.Tag, "", "manual"})}
			t.CurrentUnits = t.InitialUnits
			if r.IntN(3) == 0 {
				t.ClientID = ""
			}
			switch r.IntN(3) {
			case 0: // closed
				tx := int64(5000 + r.IntN(100))
				t = closedAt(t, pick(prices), tx)
				if r.IntN(4) != 0 {
					v.Fills[tx] = fill(tx, t.ID, t.InitialUnits.Neg().String(), t.AverageClosePrice.String())
				}
			case 1: // reduced
				tx := int64(5000 + r.IntN(100))
				t.CurrentUnits = t.InitialUnits.Div(decimal.NewFromInt(2))
				t.AverageClosePrice, t.ClosingTransactionIDs = decPtr(pick(prices)), []int64{tx}
				if r.IntN(4) != 0 {
					v.Fills[tx] = fill(tx, t.ID, t.CurrentUnits.Neg().String(), t.AverageClosePrice.String())
				}
			}
			if r.IntN(5) == 0 { // the venue reports a close without its price
				t.AverageClosePrice = nil
			}
			all = append(all, t)
		}
		for _, t := range all {
			if t.State == venue.TradeOpen {
				v.OpenTrades = append(v.OpenTrades, t)
			}
			if r.IntN(2) == 0 {
				v.Trades[t.ID] = t
			}
		}
		for range r.IntN(6) {
			id := clientID()
			o := DeskOrder{OrderID: orderID(id), ClientID: id, Symbol: pick(symbols), Side: fx.Buy, Volume: dec("1"),
				Status: pick([]string{fx.OrderSending, fx.OrderSending, fx.OrderNotSent, fx.OrderFilled, fx.OrderRejected}),
				SentAt: now.Add(-time.Duration(r.IntN(120)) * time.Second)}
			if r.IntN(3) == 0 {
				o.PositionID, o.PositionOpen, o.TradeID = int64(r.IntN(100)+1), r.IntN(2) == 0, tradeID()
			}
			d.Orders[id] = o
			lookup := ClientLookup{}
			switch r.IntN(4) {
			case 0:
				continue // not looked up
			case 1:
				if len(all) > 0 {
					t := all[r.IntN(len(all))]
					lookup.Trade = &t
				}
			case 2:
				lookup.Order = &venue.OrderInfo{ClientID: id, Tag: venue.Tag, CancelReason: pick([]string{"", venue.ReasonMarketHalted}),
					State: pick([]string{venue.OrderFilled, venue.OrderCancelled, venue.OrderPending})}
			}
			v.ByClientID[id] = lookup
		}
		for j := range r.IntN(5) {
			d.Positions = append(d.Positions, DeskPosition{PositionID: int64(j + 1), OrderID: orderID(clientID()),
				Symbol: pick(symbols), Side: fx.Buy, Volume: dec(pick([]string{"0.5", "1", "1.5", "2"})), TradeID: tradeID()})
		}
		states[i].v, states[i].d = v, d
	}
	return states
}

func TestPlanNeverSendsAndNeverTouchesUntaggedTrades(t *testing.T) {
	t.Parallel()
	// Every kind Plan may return; none of them opens a trade. A kind added later fails here until
	// someone decides it belongs.
	allowed := map[ActionKind]bool{Adopt: true, AdoptClosed: true, MarkNotSent: true, MarkRejected: true,
		CloseOrphan: true, CloseDeskSide: true, BookPartial: true, AlertUntagged: true}
	seen := map[ActionKind]int{}
	untaggedSeen := 0
	for i, s := range randomStates(rand.New(rand.NewPCG(1, 2)), 5000) {
		// An id is untagged when the venue shows it untagged anywhere; the desk's own ids never are.
		untagged := map[string]bool{}
		prices := map[string]bool{}
		note := func(tr venue.Trade) {
			if tr.Tag != venue.Tag {
				untagged[tr.ID] = true
			}
			prices[tr.Price.String()] = true
			if tr.AverageClosePrice != nil {
				prices[tr.AverageClosePrice.String()] = true
			}
		}
		for _, tr := range s.v.OpenTrades {
			note(tr)
		}
		for _, tx := range s.v.Fills {
			for _, ch := range tx.Changes {
				prices[ch.Price.String()] = true
			}
		}
		for _, tr := range s.v.Trades {
			note(tr)
		}
		for _, l := range s.v.ByClientID {
			if l.Trade != nil {
				note(*l.Trade)
			}
		}
		untaggedSeen += len(untagged)
		for _, a := range Plan(s.v, s.d, now, cfg) {
			seen[a.Kind]++
			if !allowed[a.Kind] {
				t.Fatalf("state %d: plan returned kind %q", i, a.Kind)
			}
			if untagged[a.TradeID] && a.Kind != AlertUntagged {
				t.Fatalf("state %d: %s acts on untagged trade %s", i, a.Kind, a.TradeID)
			}
			if a.Kind == CloseOrphan && a.Units != nil && !a.Units.IsPositive() {
				t.Fatalf("state %d: close of %s units of trade %s", i, a.Units, a.TradeID)
			}
			if a.Kind == MarkNotSent {
				o, l := s.d.Orders[clientIDOf(s.d, a.OrderID)], s.v.ByClientID[clientIDOf(s.d, a.OrderID)]
				if o.Status != fx.OrderSending || l.Trade != nil || l.Order != nil || now.Sub(o.SentAt) < cfg.NotSentAfter {
					t.Fatalf("state %d: NOT_SENT for order %+v with lookup %+v", i, o, l)
				}
			}
			// Never a price the venue did not give.
			for _, p := range []decimal.Decimal{a.Price, a.ClosePrice} {
				if !p.IsZero() && !prices[p.String()] {
					t.Fatalf("state %d: %s books price %s the venue did not report", i, a.Kind, p)
				}
			}
		}
	}
	// Guard against a generator that stopped producing the cases the checks are about.
	if untaggedSeen == 0 {
		t.Fatal("no state had an untagged trade")
	}
	for kind := range allowed {
		if seen[kind] == 0 {
			t.Errorf("no state produced a %s action", kind)
		}
	}
}

// clientIDOf is the client id of the desk order orderID.
func clientIDOf(d DeskState, orderID int64) string {
	for id, o := range d.Orders {
		if o.OrderID == orderID {
			return id
		}
	}
	return ""
}

func TestPlanIsDeterministic(t *testing.T) {
	t.Parallel()
	// The same states, listed in another order and held in freshly built maps, give the same plan.
	r := rand.New(rand.NewPCG(3, 4))
	multi := 0
	for i, s := range randomStates(r, 2000) {
		first := Plan(s.v, s.d, now, cfg)
		if len(first) > 1 {
			multi++
		}
		for range 3 {
			v, d := s.v, s.d
			v.OpenTrades, d.Positions = slices.Clone(v.OpenTrades), slices.Clone(d.Positions)
			r.Shuffle(len(v.OpenTrades), func(a, b int) { v.OpenTrades[a], v.OpenTrades[b] = v.OpenTrades[b], v.OpenTrades[a] })
			r.Shuffle(len(d.Positions), func(a, b int) { d.Positions[a], d.Positions[b] = d.Positions[b], d.Positions[a] })
			v.Trades, v.ByClientID, d.Orders = maps.Clone(v.Trades), maps.Clone(v.ByClientID), maps.Clone(d.Orders)
			again := Plan(v, d, now, cfg)
			if len(again) != len(first) {
				t.Fatalf("state %d: %d actions, then %d", i, len(first), len(again))
			}
			for j := range first {
				if describe(first[j]) != describe(again[j]) {
					t.Fatalf("state %d, action %d:\n\t%s\nthen\n\t%s", i, j, describe(first[j]), describe(again[j]))
				}
			}
		}
	}
	if multi < 100 {
		t.Fatalf("only %d states planned more than one action; the shuffles test little", multi)
	}
}

func TestSnapshotTakenBeforeTheDesksCloseClosesNothing(t *testing.T) {
	t.Parallel()
	// The venue was read before the desk's own close of the trade reached it; the desk's book was
	// read after that close was booked. The trade looks open and unexplained, but the desk has
	// already closed it: a second close would open the opposite exposure at the venue.
	closedOnDesk := sending(101, "101", now.Add(-time.Hour))
	closedOnDesk.Status, closedOnDesk.PositionID = fx.OrderFilled, 77
	for _, tt := range []struct {
		name   string
		closed int64 // the venue transaction the desk booked the close from
		want   []Action
	}{
		{"the close is newer than the snapshot", 5101, nil},
		{"the close is older than the snapshot", 5099, []Action{{Kind: CloseOrphan, OrderID: 101, TradeID: "5001",
			Symbol: "EURUSD", Reason: "a tagged venue trade that no open desk position explains"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, v := newDesk(), newVenue()
			o := closedOnDesk
			o.LastVenueTx = tt.closed
			d.Orders["101"] = o
			v.OpenTrades = []venue.Trade{openTagged("5001", "101", "100000")}
			requireActions(t, Plan(v, d, now, cfg), tt.want...)
		})
	}
}

func TestSnapshotTakenBeforeTheDesksPartialCloseClosesNoExcess(t *testing.T) {
	t.Parallel()
	// The desk closed half a lot at the venue and booked it (fill 5101) after the venue was read:
	// the snapshot's larger trade is the past, not an excess.
	d, v := newDesk(), newVenue()
	p := position(77, 101, "5001", "0.5")
	p.Booked = []int64{5101}
	d.Positions = []DeskPosition{p}
	v.OpenTrades = []venue.Trade{openTagged("5001", "101", "100000")}
	requireActions(t, Plan(v, d, now, cfg))
}
