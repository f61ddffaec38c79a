package trading

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

// sendingOrder writes an EXTERNAL order in SENDING for account, as the identity row a venue send
// leaves behind, and returns its id.
func sendingOrder(t *testing.T, account int64) int64 {
	t.Helper()
	res, err := testDB.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`, `execution`, `sentAt`) "+
		"VALUES (?, 'EURUSD', 'BUY', 'MARKET', 0.1, 'SENDING', 'EXTERNAL', NOW(3))", account)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Live link rows (an EXTERNAL position naming its venue trade) refused by the database — here a
// second adoption of a trade another order's position already links, as a process that lost its
// term would write it — are written row by row: the batch's other links commit and only the
// refused one is dropped, with what it was in the log. A refused link never stalls the writer.
func TestRefusedLinkRowIsDroppedAloneAndTheBatchCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &dbtest.LogBuffer{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	a, b, c := fundedAccount(t, svc, 9201), fundedAccount(t, svc, 9202), fundedAccount(t, svc, 9203)
	oa, ob, oc := sendingOrder(t, a.ID), sendingOrder(t, b.ID), sendingOrder(t, c.ID)
	trade := fmt.Sprintf("link-test-%d", oa)
	other := fmt.Sprintf("link-test-other-%d", oc)
	units, price := decimal.NewFromInt(10000), decimal.RequireFromString("1.1002")
	before := map[int64][3]string{oa: counts(t, a.ID), ob: counts(t, b.ID)}
	accountOf := map[int64]int64{oa: a.ID, ob: b.ID}

	inOneBatch(svc, 3)
	var errs [3]error
	concurrently(
		func() {
			_, errs[0] = svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: oa, TradeID: trade, Symbol: "EURUSD", Units: units, Price: price})
		},
		func() {
			_, errs[1] = svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: ob, TradeID: trade, Symbol: "EURUSD", Units: units, Price: price})
		}, // the same trade: refused
		func() {
			_, errs[2] = svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: oc, TradeID: other, Symbol: "EURUSD", Units: units, Price: price})
		},
	)
	// Which of the two adoptions of one trade wins depends on arrival order; exactly one does.
	refused, kept := ob, oa
	if errs[0] != nil {
		refused, kept = oa, ob
		errs[0], errs[1] = errs[1], errs[0]
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("the links that do not collide: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "uq_fx_position_venue_trade") {
		t.Fatalf("the second link of trade %s: %v, want the unique key's refusal", trade, errs[1])
	}
	var linked int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `venueTradeId` IN (?, ?)", trade, other).Scan(&linked); err != nil {
		t.Fatal(err)
	}
	if linked != 2 {
		t.Errorf("%d positions link the two trades, want 2", linked)
	}
	var status string
	testDB.QueryRow("SELECT `status` FROM `fx_order` WHERE `id` = ?", refused).Scan(&status)
	if status != "SENDING" {
		t.Errorf("the refused adoption's order is %s, want it left SENDING for the reconciler", status)
	}
	testDB.QueryRow("SELECT `status` FROM `fx_order` WHERE `id` = ?", kept).Scan(&status)
	if status != fx.OrderFilled {
		t.Errorf("the kept adoption's order is %s, want FILLED", status)
	}
	if after := counts(t, accountOf[refused]); after[1] != before[refused][1] || after[2] != before[refused][2] {
		t.Errorf("the refused link wrote money: %v → %v", before[refused], after)
	}
	if st := svc.CommitStats(); st.Split != 1 || st.Refused != 1 {
		t.Errorf("committer %+v: want one split batch and one refused row", st)
	}
	if !strings.Contains(logs.String(), `msg="desk write refused by the database; dropped" op="adopt venue trade"`) ||
		!strings.Contains(logs.String(), "trade_id="+trade) {
		t.Errorf("no log line naming the dropped link:\n%s", logs)
	}
}

// An adoption of an order that is FILLED already — its own send's answer was booked between the
// reconciler's read and the adoption — says so with ErrAlreadyBooked, which the reconciler takes
// for nothing left to do, and books nothing a second time.
func TestAdoptingAFilledOrderIsAlreadyBooked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Log: slog.New(slog.DiscardHandler)})
	a := fundedAccount(t, svc, 9211)
	o := sendingOrder(t, a.ID)
	trade := fmt.Sprintf("already-booked-%d", o)
	units, price := decimal.NewFromInt(10000), decimal.RequireFromString("1.1002")
	if _, err := svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: o, TradeID: trade, Symbol: "EURUSD", Units: units, Price: price}); err != nil {
		t.Fatalf("first adoption: %v", err)
	}
	before := counts(t, a.ID)
	_, err := svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: o, TradeID: trade, Symbol: "EURUSD", Units: units, Price: price})
	if !errors.Is(err, book.ErrAlreadyBooked) {
		t.Fatalf("adopting order %d again: %v, want ErrAlreadyBooked", o, err)
	}
	if after := counts(t, a.ID); after != before {
		t.Errorf("the second adoption wrote rows: %+v before, %+v after", before, after)
	}
}

// A closed link does not hold its trade id: a venue that hands the same id out again (a new venue
// account, a restarted simulator) links it to a new position, while a second open link of one
// trade stays refused (above).
func TestClosedLinkDoesNotBlockTheTradeIDAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9204)
	first, second := sendingOrder(t, a.ID), sendingOrder(t, a.ID)
	trade := fmt.Sprintf("reused-%d", first)
	units, price := decimal.NewFromInt(10000), decimal.RequireFromString("1.1002")
	pos, err := svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: first, TradeID: trade, Symbol: "EURUSD", Units: units, Price: price})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.ABook().BookVenueClose(ctx, pos, nil, price, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: second, TradeID: trade, Symbol: "EURUSD", Units: units, Price: price}); err != nil {
		t.Fatalf("a trade id whose only link is closed: %v", err)
	}
	var links int
	testDB.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `venueTradeId` = ?", trade).Scan(&links)
	if links != 2 {
		t.Errorf("%d positions name trade %s, want the closed one and the new one", links, trade)
	}
}

// A venue fill is booked once per position: booking the same partial fill again (a reconcile
// racing the send that booked it, a retried run) is answered as already booked — seen under the
// batch's locks, so it never fails the batch on the deal's venue key — and the position keeps
// the volume the first booking left.
func TestVenueFillIsBookedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9205)
	o := sendingOrder(t, a.ID)
	price := decimal.RequireFromString("1.1002")
	pos, err := svc.ABook().AdoptVenueTrade(ctx, VenueAdoption{OrderID: o, TradeID: fmt.Sprintf("once-%d", o), Symbol: "EURUSD", Units: decimal.NewFromInt(30000), Price: price})
	if err != nil {
		t.Fatal(err)
	}
	share := decimal.RequireFromString("0.1")
	if err := svc.ABook().BookVenueClose(ctx, pos, &share, decimal.RequireFromString("1.1010"), 777); err != nil {
		t.Fatal(err)
	}
	if err := svc.ABook().BookVenueClose(ctx, pos, &share, decimal.RequireFromString("1.1010"), 777); !errors.Is(err, book.ErrAlreadyBooked) {
		t.Fatalf("the same fill booked again: %v", err)
	}
	p, err := book.LoadPosition(ctx, testDB, 0, pos)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Volume.Equal(decimal.RequireFromString("0.2")) {
		t.Errorf("position %d has %s lots open, want 0.2 after one booking of a 0.1-lot fill", pos, p.Volume)
	}
}
