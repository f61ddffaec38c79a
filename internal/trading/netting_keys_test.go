package trading

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// A NETTING add can bring a position back to a volume it was closed from before; the next
// close from that volume — a netting fill's or the trader's — is a new close, with a deal of
// its own, not a duplicate of the earlier one (the soak found a netting SELL refused with a 500:
// its close key close:<position>:<volume before> was the earlier close's).
func TestNettingCloseFromARestoredVolume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9931
	prices := &movingPrices{bid: 1.1000, ask: 1.1002}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.Netting)

	first, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.2"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.Position.ID
	// 0.2 → 0.1 by a netting fill, back to 0.2 by an add, 0.2 → 0.15 by a netting fill again.
	for i, step := range []struct {
		side   fx.Side
		volume string
	}{{fx.Sell, "0.1"}, {fx.Buy, "0.1"}, {fx.Sell, "0.05"}} {
		if _, err := svc.PlaceOrder(ctx, user, market(a.ID, step.side, step.volume)); err != nil {
			t.Fatalf("step %d (%s %s): %v", i+1, step.side, step.volume, err)
		}
	}
	wantDecimal(t, "volume after reduce, add, reduce", positionOf(t, id).Volume, "0.15")
	// Back to 0.2 again, and the trader closes 0.05 from it.
	if _, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.05")); err != nil {
		t.Fatal(err)
	}
	half := decimal.RequireFromString("0.05")
	if _, err := svc.ClosePosition(ctx, user, id, &half, fx.CloseClient); err != nil {
		t.Fatalf("the trader's close from a restored volume: %v", err)
	}
	p := positionOf(t, id)
	wantDecimal(t, "volume at the end", p.Volume, "0.15")
	var closes int
	testDB.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `positionId` = ? AND `type` = 'PROFIT'", id).Scan(&closes)
	if closes != 3 {
		t.Fatalf("%d close deals on position %d, want 3", closes, id)
	}
	ledgerBalanced(t, a.ID)
}
