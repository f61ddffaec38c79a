package invariant

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"fxdesk/internal/events"
	"fxdesk/internal/testkit/dbtest"
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

	s, err := ReadSnapshot(ctx, testDB)
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
	if s, err = ReadSnapshot(ctx, testDB); err != nil {
		t.Fatal(err)
	}
	if len(s.Events) != 3 || s.Events[0].User != 1001 || s.Events[1].Type != "order.filled" || s.Orders[0].Type != "MARKET" {
		t.Fatalf("events read back as %+v, orders as %+v", s.Events, s.Orders)
	}
	expect(t, checkEvents(s), "")
	exec("UPDATE `fx_account` SET `marginCallAt` = NOW(3) WHERE `id` = ?", account)
	if s, err = ReadSnapshot(ctx, testDB); err != nil {
		t.Fatal(err)
	}
	expect(t, checkEvents(s), "recorded in margin call true after events []")

	// A balance moved behind the ledger's back, as only a bug in a writer could.
	exec("UPDATE `fx_account` SET `balance` = 10000.01 WHERE `id` = ?", account)
	if s, err = ReadSnapshot(ctx, testDB); err != nil {
		t.Fatal(err)
	}
	expect(t, checkLedger(s), "Σ 1 deals = 10000, balance = 10000.01")
}
