package pnl_test

import (
	"context"
	"testing"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/pnl"
)

// BenchmarkReadDay reads one day of a ledger of 100,000 deals, one a minute over ten weeks, with
// 10,000 openings: the time indexes keep a report at the cost of its own range's rows.
func BenchmarkReadDay(b *testing.B) {
	ctx := context.Background()
	var acct int64
	if err := testDB.QueryRow("SELECT COALESCE(MAX(`id`), 0) + 1 FROM `fx_account`").Scan(&acct); err != nil {
		b.Fatal(err)
	}
	if _, err := testDB.Exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`) VALUES (?, 9000, 'USD', 100)", acct); err != nil {
		b.Fatal(err)
	}
	end := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	digits := "(SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	n := "(SELECT a.x + 10 * b.x + 100 * c.x + 1000 * d.x + 10000 * e.x AS n FROM " + digits + " a, " + digits + " b, " + digits + " c, " + digits + " d, " + digits + " e)"
	if _, err := testDB.Exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`, `markup`, `openedAt`) "+
		"SELECT ?, 0, 'EURUSD', 'BUY', 0, 1, 1.1, 'CLOSED', 1, ? - INTERVAL (s.n * 10) MINUTE FROM "+n+" s WHERE s.n < 10000", acct, end); err != nil {
		b.Fatal(err)
	}
	// The deals are fixtures of a ledger, not balance changes: the report reads them as rows.
	if _, err := testDB.Exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `symbol`, `markup`, `idempotencyKey`, `createdAt`) "+
		"SELECT ?, CASE s.n % 3 WHEN 0 THEN 'PROFIT' WHEN 1 THEN 'COMMISSION' ELSE 'SWAP' END, -1, 0, 'USD', 'EURUSD', 1, CONCAT('bench:', s.n), "+
		"? - INTERVAL s.n MINUTE FROM "+n+" s", acct, end); err != nil {
		b.Fatal(err)
	}
	testDB.Exec("ANALYZE TABLE `fx_deal`, `fx_position`")
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		b.Fatal(err)
	}
	from := end.Add(-24 * time.Hour)
	b.ResetTimer()
	for b.Loop() {
		if _, err := pnl.Read(ctx, testDB, cat, quotes{}, from, end, false); err != nil {
			b.Fatal(err)
		}
	}
}
