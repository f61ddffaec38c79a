package trading

import (
	"context"
	"errors"
	"testing"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/venue"
)

// asDealer is a request context naming admin user 1 by token 77.
func asDealer(requestID string) context.Context {
	return audit.WithActor(context.Background(), audit.Actor{TokenID: 77, UserID: 1, Via: "api", RequestID: requestID})
}

// auditRows are the audit log's rows about entity id, newest first.
func auditRows(t *testing.T, entity string, id int64) []audit.Entry {
	t.Helper()
	es, err := audit.List(context.Background(), testDB, audit.Filter{EntityType: entity, EntityID: itoa(id)})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A dealer closes part and then the rest of a trader's position: each close is the reason DEALER
// on the position and its deals, and one audit row by the admin, in the close's own batch. A close
// without an actor, of a closed or unknown position, or of a bad volume changes nothing and
// writes no row.
func TestDealerClosesATradersPosition(t *testing.T) {
	t.Parallel()
	const user = 9811
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	o, err := svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.3")})
	if err != nil {
		t.Fatal(err)
	}
	id := o.Position.ID
	before := counts(t, a.ID)
	if _, err := svc.Dealer().ClosePosition(ctx, id, nil); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("dealer close with nobody named: %v", err)
	}
	if _, err := svc.Dealer().ClosePosition(asDealer("r0"), id, ptr(dd("0.5"))); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("dealer close of more than is open: %v", err)
	}
	if _, err := svc.Dealer().ClosePosition(asDealer("r0"), 99999999, nil); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("dealer close of an unknown position: %v", err)
	}
	if after := counts(t, a.ID); after != before || len(auditRows(t, "position", id)) != 0 {
		t.Fatalf("refused dealer closes changed the database: %v → %v, audit %v", before, after, auditRows(t, "position", id))
	}

	part, err := svc.Dealer().ClosePosition(asDealer("r1"), id, ptr(dd("0.1")))
	if err != nil || part.Position.Status != fx.PositionOpen || !part.Position.Volume.Equal(dd("0.2")) || part.Deal.Comment != "close dealer" {
		t.Fatalf("dealer partial close: %+v %v", part, err)
	}
	all, err := svc.Dealer().ClosePosition(asDealer("r2"), id, nil)
	if err != nil || all.Position.Status != fx.PositionClosed || all.Position.CloseReason == nil || *all.Position.CloseReason != string(fx.CloseDealer) {
		t.Fatalf("dealer close: %+v %v", all, err)
	}
	rows := auditRows(t, "position", id)
	if len(rows) != 2 || rows[0].Action != "position.close" || rows[0].ActorUserID == nil || *rows[0].ActorUserID != 1 || rows[0].RequestID == nil ||
		*rows[0].RequestID != "r2" || rows[1].RequestID == nil || *rows[1].RequestID != "r1" {
		t.Fatalf("audit rows %+v", rows)
	}
	if string(rows[0].Before) == "" || string(rows[0].After) == "" || string(rows[0].Before) == string(rows[0].After) {
		t.Fatalf("audit before %s after %s", rows[0].Before, rows[0].After)
	}
	if _, err := svc.Dealer().ClosePosition(asDealer("r3"), id, nil); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("dealer close of a closed position: %v", err)
	}
	if n := len(auditRows(t, "position", id)); n != 2 {
		t.Fatalf("%d audit rows after a refused close, want 2", n)
	}
	wantLedgerBalanced(t, a.ID)
}

// A dealer cancels a trader's resting order, once: one audit row; a second cancel, an unknown
// order and a cancel without an actor change nothing.
func TestDealerCancelsATradersOrder(t *testing.T) {
	t.Parallel()
	const user = 9812
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	res, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.1", "1.05", ""))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Order.ID
	if _, err := svc.Dealer().CancelOrder(ctx, id); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("dealer cancel with nobody named: %v", err)
	}
	if _, err := svc.Dealer().CancelOrder(asDealer("c0"), 99999999); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("dealer cancel of an unknown order: %v", err)
	}
	if st, _, _ := orderRow(t, id); st != fx.OrderPending || len(auditRows(t, "order", id)) != 0 {
		t.Fatalf("refused cancels: order %s, audit %v", st, auditRows(t, "order", id))
	}
	o, err := svc.Dealer().CancelOrder(asDealer("c1"), id)
	if err != nil || o.Status != fx.OrderCancelled {
		t.Fatalf("dealer cancel: %+v %v", o, err)
	}
	if st, _, _ := orderRow(t, id); st != fx.OrderCancelled {
		t.Fatalf("order after the dealer's cancel: %s", st)
	}
	if _, err := svc.Dealer().CancelOrder(asDealer("c2"), id); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("second dealer cancel: %v", err)
	}
	rows := auditRows(t, "order", id)
	if len(rows) != 1 || rows[0].Action != "order.cancel" || rows[0].RequestID == nil || *rows[0].RequestID != "c1" {
		t.Fatalf("audit rows %+v", rows)
	}
}

// A dealer's close of an EXTERNAL position closes the venue trade first and books the venue's
// price, with the reason DEALER and its audit row in the booking's batch.
func TestDealerCloseOfExternalGoesToTheVenue(t *testing.T) {
	b := newABook(t)
	const user = 9813
	a := b.externalAccount(user)
	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Dealer().ClosePosition(context.Background(), res.Position.ID, nil); !errors.Is(err, audit.ErrNoActor) ||
		b.requests("PUT /trades/{trade}/close") != 0 {
		t.Fatalf("dealer close with nobody named: %v; venue closes %d", err, b.requests("PUT /trades/{trade}/close"))
	}
	b.prices.set("EURUSD", "1.1010", "1.1012")
	cl, err := b.svc.Dealer().ClosePosition(asDealer("x1"), res.Position.ID, nil)
	if err != nil || cl.Position.Status != fx.PositionClosed || cl.Position.CloseReason == nil || *cl.Position.CloseReason != string(fx.CloseDealer) ||
		cl.Position.ClosePrice == nil || !cl.Position.ClosePrice.Equal(dd("1.101")) {
		t.Fatalf("dealer close of an EXTERNAL position: %+v %v", cl, err)
	}
	if tr := b.venueTrade(res.Order.ID); tr.State != venue.TradeClosed || b.requests("PUT /trades/{trade}/close") != 1 {
		t.Fatalf("venue trade after the dealer's close: %+v, %d closes", tr, b.requests("PUT /trades/{trade}/close"))
	}
	if rows := auditRows(t, "position", res.Position.ID); len(rows) != 1 || rows[0].Action != "position.close" {
		t.Fatalf("audit rows %+v", rows)
	}
	p, err := book.LoadPosition(context.Background(), testDB, user, res.Position.ID)
	if err != nil || p.Status != fx.PositionClosed {
		t.Fatalf("stored position %+v %v", p, err)
	}
	ledgerOf(t, a.ID)
}
