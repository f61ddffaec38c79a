package eod

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/fx"
	"fxdesk/internal/schedule"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/sqlsource"
	"fxdesk/internal/tick"
)

var testDB *sql.DB

func TestMain(m *testing.M) {
	os.Exit(func() int {
		db, closeDB, err := dbtest.NewMigrated("eod")
		if err != nil {
			panic(err)
		}
		defer closeDB()
		testDB = db
		return m.Run()
	}())
}

// quotes is a fixed price view.
type quotes map[string][2]float64

func (q quotes) LastTick(symbol string) (tick.Quote, bool) {
	p, ok := q[symbol]
	if !ok {
		return tick.Quote{}, false
	}
	return tick.Quote{Bid: p[0], Ask: p[1], ReceivedAt: time.Now()}, true
}

func (q quotes) SymbolState(symbol string) tick.State {
	if _, ok := q[symbol]; ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// desk is one test's book: the end-of-day tables and the ledger start empty, because a freeze
// covers every account of the database.
type desk struct {
	t     *testing.T
	ctx   context.Context
	inbox *alert.Inbox
	live  quotes
}

func newDesk(t *testing.T) *desk {
	t.Helper()
	for _, table := range []string{"fx_eod_day", "fx_eod_symbol", "fx_eod_account", "fx_eod_price", "fx_deal", "fx_position", "fx_order", "fx_execution_alert"} {
		if _, err := testDB.Exec("DELETE FROM `" + table + "`"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := testDB.Exec("DELETE FROM `fx_account`"); err != nil {
		t.Fatal(err)
	}
	return &desk{t: t, ctx: context.Background(), inbox: alert.NewInbox(testDB, slog.New(slog.DiscardHandler)), live: quotes{}}
}

func (d *desk) job(now time.Time) *Job {
	return New(Config{DB: testDB, Prices: func() tick.Prices { return d.live }, Alerts: d.inbox, By: "test:1",
		Now: func() time.Time { return now }}, slog.New(slog.DiscardHandler))
}

// run is the swap job's call: every weekday rollover of the last 7 days up to at.
func (d *desk) run(at, now time.Time) schedule.Result {
	d.t.Helper()
	var due []fx.Rollover
	last, err := fx.LastRollover(at)
	if err != nil {
		d.t.Fatal(err)
	}
	for r := last; r.At.After(at.Add(-7 * 24 * time.Hour)); r = r.Previous() {
		if wd := r.Weekday(); wd != time.Saturday && wd != time.Sunday {
			due = append([]fx.Rollover{r}, due...)
		}
	}
	res := schedule.Result{}
	if err := d.job(now).Run(d.ctx, at, due, res); err != nil {
		d.t.Fatal(err)
	}
	return res
}

func (d *desk) exec(q string, args ...any) int64 {
	d.t.Helper()
	res, err := testDB.ExecContext(d.ctx, q, args...)
	if err != nil {
		d.t.Fatalf("%s: %v", q, err)
	}
	id, _ := res.LastInsertId()
	return id
}

// account opens a USD account at createdAt.
func (d *desk) account(createdAt time.Time) int64 {
	return d.exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `createdAt`) VALUES (7, 'USD', 100, ?)", createdAt)
}

// deal posts amount to account at createdAt, moving its balance as the ledger does.
func (d *desk) deal(account int64, typ, amount string, createdAt time.Time, position any, volume any) int64 {
	d.t.Helper()
	var bal decimal.Decimal
	if err := testDB.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", account).Scan(&bal); err != nil {
		d.t.Fatal(err)
	}
	bal = bal.Add(decimal.RequireFromString(amount))
	d.exec("UPDATE `fx_account` SET `balance` = ? WHERE `id` = ?", bal, account)
	return d.exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`, `positionId`, `volume`, `createdAt`) "+
		"VALUES (?, ?, ?, ?, 'USD', ?, ?, ?, ?)", account, typ, amount, bal, fmt.Sprintf("t:%d:%d", account, time.Now().UnixNano()), position, volume, createdAt)
}

// position opens a EURUSD position of volume lots at price.
func (d *desk) position(account int64, side, volume, price string, openedAt time.Time) int64 {
	return d.exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `openedAt`) "+
		"VALUES (?, 1, 'EURUSD', ?, ?, ?, ?, ?)", account, side, volume, volume, price, openedAt)
}

// snapshot is one frozen account row, every column as text.
func (d *desk) snapshot(day string, account int64) string {
	d.t.Helper()
	var out string
	err := testDB.QueryRow("SELECT CONCAT_WS('|', `currency`, `balance`, COALESCE(`equity`, '-'), COALESCE(`margin`, '-'), COALESCE(`freeMargin`, '-'), "+
		"COALESCE(`floatingPnl`, '-'), `openPositions`, `pendingOrders`, `throughDealId`, `takenAt`) FROM `fx_eod_account` WHERE `tradingDay` = ? AND `accountId` = ?",
		day, account).Scan(&out)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

func (d *desk) count(q string, args ...any) int {
	d.t.Helper()
	var n int
	if err := testDB.QueryRow(q, args...).Scan(&n); err != nil {
		d.t.Fatal(err)
	}
	return n
}

// weekday returns the first weekday rollover after t.
func weekday(t *testing.T, after time.Time) fx.Rollover {
	t.Helper()
	r, err := fx.NextRollover(after)
	if err != nil {
		t.Fatal(err)
	}
	for r.Weekday() == time.Saturday || r.Weekday() == time.Sunday {
		r = r.Next()
	}
	return r
}

// An on-time freeze writes each account as it stands, marked at the captured closing prices:
// balance and last deal, equity = balance + floating P&L at the close (bid for a long), margin
// = lots × contract × mid ÷ leverage.
func TestAnOnTimeDayIsFrozenAtItsClosingPrices(t *testing.T) {
	d := newDesk(t)
	day := weekday(t, time.Now().Add(24*time.Hour))
	opened := day.At.Add(-3 * time.Hour)
	a := d.account(opened)
	d.deal(a, "DEPOSIT", "10000.00", opened, nil, nil)
	d.position(a, "BUY", "1.00", "1.08000", opened)
	last := d.deal(a, "COMMISSION", "-7.00", opened, nil, nil)
	idle := d.account(opened)
	d.live["EURUSD"] = [2]float64{1.08500, 1.08520}

	res := d.run(day.At, day.At)
	if res["daysFrozen"] != 1 || res["accountsFrozen"] != 2 || res["pricesCaptured"] == 0 {
		t.Fatalf("run: %v, want one day of two accounts frozen after a capture", res)
	}
	// 1 lot × 100000 × (1.08500 − 1.08000) = 500.00; margin 100000 × 1.08510 ÷ 100 = 1085.10.
	want := fmt.Sprintf("USD|9993.000|10493.000|1085.100|9407.900|500.000|1|0|%d|", last)
	if got := d.snapshot(day.Date, a); !strings.HasPrefix(got, want) {
		t.Errorf("account %d frozen as %s, want %s…", a, got, want)
	}
	if got := d.snapshot(day.Date, idle); !strings.HasPrefix(got, "USD|0.000|0.000|0.000|0.000|0.000|0|0|0|") {
		t.Errorf("idle account frozen as %s", got)
	}
	var mode string
	var accounts int
	if err := testDB.QueryRow("SELECT `mode`, `accounts` FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date).Scan(&mode, &accounts); err != nil {
		t.Fatal(err)
	}
	if mode != "ON_TIME" || accounts != 2 {
		t.Errorf("day %s: mode %s, accounts %d", day.Date, mode, accounts)
	}
	var net, commission string
	if err := testDB.QueryRow("SELECT `bbookNet`, `commission` FROM `fx_eod_symbol` WHERE `tradingDay` = ? AND `symbol` = 'EURUSD' AND `currency` = 'USD'", day.Date).
		Scan(&net, &commission); err != nil {
		t.Fatal(err)
	}
	if net != "1.0000" {
		t.Errorf("desk B-book net %s, want 1.0000", net)
	}
	var bid string
	if err := testDB.QueryRow("SELECT `bid` FROM `fx_eod_price` WHERE `tradingDay` = ? AND `symbol` = 'EURUSD'", day.Date).Scan(&bid); err != nil {
		t.Fatal(err)
	}
	if bid != "1.0850000000" {
		t.Errorf("closing bid %s", bid)
	}
}

// A rerun, or a run after a crash that left the day half written, inserts only the rows still
// missing: the rows written first are not touched, and the day is counted once.
func TestARerunWritesOnlyWhatIsMissing(t *testing.T) {
	d := newDesk(t)
	day := weekday(t, time.Now().Add(24*time.Hour))
	opened := day.At.Add(-time.Hour)
	a := d.account(opened)
	d.deal(a, "DEPOSIT", "500.00", opened, nil, nil)
	d.live["EURUSD"] = [2]float64{1.1, 1.1002}
	d.run(day.At, day.At)
	first := d.snapshot(day.Date, a)

	// The crash: the day's row never made it, and the book moved on meanwhile.
	d.exec("DELETE FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date)
	b := d.account(opened)
	d.deal(a, "DEPOSIT", "1.00", opened, nil, nil)
	res := d.run(day.At, day.At.Add(time.Minute))
	if res["accountsFrozen"] != 1 {
		t.Errorf("rerun froze %d accounts, want only the missing one", res["accountsFrozen"])
	}
	if got := d.snapshot(day.Date, a); got != first {
		t.Errorf("account %d rewritten by the rerun: %s, was %s", a, got, first)
	}
	if d.snapshot(day.Date, b) == "" {
		t.Errorf("account %d not frozen by the rerun", b)
	}
	if res := d.run(day.At, day.At.Add(2*time.Minute)); res["daysFrozen"] != 0 || res["accountsFrozen"] != 0 {
		t.Errorf("a run after the day is complete: %v", res)
	}
	if n := d.count("SELECT `accounts` FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date); n != 2 {
		t.Errorf("day counts %d accounts, want 2", n)
	}
}

// A run replayed long after a rollover with that rollover as its --at does not record today's
// prices as that day's close.
func TestAReplayedRunDoesNotCaptureTodaysPrices(t *testing.T) {
	d := newDesk(t)
	day := weekday(t, time.Now().Add(-5*24*time.Hour))
	d.account(day.At.Add(-time.Hour))
	d.live["EURUSD"] = [2]float64{1.2, 1.2002}
	res := d.run(day.At, day.At.Add(3*24*time.Hour))
	if res["pricesCaptured"] != 0 || res["daysFrozen"] != 0 {
		t.Errorf("a replay of %s three days later: %v, want nothing captured or frozen", day.Date, res)
	}
	if n := d.count("SELECT COUNT(*) FROM `fx_eod_price`"); n != 0 {
		t.Errorf("%d closing prices recorded by a replay", n)
	}
}

// A day frozen late is the ledger as it stood at its rollover: the last deal before it, the
// positions open then at their volume then, the orders resting then — not the book of now.
func TestALateDayIsRebuiltAsOfItsRollover(t *testing.T) {
	d := newDesk(t)
	day := weekday(t, time.Now().Add(-10*24*time.Hour))
	before, after := day.At.Add(-2*time.Hour), day.At.Add(2*time.Hour)
	d.exec("INSERT INTO `fx_eod_price` (`tradingDay`, `symbol`, `bid`, `ask`, `quotedAt`, `capturedBy`) VALUES (?, 'EURUSD', 1.09, 1.0902, ?, 'holder')", day.Date, day.At)
	a := d.account(before)
	d.deal(a, "DEPOSIT", "1000.00", before, nil, nil)
	kept := d.position(a, "BUY", "0.50", "1.08000", before)
	through := d.deal(a, "COMMISSION", "-1.00", before, nil, nil)
	// After the rollover: half of the position closed, a new position, a deposit, a new account.
	d.deal(a, "PROFIT", "25.00", after, kept, "0.25")
	d.exec("UPDATE `fx_position` SET `volume` = 0.25 WHERE `id` = ?", kept)
	d.position(a, "SELL", "2.00", "1.09000", after)
	d.deal(a, "DEPOSIT", "5000.00", after, nil, nil)
	late := d.account(after)

	res := schedule.Result{}
	if err := d.job(day.At.Add(3*24*time.Hour)).Run(d.ctx, day.At.Add(time.Hour), []fx.Rollover{day}, res); err != nil {
		t.Fatal(err)
	}
	// 0.50 lot × 100000 × (1.09 − 1.08) = 500.00 on a balance of 999.00; margin 0.5 × 100000 × 1.0901 ÷ 100.
	want := fmt.Sprintf("USD|999.000|1499.000|545.050|953.950|500.000|1|0|%d|", through)
	if got := d.snapshot(day.Date, a); !strings.HasPrefix(got, want) {
		t.Errorf("late day froze account %d as %s, want %s…", a, got, want)
	}
	if got := d.snapshot(day.Date, late); got != "" {
		t.Errorf("account %d opened after the rollover was frozen: %s", late, got)
	}
	var mode string
	if err := testDB.QueryRow("SELECT `mode` FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date).Scan(&mode); err != nil || mode != "CAUGHT_UP" {
		t.Errorf("mode %q (%v), want CAUGHT_UP", mode, err)
	}
	if bad, err := Reconcile(d.ctx, testDB, day.Date, day.Date); err != nil || len(bad) != 0 {
		t.Errorf("reconcile: %v %v", bad, err)
	}
}

// The freeze goes through the accounts in batches in id order, passing over those the day
// already holds: over several batches, and on a rerun after a crash, each account is frozen once,
// with its own positions and resting orders — on time and rebuilt alike.
func TestBatchesFreezeEachAccountOnceWithItsOwnBook(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			d := newDesk(t)
			day := weekday(t, time.Now().Add(24*time.Hour))
			now := day.At
			if late {
				day = weekday(t, time.Now().Add(-10*24*time.Hour))
				now = day.At.Add(3 * 24 * time.Hour)
			}
			opened := day.At.Add(-time.Hour)
			d.exec("INSERT INTO `fx_eod_price` (`tradingDay`, `symbol`, `bid`, `ask`, `quotedAt`, `capturedBy`) VALUES (?, 'EURUSD', 1.1, 1.1002, ?, 'holder')", day.Date, day.At)
			// Account i holds i positions and i − 1 resting orders.
			open := func() int64 {
				a := d.account(opened)
				d.deal(a, "DEPOSIT", "1000.00", opened, nil, nil)
				return a
			}
			book := func(a int64, i int) {
				for range i {
					d.position(a, "BUY", "0.01", "1.10000", opened)
				}
				for range i - 1 {
					d.exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `status`, `createdAt`) "+
						"VALUES (?, 'EURUSD', 'BUY', 'LIMIT', 0.01, 1.05, 'PENDING', ?)", a, opened)
				}
			}
			var ids []int64
			for i := 1; i <= 5; i++ {
				ids = append(ids, open())
				book(ids[i-1], i)
			}
			run := func() schedule.Result {
				t.Helper()
				res := schedule.Result{}
				j := New(Config{DB: testDB, By: "test:1", Batch: 2, Now: func() time.Time { return now }}, slog.New(slog.DiscardHandler))
				if err := j.Run(d.ctx, day.At, []fx.Rollover{day}, res); err != nil {
					t.Fatal(err)
				}
				return res
			}
			check := func() {
				t.Helper()
				for i, a := range ids {
					var positions, orders int
					if err := testDB.QueryRow("SELECT `openPositions`, `pendingOrders` FROM `fx_eod_account` WHERE `tradingDay` = ? AND `accountId` = ?",
						day.Date, a).Scan(&positions, &orders); err != nil {
						t.Fatalf("account %d: %v", a, err)
					}
					if positions != i+1 || orders != i {
						t.Errorf("account %d frozen with %d positions and %d orders, want %d and %d", a, positions, orders, i+1, i)
					}
				}
			}
			if res := run(); res["accountsFrozen"] != 5 {
				t.Fatalf("froze %v, want 5 accounts", res)
			}
			check()

			// The crash: the day's row never made it, and an account opened meanwhile.
			d.exec("DELETE FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date)
			ids = append(ids, open())
			book(ids[5], 6)
			if res := run(); res["accountsFrozen"] != 1 {
				t.Fatalf("rerun froze %v, want the missing account only", res)
			}
			check()
		})
	}
}

// The holder captures the close of a day the cron process missed; the next run freezes that
// day at those prices and its own day at the live ones. A day nobody captured is not frozen and
// is named in eod-prices-missing.
func TestAMissedDayIsFrozenAtItsOwnPrices(t *testing.T) {
	d := newDesk(t)
	d1 := weekday(t, time.Now().Add(24*time.Hour))
	d2 := weekday(t, d1.At)
	d3 := weekday(t, d2.At)
	d4 := weekday(t, d3.At)
	opened := d1.At.Add(-time.Hour)
	a := d.account(opened)
	d.deal(a, "DEPOSIT", "10000.00", opened, nil, nil)
	d.position(a, "SELL", "1.00", "1.10000", opened)

	d.live["EURUSD"] = [2]float64{1.09000, 1.09010}
	d.run(d1.At, d1.At)
	d.live["EURUSD"] = [2]float64{1.08000, 1.08010}
	rec := &Recorder{DB: testDB, Prices: d.live, By: "holder:1", Log: slog.New(slog.DiscardHandler)}
	if n, err := rec.CaptureDue(d.ctx, d2.At.Add(5*time.Second)); err != nil || n == 0 {
		t.Fatalf("holder capture at %s: %d prices, %v", d2.Date, n, err)
	}
	// Nobody is up at d3's rollover; the cron process is back for d4.
	d.live["EURUSD"] = [2]float64{1.07000, 1.07010}
	res := d.run(d4.At, d4.At)
	if res["daysFrozen"] != 2 || res["daysUnpriced"] != 1 {
		t.Fatalf("run at %s: %v, want %s and %s frozen, %s unpriced", d4.Date, res, d2.Date, d4.Date, d3.Date)
	}
	// Short 1 lot from 1.10000, closed at the ask.
	for day, want := range map[string]string{d1.Date: "990.000", d2.Date: "1990.000", d4.Date: "2990.000"} {
		var got string
		if err := testDB.QueryRow("SELECT `floatingPnl` FROM `fx_eod_account` WHERE `tradingDay` = ? AND `accountId` = ?", day, a).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("day %s floating %s, want %s (its own close)", day, got, want)
		}
	}
	if n := d.count("SELECT COUNT(*) FROM `fx_eod_account` WHERE `tradingDay` = ?", d3.Date); n != 0 {
		t.Errorf("day %s without prices has %d rows", d3.Date, n)
	}
	var msg string
	if err := testDB.QueryRow("SELECT `message` FROM `fx_execution_alert` WHERE `code` = ? AND `status` = 'OPEN'", AlertPricesMissing).Scan(&msg); err != nil {
		t.Fatalf("no open %s: %v", AlertPricesMissing, err)
	}
	if !strings.Contains(msg, d3.Date) {
		t.Errorf("%s does not name %s: %s", AlertPricesMissing, d3.Date, msg)
	}
}

// A deal changed after its day was frozen breaks the chain: the alert names the account and the
// day, and the snapshot stays as it was.
func TestATamperedDealFailsReconciliation(t *testing.T) {
	d := newDesk(t)
	d1 := weekday(t, time.Now().Add(24*time.Hour))
	d2 := weekday(t, d1.At)
	opened := d1.At.Add(-time.Hour)
	a := d.account(opened)
	b := d.account(opened)
	d.deal(a, "DEPOSIT", "100.00", opened, nil, nil)
	d.deal(b, "DEPOSIT", "100.00", opened, nil, nil)
	d.live["EURUSD"] = [2]float64{1.1, 1.1002}
	d.run(d1.At, d1.At)
	tampered := d.deal(a, "DEPOSIT", "50.00", d1.At.Add(time.Hour), nil, nil)
	d.deal(b, "DEPOSIT", "50.00", d1.At.Add(time.Hour), nil, nil)
	if res := d.run(d2.At, d2.At); res["unreconciled"] != 0 {
		t.Fatalf("an honest book does not reconcile: %v", res)
	}
	frozen := d.snapshot(d2.Date, a)

	d.exec("UPDATE `fx_deal` SET `amount` = 5.00 WHERE `id` = ?", tampered)
	res := d.run(d2.At.Add(time.Hour), d2.At.Add(time.Hour))
	if res["unreconciled"] != 1 {
		t.Fatalf("after the tamper: %v, want one account-day unreconciled", res)
	}
	var msg string
	if err := testDB.QueryRow("SELECT `message` FROM `fx_execution_alert` WHERE `code` = ? AND `status` = 'OPEN'", AlertReconciliation).Scan(&msg); err != nil {
		t.Fatalf("no open %s: %v", AlertReconciliation, err)
	}
	if !strings.Contains(msg, fmt.Sprintf("account %d on %s", a, d2.Date)) || strings.Contains(msg, fmt.Sprintf("account %d ", b)) {
		t.Errorf("%s names the wrong accounts: %s", AlertReconciliation, msg)
	}
	if got := d.snapshot(d2.Date, a); got != frozen {
		t.Errorf("snapshot rewritten after the tamper: %s, was %s", got, frozen)
	}
	// Put back, the chain holds again and the alert resolves.
	d.exec("UPDATE `fx_deal` SET `amount` = 50.00 WHERE `id` = ?", tampered)
	if res := d.run(d2.At.Add(2*time.Hour), d2.At.Add(2*time.Hour)); res["unreconciled"] != 0 {
		t.Errorf("restored book: %v", res)
	}
	if n := d.count("SELECT COUNT(*) FROM `fx_execution_alert` WHERE `code` = ? AND `status` = 'OPEN'", AlertReconciliation); n != 0 {
		t.Errorf("%s still open after the book was restored", AlertReconciliation)
	}
}

// Each end-of-day table has one writer, its insert in this package: nothing updates or deletes
// a frozen row.
func TestTheFrozenTablesHaveOneWriter(t *testing.T) {
	t.Parallel()
	inserts := map[string]string{
		"fx_eod_price": insertPrices, "fx_eod_account": insertAccounts, "fx_eod_symbol": insertDesk, "fx_eod_day": insertDay,
	}
	texts := sqlsource.ModuleTexts(t)
	for table, insert := range inserts {
		writes := sqlsource.WritesTable(table)
		if !writes.MatchString(insert) {
			t.Fatalf("the detector does not see %s's own insert", table)
		}
		found := 0
		for _, s := range texts {
			if !writes.MatchString(s.Text) {
				continue
			}
			if path.Dir(s.File) == "internal/eod" && strings.HasPrefix(s.Text, insert) {
				found++
				continue
			}
			t.Errorf("%s writes %s other than through its one insert: %s", s.Where(), table, s.Text)
		}
		if found == 0 {
			t.Errorf("%s's insert not found in the sources: the walk is not seeing it", table)
		}
	}
}
