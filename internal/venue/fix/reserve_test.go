package fix_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/venue"
)

// reservedRig opens a 10,000-unit EURUSD buy on a fresh rig and reserves its whole close: the
// rig, the trade's key (its ClOrdID) and public id.
func reservedRig(t *testing.T) (*rig, string, string) {
	t.Helper()
	r := newRig(t, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: key, Symbol: "EURUSD", Units: dd("10000")})
	if err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	r.session.ReserveClose(out.Fill.TradeOpened)
	if err := r.session.WaitReservations(ctx); err != nil {
		t.Fatal(err)
	}
	if c, ready, _ := r.session.Reservation(key); c != key+".c1" || !ready {
		t.Fatalf("reservation %q ready=%v, want %s.c1 ready", c, ready, key)
	}
	if st := journalStatus(t, key+".c1"); st != "RESERVED" {
		t.Fatalf("the reservation's row is %q, want RESERVED", st)
	}
	return r, key, out.Fill.TradeOpened
}

func journalStatus(t *testing.T, clOrdID string) string {
	t.Helper()
	var st string
	if err := testDB.QueryRow("SELECT `status` FROM `fx_fix_order` WHERE `clOrdId` = ?", clOrdID).Scan(&st); err != nil {
		return "none"
	}
	return st
}

// waitHeld waits until the venue holds a report: what (an order) reached it. The venue's state
// announces nothing, so it is polled, a deadline (ctx) away.
func waitHeld(ctx context.Context, t *testing.T, v *fixvenue.Server, what string) {
	t.Helper()
	for len(v.State().Held) == 0 {
		if ctx.Err() != nil {
			t.Fatal(what + " never reached the venue")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// venueCloses is the ClOrdIDs of trade key's closes at the venue and how many times each was sent.
func venueCloses(v *fixvenue.Server, key string) map[string]int {
	out := map[string]int{}
	for _, o := range v.State().Orders {
		if len(o.ClOrdID) > len(key) && o.ClOrdID[:len(key)+2] == key+".c" {
			out[o.ClOrdID] = len(o.SeqNums)
		}
	}
	return out
}

// The trigger sends the reserved ClOrdID with no identity commit in its way: identity batches
// are held (none can commit), and the reserved close still goes and fills; its row's state and
// the units sent come from its report.
func TestReservedCloseIsSentWithoutACommit(t *testing.T) {
	r, key, trade := reservedRig(t)
	r.session.HoldIdentities(1 << 30)
	defer r.session.HoldIdentities(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := r.session.CloseTrade(ctx, trade, nil)
	if err != nil || out.Fill == nil || len(out.Fill.TradesClosed) != 1 {
		t.Fatalf("close: %+v %v", out, err)
	}
	if got := venueCloses(r.venue, key); len(got) != 1 || got[key+".c1"] != 1 {
		t.Fatalf("venue closes %v, want %s.c1 once", got, key)
	}
	var qty string
	if err := testDB.QueryRow("SELECT `status`, `qty` FROM `fx_fix_order` WHERE `clOrdId` = ?", key+".c1").Scan(new(string), &qty); err != nil || journalStatus(t, key+".c1") != "FILLED" || !dd(qty).Equal(dd("10000")) {
		t.Fatalf("row %s: %s qty %s (%v), want FILLED 10000", key+".c1", journalStatus(t, key+".c1"), qty, err)
	}
}

// A trader's partial close while the whole close is reserved takes the next number; the
// reservation stays "close the rest" and closes what is open at its trigger.
func TestPartialCloseOfAReservedTradeTakesTheNextNumber(t *testing.T) {
	r, key, trade := reservedRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	part := dd("4000")
	if out, err := r.session.CloseTrade(ctx, trade, &part); err != nil || out.Fill == nil {
		t.Fatalf("partial close: %+v %v", out, err)
	}
	if c, ready, _ := r.session.Reservation(key); c != key+".c1" || !ready {
		t.Fatalf("after the partial close the reservation is %q ready=%v, want %s.c1", c, ready, key)
	}
	out, err := r.session.CloseTrade(ctx, trade, nil)
	if err != nil || out.Fill == nil || !out.Fill.Units.Equal(dd("-6000")) {
		t.Fatalf("close the rest: %+v %v", out, err)
	}
	if got := venueCloses(r.venue, key); len(got) != 2 || got[key+".c1"] != 1 || got[key+".c2"] != 1 {
		t.Fatalf("venue closes %v, want %s.c2 (4000) then %s.c1 (the rest)", got, key, key)
	}
	if u, _ := r.venue.NetPosition("EURUSD"); !u.IsZero() {
		t.Fatalf("venue net %s, want 0", u)
	}
}

// The stop modified while the reserved close is in flight reserves nothing new: one close at a
// time, and the trade it closes needs none.
func TestStopModifiedWhileReservedCloseInFlight(t *testing.T) {
	r, key, trade := reservedRig(t)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var out venue.Outcome
	var err error
	wg.Go(func() { out, err = r.session.CloseTrade(ctx, trade, nil) })
	waitHeld(ctx, t, r.venue, "the reserved close")
	r.session.ReserveClose(trade) // the trader moves the stop
	if err := r.session.WaitReservations(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := r.session.Reservation(key); c != "" {
		t.Fatalf("a reservation %q while the reserved close is in flight", c)
	}
	r.venue.Release("")
	wg.Wait()
	if err != nil || out.Fill == nil || len(out.Fill.TradesClosed) != 1 {
		t.Fatalf("close: %+v %v", out, err)
	}
	if got := venueCloses(r.venue, key); len(got) != 1 || journalStatus(t, key+".c2") != "none" {
		t.Fatalf("venue closes %v, journal %s.c2 %s: want only %s.c1", got, key, journalStatus(t, key+".c2"), key)
	}
}

// A reserved close the venue rejected leaves the trade open: its close is reserved again.
func TestRejectedReservedCloseIsReservedAgain(t *testing.T) {
	r, key, trade := reservedRig(t)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultReject, Reason: fixvenue.RejectMarketClosed}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := r.session.CloseTrade(ctx, trade, nil); err != nil || out.Cancelled == nil {
		t.Fatalf("rejected close: %+v %v", out, err)
	}
	if err := r.session.WaitReservations(ctx); err != nil {
		t.Fatal(err)
	}
	if c, ready, _ := r.session.Reservation(key); c != key+".c2" || !ready || journalStatus(t, key+".c2") != "RESERVED" {
		t.Fatalf("reservation %q ready=%v, row %s; want %s.c2 RESERVED", c, ready, journalStatus(t, key+".c2"), key)
	}
}

// A takeover: the earlier holder sent the reserved close and stopped before any write (its
// report held at the venue). The new holder inherits the reservation; its whole close sends the
// same ClOrdID, which the venue refuses as a duplicate, and the earlier send is the close — one
// close at the venue, answered as a fill.
func TestTakeoverSendsTheReservedCloseOnceAtTheVenue(t *testing.T) {
	r, key, trade := reservedRig(t)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go func() { _, _ = r.session.SendRaw(ctx, key+".c1", "EURUSD", "2", dd("10000")) }()
	waitHeld(ctx, t, r.venue, "the earlier holder's close")
	r.halt()
	r.start(t, 5*time.Second)
	if c, ready, inherited := r.session.Reservation(key); c != key+".c1" || !ready || !inherited {
		t.Fatalf("the new holder's reservation %q ready=%v inherited=%v, want %s.c1 inherited", c, ready, inherited, key)
	}
	out, err := r.session.CloseTrade(ctx, trade, nil)
	if err != nil || out.Fill == nil || len(out.Fill.TradesClosed) != 1 {
		t.Fatalf("the new holder's close: %+v %v", out, err)
	}
	if got := venueCloses(r.venue, key); len(got) != 1 {
		t.Fatalf("venue closes %v, want only %s.c1", got, key)
	}
	if u, _ := r.venue.NetPosition("EURUSD"); !u.IsZero() {
		t.Fatalf("venue net %s, want 0: closed once", u)
	}
	r.venue.Release("")
}

// A takeover with no close by the new holder: the earlier holder sent the reserved close and
// stopped before any write, and the venue holds its report for good (lost, or slow). Nothing
// triggers the new holder's close (no tick reaches the stop again); its reconciler asks the venue
// about the inherited reservation and adopts the earlier send: the trade closed, its row FILLED,
// one close at the venue — never a desk trade shown open while the venue holds it closed.
func TestTakeoverAdoptsAnInheritedReservationTheVenueExecuted(t *testing.T) {
	r, key, trade := reservedRig(t)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go func() { _, _ = r.session.SendRaw(ctx, key+".c1", "EURUSD", "2", dd("10000")) }()
	waitHeld(ctx, t, r.venue, "the earlier holder's close")
	r.halt()
	r.start(t, 5*time.Second)
	open, err := r.session.OpenTrades(ctx) // the reconciler's run
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range open {
		if o.ID == trade {
			t.Fatalf("after the reconciler's run the desk lists %+v open; the venue closed it (%s held)", o, key+".c1")
		}
	}
	if st := journalStatus(t, key+".c1"); st != "FILLED" {
		t.Fatalf("the inherited reservation's row is %s, want FILLED from the venue's status answer", st)
	}
	if got := venueCloses(r.venue, key); len(got) != 1 || got[key+".c1"] != 1 {
		t.Fatalf("venue closes %v, want %s.c1 sent once", got, key)
	}
	if u, _ := r.venue.NetPosition("EURUSD"); !u.IsZero() {
		t.Fatalf("venue net %s, want 0: closed once", u)
	}
	r.venue.Release("")
}

// A reserved close this holder sent whose report never comes (held by the venue): its wait ends
// with the outcome unknown, and its row is still RESERVED (the send wrote nothing). The
// reconciler's next run asks the venue about it and books what it did — the trade closed, with
// no further close of the trade needed to find out.
func TestReservedCloseWithoutAReportIsAskedAboutByTheReconciler(t *testing.T) {
	r, key, trade := reservedRig(t)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	short, shortCancel := context.WithTimeout(ctx, time.Second)
	_, err := r.session.CloseTrade(short, trade, nil)
	shortCancel()
	if !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("close with its report held: %v, want the outcome unknown", err)
	}
	if st := journalStatus(t, key+".c1"); st != "RESERVED" {
		t.Fatalf("the sent reservation's row is %s, want RESERVED (nothing written at the send)", st)
	}
	open, err := r.session.OpenTrades(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range open {
		if o.ID == trade {
			t.Fatalf("after the reconciler's run the desk lists %+v open; the venue closed it (%s held)", o, key+".c1")
		}
	}
	if st := journalStatus(t, key+".c1"); st != "FILLED" {
		t.Fatalf("the reserved close's row is %s, want FILLED from the venue's status answer", st)
	}
	if got := venueCloses(r.venue, key); len(got) != 1 || got[key+".c1"] != 1 {
		t.Fatalf("venue closes %v, want %s.c1 sent once", got, key)
	}
	r.venue.Release("")
}

// A takeover where the earlier holder never sent its reservation: the reconciler's question
// finds the venue does not know it, and it stays the trade's whole close, no longer inherited.
func TestTakeoverKeepsAnInheritedReservationTheVenueNeverSaw(t *testing.T) {
	r, key, trade := reservedRig(t)
	r.halt()
	r.start(t, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	open, err := r.session.OpenTrades(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range open {
		found = found || o.ID == trade
	}
	if c, ready, inherited := r.session.Reservation(key); !found || c != key+".c1" || !ready || inherited {
		t.Fatalf("trade listed %v, reservation %q ready=%v inherited=%v; want it open with %s.c1 its own", found, c, ready, inherited, key)
	}
	if got := venueCloses(r.venue, key); len(got) != 0 {
		t.Fatalf("venue closes %v, want none: asking sends nothing", got)
	}
}

// After a takeover, a partial close of a trade whose inherited reservation an earlier holder
// may have sent asks the venue first: it was sent and closed the trade, so nothing more goes.
func TestPartialCloseAfterTakeoverAsksAboutTheInheritedReservation(t *testing.T) {
	r, key, trade := reservedRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	sent, sendCancel := context.WithTimeout(ctx, 2*time.Second)
	_, _ = r.session.SendRaw(sent, key+".c1", "EURUSD", "2", dd("10000")) // its report lost
	sendCancel()
	r.halt()
	r.start(t, 5*time.Second)
	part := dd("4000")
	_, err := r.session.CloseTrade(ctx, trade, &part)
	var verr *venue.Error
	if !errors.As(err, &verr) || verr.Status != 404 {
		t.Fatalf("partial close after the inherited reservation filled: %v, want 404 (the trade is closed)", err)
	}
	if got := venueCloses(r.venue, key); len(got) != 1 {
		t.Fatalf("venue closes %v, want only %s.c1", got, key)
	}
	if u, _ := r.venue.NetPosition("EURUSD"); !u.IsZero() {
		t.Fatalf("venue net %s, want 0", u)
	}
}

// The venue refuses a ClOrdID it saw, sent again without PossDupFlag, as a duplicate order
// (ExecType=8, OrdStatus=8, OrdRejReason=6) — never with the old order's status, which the desk
// would read as this order's. The desk journals nothing from the refusal: the old order stays
// FILLED, the venue's net unchanged.
func TestVenueRefusesARepeatedClOrdIDAsADuplicateOrder(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := orderID()
	if out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "EURUSD", Units: dd("10000")}); err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	before, _ := r.venue.NetPosition("EURUSD")
	rep, err := r.session.SendRaw(ctx, id, "EURUSD", "1", dd("10000"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExecType != "8" || rep.OrdStatus != "8" || !rep.HasRejectReason || rep.RejectReason != 6 {
		t.Fatalf("the venue answered a repeated ClOrdID with ExecType=%s OrdStatus=%s OrdRejReason=%d (%v); want 8/8/6", rep.ExecType, rep.OrdStatus, rep.RejectReason, rep.HasRejectReason)
	}
	if after, _ := r.venue.NetPosition("EURUSD"); !after.Equal(before) {
		t.Fatalf("venue net %s after the duplicate, was %s", after, before)
	}
	// The refusal was handed on after its batch was journaled: the row shows what it did.
	if st := journalStatus(t, id); st != "FILLED" {
		t.Fatalf("the order's row is %s after the venue refused its duplicate, want FILLED", st)
	}
}
