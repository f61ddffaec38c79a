package trading

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// A PATCH of SL racing a close of the same position is a real deadlock on the server: the
// UPDATE of the stops reaches the row through the open-positions index while the close, holding
// the row, waits to change that index. The victim is retried, whole, and nobody hears an
// internal error: the modify either lands before the close or finds the position closed. The
// test runs the race until the server has chosen a victim a few times, so it cannot pass
// without provoking the deadlock it is about.
func TestModifyRacingCloseIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9601
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	sl := decimal.RequireFromString("1.05")
	for i := 0; i < 400 && svc.rolledBack.Load() < 3; i++ {
		o, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.01", ""))
		if err != nil {
			t.Fatal(err)
		}
		id := o.Position.ID
		var modErr, closeErr error
		concurrently(
			func() { _, modErr = svc.ModifyPosition(ctx, user, id, StopChange{Set: true, Value: &sl}, StopChange{}) },
			func() { _, closeErr = svc.ClosePosition(ctx, user, id, nil, fx.CloseClient) },
		)
		if closeErr != nil {
			t.Fatalf("race %d: close answered %v", i, closeErr)
		}
		if modErr != nil && (fx.ErrorCode(modErr) != fx.ECONFLICT || fx.ErrorMessage(modErr) != errClosedText(id)) {
			t.Fatalf("race %d: modify answered %v (code %s); want success or the position closed", i, modErr, fx.ErrorCode(modErr))
		}
		if p, err := book.LoadPosition(ctx, testDB, user, id); err != nil || p.Status != fx.PositionClosed {
			t.Fatalf("race %d: position after the race %+v, %v", i, p, err)
		}
	}
	if n := svc.rolledBack.Load(); n == 0 {
		t.Fatal("400 races of a modify and a close: the server never chose a deadlock victim, so nothing here tested the retry")
	}
	wantLedgerBalanced(t, a.ID)
}

func errClosedText(id int64) string {
	return fx.ErrorMessage(fx.Errorf(fx.ECONFLICT, "Position %d is closed.", id))
}
