package execution

import (
	"testing"

	"fxdesk/internal/venue"
)

// The soak's FIX lane (seed 237868095786120, position 143): a take-profit close of 0.7 lots the
// venue filled in three executions of 23,333 + 23,333 + 23,334 units, its answer lost. One run
// booked the first two shares (0.2333 + 0.2334, the running total's lots) and the holder lost
// the lease before the third. What is left on the desk, 0.2333 lots, is 23,330 units; the fill
// left to book is 23,334: no lots hold those units exactly, and a plan that waited for them to
// add up to the unit left the position open for ever while the venue had closed it. The last
// share closes what the desk holds.
func TestTheLastShareOfAPartlyBookedCloseClosesWhatIsLeft(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	pos := position(143, 144, "253", "0.2333")
	pos.Booked = []int64{560, 573}
	d.Positions = []DeskPosition{pos}
	v.Trades["253"] = closedAt(openTagged("253", "144", "70000"), "1.32026", 560, 573, 586)
	v.Fills[586] = fill(586, "253", "-23334", "1.32026")
	requireActions(t, Plan(v, d, now, cfg), Action{Kind: CloseDeskSide, OrderID: 144, PositionID: 143, TradeID: "253",
		Symbol: "EURUSD", Volume: dec("0.2333"), Price: dec("1.32026"), TransactionID: 586, Reason: "closed at the venue"})
}

// The same close booked one share at a time while the trade stays open: 0.3 lots, a partial
// close of 0.1 filled as 3,333 + 3,333 + 3,334 units, the first share booked by an earlier run
// (0.0333). The two left (6,667 units) are what the desk's 0.2667 lots and the venue's 20,000
// units differ by to within a step of the book's lots; they book 0.0333 + 0.0334, so that the
// desk holds 0.2 lots, the venue's 20,000 units.
func TestSharesLeftOfAPartlyBookedPartialCloseBookWhatTheVenueHolds(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	pos := position(701, 101, "5001", "0.2667")
	pos.Booked = []int64{5020}
	d.Positions = []DeskPosition{pos}
	trade := openTagged("5001", "101", "30000")
	trade.CurrentUnits = dec("20000")
	trade.AverageClosePrice, trade.ClosingTransactionIDs = decPtr("1.0795"), []int64{5020, 5021, 5022}
	v.OpenTrades = []venue.Trade{trade}
	v.Trades["5001"] = trade
	v.Fills[5021] = fill(5021, "5001", "-3333", "1.07950")
	v.Fills[5022] = fill(5022, "5001", "-3334", "1.07950")
	why := "the venue closed part of the trade and the desk did not book it"
	requireActions(t, Plan(v, d, now, cfg),
		Action{Kind: BookPartial, OrderID: 101, PositionID: 701, TradeID: "5001", Symbol: "EURUSD", Volume: dec("0.0333"), Price: dec("1.0795"), TransactionID: 5021, Reason: why},
		Action{Kind: BookPartial, OrderID: 101, PositionID: 701, TradeID: "5001", Symbol: "EURUSD", Volume: dec("0.0334"), Price: dec("1.0795"), TransactionID: 5022, Reason: why})
}

// A fill short by a step or more of the book's lots is not rounding: the plan still waits for
// the fills to add up (a share it cannot read, or one the venue has not reported yet).
func TestSharesShortByALotStepWait(t *testing.T) {
	t.Parallel()
	d, v := newDesk(), newVenue()
	pos := position(143, 144, "253", "0.2333")
	pos.Booked = []int64{560, 573}
	d.Positions = []DeskPosition{pos}
	v.Trades["253"] = closedAt(openTagged("253", "144", "70000"), "1.32026", 560, 573, 586)
	v.Fills[586] = fill(586, "253", "-23320", "1.32026") // 10 units short of 0.2333 lots
	requireActions(t, Plan(v, d, now, cfg))
}
