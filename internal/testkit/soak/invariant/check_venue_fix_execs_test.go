package invariant

import (
	"testing"
	"time"
)

// fixExecs is the FIX lane's evidence with the desk's journal: fixFixture's orders, each filled
// in one execution the journal recorded once and allocated to its trade (its opening order's
// ClOrdID; the positions' venueTradeId, the trade's public id, is not it); position 11 closed
// 100 ms after its close executed; and one web process told, after that close, that the venue
// no longer held trade 101.
type fixExecs struct {
	*abook
	drops []WatchDrop
}

func fixExecsFixture() *fixExecs {
	f := &fixExecs{abook: fixFixture()}
	s, vs := f.s, f.vs
	s.Positions[1].ClosedAt = ntime(at(4).Add(100 * time.Millisecond))
	for i, id := range []string{"E100", "E101", "E101c1", "E103", "", "EV9"} {
		if o := &vs.Orders[i]; id != "" {
			o.Executions = []VenueExecution{{ExecID: id, Qty: o.CumQty, Px: o.AvgPx}}
		}
	}
	s.FIXExecutions = []dbFIXExecution{
		{ID: 1, ExecID: "E100", ClOrdID: "100", Symbol: "EURUSD", Units: dec("10000"), Price: dec("1.10010"), At: at(1)},
		{ID: 2, ExecID: "E101", ClOrdID: "101", Symbol: "EURUSD", Units: dec("20000"), Price: dec("1.10020"), At: at(2)},
		{ID: 3, ExecID: "E103", ClOrdID: "103", Symbol: "GBPUSD", Units: dec("-10000"), Price: dec("1.25000"), At: at(3)},
		{ID: 4, ExecID: "E101c1", ClOrdID: "101.c1", Symbol: "EURUSD", Units: dec("-20000"), Price: dec("1.10000"), At: at(4)},
		// Learned from a status report: the journal names it by the report.
		// The venue's own order, journaled under its OrderID (docs/fix.md, «Whose execution»).
		{ID: 5, ExecID: "venue:V-k-9#5000", ClOrdID: "venue:V-k-9", Symbol: "GBPUSD", Units: dec("5000"), Price: dec("1.20000"), At: at(5)},
	}
	s.FIXAllocations = []dbFIXAllocation{
		{Execution: 1, Trade: "100", Units: dec("10000")},
		{Execution: 2, Trade: "101", Units: dec("20000")},
		{Execution: 3, Trade: "103", Units: dec("-10000")},
		{Execution: 4, Trade: "101", Units: dec("-20000")},
		{Execution: 5, Trade: "103", Units: dec("5000")},
	}
	f.drops = []WatchDrop{{Proc: "web2", At: at(4).Add(300 * time.Millisecond), Position: 11}}
	return f
}

// addExecution records execution id of clOrdID in the journal, all of it allocated to trade.
func (f *fixExecs) addExecution(id int64, execID, clOrdID, trade, units string, sec float64) {
	f.s.FIXExecutions = append(f.s.FIXExecutions, dbFIXExecution{ID: id, ExecID: execID, ClOrdID: clOrdID, Symbol: "EURUSD", Units: dec(units), Price: dec("1.1"), At: at(sec)})
	f.s.FIXAllocations = append(f.s.FIXAllocations, dbFIXAllocation{Execution: id, Trade: trade, Units: dec(units)})
}

// dropExecution removes journal execution id and its allocations.
func (f *fixExecs) dropExecution(id int64) {
	var es []dbFIXExecution
	for _, e := range f.s.FIXExecutions {
		if e.ID != id {
			es = append(es, e)
		}
	}
	var as []dbFIXAllocation
	for _, a := range f.s.FIXAllocations {
		if a.Execution != id {
			as = append(as, a)
		}
	}
	f.s.FIXExecutions, f.s.FIXAllocations = es, as
}

func TestVenueExecutionsBookedCheckFlagsAnExecutionNotBookedExactlyOnce(t *testing.T) {
	runCases(t, fixExecsFixture, func(f *fixExecs) Result { return checkVenueExecutionsBooked(f.s, f.vs) }, []checkCase[*fixExecs]{
		{"a venue-side close the journal never recorded", func(f *fixExecs) { f.dropExecution(5) },
			"the venue executed 5000 units of venue:V-k-9 (GBPUSD BUY, executions EV9 5000@1.2); the desk's journal records 0"},
		{"a venue-side close journaled under its numeric ClOrdID, a desk order's", func(f *fixExecs) { f.s.FIXExecutions[4].ClOrdID = "101" },
			"the venue executed 20000 units of 101 (EURUSD BUY, executions E101 20000@1.1002); the desk's journal records 25000, more than once"},
		{"an open filled in three executions, one journaled twice", func(f *fixExecs) {
			f.vs.Orders[0].Executions = []VenueExecution{{ExecID: "E100a", Qty: dec("3333"), Px: dec("1.1001")}, {ExecID: "E100b", Qty: dec("3333"), Px: dec("1.1001")}, {ExecID: "E100c", Qty: dec("3334"), Px: dec("1.1001")}}
			f.s.FIXExecutions[0].ExecID, f.s.FIXExecutions[0].Units, f.s.FIXAllocations[0].Units = "E100a", dec("3333"), dec("3333")
			f.addExecution(6, "E100b", "100", "100", "3333", 1.1)
			f.addExecution(7, "E100c", "100", "100", "3334", 1.2)
			f.addExecution(8, "E100b", "100", "100", "3333", 1.3)
		}, "the venue executed 10000 units of 100 (EURUSD BUY, executions E100a 3333@1.1001 E100b 3333@1.1001 E100c 3334@1.1001); the desk's journal records 13333, more than once"},
		{"a close recorded twice (its trade report and a status report)", func(f *fixExecs) { f.addExecution(6, "101.c1#20000", "101.c1", "101", "-20000", 4.5) },
			"the venue executed 20000 units of 101.c1 (EURUSD SELL, executions E101c1 20000@1.1); the desk's journal records 40000, more than once"},
		{"a journal execution the venue never made", func(f *fixExecs) { f.s.FIXExecutions[0].ExecID = "E999" },
			"the desk's journal records execution E999 of 100 (10000 units at 1.1001), which the venue never made (its executions: E100 10000@1.1001)"},
		{"executions of an order the venue rejected", func(f *fixExecs) { f.addExecution(6, "E104", "104", "104", "10000", 6) },
			"the desk's journal records 1 executions of 104 (first E104, 10000 units), which the venue never filled"},
		{"a close filled in two executions, the desk booked only the last", func(f *fixExecs) {
			f.vs.Orders[2].Executions = []VenueExecution{{ExecID: "E101c1a", Qty: dec("12000"), Px: dec("1.1")}, {ExecID: "E101c1b", Qty: dec("8000"), Px: dec("1.1")}}
			f.s.FIXExecutions[3].ExecID, f.s.FIXExecutions[3].Units, f.s.FIXAllocations[3].Units = "E101c1a", dec("-12000"), dec("-12000")
			f.addExecution(6, "E101c1b", "101.c1", "101", "-8000", 4.1)
			f.s.Positions[1].Status, f.s.Positions[1].Volume, f.s.Positions[1].ClosedAt.Valid = "OPEN", dec("0.12"), false
		}, "position 11 (EURUSD BUY, OPEN, 0.12 lots left) books 12000 units of trade 101; the executions the journal allocated to it leave 0"},
		{"a venue-side close allocated to a trade the desk never booked", func(f *fixExecs) { f.s.Positions[3].Volume = dec("0.1") },
			"position 13 (GBPUSD SELL, OPEN, 0.1 lots left) books -10000 units of trade 103; the executions the journal allocated to it leave -5000"},
		{"odd units rounded to lots", func(f *fixExecs) {
			f.vs.Orders[0].CumQty, f.vs.Orders[0].Executions[0].Qty = dec("12345"), dec("12345")
			f.s.FIXExecutions[0].Units, f.s.FIXAllocations[0].Units = dec("12345"), dec("12345")
			f.s.Positions[0].OpenVolume, f.s.Positions[0].Volume = dec("0.1235"), dec("0.1235")
		}, "trade 100 opened with 12345 units at the venue; its position 10 opened 0.1235 lots"},
		{"two desk positions linked to one trade", func(f *fixExecs) {
			p := f.s.Positions[0]
			p.ID = 14
			f.s.Positions = append(f.s.Positions, p)
		}, "the journal allocates executions to trade 100 (it holds 10000 units), and 2 desk positions are linked to it (10 OPEN 0.1 lots, 14 OPEN 0.1 lots)"},
	})
}

// crossed makes the desk's close 101.c1 cross the venue's own sell of trade 101's 20,000 units
// (docs/fix.md, «A close that crosses the venue's own»): the venue's order journaled first took
// the trade to zero, the close's execution is allocated past it to trade 101.c1, and — when
// orphanClosed — the reconciler's close 101.c1.c1 took that back.
func (f *fixExecs) crossed(orphanClosed bool) {
	f.vs.Orders = append(f.vs.Orders, VenueOrder{OrderID: "V-k-10", Own: true, Symbol: "EURUSD", Side: "SELL", Status: "FILLED", Qty: dec("20000"), CumQty: dec("20000"), AvgPx: dec("1.1"),
		Executions: []VenueExecution{{ExecID: "EV10", Qty: dec("20000"), Px: dec("1.1")}}})
	f.addExecution(6, "EV10", "venue:V-k-10", "101", "-20000", 3.5)
	f.s.FIXAllocations[3].Trade = "101.c1"
	if orphanClosed {
		f.vs.Orders = append(f.vs.Orders, VenueOrder{ClOrdID: "101.c1.c1", Symbol: "EURUSD", Side: "BUY", Status: "FILLED", Qty: dec("20000"), CumQty: dec("20000"), AvgPx: dec("1.1"),
			Executions: []VenueExecution{{ExecID: "E101c1c1", Qty: dec("20000"), Px: dec("1.1")}}})
		f.addExecution(7, "E101c1c1", "101.c1.c1", "101.c1", "20000", 6)
	}
}

func TestVenueExecutionsBookedCheckTakesACloseCrossingTheVenuesOwn(t *testing.T) {
	runCases(t, fixExecsFixture, func(f *fixExecs) Result { return checkVenueExecutionsBooked(f.s, f.vs) }, []checkCase[*fixExecs]{
		{"what the close executed past its trade closed as an orphan", func(f *fixExecs) { f.crossed(true) }, ""},
		{"what the close executed past its trade still held", func(f *fixExecs) { f.crossed(false) },
			"close 101.c1 executed -20000 units past its trade, and the venue still holds them"},
	})
}

// A desk close wholly past its trade is not booked on the position: the reconciler booked the
// position at the venue's own close's price, which the journal allocated to the trade first (soak
// seed 653824426413480: close 174660.c1 at 146.053, position 166222 closed at the venue's 146.06).
func TestVenueFillsBookedCheckLeavesACloseWhollyPastItsTrade(t *testing.T) {
	runCases(t, fixExecsFixture, func(f *fixExecs) Result { return checkVenueFillsBooked(f.s, f.vs) }, []checkCase[*fixExecs]{
		{"the position booked at the venue's own close", func(f *fixExecs) {
			f.crossed(true)
			f.vs.Orders[6].AvgPx, f.vs.Orders[6].Executions[0].Px = dec("1.0995"), dec("1.0995")
			f.s.Deals[0].Price = ndec("1.09948")
		}, ""},
		{"a close within its trade still booked at its price", func(f *fixExecs) { f.s.Deals[0].Price = ndec("1.09948") },
			"the venue filled close 101.c1 (SELL 20000 units at 1.1), but position 11"},
	})
}

func TestVenueWatchedCheckFlagsAPositionDroppedWhileTheVenueHeldItsTrade(t *testing.T) {
	runCases(t, fixExecsFixture, func(f *fixExecs) Result { return checkVenueWatched(f.s, f.drops) }, []checkCase[*fixExecs]{
		{"closed on the desk before the venue executed its close", func(f *fixExecs) { f.s.Positions[1].ClosedAt = ntime(at(3)) },
			"position 11 (EURUSD BUY) was closed on the desk at 12:00:03.000, 1s before the venue stopped holding its trade 101 (at 12:00:04.000)"},
		{"closed on the desk while the venue still holds the trade", func(f *fixExecs) { f.dropExecution(4) },
			"position 11 (EURUSD BUY) was closed on the desk at 12:00:04.100 while the venue still holds 20000 units of its trade 101"},
		{"open on the desk after the venue closed the trade", func(f *fixExecs) { f.addExecution(6, "EV10", "venue:V-k-10", "100", "-10000", 7) },
			"position 10 (EURUSD BUY 0.1 lots) is open on the desk; the venue stopped holding its trade 100 at 12:00:07.000"},
		{"a web process told the venue had no trade it still holds", func(f *fixExecs) {
			f.drops = append(f.drops, WatchDrop{Proc: "web3", At: at(6), Position: 10})
		}, "web3 was told at 12:00:06.000 that the venue no longer held position 10's trade 100 (EURUSD BUY) and stopped watching it; the venue still holds it"},
		{"a web process told so before the venue's close", func(f *fixExecs) { f.drops[0].At = at(3) },
			"web2 was told at 12:00:03.000 that the venue no longer held position 11's trade 101 (EURUSD BUY) and stopped watching it; the venue held it until 12:00:04.000"},
	})
}
