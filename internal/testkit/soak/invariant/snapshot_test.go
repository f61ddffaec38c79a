package invariant

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/eod"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/schedule"
	"fxdesk/internal/swaps"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

var testDB *sql.DB

func TestMain(m *testing.M) {
	os.Exit(func() int {
		db, closeDB, err := dbtest.NewMigrated("soak-invariant")
		if err != nil {
			panic(err)
		}
		defer closeDB()
		testDB = db
		return m.Run()
	}())
}

// The checks read the desk's tables only through readSnapshot: its SQL must keep up with the
// migrations, and the rows it scans must be what the checks expect of them (a balance and its
// deals compare equal at the database's scale).
func TestReadSnapshotReadsTheDeskTablesAsTheChecksExpectThem(t *testing.T) {
	ctx := context.Background()
	exec := func(q string, args ...any) int64 {
		t.Helper()
		res, err := testDB.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	account := exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`) VALUES (1001, 'USD', 100, 10000.00)")
	exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES (?, 'DEPOSIT', 10000.00, 10000.00, 'USD', 'dep:1')", account)
	order := exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`, `requestNonce`) VALUES (?, 'EURJPY', 'BUY', 'MARKET', 1.00, 'FILLED', 't1-order-1')", account)
	position := exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`) VALUES (?, ?, 'EURJPY', 'BUY', 1.00, 1.00, 160.123)", account, order)
	exec("INSERT INTO `fx_swap_charge` (`positionId`, `rolloverDate`, `accountId`, `symbol`, `side`, `volume`, `days`, `amountQuote`, `quoteCurrency`, `accountCurrency`) "+
		"VALUES (?, '2025-03-05', ?, 'EURJPY', 'BUY', 1.00, 1, -500, 'JPY', 'USD')", position, account)

	s, err := ReadSnapshot(ctx, testDB, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Accounts) != 1 || len(s.Deals) != 1 || len(s.Orders) != 1 || len(s.Positions) != 1 || len(s.Charges) != 1 {
		t.Fatalf("snapshot has %d accounts, %d deals, %d orders, %d positions, %d charges; want one of each",
			len(s.Accounts), len(s.Deals), len(s.Orders), len(s.Positions), len(s.Charges))
	}
	if o, p, c := s.Orders[0], s.Positions[0], s.Charges[0]; o.Nonce.String != "t1-order-1" || o.Execution != "INTERNAL" || o.SentAt.Valid ||
		p.Order != order || p.Status != "OPEN" || p.VenueTradeID.Valid || p.ClosedAt.Valid || c.Date != "2025-03-05" || c.Status != "PENDING" {
		t.Fatalf("rows read back as order %+v, position %+v, charge %+v", o, p, c)
	}
	if in, ok := s.Instruments["EURJPY"]; !ok || in.Quote != "JPY" || !in.Contract.IsPositive() || !in.Point.IsPositive() {
		t.Fatalf("EURJPY read as %+v (found %v): the swap price check needs its quote currency, contract and point", in, ok)
	}
	expect(t, checkLedger(s), "")
	expect(t, checkNonces(s, &Evidence{}), "")
	expect(t, checkSwapUnique(s), "")

	// The events outbox and the margin call as the desk writes them: the deposit, the fill and
	// its position told once each; the account in margin call without its event.
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []events.Event{
		{AccountID: account, UserID: 1001, Type: events.Deposit, Payload: events.Balance{AccountID: account, Type: "DEPOSIT", Amount: "10000.00", BalanceAfter: "10000.00", IdempotencyKey: "dep:1"}},
		{AccountID: account, UserID: 1001, Type: events.OrderFilled, Payload: map[string]any{"id": order, "accountId": account, "status": "FILLED", "positionId": position}},
		{AccountID: account, UserID: 1001, Type: events.PositionOpened, Payload: map[string]any{"id": position, "accountId": account, "orderId": order}},
	} {
		if err := events.Record(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if s, err = ReadSnapshot(ctx, testDB, Scope{}); err != nil {
		t.Fatal(err)
	}
	if len(s.Events) != 3 || s.Events[0].User != 1001 || s.Events[1].Type != "order.filled" || s.Orders[0].Type != "MARKET" {
		t.Fatalf("events read back as %+v, orders as %+v", s.Events, s.Orders)
	}
	expect(t, checkEvents(s), "")
	exec("UPDATE `fx_account` SET `marginCallAt` = NOW(3) WHERE `id` = ?", account)
	if s, err = ReadSnapshot(ctx, testDB, Scope{}); err != nil {
		t.Fatal(err)
	}
	expect(t, checkEvents(s), "recorded in margin call true after events []")

	// A balance moved behind the ledger's back, as only a bug in a writer could.
	exec("UPDATE `fx_account` SET `balance` = 10000.01 WHERE `id` = ?", account)
	if s, err = ReadSnapshot(ctx, testDB, Scope{}); err != nil {
		t.Fatal(err)
	}
	expect(t, checkLedger(s), "Σ 1 deals = 10000, balance = 10000.01")
}

// quotes is a fixed price view: every symbol it has is quoting.
type quotes map[string]tick.Quote

func (q quotes) LastTick(symbol string) (tick.Quote, bool) { v, ok := q[symbol]; return v, ok }
func (q quotes) SymbolState(string) tick.State             { return tick.Quoting }

// The end of day's checks hold on a day the desk's own job froze, and fail once its rows are
// tampered with as only something outside the desk could: a frozen balance updated, a snapshot
// row deleted, a closing price rewritten. On a database of its own, so that the accounts the test
// above leaves (one of them moved behind the ledger's back on purpose) are not frozen with it.
func TestEODChecksHoldOnADayTheDeskFrozeAndFailOnceItsRowsAreTamperedWith(t *testing.T) {
	ctx := context.Background()
	db, exec := migratedDB(t, "soak-invariant-eod")
	// An account opened and a position written a minute before the freeze, so that the checks
	// know both were there when it read the book; the majors marked up 10 points.
	exec("UPDATE `fx_symbol_group` SET `markupPoints` = 10 WHERE `name` = 'majors'")
	account := exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`, `createdAt`) VALUES (1001, 'USD', 100, 10000.00, NOW(3) - INTERVAL 1 MINUTE)")
	exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES (?, 'DEPOSIT', 10000.00, 10000.00, 'USD', 'dep:1')", account)
	order := exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`, `requestNonce`) VALUES (?, 'EURUSD', 'BUY', 'MARKET', 0.50, 'FILLED', 't1-order-1')", account)
	exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `openedAt`) "+
		"VALUES (?, ?, 'EURUSD', 'BUY', 0.50, 0.50, 1.10000, NOW(3) - INTERVAL 1 MINUTE)", account, order)

	// A run five minutes after a rollover a week ahead, as the soak's runs are: on time, so it
	// captures the closing prices from its price view and freezes the day.
	next, err := fx.NextRollover(time.Now().Add(7 * 24 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for next.Weekday() == time.Saturday || next.Weekday() == time.Sunday {
		next = next.Next()
	}
	runAt := next.At.Add(5 * time.Minute)
	due, err := swaps.DueRollovers(runAt, swaps.DefaultExpireAfter)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	view := quotes{"EURUSD": {Bid: 1.10200, Ask: 1.10210, ReceivedAt: now, ProviderTime: now}, "USDJPY": {Bid: 150.1, Ask: 150.12, ReceivedAt: now, ProviderTime: now}}
	job := eod.New(eod.Config{DB: db, Prices: func() tick.Prices { return view }, By: "test:4242"}, slog.New(slog.DiscardHandler))
	res := schedule.Result{}
	started := time.Now()
	if err := job.Run(ctx, runAt, due, res); err != nil {
		t.Fatal(err)
	}
	if res["daysFrozen"] != 1 || res["accountsFrozen"] != 1 {
		t.Fatalf("the job froze %v; want one day of one account", res)
	}
	ev := &Evidence{Runs: []RolloverRun{{At: runAt, PID: 4242, Start: started, End: time.Now(), OK: true, Why: "test"}}, EODSeen: map[string]EODRow{}}
	judge := func() (*Snapshot, map[string]Result) {
		t.Helper()
		s, err := ReadSnapshot(ctx, db, Scope{})
		if err != nil {
			t.Fatal(err)
		}
		ev.Reconciled, err = eod.Reconcile(ctx, db, "1000-01-01", "9999-12-31")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Result{}
		for _, r := range []Result{checkEODComplete(s, ev), checkEODReconciles(s, ev), checkEODUnchanged(s, ev), checkEODMarks(s)} {
			out[r.Name] = r
		}
		return s, out
	}
	s, rs := judge()
	for _, r := range rs {
		expect(t, r, "")
	}
	if len(s.EOD.Days) != 1 || len(s.EOD.Accounts) != 1 || len(s.EOD.Prices) != 2 || len(s.EOD.Symbols) == 0 {
		t.Fatalf("read back %d days, %d account rows, %d prices, %d desk rows; want 1, 1, 2 and some", len(s.EOD.Days), len(s.EOD.Accounts), len(s.EOD.Prices), len(s.EOD.Symbols))
	}
	// The marks were judged, not passed over: 0.5 lots closing at 1.10190 (bid − the majors'
	// markup) made 95.00 USD.
	if a := s.EOD.Accounts[0]; !a.Floating.Valid || !a.Floating.Decimal.Equal(dec("95")) || !strings.HasPrefix(rs["eodMarks"].Figures, "1 account snapshots judged (1 with open positions") {
		t.Fatalf("frozen floating %s; eodMarks: %s", nullText(a.Floating), rs["eodMarks"].Figures)
	}
	for _, row := range s.EOD.Rows(s.Taken) {
		ev.EODSeen[row.ID()] = row
	}
	day := s.EOD.Days[0].Day

	exec("UPDATE `fx_eod_account` SET `balance` = `balance` + 1 WHERE `tradingDay` = ?", day)
	_, rs = judge()
	expect(t, rs["eodReconciles"], "but the frozen balance is 10001")
	expect(t, rs["eodReconciles"], "eod.Reconcile: account")
	expect(t, rs["eodUnchanged"], "fx_eod_account "+day+" account")
	expect(t, rs["eodMarks"], "equity 10095, but balance 10001 + floating 95 = 10096")
	exec("UPDATE `fx_eod_account` SET `balance` = `balance` - 1 WHERE `tradingDay` = ?", day)

	exec("UPDATE `fx_eod_price` SET `bid` = 1.10300 WHERE `tradingDay` = ? AND `symbol` = 'EURUSD'", day)
	_, rs = judge()
	expect(t, rs["eodUnchanged"], "fx_eod_price "+day+" EURUSD was rewritten")
	expect(t, rs["eodMarks"], "floating P&L 95 frozen, but its 1 open positions at the day's prices make 145")
	exec("UPDATE `fx_eod_price` SET `bid` = 1.10200 WHERE `tradingDay` = ? AND `symbol` = 'EURUSD'", day)

	exec("DELETE FROM `fx_eod_account` WHERE `tradingDay` = ?", day)
	_, rs = judge()
	expect(t, rs["eodComplete"], "0 account snapshots, but its fx_eod_day row counted 1")
	expect(t, rs["eodComplete"], fmt.Sprintf("no snapshot of account %d", account))
	expect(t, rs["eodUnchanged"], "is gone")
}

// Over a pre-filled history the snapshot reads the soak's accounts row by row and the history
// by sums: an account before the scope is not in Accounts, its open INTERNAL book is in the
// hedger's net, and a history account whose balance is not Σ its deals breaks prefilledLedger.
func TestReadSnapshotOverAPrefilledHistory(t *testing.T) {
	ctx := context.Background()
	db, exec := migratedDB(t, "soak-prefill")
	good := exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`) VALUES (100001, 'USD', 100, 500.00)")
	exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES (?, 'DEPOSIT', 500.00, 500.00, 'USD', 'gen:1')", good)
	order := exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`) VALUES (?, 'EURUSD', 'BUY', 'MARKET', 2.00, 'FILLED')", good)
	exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`) VALUES (?, ?, 'EURUSD', 'BUY', 2.00, 2.00, 1.1)", good, order)
	bad := exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`) VALUES (100002, 'USD', 100, 300.00)")
	exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES (?, 'DEPOSIT', 200.00, 200.00, 'USD', 'gen:2')", bad)
	soakAccount := exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`) VALUES (1001, 'USD', 100, 0)")

	s, err := ReadSnapshot(ctx, db, Scope{FirstAccount: soakAccount})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Accounts) != 1 || s.Accounts[0].ID != soakAccount || len(s.Positions) != 0 || len(s.Deals) != 0 {
		t.Fatalf("scoped snapshot: accounts %+v, %d positions, %d deals; want the soak's account alone", s.Accounts, len(s.Positions), len(s.Deals))
	}
	if got := bBookLots(s)["EURUSD"]; !got.Equal(dec("-2")) {
		t.Errorf("the hedger's net of EURUSD = %s lots, want -2 (the history's open buy)", got)
	}
	r := checkPrefilledLedger(s)
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Text, fmt.Sprintf("account %d", bad)) {
		t.Fatalf("prefilledLedger = %+v, want account %d alone", r, bad)
	}
	if s, err = ReadSnapshot(ctx, db, Scope{}); err != nil || len(s.Accounts) != 3 || s.Prefilled.Broken != nil {
		t.Fatalf("whole snapshot: %v, %d accounts, history %+v", err, len(s.Accounts), s.Prefilled)
	}
}

// migratedDB is a fresh migrated database of the test's own, dropped after it, and an exec
// that fails the test on an error and answers the insert's id.
func migratedDB(t *testing.T, name string) (*sql.DB, func(q string, args ...any) int64) {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	return db, func(q string, args ...any) int64 {
		t.Helper()
		res, err := db.ExecContext(context.Background(), q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		id, _ := res.LastInsertId()
		return id
	}
}
