package trading

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

// BenchmarkExposures is the hedger's read of the B-book (ABook.Exposures, once per pass): one
// aggregate over every open position, on a desk of 10,000 open positions over four symbols, one
// in five of them EXTERNAL. Its cost grows with the open positions, which is why the hedger
// reads it once per pass and passes on changes, coalesced, not per fill.
func BenchmarkExposures(b *testing.B) {
	dbtest.SkipUnlessBench(b, "exposures")
	const positions = 10_000
	ctx := context.Background()
	db, drop, err := dbtest.NewMigrated("exposures")
	if err != nil {
		b.Fatal(err)
	}
	defer drop()
	if _, err := db.ExecContext(ctx, "INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES (1, 1, 'USD', 100, 1000000.00)"); err != nil {
		b.Fatal(err)
	}
	symbols := []string{"EURUSD", "GBPUSD", "USDJPY", "XAUUSD"}
	var sb strings.Builder
	for lo := 0; lo < positions; lo += 2000 {
		sb.Reset()
		sb.WriteString("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `venueTradeId`) VALUES ")
		for i := lo; i < lo+2000; i++ {
			if i > lo {
				sb.WriteString(",")
			}
			side, trade := "BUY", "NULL"
			if i%3 == 0 {
				side = "SELL"
			}
			if i%5 == 0 {
				trade = fmt.Sprintf("'%d'", i)
			}
			fmt.Fprintf(&sb, "(1,%d,'%s','%s',0.10,0.10,1.1,%s)", i+1, symbols[i%len(symbols)], side, trade)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			b.Fatal(err)
		}
	}
	svc, err := New(Config{DB: db, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(b, &gatetest.Lease{}).g})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ex, err := svc.ABook().Exposures(ctx)
		if err != nil || len(ex) != len(symbols) {
			b.Fatalf("exposures %v, %v", ex, err)
		}
	}
}
