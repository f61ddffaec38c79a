package trading

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

// BenchmarkRiskViewLoad is the holder's risk view load (RiskDesk.Load) over a year's open book —
// 50,000 open positions over 5,000 accounts — beside 200,000 closed positions that the load must
// not read: what a boot or a takeover waits for before it admits fills (docs/operations.md,
// «Boot and takeover»). It reports open positions loaded per second.
//
//	FXDESK_BENCH=1 go test -count=1 -run '^$' -bench BenchmarkRiskViewLoad ./internal/trading/
func BenchmarkRiskViewLoad(b *testing.B) {
	dbtest.SkipUnlessBench(b, "risk view load")
	const accounts, open, closed = 5_000, 50_000, 200_000
	ctx := context.Background()
	db, drop, err := dbtest.NewMigrated("riskviewload")
	if err != nil {
		b.Fatal(err)
	}
	defer drop()
	exec := func(head string, n int, row func(i int) string) {
		var sb strings.Builder
		for lo := 0; lo < n; lo += 5000 {
			sb.Reset()
			sb.WriteString(head)
			for i := lo; i < min(n, lo+5000); i++ {
				if i > lo {
					sb.WriteString(",")
				}
				sb.WriteString(row(i))
			}
			if _, err := db.ExecContext(ctx, sb.String()); err != nil {
				b.Fatal(err)
			}
		}
	}
	exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES ", accounts,
		func(i int) string { return fmt.Sprintf("(%d,%d,'USD',100,1000000.00)", i+1, i+1) })
	cols := "INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `sl`, `tp`, `status`) VALUES "
	exec(cols, closed, func(i int) string {
		return fmt.Sprintf("(%d,%d,'EURUSD','BUY',0,0.10,1.08000,NULL,NULL,'CLOSED')", i%accounts+1, i+1)
	})
	exec(cols, open, func(i int) string {
		return fmt.Sprintf("(%d,%d,'EURUSD','SELL',0.10,0.10,1.08000,1.20000,1.00000,'OPEN')", i%accounts+1, closed+i+1)
	})
	for _, t := range []string{"fx_account", "fx_position"} {
		rows, err := db.QueryContext(ctx, "ANALYZE TABLE `"+t+"`")
		if err != nil {
			b.Fatal(err)
		}
		rows.Close()
	}
	svc, err := New(Config{DB: db, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(b, &gatetest.Lease{}).g})
	if err != nil {
		b.Fatal(err)
	}
	runCommits(b, svc)
	rd := NewRiskDesk(svc, nil)
	for b.Loop() {
		s, err := rd.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Positions) != open || len(s.Accounts) != accounts {
			b.Fatalf("loaded %d positions, %d accounts", len(s.Positions), len(s.Accounts))
		}
	}
	b.ReportMetric(float64(open)*float64(b.N)/b.Elapsed().Seconds(), "positions/s")
}

// BenchmarkRiskViewLoadYear is the same load over a generated year (`make year`; FXDESK_YEAR_DB
// names it): its 50,000 open positions over 20,000 accounts, its 10,000 resting orders, beside
// 2,000,000 closed positions (docs/boot.md, «The risk view's read»). It reads into a Snapshot:
// the engine's install is not in it.
//
//	FXDESK_BENCH=1 FXDESK_YEAR_DB=fxdesk_year go test -count=1 -run '^$' -bench BenchmarkRiskViewLoadYear -benchtime 20x -benchmem ./internal/trading/
func BenchmarkRiskViewLoadYear(b *testing.B) {
	dbtest.SkipUnlessBench(b, "risk view load on a year")
	name := os.Getenv("FXDESK_YEAR_DB")
	if name == "" {
		b.Skip("FXDESK_YEAR_DB names no generated year database")
	}
	db := dbtest.OpenExisting(b, name)
	svc, err := New(Config{DB: db, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(b, &gatetest.Lease{}).g})
	if err != nil {
		b.Fatal(err)
	}
	rd := NewRiskDesk(svc, nil)
	ctx := context.Background()
	var positions int
	for b.Loop() {
		s, err := rd.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		positions = len(s.Positions)
	}
	b.ReportMetric(float64(positions)*float64(b.N)/b.Elapsed().Seconds(), "positions/s")
}
