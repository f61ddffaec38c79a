package trading

import (
	"context"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
)

// appliedBalances records the balances a refresh hands the engine.
type appliedBalances struct {
	mu  sync.Mutex
	got map[int64]float64
}

func (a *appliedBalances) apply(_ context.Context, changes ...risk.Change) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range changes {
		if c.Kind == risk.BalanceChanged {
			a.got[c.Account.ID] = c.Account.Balance
		}
	}
}

func (a *appliedBalances) balance(id int64) (float64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.got[id]
	return b, ok
}

// A swap committed after a later deal: a rollover transaction inserts its
// SWAP deal and stays open while another account's deal is inserted and committed, and a
// refresh runs in between; the swap then commits. The next refresh must hand the engine the
// swapped balance. Following deals by id, the refresh had moved past the later deal's id and
// never saw the swap.
func TestBalanceRefreshSeesLateCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	swapped := fundedAccount(t, svc, 9401)
	other := fundedAccount(t, svc, 9402)
	rd := NewRiskDesk(svc, nil)
	if _, err := rd.Load(ctx); err != nil {
		t.Fatal(err)
	}
	applied := &appliedBalances{got: map[int64]float64{}}

	// The rollover's transaction, as the swap job posts: the account locked, the ledger's
	// statements sent, not yet committed.
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var bal decimal.Decimal
	if err := tx.QueryRowContext(ctx, "SELECT `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", swapped.ID).Scan(&bal); err != nil {
		t.Fatal(err)
	}
	p, err := ledger.Post([]*ledger.Account{{ID: swapped.ID, Currency: "USD", Balance: bal, EquityMoves: true}},
		[]ledger.Deal{{AccountID: swapped.ID, Type: fx.DealSwap, Amount: decimal.RequireFromString("-7.50"),
			IdempotencyKey: "test-late-swap", Comment: "late swap"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exec(ctx, tx); err != nil {
		t.Fatal(err)
	}

	// A later deal on another account commits first, and a refresh runs.
	if _, _, err := svc.Accounts().Deposit(asAdmin(ctx), other.ID, decimal.NewFromInt(5), "late-swap-other"); err != nil {
		t.Fatal(err)
	}
	if err := rd.refreshBalances(ctx, applied.apply); err != nil {
		t.Fatal(err)
	}
	if b, ok := applied.balance(other.ID); !ok || b != 1005 {
		t.Fatalf("the committed deposit reached the engine as %v (%v), want 1005", b, ok)
	}
	if b, ok := applied.balance(swapped.ID); ok {
		t.Fatalf("an uncommitted swap reached the engine: %v", b)
	}

	// The swap commits: one refresh brings it.
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := rd.refreshBalances(ctx, applied.apply); err != nil {
		t.Fatal(err)
	}
	if b, ok := applied.balance(swapped.ID); !ok || b != 992.50 {
		t.Fatalf("after the swap committed the engine's balance is %v (applied %v), want 992.50", b, ok)
	}
	// Σ deals = balance.
	var sum, stored decimal.Decimal
	testDB.QueryRow("SELECT COALESCE(SUM(`amount`), 0) FROM `fx_deal` WHERE `accountId` = ?", swapped.ID).Scan(&sum)
	testDB.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", swapped.ID).Scan(&stored)
	if !sum.Equal(stored) || !stored.Equal(decimal.RequireFromString("992.50")) {
		t.Fatalf("Σ deals %s, balance %s, want 992.50 both", sum, stored)
	}

	// Nothing changed since: the next refresh applies neither account again.
	again := &appliedBalances{got: map[int64]float64{}}
	if err := rd.refreshBalances(ctx, again.apply); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{swapped.ID, other.ID} {
		if b, ok := again.balance(id); ok {
			t.Fatalf("account %d re-applied (%v) without a change", id, b)
		}
	}
}
