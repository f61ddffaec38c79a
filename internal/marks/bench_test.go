package marks

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/schedule"
	"fxdesk/internal/testkit/dbtest"
)

// BenchmarkLedgerCheck times the reconcile job's ledger check on a short and a long ledger of the
// same accounts (FXDESK_BENCH_ACCOUNTS, default 2,000, with 5 and then 250 deals each), once its
// checkpoints exist and 100 new deals were written since the last check — what a check every five
// minutes meets — beside the full scan it replaced (Σ every deal per account). The checkpointed
// check should take about the same time on both ledgers; the scan grows with the ledger.
//
//	FXDESK_BENCH=1 go test -run '^$' -bench BenchmarkLedgerCheck -benchtime 5x ./internal/marks/
func BenchmarkLedgerCheck(b *testing.B) {
	dbtest.SkipUnlessBench(b, "ledger check")
	accounts := 2000
	if v := os.Getenv("FXDESK_BENCH_ACCOUNTS"); v != "" {
		if _, err := fmt.Sscan(v, &accounts); err != nil {
			b.Fatal(err)
		}
	}
	for _, per := range []int{5, 250} {
		b.Run(fmt.Sprintf("deals=%d", accounts*per), func(b *testing.B) {
			db, closeDB, err := dbtest.NewMigrated("marksbench")
			if err != nil {
				b.Fatal(err)
			}
			defer closeDB()
			ctx := context.Background()
			exec := func(q string) {
				if _, err := db.ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			var rows []string
			for a := 1; a <= accounts; a++ {
				rows = append(rows, fmt.Sprintf("(%d, %d, 'USD', 100, %d)", a, a, per))
			}
			exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES " + strings.Join(rows, ", "))
			seq := 0
			deals := func(n int) {
				rows = rows[:0]
				for i := range n {
					seq++
					// Deals interleave over the accounts, as a live desk writes them.
					rows = append(rows, fmt.Sprintf("(%d, 'ADJUSTMENT', 1.00, 0, 'USD', 'b:%d')", 1+i%accounts, seq))
					if len(rows) == 5000 || i == n-1 {
						exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES " + strings.Join(rows, ", "))
						rows = rows[:0]
					}
				}
			}
			deals(accounts * per)
			exec("ANALYZE TABLE `fx_deal`")
			job := New(Config{DB: db}, slog.New(slog.DiscardHandler))
			if err := job.checkLedger(ctx, schedule.Result{}); err != nil { // the first check sums every deal once
				b.Fatal(err)
			}
			var check, scan time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				deals(100)
				exec("UPDATE `fx_account` SET `balance` = `balance` + 1 WHERE `id` <= 100")
				b.StartTimer()
				t0 := time.Now()
				res := schedule.Result{}
				if err := job.checkLedger(ctx, res); err != nil {
					b.Fatal(err)
				}
				check += time.Since(t0)
				if res["drifted"] != 0 {
					b.Fatalf("%v", res)
				}
				t0 = time.Now()
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_account` a LEFT JOIN (SELECT `accountId`, SUM(`amount`) AS `total` FROM `fx_deal` GROUP BY `accountId`) d "+
					"ON d.`accountId` = a.`id` WHERE a.`balance` <> COALESCE(d.`total`, 0)").Scan(&n); err != nil {
					b.Fatal(err)
				}
				scan += time.Since(t0)
			}
			b.ReportMetric(float64(check.Microseconds())/1000/float64(b.N), "check-ms")
			b.ReportMetric(float64(scan.Microseconds())/1000/float64(b.N), "fullscan-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
