package trading

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// One batch's closes are written by one statement: a full close, a partial close and two
// partial closes of one position, in one batch, leave each row as if each close had been its own
// transaction, and the ledger balances.
func TestBatchClosesWrittenTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9301)
	if _, _, err := svc.Accounts().Deposit(asAdmin(ctx), a.ID, decimal.NewFromInt(9000), "more"); err != nil {
		t.Fatal(err)
	}
	var pos [3]int64
	for i := range pos {
		res, err := svc.PlaceOrder(ctx, 9301, marketBuy(a.ID, "0.3", ""))
		if err != nil {
			t.Fatal(err)
		}
		pos[i] = res.Position.ID
	}
	tenth := decimal.RequireFromString("0.1")
	inOneBatch(svc, 4)
	var errs [4]error
	concurrently(
		func() { _, errs[0] = svc.ClosePosition(ctx, 9301, pos[0], nil, fx.CloseClient) },
		func() { _, errs[1] = svc.ClosePosition(ctx, 9301, pos[1], &tenth, fx.CloseClient) },
		func() { _, errs[2] = svc.ClosePosition(ctx, 9301, pos[2], &tenth, fx.CloseClient) },
		func() { _, errs[3] = svc.ClosePosition(ctx, 9301, pos[2], &tenth, fx.CloseClient) },
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	if st := svc.CommitStats(); st.LastSize != 4 {
		t.Fatalf("the closes were not one batch: %+v", st)
	}
	want := []struct {
		volume, profit string
		closed         bool
	}{
		{"0", "-6.00", true},    // 0.3 lots closed at the bid 1.1000, opened at the ask 1.1002
		{"0.2", "-2.00", false}, // 0.1 of them
		{"0.1", "-4.00", false}, // 0.1 twice
	}
	for i, id := range pos {
		p, err := book.LoadPosition(ctx, testDB, 9301, id)
		if err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if !p.Volume.Equal(decimal.RequireFromString(w.volume)) || !p.RealizedProfit.Equal(decimal.RequireFromString(w.profit)) ||
			(p.Status == fx.PositionClosed) != w.closed || (p.ClosePrice != nil) != w.closed || (p.ClosedAt != nil) != w.closed ||
			(w.closed && (p.CloseReason == nil || *p.CloseReason != string(fx.CloseClient))) {
			t.Errorf("position %d after the batch: %+v, want volume %s, realized %s, closed %v", id, p, w.volume, w.profit, w.closed)
		}
	}
	ledgerOf(t, a.ID) // fails unless Σ deals = balance
}
