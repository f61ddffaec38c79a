package fix_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/venue"
)

// A race read from the code while chasing the soak's FIX lane (seed 237868095786120): after a
// takeover the reconciler asks the venue about an inherited reservation, and the trade's close
// sends that same ClOrdID just after the venue answered "unknown order" (the question was on the
// wire before the order). The venue executes the close and loses its report. "Unknown" was the truth when asked, not about the
// close sent since: the reconciler must not take the close back as an unsent reservation, or
// nobody asks about it again — the desk shows the trade open for ever while the venue closed it.
func TestAReservedCloseSentWhileTheReconcilerAsksIsAskedAboutLater(t *testing.T) {
	r, key, trade := reservedRig(t)
	r.halt()
	r.start(t, 5*time.Second)
	if c, ready, inherited := r.session.Reservation(key); c != key+".c1" || !ready || !inherited {
		t.Fatalf("the new holder's reservation %q ready=%v inherited=%v, want %s.c1 inherited", c, ready, inherited, key)
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	closed := make(chan error, 1)
	r.session.AfterReservedAsk(func(clOrdID string) {
		if clOrdID != key+".c1" {
			return
		}
		r.session.AfterReservedAsk(nil)
		// The trade's stop triggers now: its whole close sends the inherited reservation.
		go func() {
			short, shortCancel := context.WithTimeout(ctx, time.Second)
			defer shortCancel()
			_, err := r.session.CloseTrade(short, trade, nil)
			closed <- err
		}()
		poll.Until(t, 10*time.Second, time.Millisecond, "the close reached the venue", func() bool { return venueCloses(r.venue, key)[key+".c1"] == 1 })
	})
	if _, err := r.session.OpenTrades(ctx); err != nil { // the reconciler's run that asks
		t.Fatal(err)
	}
	if err := <-closed; !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("the close whose report the venue lost: %v, want the outcome unknown", err)
	}

	open, err := r.session.OpenTrades(ctx) // the reconciler's next run
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range open {
		if o.ID == trade {
			t.Fatalf("after the reconciler's next run the desk lists %+v open; the venue closed it (%s, report lost)", o, key+".c1")
		}
	}
	if st := journalStatus(t, key+".c1"); st != "FILLED" {
		t.Fatalf("the close's row is %s, want FILLED from the venue's status answer", st)
	}
	if got := venueCloses(r.venue, key); len(got) != 1 || got[key+".c1"] != 1 {
		t.Fatalf("venue closes %v, want %s.c1 sent once", got, key)
	}
}

// A reserved close sent, its wait over before the venue executed it (latency), and its report
// lost: the reconciler's question finds it still executing (OrdStatus=0), so its row is NEW, no
// longer RESERVED. The next run asks again — as a NEW row of the journal — and books the fill:
// a sent reservation whose row left RESERVED is never left to a send nobody waits for.
func TestASentReservationWhoseRowIsNewIsAskedAgain(t *testing.T) {
	r := newRig(t, 5*time.Second, 400*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: key, Symbol: "EURUSD", Units: dd("10000")})
	if err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	trade := out.Fill.TradeOpened
	r.session.ReserveClose(trade)
	if err := r.session.WaitReservations(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	short, shortCancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = r.session.CloseTrade(short, trade, nil)
	shortCancel()
	if !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("close: %v, want the outcome unknown", err)
	}
	if _, err := r.session.OpenTrades(ctx); err != nil { // asked while the venue executes it
		t.Fatal(err)
	}
	if st := journalStatus(t, key+".c1"); st != "NEW" {
		t.Fatalf("the reconciler asked while the venue executes it: row %s, want NEW (OrdStatus=0)", st)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the reconciler books the close", func() bool {
		if _, err := r.session.OpenTrades(ctx); err != nil {
			t.Fatal(err)
		}
		return journalStatus(t, key+".c1") == "FILLED"
	})
	if lt, ok := r.session.LiveTrades()[key]; ok {
		t.Fatalf("the holder keeps %+v, want the trade closed", lt)
	}
}
