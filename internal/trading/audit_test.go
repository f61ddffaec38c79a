package trading

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// A deposit is one audit row in its deal's transaction, with the balance before and after; a
// replay of its nonce, a refused amount and a deposit with no actor record nothing (and the last
// moves no money).
func TestDepositIsAudited(t *testing.T) {
	t.Parallel()
	const user = 9611
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user) // deposit nonce "seed": 1,000
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: 1, TokenID: 5, Via: "api", RequestID: "dep-1"})
	rows := func() []audit.Entry {
		t.Helper()
		es, err := audit.List(context.Background(), testDB, audit.Filter{EntityType: "account", EntityID: strconv.FormatInt(a.ID, 10)})
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	if n := len(rows()); n != 1 {
		t.Fatalf("the seed deposit left %d audit rows, want 1", n)
	}
	if _, _, err := svc.Accounts().Deposit(ctx, a.ID, decimal.RequireFromString("250.50"), "audit-1"); err != nil {
		t.Fatal(err)
	}
	es := rows()
	if len(es) != 2 {
		t.Fatalf("audit rows = %+v, want 2", es)
	}
	e := es[0]
	var before, after balanceRecord
	json.Unmarshal(e.Before, &before)
	json.Unmarshal(e.After, &after)
	if e.Action != "account.deposit" || e.ActorVia != "api" || e.ActorTokenID == nil || *e.ActorTokenID != 5 || e.RequestID == nil || *e.RequestID != "dep-1" ||
		before.Balance != "1000.00" || after.Balance != "1250.50" || after.Deposited != "250.50" || after.Currency != "USD" ||
		after.IdempotencyKey != "deposit:"+strconv.FormatInt(a.ID, 10)+":"+nonceOrRandom("audit-1") {
		t.Fatalf("deposit row = %+v before %+v after %+v", e, before, after)
	}
	// A replay (same nonce, same amount) and a reuse (another amount) write no row.
	if _, replayed, err := svc.Accounts().Deposit(ctx, a.ID, decimal.RequireFromString("250.50"), "audit-1"); err != nil || !replayed {
		t.Fatalf("replay: %v %v", replayed, err)
	}
	if _, _, err := svc.Accounts().Deposit(ctx, a.ID, decimal.RequireFromString("9"), "audit-1"); fx.ErrorCode(err) != fx.EKEYREUSED {
		t.Fatalf("reuse: %v", err)
	}
	if _, _, err := svc.Accounts().Deposit(ctx, a.ID, decimal.RequireFromString("-1"), "audit-2"); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("negative: %v", err)
	}
	if n := len(rows()); n != 2 {
		t.Fatalf("a replay or a refusal wrote an audit row: %d rows", n)
	}
	// No actor: refused, no deal, no row.
	deals := counts(t, a.ID)
	if _, _, err := svc.Accounts().Deposit(context.Background(), a.ID, decimal.NewFromInt(1), "audit-3"); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("no actor: %v", err)
	}
	if after := counts(t, a.ID); after != deals || len(rows()) != 2 {
		t.Fatalf("a deposit with no actor wrote: %v → %v", deals, after)
	}
	wantLedgerBalanced(t, a.ID)
}
