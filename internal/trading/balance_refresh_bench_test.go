package trading

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

// BenchmarkRefreshBalances is the risk view's balance refresh (FollowBalances) on a desk of
// 100,000 accounts: one read of every account's (id, balanceVersion, balance), compared in
// memory. "idle" is a refresh with nothing changed, the usual case; "all_changed" one after a
// rollover moved every balance.
func BenchmarkRefreshBalances(b *testing.B) {
	dbtest.SkipUnlessBench(b, "balance refresh")
	const accounts = 100_000
	ctx := context.Background()
	db, drop, err := dbtest.NewMigrated("refreshbalances")
	if err != nil {
		b.Fatal(err)
	}
	defer drop()
	var sb strings.Builder
	for lo := 0; lo < accounts; lo += 5000 {
		sb.Reset()
		sb.WriteString("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES ")
		for i := lo; i < lo+5000; i++ {
			if i > lo {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "(%d,%d,'USD',100,1000.00)", i+1, i+1)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			b.Fatal(err)
		}
	}
	svc, err := New(Config{DB: db, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(b, &gatetest.Lease{}).g})
	if err != nil {
		b.Fatal(err)
	}
	runCommits(b, svc)
	rd := NewRiskDesk(svc, nil)
	if _, err := rd.Load(ctx); err != nil {
		b.Fatal(err)
	}
	applied := 0
	apply := func(_ context.Context, ch ...risk.Change) { applied += len(ch) }
	b.Run("idle", func(b *testing.B) {
		for b.Loop() {
			if err := rd.refreshBalances(ctx, apply); err != nil {
				b.Fatal(err)
			}
		}
		if applied != 0 {
			b.Fatalf("%d balances applied with nothing changed", applied)
		}
	})
	b.Run("all_changed", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			// A test bumps versions behind the ledger to stand for a rollover of every account.
			if _, err := db.ExecContext(ctx, "UPDATE `fx_account` SET `balanceVersion` = `balanceVersion` + 1"); err != nil {
				b.Fatal(err)
			}
			applied = 0
			b.StartTimer()
			if err := rd.refreshBalances(ctx, apply); err != nil {
				b.Fatal(err)
			}
			if applied != accounts {
				b.Fatalf("%d balances applied, want %d", applied, accounts)
			}
		}
	})
}
