package fix_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

// A close whose final report another process journaled (the old holder, hearing it after this
// holder loaded its trades) closed the trade: the next close of it asks the venue, finds the
// report already journaled, and must read the trade from the journal again rather than send a
// second close — which a netting venue would execute, selling what the desk no longer holds.
func TestACloseJournaledElsewhereIsNeverSentAgain(t *testing.T) {
	r := newRig(t, time.Second)
	// The venue fills the close and never reports it; another process journals its fill, and
	// this session's trades still hold the trade open.
	key, trade, c1 := closeWithFault(t, r, fixvenue.FaultLose)
	journalElsewhere(t, r, c1)
	closedOnce(t, r, key, trade)
}

// The final report of a pending close whose fill the journal already holds (journaled by another
// process, or in a commit whose answer was lost, and now resent) records nothing new: the holder
// reads the trade from the journal again, so it knows the trade closed, and never sends the
// second close a netting venue would execute.
func TestAResentReportOfAJournaledFillClosesTheTradeInMemory(t *testing.T) {
	r := newRig(t, time.Second)
	key, trade, c1 := closeWithFault(t, r, fixvenue.FaultHold)
	journalElsewhere(t, r, c1)
	if n := r.venue.Release(c1.ClOrdID); n != 1 {
		t.Fatalf("released %d held reports, want 1", n)
	}
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the holder forgets the closed trade", func() bool {
		_, open := r.session.LiveTrades()[key]
		return !open
	})
	closedOnce(t, r, key, trade)
}

// closeWithFault opens a trade of 10,000 EURUSD and closes it with the venue's report faulted
// (lost or held), so the close's outcome is unknown here; it answers the trade's key and public
// id and the venue's filled close <key>.c1.
func closeWithFault(t *testing.T, r *rig, kind string) (key, trade string, c1 fixvenue.Order) {
	t.Helper()
	ctx := context.Background()
	key = orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: key, Symbol: "EURUSD", Units: dd("10000")})
	if err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	trade = out.Fill.TradeOpened
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: kind}); err != nil {
		t.Fatal(err)
	}
	if out, err := r.session.CloseTrade(ctx, trade, nil); err == nil {
		t.Fatalf("a close whose report is faulted (%s): %+v, want an unknown outcome", kind, out)
	}
	for _, o := range r.venue.State().Orders {
		if o.ClOrdID == key+".c1" {
			c1 = o
		}
	}
	if c1.Status != "2" {
		t.Fatalf("the venue's close %s.c1: %+v, want filled", key, c1)
	}
	return key, trade, c1
}

// journalElsewhere records the venue's fill of close o as another process would.
func journalElsewhere(t *testing.T, r *rig, o fixvenue.Order) {
	t.Helper()
	if err := r.session.JournalElsewhere(fix.TestReport{ExecID: o.ExecID, ExecType: "F", OrdStatus: "2", ClOrdID: o.ClOrdID, OrderID: o.OrderID,
		Symbol: o.Symbol, Side: o.Side, OrderQty: o.Qty, CumQty: o.CumQty, AvgPx: o.AvgPx, LastQty: o.CumQty, LastPx: o.AvgPx, Time: o.Time}); err != nil {
		t.Fatal(err)
	}
}

// closedOnce checks that the next close of trade finds it gone (404) and that the venue holds
// one close of it.
func closedOnce(t *testing.T, r *rig, key, trade string) {
	t.Helper()
	_, err := r.session.CloseTrade(context.Background(), trade, nil)
	var verr *venue.Error
	if !errors.As(err, &verr) || verr.Status != 404 {
		t.Fatalf("the next close of the closed trade: %v, want 404 (no open trade)", err)
	}
	if n := closeOrders(r.venue, key); n != 1 {
		t.Fatalf("the venue received %d closes of trade %s, want 1", n, trade)
	}
}
