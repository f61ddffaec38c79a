package pnl_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/pnl"
	"fxdesk/internal/testkit/dbtest"
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

// BenchmarkRecentLedger is a dealer's poll right after a rollover: 150,000 swap deals (on 50,000
// positions) the summaries have not reached, older than SummaryMargin, then a few new deals
// before each report ending now — each op one report through Marks with a new reading of the
// recent ledger waited for (the clock moved past MarkStale). It writes at the database's clock,
// into the unsummarised span after the summaries' cursor, which it puts back afterwards, and
// reports the database server's processor time per report beside the time.
func BenchmarkRecentLedger(b *testing.B) {
	ctx := context.Background()
	var acct int64
	if err := testDB.QueryRow("SELECT COALESCE(MAX(`id`), 0) + 1 FROM `fx_account`").Scan(&acct); err != nil {
		b.Fatal(err)
	}
	if _, err := testDB.Exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`) VALUES (?, 9001, 'USD', 100)", acct); err != nil {
		b.Fatal(err)
	}
	var dbNow time.Time
	if err := testDB.QueryRow("SELECT NOW(3)").Scan(&dbNow); err != nil {
		b.Fatal(err)
	}
	// The swaps are dated 15 minutes ago and the 150 s before; the summaries end at their hour.
	z := dbNow.UTC().Add(-18 * time.Minute).Truncate(time.Hour)
	var was sql.NullTime
	if err := testDB.QueryRow("SELECT `through` FROM `fx_pnl_summary` WHERE `id` = 1").Scan(&was); err != nil && err != sql.ErrNoRows {
		b.Fatal(err)
	}
	b.Cleanup(func() { testDB.Exec("UPDATE `fx_pnl_summary` SET `through` = ? WHERE `id` = 1", was) })
	if _, err := testDB.Exec("INSERT INTO `fx_pnl_summary` (`id`, `through`) VALUES (1, ?) ON DUPLICATE KEY UPDATE `through` = ?", z, z); err != nil {
		b.Fatal(err)
	}
	digits := "(SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	n := "(SELECT a.x + 10 * b.x + 100 * c.x + 1000 * d.x + 10000 * e.x + 100000 * f.x AS n FROM " + digits + " a, " + digits + " b, " + digits + " c, " + digits + " d, " + digits + " e, " + digits + " f)"
	var first int64
	if err := testDB.QueryRow("SELECT COALESCE(MAX(`id`), 0) + 1 FROM `fx_position`").Scan(&first); err != nil {
		b.Fatal(err)
	}
	if _, err := testDB.Exec("INSERT INTO `fx_position` (`id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`, `markup`, `openedAt`) "+
		"SELECT ? + s.n, ?, 0, 'EURUSD', 'BUY', 0, 1, 1.1, 'CLOSED', 1, ? FROM "+n+" s WHERE s.n < 50000", first, acct, z.Add(-24*time.Hour)); err != nil {
		b.Fatal(err)
	}
	// The deals are fixtures of a ledger, not balance changes: the report reads them as rows.
	if _, err := testDB.Exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `symbol`, `positionId`, `idempotencyKey`, `createdAt`) "+
		"SELECT ?, 'SWAP', -1, 0, 'USD', 'EURUSD', ? + s.n % 50000, CONCAT('bench:swap:', ?, ':', s.n), NOW(3) - INTERVAL 15 MINUTE - INTERVAL (s.n * 1000) MICROSECOND FROM "+n+" s WHERE s.n < 150000",
		acct, first, acct); err != nil {
		b.Fatal(err)
	}
	testDB.Exec("ANALYZE TABLE `fx_deal`, `fx_position`")
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		b.Fatal(err)
	}
	marks := pnl.NewMarks(testDB)
	// Ahead of the database's clock, so every deal written here is before the reading's end.
	now := dbNow.Add(time.Hour)
	marks.SetClock(func() time.Time { return now })
	from := z.Add(-time.Hour)
	if _, err := marks.Read(ctx, cat, quotes{}, from, now, true); err != nil {
		b.Fatal(err)
	}
	i := 0
	var server time.Duration
	for b.Loop() {
		b.StopTimer()
		for range 5 {
			i++
			if _, err := testDB.Exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `symbol`, `positionId`, `idempotencyKey`) "+
				"VALUES (?, 'COMMISSION', -1, 0, 'USD', 'EURUSD', ?, CONCAT('bench:new:', ?, ':', ?))", acct, first, acct, i); err != nil {
				b.Fatal(err)
			}
		}
		now = now.Add(pnl.MarkStale + time.Millisecond)
		cpu := dbtest.ReadCPU()
		b.StartTimer()
		if _, err := marks.Read(ctx, cat, quotes{}, from, now, true); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		server += dbtest.ReadCPU().Sub(cpu).Server
		b.StartTimer()
	}
	// The server's processor time beside each report: its other databases' work too, on a
	// shared machine.
	b.ReportMetric(float64(server.Milliseconds())/float64(b.N), "server-ms/op")
}
