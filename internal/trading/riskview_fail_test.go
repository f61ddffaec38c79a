package trading

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/testkit/poll"
)

// A read of the streamed risk view that fails ends the whole load with its error, whichever read
// fails: one the batches wait for (the accounts), the streamed one itself (the positions), or the
// other streamed one (the orders).
func TestAFailedReadEndsTheStreamedLoad(t *testing.T) {
	t.Parallel()
	for _, table := range []string{"fx_account", "fx_position", "fx_order"} {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			db, drop, err := dbtest.NewMigrated("riskviewfail")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(drop)
			// More positions than the batches the sink's queue holds.
			const positions = 8 * loadBatch
			seedOpenPositions(t, db, positions)
			svc, err := New(Config{DB: db, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
			if err != nil {
				t.Fatal(err)
			}
			rd := NewRiskDesk(svc, nil)
			var whole risk.Snapshot
			if err := rd.LoadInto(context.Background(), &whole); err != nil || len(whole.Positions) != positions {
				t.Fatalf("before the table is gone: %d positions (%v), want %d", len(whole.Positions), err, positions)
			}
			if _, err := db.Exec("RENAME TABLE `" + table + "` TO `" + table + "_gone`"); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- rd.LoadInto(context.Background(), &discardSink{}) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "risk view") {
					t.Fatalf("LoadInto without %s = %v, want the failed read's error", table, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("LoadInto without %s has not returned after 30 s: a read waits on the sink", table)
			}
		})
	}
}

// discardSink takes every part and keeps none.
type discardSink struct{}

func (discardSink) AddTerms([]risk.Instrument, []risk.GroupTerms) {}
func (discardSink) AddAccounts([]risk.Account)                    {}
func (discardSink) AddPositions([]risk.Position)                  {}
func (discardSink) AddOrders([]risk.Order)                        {}

// When the accounts fail after the positions' statement has streamed more batches than the
// sink's queue holds, the load still ends: the positions' read, waiting to hand a batch over,
// gives up with the load instead of waiting for a sink that will never take it. The accounts'
// read is held on a table lock until the positions' statement is done, then killed.
func TestALateFailureLeavesNoReadWaiting(t *testing.T) {
	t.Parallel()
	db, drop, err := dbtest.NewMigrated("riskviewlate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	seedOpenPositions(t, db, 8*loadBatch)
	svc, err := New(Config{DB: db, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "LOCK TABLES `fx_account` WRITE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- NewRiskDesk(svc, nil).LoadInto(ctx, discardSink{}) }()
	var dbName string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	running := func(like string) (id int64) {
		err := db.QueryRow("SELECT COALESCE(MAX(`ID`), 0) FROM information_schema.PROCESSLIST WHERE `DB` = ? AND `INFO` LIKE ?", dbName, like).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	var accounts int64
	poll.Until(t, 30*time.Second, 5*time.Millisecond, "the accounts' read waiting on the lock", func() bool {
		accounts = running("SELECT `id`, `accountGroup`%")
		return accounts != 0
	})
	poll.Until(t, 30*time.Second, 5*time.Millisecond, "the positions' statement done", func() bool { return running("SELECT p.`id`%") == 0 })
	if _, err := db.Exec(fmt.Sprintf("KILL QUERY %d", accounts)); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	if err, ok := poll.Receive(t, done, 30*time.Second, "LoadInto returning after the accounts' read failed"); ok && (err == nil || !strings.Contains(err.Error(), "accounts")) {
		t.Fatalf("LoadInto = %v, want the accounts' read's error", err)
	}
}

// seedOpenPositions writes n open EURUSD positions of one account, 1.
func seedOpenPositions(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	if _, err := db.Exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES (1, 1, 'USD', 100, 1000.00)"); err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < n; lo += 2000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`) VALUES ")
		for i := lo; i < min(n, lo+2000); i++ {
			if i > lo {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "(1,%d,'EURUSD','BUY',0.01,0.01,1.10000,'OPEN')", i+1)
		}
		if _, err := db.Exec(sb.String()); err != nil {
			t.Fatal(err)
		}
	}
}
