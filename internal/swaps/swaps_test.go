package swaps

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

var testDB *sql.DB

func TestMain(m *testing.M) {
	os.Exit(func() int {
		db, closeDB, err := dbtest.NewMigrated("swaps")
		if err != nil {
			panic(err)
		}
		defer closeDB()
		testDB = db
		return m.Run()
	}())
}

// noPrices quotes nothing: USD accounts on USD-quoted EURUSD need no conversion.
type noPrices struct{}

func (noPrices) LastTick(string) (tick.Quote, bool) { return tick.Quote{}, false }
func (noPrices) SymbolState(string) tick.State      { return tick.QuotingHalted }

func newJob(batch int) *Job {
	return New(Config{DB: testDB, Prices: func() tick.Prices { return noPrices{} }, Batch: batch}, slog.New(slog.DiscardHandler))
}

func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// seedLong writes a USD account funded by a deposit deal and one open EURUSD BUY 1.00 position
// opened at openedAt (watermark through, "" for none), straight into the database, and returns
// the position's id. Each lot long EURUSD costs 7.50 USD a night, 22.50 on Wednesday.
func seedLong(t *testing.T, openedAt time.Time, through string) (account, position int64) {
	t.Helper()
	ctx := context.Background()
	res, err := testDB.ExecContext(ctx, "INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`) VALUES (7, 'USD', 100, 10000.00)")
	if err != nil {
		t.Fatal(err)
	}
	account, _ = res.LastInsertId()
	if _, err := testDB.ExecContext(ctx, "INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) "+
		"VALUES (?, 'DEPOSIT', 10000.00, 10000.00, 'USD', ?)", account, fmt.Sprintf("seed:%d", account)); err != nil {
		t.Fatal(err)
	}
	var wm any
	if through != "" {
		wm = through
	}
	res, err = testDB.ExecContext(ctx, "INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `openedAt`, `swapThrough`) "+
		"VALUES (?, ?, 'EURUSD', 'BUY', 1.00, 1.00, 1.08000, ?, ?)", account, 1000+account, openedAt, wm)
	if err != nil {
		t.Fatal(err)
	}
	position, _ = res.LastInsertId()
	return account, position
}

// swapsOf maps rollover date → amount of position's SWAP deals, failing on a date charged twice
// (the unique key makes that impossible; the test still says so if it ever is not).
func swapsOf(t *testing.T, position int64) map[string]string {
	t.Helper()
	rows, err := testDB.Query("SELECT `idempotencyKey`, `amount` FROM `fx_deal` WHERE `type` = 'SWAP' AND `positionId` = ? ORDER BY `id`", position)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k string
		var a decimal.Decimal
		if err := rows.Scan(&k, &a); err != nil {
			t.Fatal(err)
		}
		date := k[len(fmt.Sprintf("swap:%d:", position)):]
		if _, dup := out[date]; dup {
			t.Fatalf("position %d charged twice on %s", position, date)
		}
		out[date] = a.StringFixed(2)
	}
	return out
}

// wantSwaps asserts position's SWAP deals are exactly want (date → amount), its accrued swap is
// their sum, its watermark is through, and its account's balance is Σ of its deals.
func wantSwaps(t *testing.T, account, position int64, through string, want map[string]string) {
	t.Helper()
	got := swapsOf(t, position)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("position %d: swap deals %v, want %v", position, got, want)
	}
	var accrued, sum decimal.Decimal
	var wm sql.NullString
	if err := testDB.QueryRow("SELECT p.`swap`, DATE_FORMAT(p.`swapThrough`, '%Y-%m-%d'), "+
		"(SELECT COALESCE(SUM(`amount`), 0) FROM `fx_deal` WHERE `type` = 'SWAP' AND `positionId` = p.`id`) FROM `fx_position` p WHERE p.`id` = ?",
		position).Scan(&accrued, &wm, &sum); err != nil {
		t.Fatal(err)
	}
	if !accrued.Equal(sum) {
		t.Errorf("position %d: accrued swap %s, Σ of its SWAP deals %s", position, accrued, sum)
	}
	if wm.String != through {
		t.Errorf("position %d: watermark %q, want %q", position, wm.String, through)
	}
	var balance, deals decimal.Decimal
	if err := testDB.QueryRow("SELECT a.`balance`, (SELECT COALESCE(SUM(`amount`), 0) FROM `fx_deal` WHERE `accountId` = a.`id`) "+
		"FROM `fx_account` a WHERE a.`id` = ?", account).Scan(&balance, &deals); err != nil {
		t.Fatal(err)
	}
	if !balance.Equal(deals) {
		t.Errorf("account %d: balance %s, Σ deals %s", account, balance, deals)
	}
}

// waitLockWait returns once another connection to this test's database is locking accounts
// while the test holds one: the run has selected its batch and is blocked locking it. (MariaDB
// takes a primary-key lock of a short IN list while optimising, before the transaction shows
// in INNODB_TRX, so the process list is what tells.)
func waitLockWait(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := testDB.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE `DB` = DATABASE() AND `ID` <> CONNECTION_ID() " +
			"AND `INFO` LIKE '%FROM `fx_account` WHERE `id` IN (%FOR UPDATE'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never waited for the locked account")
		}
		time.Sleep(10 * time.Millisecond) // the server offers no signal for "a lock wait began"
	}
}

// A rollover run --at several days ahead charges a position that commits while it runs for
// every date it held, not from the date the run happened to reach. The test holds the account of
// a position opened after Monday's rollover, so the run stops when it reaches that position,
// commits a second position opened before Monday's rollover, and lets the run go on. Charging one
// pass per date (the defect), the run had finished Monday's pass when it stopped: the second
// position first appears in Tuesday's pass, is charged from Tuesday on, its watermark moves past
// Monday, and Monday is never charged.
func TestSwapFillDuringRunIsChargedEveryDueDate(t *testing.T) {
	// Thursday 2026-12-03 18:00 New York: due 11-27, 11-30, 12-01, 12-02 (triple), 12-03.
	at := utc(t, "2026-12-03T23:00:00Z")
	a1, p1 := seedLong(t, utc(t, "2026-11-30T23:00:00Z"), "") // Monday 18:00 New York, after its rollover

	ctx := context.Background()
	hold, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.ExecContext(ctx, "SELECT `id` FROM `fx_account` WHERE `id` = ? FOR UPDATE", a1); err != nil {
		t.Fatal(err)
	}
	type result struct {
		counts map[string]int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		got, err := newJob(DefaultBatch).Run(ctx, at)
		done <- result{got, err}
	}()
	waitLockWait(t)
	a2, p2 := seedLong(t, utc(t, "2026-11-30T14:00:00Z"), "") // Monday 09:00 New York: the fill that commits while the run is inside
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("run: %v", r.counts)
	want := map[string]string{"2026-11-30": "-7.50", "2026-12-01": "-7.50", "2026-12-02": "-22.50", "2026-12-03": "-7.50"}
	wantSwaps(t, a1, p1, "2026-12-03", map[string]string{"2026-12-01": "-7.50", "2026-12-02": "-22.50", "2026-12-03": "-7.50"})
	wantSwaps(t, a2, p2, "2026-12-03", want)

	// A second run at the same instant finds nothing left.
	again, err := newJob(DefaultBatch).Run(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	if again["charged"] != 0 || again["pending"] != 0 {
		t.Fatalf("second run: %v, want nothing charged", again)
	}
	wantSwaps(t, a2, p2, "2026-12-03", want)
}

// One pass settles every due date a position is owed, in one transaction per batch: a
// position whose watermark is two dates behind is charged those two dates and no earlier one,
// a position opened between two rollovers only the ones after it opened, one opened after the
// last rollover nothing; runs at once, batches of one position, and a later run with an
// earlier --at charge nothing twice.
func TestSwapOnePassChargesEachDueDateOnce(t *testing.T) {
	// Tuesday 2026-12-15 17:30 New York: due 12-09 (Wed, triple) … 12-15.
	at := utc(t, "2026-12-15T22:30:00Z")
	aBehind, pBehind := seedLong(t, utc(t, "2026-12-01T12:00:00Z"), "2026-12-11") // Friday settled; Monday and Tuesday owed
	aMid, pMid := seedLong(t, utc(t, "2026-12-10T23:00:00Z"), "")                 // after Thursday's rollover
	aLate, pLate := seedLong(t, utc(t, "2026-12-15T22:10:00Z"), "")               // after Tuesday's rollover
	aNew, pNew := seedLong(t, utc(t, "2026-12-08T12:00:00Z"), "")                 // Tuesday 12-08: the whole window

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = newJob(1).Run(context.Background(), at) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, err := newJob(1).Run(context.Background(), utc(t, "2026-12-14T22:30:00Z")); err != nil || got["charged"] != 0 {
		t.Fatalf("a run at an earlier instant: %v (%v), want nothing charged", got, err)
	}
	wantSwaps(t, aBehind, pBehind, "2026-12-15", map[string]string{"2026-12-14": "-7.50", "2026-12-15": "-7.50"})
	wantSwaps(t, aMid, pMid, "2026-12-15", map[string]string{"2026-12-11": "-7.50", "2026-12-14": "-7.50", "2026-12-15": "-7.50"})
	wantSwaps(t, aLate, pLate, "", map[string]string{})
	wantSwaps(t, aNew, pNew, "2026-12-15", map[string]string{"2026-12-09": "-22.50", "2026-12-10": "-7.50", "2026-12-11": "-7.50",
		"2026-12-14": "-7.50", "2026-12-15": "-7.50"})
}

// An account group's override of a symbol's swap points is what its accounts are charged; an
// account of another group on the same symbol pays the instrument's.
func TestSwapChargesTheAccountGroupsOverride(t *testing.T) {
	at := utc(t, "2026-12-15T22:30:00Z") // Tuesday 17:30 New York: 12-15 due
	aVIP, pVIP := seedLong(t, utc(t, "2026-12-01T12:00:00Z"), "2026-12-14")
	aStd, pStd := seedLong(t, utc(t, "2026-12-01T12:00:00Z"), "2026-12-14")
	for _, q := range []string{
		"INSERT IGNORE INTO `fx_account_group` (`name`) VALUES ('swap-vip')",
		"INSERT INTO `fx_symbol_override` (`accountGroup`, `symbol`, `swapLong`) VALUES ('swap-vip', 'EURUSD', -2.00)",
	} {
		if _, err := testDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := testDB.Exec("UPDATE `fx_account` SET `accountGroup` = 'swap-vip' WHERE `id` = ?", aVIP); err != nil {
		t.Fatal(err)
	}
	if _, err := newJob(10).Run(context.Background(), at); err != nil {
		t.Fatal(err)
	}
	wantSwaps(t, aVIP, pVIP, "2026-12-15", map[string]string{"2026-12-15": "-2.00"})
	wantSwaps(t, aStd, pStd, "2026-12-15", map[string]string{"2026-12-15": "-7.50"})
}

// The pass goes account by account: an account whose open positions span several batches, between
// accounts with one each, has every position charged once, and its balance moves by every charge.
func TestSwapPassSplitsAnAccountAcrossBatches(t *testing.T) {
	at := utc(t, "2026-12-15T22:30:00Z") // Tuesday; the positions have Monday settled
	first, p1 := seedLong(t, utc(t, "2026-12-01T12:00:00Z"), "2026-12-14")
	many, p2 := seedLong(t, utc(t, "2026-12-01T12:00:00Z"), "2026-12-14")
	positions := []int64{p2}
	for range 4 {
		res, err := testDB.Exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `openedAt`, `swapThrough`) "+
			"VALUES (?, 0, 'EURUSD', 'BUY', 1.00, 1.00, 1.08000, '2026-12-01 12:00:00', '2026-12-14')", many)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		positions = append(positions, id)
	}
	last, p3 := seedLong(t, utc(t, "2026-12-01T12:00:00Z"), "2026-12-14")
	if _, err := newJob(2).Run(context.Background(), at); err != nil {
		t.Fatal(err)
	}
	wantSwaps(t, first, p1, "2026-12-15", map[string]string{"2026-12-15": "-7.50"})
	for _, p := range positions {
		wantSwaps(t, many, p, "2026-12-15", map[string]string{"2026-12-15": "-7.50"})
	}
	wantSwaps(t, last, p3, "2026-12-15", map[string]string{"2026-12-15": "-7.50"})
	var bal decimal.Decimal
	if err := testDB.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", many).Scan(&bal); err != nil || !bal.Equal(decimal.RequireFromString("9962.50")) {
		t.Fatalf("account with five positions: balance %s (%v), want 9962.50", bal, err)
	}
}
