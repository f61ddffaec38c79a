package swaps

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

// BenchmarkRollover measures processFxSwaps' charge over a book of open positions in a database
// that also holds a history of closed trades — deals and events the charge's own inserts land
// among, as on a broker's live desk: FXDESK_BENCH_OPEN open positions (default 50,000) on
// FXDESK_BENCH_ACCOUNTS accounts (default 20,000; 30 % in EUR, so their charges convert through
// the EURUSD mid), beside FXDESK_BENCH_HISTORY closed trades (default 250,000: a commission and
// a profit deal each, and two events). Each iteration charges the next weekday rollover over
// every open position, each with its deal and its swap.charged event, and reports positions/s
// and the processor time per position of this process and of the server.
//
//	FXDESK_BENCH=1 go test -run '^$' -bench BenchmarkRollover -benchtime 3x ./internal/swaps/
//
// With FXDESK_YEAR_DB naming a generated year (`make year`) it charges that year's own open book
// instead, from the rollover after its last charge — the charges stay in it:
//
//	FXDESK_BENCH=1 FXDESK_YEAR_DB=fxdesk_year go test -run '^$' -bench BenchmarkRollover -benchtime 1x ./internal/swaps/
func BenchmarkRollover(b *testing.B) {
	dbtest.SkipUnlessBench(b, "rollover")
	open, accounts, history := benchEnv(b, "FXDESK_BENCH_OPEN", 50000), benchEnv(b, "FXDESK_BENCH_ACCOUNTS", 20000), benchEnv(b, "FXDESK_BENCH_HISTORY", 250000)
	first := benchRollover(b, "2026-03-02") // a Monday
	var db *sql.DB
	var prices tick.Prices = benchPrices{}
	yearDB, done := os.Getenv("FXDESK_YEAR_DB"), 0
	if yearDB != "" {
		// A generated year (docs/operations.md, «A year of data»): its own open book, charged from
		// the rollover after its last at its last frozen day's prices. Its charges stay.
		db, prices = yearBook(b, yearDB)
		if err := db.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'OPEN'").Scan(&open); err != nil {
			b.Fatal(err)
		}
	} else {
		db = benchBook(b, "swapsbench", bookSize{accounts: accounts, open: open, closed: history, openedAt: first.At.Add(-30 * 24 * time.Hour),
			through: first.Previous().Previous().Previous().Date})
	}
	// A kept database (FXDESK_BENCH_DB) goes on from the day after its last charge.
	var through sql.NullString
	if err := db.QueryRow("SELECT DATE_FORMAT(MAX(`swapThrough`), '%Y-%m-%d') FROM `fx_position` WHERE `status` = 'OPEN'").Scan(&through); err != nil {
		b.Fatal(err)
	}
	for through.Valid && first.Date <= through.String {
		first = first.Next()
	}
	job := New(Config{DB: db, Prices: func() tick.Prices { return prices }}, slog.New(slog.DiscardHandler))
	// The server's buffer pool decides a year's rate (docs/operations.md, «What the desk does on
	// a year»): the figure names the pool it ran on.
	var pool int64
	if err := db.QueryRow("SELECT @@innodb_buffer_pool_size").Scan(&pool); err != nil {
		b.Fatal(err)
	}

	ro := first
	var took time.Duration
	var cpu dbtest.CPU
	b.ResetTimer()
	for range b.N {
		for ro.Weekday() == time.Saturday || ro.Weekday() == time.Sunday {
			ro = ro.Next()
		}
		before, t0 := dbtest.ReadCPU(), time.Now()
		got, err := job.Run(context.Background(), ro.At.Add(time.Minute))
		took += time.Since(t0)
		used := dbtest.ReadCPU().Sub(before)
		cpu.Self, cpu.Server = cpu.Self+used.Self, cpu.Server+used.Server
		if err != nil {
			b.Fatal(err)
		}
		switch {
		case yearDB != "":
			// A generated book's positions are not all due the same dates (some opened since
			// its last charge): each position-date charged or found zero counts.
			done += got["charged"] + got["zero"]
		case got["charged"] != open:
			b.Fatalf("%s: %v, want %d charged", ro.Date, got, open)
		default:
			done += open
		}
		ro = ro.Next()
	}
	b.StopTimer()
	n := float64(done)
	b.ReportMetric(n/took.Seconds(), "positions/s")
	b.ReportMetric(float64(cpu.Self.Microseconds())/n, "self-µs/position")
	b.ReportMetric(float64(cpu.Server.Microseconds())/n, "server-µs/position")
	b.ReportMetric(float64(pool>>20), "pool-MiB")
	b.ReportMetric(0, "ns/op")
}

func benchEnv(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		tb.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}

func benchRollover(tb testing.TB, date string) fx.Rollover {
	d, err := time.Parse("2006-01-02", date)
	if err != nil {
		tb.Fatal(err)
	}
	ro, err := fx.LastRollover(d.Add(36 * time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	if ro.Date != date {
		tb.Fatalf("rollover %s, want %s", ro.Date, date)
	}
	return ro
}

// yearBook opens the generated database name and quotes every symbol at its last frozen day's
// closing prices (fx_eod_price), fresh.
func yearBook(b *testing.B, name string) (*sql.DB, tick.Prices) {
	b.Helper()
	db := dbtest.OpenExisting(b, name)
	rows, err := db.Query("SELECT `symbol`, `bid`, `ask` FROM `fx_eod_price` WHERE `tradingDay` = (SELECT MAX(`tradingDay`) FROM `fx_eod_price`)")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	q := closingPrices{}
	for rows.Next() {
		var sym string
		var bid, ask float64
		if err := rows.Scan(&sym, &bid, &ask); err != nil {
			b.Fatal(err)
		}
		q[sym] = [2]float64{bid, ask}
	}
	if err := rows.Err(); err != nil || len(q) == 0 {
		b.Fatalf("%s: no closing prices (%v): not a generated year", name, err)
	}
	return db, q
}

// closingPrices quotes each symbol it holds at its bid and ask, fresh.
type closingPrices map[string][2]float64

func (p closingPrices) LastTick(s string) (tick.Quote, bool) {
	q, ok := p[s]
	return tick.Quote{Bid: q[0], Ask: q[1], ReceivedAt: time.Now(), ProviderTime: time.Now()}, ok
}

func (p closingPrices) SymbolState(s string) tick.State {
	if _, ok := p[s]; ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// benchPrices quotes EURUSD, the one leg the bench's EUR accounts need, fresh.
type benchPrices struct{}

func (benchPrices) LastTick(s string) (tick.Quote, bool) {
	if s != "EURUSD" {
		return tick.Quote{}, false
	}
	return tick.Quote{Bid: 1.08, Ask: 1.0802, ReceivedAt: time.Now(), ProviderTime: time.Now()}, true
}

func (benchPrices) SymbolState(s string) tick.State {
	if s == "EURUSD" {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// benchBook is a database holding the book s, seeded; dropped at the end of the benchmark unless
// FXDESK_BENCH_DB names it, which keeps it (seeded on first use) for the next run.
func benchBook(b *testing.B, prefix string, s bookSize) *sql.DB {
	b.Helper()
	if name := os.Getenv("FXDESK_BENCH_DB"); name != "" {
		admin, err := sql.Open("mysql", dbtest.ServerDSN())
		if err != nil {
			b.Fatal(err)
		}
		defer admin.Close()
		if _, err := admin.Exec("CREATE DATABASE IF NOT EXISTS `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
			b.Fatal(err)
		}
		cfg, err := mysql.ParseDSN(dbtest.ServerDSN())
		if err != nil {
			b.Fatal(err)
		}
		cfg.DBName = name
		db, err := store.OpenMigrated(context.Background(), cfg.FormatDSN(), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM `fx_account`").Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			start := time.Now()
			seedBook(b, db, s)
			b.Logf("seeded %d accounts, %d open positions, %d closed trades in %v", s.accounts, s.open, s.closed, time.Since(start).Round(time.Millisecond))
		}
		return db
	}
	db, closeDB, err := dbtest.NewMigrated(prefix)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeDB)
	start := time.Now()
	seedBook(b, db, s)
	b.Logf("seeded %d accounts, %d open positions, %d closed trades in %v", s.accounts, s.open, s.closed, time.Since(start).Round(time.Millisecond))
	return db
}

type bookSize struct {
	accounts, open, closed int
	openedAt               time.Time // when the open positions were opened
	through                string    // their swap watermark
}

// seedBook writes a broker's book straight into db with multi-row INSERTs: accounts funded by a
// deposit, closed trades (a position, its commission and profit deals, two events) in random
// accounts, with the open positions (USD-quoted symbols) spread among them in id order as a
// live desk interleaves them. Every account's balance is the sum of its deals.
func seedBook(tb testing.TB, db *sql.DB, s bookSize) {
	tb.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(42, uint64(s.open)))
	ccy := func(a int) string {
		if a%10 < 3 {
			return "EUR"
		}
		return "USD"
	}
	balance := make([]decimal.Decimal, s.accounts+1)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	sem := make(chan struct{}, 2)
	send := func(head string, rows []string) {
		if len(rows) == 0 {
			return
		}
		q := head + strings.Join(rows, ", ")
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := db.ExecContext(ctx, q); err != nil {
				errs <- fmt.Errorf("%.80s: %w", head, err)
			}
		}()
	}
	flush := func() {
		wg.Wait()
		select {
		case err := <-errs:
			tb.Fatal(err)
		default:
		}
	}
	const chunk = 2000
	const accountHead = "INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES "
	const dealHead = "INSERT INTO `fx_deal` (`id`, `accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, `symbol`, `side`, `volume`, `idempotencyKey`, `createdAt`) VALUES "
	const positionHead = "INSERT INTO `fx_position` (`id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`, `closePrice`, `closeReason`, `openedAt`, `closedAt`, `swapThrough`) VALUES "
	const eventHead = "INSERT INTO `fx_event` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) VALUES "

	var dealRows []string
	dealID := int64(0)
	deal := func(a int, typ string, amount decimal.Decimal, order, position int64, symbol, side string, at time.Time) {
		dealID++
		balance[a] = balance[a].Add(amount)
		pos, ord := "NULL", "NULL"
		if position > 0 {
			pos, ord = strconv.FormatInt(position, 10), strconv.FormatInt(order, 10)
		}
		sym, sd, vol := "NULL", "NULL", "NULL"
		if symbol != "" {
			sym, sd, vol = "'"+symbol+"'", "'"+side+"'", "0.10"
		}
		dealRows = append(dealRows, fmt.Sprintf("(%d, %d, '%s', %s, %s, '%s', %s, %s, %s, %s, %s, '%s:%d', '%s')", dealID, a, typ, amount.StringFixed(2),
			balance[a].StringFixed(2), ccy(a), ord, pos, sym, sd, vol, strings.ToLower(typ), dealID, at.Format("2006-01-02 15:04:05.000")))
		if len(dealRows) == chunk {
			send(dealHead, dealRows)
			dealRows = nil
		}
	}
	var eventRows []string
	eventID := int64(0)
	event := func(a int, typ string, position int64, symbol string, at time.Time) {
		eventID++
		payload := fmt.Sprintf(`{"id":%d,"accountId":%d,"orderId":%d,"symbol":"%s","side":"BUY","volume":"0.1","initialVolume":"0.1","openPrice":"1.0812300000",`+
			`"sl":null,"tp":null,"commission":"-0.70","realizedProfit":"12.30","status":"CLOSED","closePrice":"1.0824600000","closeReason":"CLIENT",`+
			`"openedAt":"%s","closedAt":"%s","execution":"INTERNAL","closedVolume":"0.1","price":"1.0824600000","profit":"12.30","reason":"CLIENT"}`,
			position, a, position, symbol, at.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
		eventRows = append(eventRows, fmt.Sprintf("(%d, %d, %d, '%s', '%s', 0, '%s')", eventID, a, 100000+a, typ, payload, at.Format("2006-01-02 15:04:05.000")))
		if len(eventRows) == chunk {
			send(eventHead, eventRows)
			eventRows = nil
		}
	}

	var rows []string
	for a := 1; a <= s.accounts; a++ {
		rows = append(rows, fmt.Sprintf("(%d, %d, '%s', 100, 0)", a, 100000+a, ccy(a)))
		if len(rows) == chunk || a == s.accounts {
			send(accountHead, rows)
			rows = nil
		}
	}
	flush()
	start := s.openedAt.Add(-300 * 24 * time.Hour)
	for a := 1; a <= s.accounts; a++ {
		deal(a, "DEPOSIT", decimal.NewFromInt(100000), 0, 0, "", "", start)
	}
	symbols := []string{"EURUSD", "GBPUSD", "AUDUSD", "XAUUSD"}
	var posRows []string
	total := s.open + s.closed
	openLeft := s.open
	for p := int64(1); p <= int64(total); p++ {
		a := 1 + rng.IntN(s.accounts)
		symbol := symbols[rng.IntN(len(symbols))]
		side := "BUY"
		if rng.IntN(2) == 1 {
			side = "SELL"
		}
		// The open positions are spread evenly among the closed ones, by id.
		isOpen := openLeft > 0 && rng.IntN(total-int(p)+1) < openLeft
		if isOpen {
			openLeft--
			posRows = append(posRows, fmt.Sprintf("(%d, %d, %d, '%s', '%s', 0.10, 0.10, 1.08000, 'OPEN', NULL, NULL, '%s', NULL, '%s')",
				p, a, p, symbol, side, s.openedAt.Format("2006-01-02 15:04:05"), s.through))
		} else {
			at := start.Add(time.Duration(p) * (s.openedAt.Sub(start) / time.Duration(total+1)))
			posRows = append(posRows, fmt.Sprintf("(%d, %d, %d, '%s', '%s', 0.10, 0.10, 1.08000, 'CLOSED', 1.08100, 'CLIENT', '%s', '%s', NULL)",
				p, a, p, symbol, side, at.Format("2006-01-02 15:04:05"), at.Add(time.Hour).Format("2006-01-02 15:04:05")))
			deal(a, "COMMISSION", decimal.RequireFromString("-0.70"), p, p, symbol, side, at)
			deal(a, "PROFIT", decimal.NewFromInt(int64(rng.IntN(4000)-2000)).Shift(-2), p, p, symbol, side, at.Add(time.Hour))
			event(a, "position.opened", p, symbol, at)
			event(a, "position.closed", p, symbol, at.Add(time.Hour))
		}
		if len(posRows) == chunk {
			send(positionHead, posRows)
			posRows = nil
		}
	}
	send(positionHead, posRows)
	send(dealHead, dealRows)
	send(eventHead, eventRows)
	flush()
	for a := 1; a <= s.accounts; a += chunk {
		var sb strings.Builder
		sb.WriteString("UPDATE `fx_account` SET `balance` = CASE `id`")
		hi := min(a+chunk-1, s.accounts)
		for i := a; i <= hi; i++ {
			fmt.Fprintf(&sb, " WHEN %d THEN %s", i, balance[i].StringFixed(2))
		}
		fmt.Fprintf(&sb, " END, `equity` = `balance` WHERE `id` BETWEEN %d AND %d", a, hi)
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "UPDATE `fx_event_seq` SET `last` = ?", eventID); err != nil {
		tb.Fatal(err)
	}
	for _, t := range []string{"fx_account", "fx_position", "fx_deal", "fx_event"} {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE `"+t+"`"); err != nil {
			tb.Fatal(err)
		}
	}
}
