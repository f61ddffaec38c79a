package execution_test

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/execution"
	"fxdesk/internal/hedge"
	"fxdesk/internal/sim/venuesim"
)

// The venue fills 60 % of a 100,000-unit hedge order: the hedge position holds the 60,000 the
// venue filled, and the P&L of the venue's own closes of it — a share, then the rest, booked by
// the reconciler at the venue's average close — is worked out from those 60,000, never from the
// 100,000 ordered (the dealer's P&L sums it, docs/pnl.md).
func TestHedgePLOfAPartialFillIsFromTheUnitsFilled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.hedgeBook()
	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultPartial, Percent: 60}); err != nil {
		t.Fatal(err)
	}
	p, err := b.Open(ctx, "EURUSD", decimal.NewFromInt(100000), hedge.ByHedger)
	if err != nil {
		t.Fatal(err)
	}
	var fill decimal.Decimal
	if err := testDB.QueryRow("SELECT `fillUnits` FROM `fx_hedge_order` WHERE `id` = ?", p.OrderID).Scan(&fill); err != nil {
		t.Fatal(err)
	}
	if !p.Units.Equal(decimal.NewFromInt(60000)) || !fill.Equal(decimal.NewFromInt(60000)) {
		t.Fatalf("hedge position %+v, order fill %s; want the 60,000 units filled", p, fill)
	}
	share := decimal.NewFromInt(20000)
	if _, err := e.sim.CloseTradeAtVenue(p.TradeID, &share); err != nil {
		t.Fatal(err)
	}
	rec := e.hedgeReconciler(b, nil)
	if res, err := rec.Reconcile(ctx, "test"); err != nil || res.Planned[execution.BookHedgePartial] != 1 {
		t.Fatalf("reconcile planned %v (%v); want the venue's share booked", res.Planned, err)
	}
	got, err := b.PositionByID(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Bought at the ask 1.1002, the venue sold 20,000 back at the bid 1.1: −0.0002 × 20,000 = −4.
	if !got.Units.Equal(decimal.NewFromInt(40000)) || got.RealizedPL == nil || !got.RealizedPL.Equal(decimal.NewFromInt(-4)) {
		t.Fatalf("after the venue's share: %+v; want 40,000 units, realised -4 (not -12 from the 100,000 ordered)", got)
	}
	if _, err := e.sim.CloseTradeAtVenue(p.TradeID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	closed, err := b.PositionByID(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	// All 60,000 closed at the bid 1.1: −0.0002 × 60,000 = −12, not −20 from the order's units.
	if closed.Status != hedge.PositionClosed || closed.CloseReason != hedge.CloseVenue || closed.RealizedPL == nil || !closed.RealizedPL.Equal(decimal.NewFromInt(-12)) {
		t.Fatalf("after the venue's close: %+v; want CLOSED by the venue, realised -12", closed)
	}
}
