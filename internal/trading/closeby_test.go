package trading

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// Close-by: the pair realises (sell open − buy open) × v with no spread; the named position
// closes v at the opposite's open price, the opposite at its own (no profit); the larger keeps
// the rest. A retry with the same nonce replays; the nonce on another pair is refused.
func TestCloseBy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9921
	prices := &movingPrices{bid: 1.1000, ask: 1.1002}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.Hedging)
	buy, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.2")) // at 1.1002
	if err != nil {
		t.Fatal(err)
	}
	prices.set(1.1010, 1.1012)
	sell, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.1")) // at 1.1010
	if err != nil {
		t.Fatal(err)
	}
	var deals int
	count := func() int {
		testDB.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` = ?", a.ID).Scan(&deals)
		return deals
	}
	before := count()

	res, err := svc.CloseBy(ctx, user, buy.Position.ID, sell.Position.ID, "cb-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed || len(res.Deals) != 2 {
		t.Fatalf("close-by answered %+v", res)
	}
	// The buy closes 0.1 at the sell's 1.1010: 0.0008 × 10,000 = 8; the sell at its own price: 0.
	wantDecimal(t, "the named position's profit", res.Deals[0].Amount, "8")
	wantDecimal(t, "the opposite's profit", res.Deals[1].Amount, "0")
	b, s := positionOf(t, buy.Position.ID), positionOf(t, sell.Position.ID)
	wantDecimal(t, "the buy's rest", b.Volume, "0.1")
	if b.Status != fx.PositionOpen || s.Status != fx.PositionClosed || *s.CloseReason != string(fx.CloseBy) {
		t.Fatalf("after close-by: buy %s, sell %s %v", b.Status, s.Status, s.CloseReason)
	}
	if count() != before+2 {
		t.Fatalf("%d deals written, want 2", deals-before)
	}
	ledgerBalanced(t, a.ID)

	again, err := svc.CloseBy(ctx, user, buy.Position.ID, sell.Position.ID, "cb-1")
	if err != nil || !again.Replayed || len(again.Deals) != 2 || again.Deals[0].ID != res.Deals[0].ID {
		t.Fatalf("retry: %+v, %v; want the original replayed", again, err)
	}
	other, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	before = count()
	if _, err := svc.CloseBy(ctx, user, buy.Position.ID, other.Position.ID, "cb-1"); fx.ErrorCode(err) != fx.EKEYREUSED {
		t.Fatalf("nonce on another pair: %v, want %s", err, fx.EKEYREUSED)
	}
	for _, c := range []struct {
		name    string
		id, opp int64
		code    string
	}{
		{"same side", other.Position.ID, other.Position.ID, fx.EINVALID},
		{"closed opposite", buy.Position.ID, sell.Position.ID, fx.ECONFLICT},
		{"unknown opposite", buy.Position.ID, 1 << 40, fx.ENOTFOUND},
	} {
		if _, err := svc.CloseBy(ctx, user, c.id, c.opp, ""); fx.ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if count() != before {
		t.Fatalf("refused close-bys wrote %d deals", deals-before)
	}
	// Both of another's positions are not found.
	if _, err := svc.CloseBy(ctx, user+1, buy.Position.ID, other.Position.ID, ""); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("another trader's close-by: %v", err)
	}
	if _, err := svc.CloseBy(ctx, user, buy.Position.ID, other.Position.ID, "cb-2"); err != nil {
		t.Fatal(err)
	}
	if n := len(openOf(t, a.ID)); n != 0 {
		t.Fatalf("%d open after closing the last pair", n)
	}
	ledgerBalanced(t, a.ID)
}

// A NETTING or FIFO account never holds a pair to close by: refused.
func TestCloseByRefusedOffHedging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9922
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.FIFO)
	p1, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CloseBy(ctx, user, p1.Position.ID, p2.Position.ID, ""); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("close-by on FIFO: %v, want ECONFLICT", err)
	}
	if v := positionOf(t, p1.Position.ID).Volume; !v.Equal(decimal.RequireFromString("0.1")) {
		t.Fatalf("refused close-by changed the position: %s", v)
	}
}

// A close-by and its retry in one group commit: one closes the pair, the other is answered with
// it (replayed); the pair's two deals are written once.
func TestCloseByRetryInOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9923
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.Hedging)
	buy, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.2"))
	if err != nil {
		t.Fatal(err)
	}
	sell, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	inOneBatch(svc, 2)
	var res [2]CloseByResult
	var errs [2]error
	concurrently(
		func() { res[0], errs[0] = svc.CloseBy(ctx, user, buy.Position.ID, sell.Position.ID, "same") },
		func() { res[1], errs[1] = svc.CloseBy(ctx, user, buy.Position.ID, sell.Position.ID, "same") },
	)
	if errs[0] != nil || errs[1] != nil || res[0].Replayed == res[1].Replayed {
		t.Fatalf("close-by and its retry in one batch: %v %v, replayed %v %v; want one of each", errs[0], errs[1], res[0].Replayed, res[1].Replayed)
	}
	var n int
	testDB.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` = ? AND `comment` = 'close close_by'", a.ID).Scan(&n)
	if n != 2 {
		t.Fatalf("%d close-by deals, want 2", n)
	}
	wantDecimal(t, "the buy's rest", positionOf(t, buy.Position.ID).Volume, "0.1")
	ledgerBalanced(t, a.ID)
}
