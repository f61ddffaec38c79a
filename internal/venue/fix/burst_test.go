package fix_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/testkit/tcpproxy"
	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

// The burst path (docs/fix.md, «The burst on one session»): closes decided on the holder's
// trades in memory, their identity rows committed together, reports journaled in batches.

// openTrade places a market buy of units on symbol and answers the trade's public id and key.
func openTrade(t *testing.T, r *rig, symbol, units string) (id, key string) {
	t.Helper()
	key = orderID()
	out, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: key, Symbol: symbol, Units: dd(units)})
	if err != nil || out.Fill == nil {
		t.Fatalf("open %s: %+v %v", key, out, err)
	}
	return out.Fill.TradeOpened, key
}

// closeAsync closes trade id (all of it) on a goroutine of its own; the answer comes on the channel.
func closeAsync(r *rig, id string) <-chan error {
	done := make(chan error, 1)
	go func() {
		out, err := r.session.CloseTrade(context.Background(), id, nil)
		if err == nil && out.Fill == nil {
			err = errors.New("the close did not fill")
		}
		done <- err
	}()
	return done
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("a close did not answer")
		return nil
	}
}

// newRigViaProxy is newRig whose session reaches MySQL through a TCP proxy the test controls.
func newRigViaProxy(t *testing.T) (*rig, *tcpproxy.Proxy) {
	t.Helper()
	proxy, err := tcpproxy.Start(dbtestAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	db, err := store.Connect(testDatabase.DSNVia(proxy.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := newRig(t, 5*time.Second)
	r.halt()
	r.db = db
	r.start(t, 5*time.Second)
	return r, proxy
}

// A batch of close identities whose commit fails sends none of its closes: each answers "not
// sent" and the venue sees no order. The next close of either trade asks the venue about the
// close whose row may have committed, then goes with the next number, which a new holder
// numbers past.
func TestCloseBatchWhoseCommitFailsSendsNothing(t *testing.T) {
	r, proxy := newRigViaProxy(t)
	a, keyA := openTrade(t, r, "EURCHF", "1000")
	b, keyB := openTrade(t, r, "EURCHF", "2000")

	r.session.HoldIdentities(3) // never reached: the two closes wait in one batch
	closeA, closeB := closeAsync(r, a), closeAsync(r, b)
	poll.Until(t, 10*time.Second, time.Millisecond, "both closes queued for their identity batch", func() bool { return r.session.QueuedIdentities() == 2 })
	proxy.Cut()
	r.session.HoldIdentities(0)
	for _, ch := range []<-chan error{closeA, closeB} {
		if err := waitErr(t, ch); !errors.Is(err, venue.ErrNotSent) {
			t.Fatalf("a close whose identity batch failed: want ErrNotSent, got %v", err)
		}
	}
	if n := closeOrders(r.venue, keyA) + closeOrders(r.venue, keyB); n != 0 {
		t.Fatalf("the venue holds %d closes after a failed identity batch, want none", n)
	}

	proxy.Restore()
	part := dd("400")
	if out, err := r.session.CloseTrade(context.Background(), a, &part); err != nil || out.Fill == nil {
		t.Fatalf("the next close of %s: %+v %v", a, out, err)
	}
	if n := closeOrders(r.venue, keyA); n != 1 {
		t.Fatalf("the venue holds %d closes of trade %s, want 1", n, keyA)
	}
	if n := closeOrders(r.venue, keyB); n != 0 {
		t.Fatalf("the venue holds %d closes of trade %s, want none", n, keyB)
	}
	// A new holder numbers the trade's next close past the one that went (<key>.c2; c1 was
	// never written), and it goes.
	r.halt()
	r.start(t, 5*time.Second)
	if lt := r.session.LiveTrades()[keyA]; lt.Closes != 2 || !lt.Units.Equal(dd("600")) || lt.Pending != "" {
		t.Fatalf("a new holder loads trade %s as %+v, want 600 units after its second close", keyA, lt)
	}
	if err := waitErr(t, closeAsync(r, a)); err != nil {
		t.Fatalf("the close after a restart: %v", err)
	}
	if n := closeOrders(r.venue, keyA); n != 2 {
		t.Fatalf("the venue holds %d closes of trade %s, want 2", n, keyA)
	}
}

// dbtestAddr is the MySQL server's host:port of the test database.
func dbtestAddr(t *testing.T) string {
	t.Helper()
	cfg, err := store.DSN(testDatabase.DSN)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

// Two closes of one trade decided while the first waits for its identity batch: the second is
// refused CLOSE_IN_FLIGHT at once, with nothing written or sent; the first goes in a batch with
// another trade's close, and the trade is closed once.
func TestSecondCloseOfATradeInOneBatchIsRefused(t *testing.T) {
	r := newRig(t, 5*time.Second)
	a, keyA := openTrade(t, r, "GBPJPY", "1000")
	b, _ := openTrade(t, r, "GBPJPY", "1000")
	before := r.session.IdentityBatches()

	r.session.HoldIdentities(2)
	first := closeAsync(r, a)
	poll.Until(t, 10*time.Second, time.Millisecond, "the first close queued", func() bool { return r.session.QueuedIdentities() == 1 })
	_, err := r.session.CloseTrade(context.Background(), a, nil)
	var verr *venue.Error
	if !errors.As(err, &verr) || verr.Status != 409 || verr.Code != "CLOSE_IN_FLIGHT" {
		t.Fatalf("a second close of %s in the same batch: want 409 CLOSE_IN_FLIGHT, got %v", a, err)
	}
	if r.session.QueuedIdentities() != 1 {
		t.Fatalf("the refused close was queued: %d identities wait", r.session.QueuedIdentities())
	}
	other := closeAsync(r, b)
	for _, ch := range []<-chan error{first, other} {
		if err := waitErr(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	r.session.HoldIdentities(0)
	if n := closeOrders(r.venue, keyA); n != 1 {
		t.Fatalf("the venue holds %d closes of trade %s, want 1", n, keyA)
	}
	if r.session.IdentityBatches() == before {
		t.Fatal("the two closes did not share an identity batch")
	}
}

// A batch of reports that carries one fill three times — the report, the library's resend of it
// and a status report — records the execution once, and the holder's trades count its units once.
func TestReportBatchWithAResentReportBooksOnce(t *testing.T) {
	r := newRig(t, 300*time.Millisecond)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	key := orderID()
	if _, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: key, Symbol: "AUDNZD", Units: dd("3000")}); !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("want the lost report's outcome unknown, got %v", err)
	}
	fill := fix.TestReport{ExecID: "E-" + key, ExecType: "F", OrdStatus: "2", ClOrdID: key, OrderID: "V-" + key, Symbol: "AUDNZD", Side: "1",
		OrderQty: dd("3000"), CumQty: dd("3000"), AvgPx: dd("1.0802"), LastQty: dd("3000"), LastPx: dd("1.0802"), Time: time.Now()}
	status := fill
	status.ExecID, status.ExecType = "S-"+key, "I"
	r.session.JournalBatch(fill, fill, status)

	var execs int
	var units decimal.Decimal
	if err := testDB.QueryRow("SELECT COUNT(*), COALESCE(SUM(`units`), 0) FROM `fx_fix_execution` WHERE `clOrdId` = ?", key).Scan(&execs, &units); err != nil {
		t.Fatal(err)
	}
	if execs != 1 || !units.Equal(dd("3000")) {
		t.Fatalf("%d executions of %s units journaled, want one of 3000", execs, units)
	}
	lt, ok := r.session.LiveTrades()[key]
	if !ok || !lt.Units.Equal(dd("3000")) || lt.ID == 0 {
		t.Fatalf("the holder keeps %+v (found %v), want 3000 units and the execution's id", lt, ok)
	}
}

// The trades the holder keeps in memory, after a session has opened, reduced, closed and left a
// close in flight, equal what a new holder loads from the journal.
func TestLiveTradesAfterRestartEqualTheJournal(t *testing.T) {
	r := newRig(t, 300*time.Millisecond)
	ctx := context.Background()
	_, keyOpen := openTrade(t, r, "CHFJPY", "1000")
	reduced, keyReduced := openTrade(t, r, "CHFJPY", "5000")
	closed, keyClosed := openTrade(t, r, "CHFJPY", "2000")
	inFlight, keyInFlight := openTrade(t, r, "CHFJPY", "3000")
	part := dd("2000")
	if _, err := r.session.CloseTrade(ctx, reduced, &part); err != nil {
		t.Fatal(err)
	}
	if _, err := r.session.CloseTrade(ctx, closed, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.session.CloseTrade(ctx, inFlight, nil); !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("a held close: want its outcome unknown, got %v", err)
	}
	keys := []string{keyOpen, keyReduced, keyClosed, keyInFlight}
	mine := func(all map[string]fix.LiveTrade) map[string]fix.LiveTrade {
		out := map[string]fix.LiveTrade{}
		for _, k := range keys {
			if t, ok := all[k]; ok && (!t.Units.IsZero() || t.Pending != "") {
				out[k] = t
			}
		}
		return out
	}
	kept := mine(r.session.LiveTrades())
	if len(kept) != 3 || kept[keyInFlight].Pending == "" || !kept[keyReduced].Units.Equal(dd("3000")) || kept[keyReduced].Closes != 1 {
		t.Fatalf("the holder keeps %+v: want three live trades, %s reduced to 3000 by one close, %s's close in flight", kept, keyReduced, keyInFlight)
	}
	r.halt()
	r.start(t, 300*time.Millisecond)
	loaded := mine(r.session.LiveTrades())
	if len(loaded) != len(kept) {
		t.Fatalf("loaded %+v, kept %+v", loaded, kept)
	}
	for k, want := range kept {
		got := loaded[k]
		if got.Key != want.Key || got.ID != want.ID || got.Symbol != want.Symbol || !got.Units.Equal(want.Units) || got.Closes != want.Closes || got.Pending != want.Pending {
			t.Fatalf("trade %s: loaded %+v, kept %+v", k, got, want)
		}
	}
	r.venue.Release("")
}
