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
	ctx := context.Background()
	id := orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "EURUSD", Units: dd("10000")})
	if err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	trade := out.Fill.TradeOpened
	// The venue fills the close and never reports it: its outcome is unknown here.
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	if out, err := r.session.CloseTrade(ctx, trade, nil); err == nil {
		t.Fatalf("a close whose report was lost: %+v, want an unknown outcome", out)
	}
	var c1 *fixvenue.Order
	for _, o := range r.venue.State().Orders {
		if o.ClOrdID == id+".c1" {
			c1 = &o
		}
	}
	if c1 == nil || c1.Status != "2" {
		t.Fatalf("the venue's close %s.c1: %+v, want filled", id, c1)
	}
	// Another process journals its fill; this session's trades still hold the trade open.
	if err := r.session.JournalElsewhere(fix.TestReport{ExecID: c1.ExecID, ExecType: "F", OrdStatus: "2", ClOrdID: c1.ClOrdID, OrderID: c1.OrderID,
		Symbol: c1.Symbol, Side: c1.Side, OrderQty: c1.Qty, CumQty: c1.CumQty, AvgPx: c1.AvgPx, LastQty: c1.CumQty, LastPx: c1.AvgPx, Time: c1.Time}); err != nil {
		t.Fatal(err)
	}
	_, err = r.session.CloseTrade(ctx, trade, nil)
	var verr *venue.Error
	if !errors.As(err, &verr) || verr.Status != 404 {
		t.Fatalf("the next close of a trade closed elsewhere: %v, want 404 (no open trade)", err)
	}
	if n := closeOrders(r.venue, id); n != 1 {
		t.Fatalf("the venue received %d closes of trade %s, want 1", n, trade)
	}
}

// The final report of a pending close whose fill the journal already holds (journaled by another
// process, or in a commit whose answer was lost, and now resent) records nothing new: the holder
// reads the trade from the journal again, so it knows the trade closed, and never sends the
// second close a netting venue would execute.
func TestAResentReportOfAJournaledFillClosesTheTradeInMemory(t *testing.T) {
	r := newRig(t, time.Second)
	ctx := context.Background()
	id := orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "EURUSD", Units: dd("10000")})
	if err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	trade := out.Fill.TradeOpened
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	if out, err := r.session.CloseTrade(ctx, trade, nil); err == nil {
		t.Fatalf("a close whose report is held: %+v, want an unknown outcome", out)
	}
	var c1 *fixvenue.Order
	for _, o := range r.venue.State().Orders {
		if o.ClOrdID == id+".c1" {
			c1 = &o
		}
	}
	if c1 == nil || c1.Status != "2" {
		t.Fatalf("the venue's close %s.c1: %+v, want filled", id, c1)
	}
	if err := r.session.JournalElsewhere(fix.TestReport{ExecID: c1.ExecID, ExecType: "F", OrdStatus: "2", ClOrdID: c1.ClOrdID, OrderID: c1.OrderID,
		Symbol: c1.Symbol, Side: c1.Side, OrderQty: c1.Qty, CumQty: c1.CumQty, AvgPx: c1.AvgPx, LastQty: c1.CumQty, LastPx: c1.AvgPx, Time: c1.Time}); err != nil {
		t.Fatal(err)
	}
	if n := r.venue.Release(c1.ClOrdID); n != 1 {
		t.Fatalf("released %d held reports, want 1", n)
	}
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the holder forgets the closed trade", func() bool {
		_, open := r.session.LiveTrades()[id]
		return !open
	})
	_, err = r.session.CloseTrade(ctx, trade, nil)
	var verr *venue.Error
	if !errors.As(err, &verr) || verr.Status != 404 {
		t.Fatalf("the next close of the closed trade: %v, want 404 (no open trade)", err)
	}
	if n := closeOrders(r.venue, id); n != 1 {
		t.Fatalf("the venue received %d closes of trade %s, want 1", n, trade)
	}
}
