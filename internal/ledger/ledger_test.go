package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/dbtest"
)

var testDB *sql.DB

func TestMain(m *testing.M) {
	os.Exit(func() int {
		db, closeDB, err := dbtest.NewMigrated("ledger")
		if err != nil {
			panic(err)
		}
		defer closeDB()
		testDB = db
		return m.Run()
	}())
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// Deals take balanceAfter in slice order within their account, whatever the other accounts do,
// and each amount is rounded once.
func TestPostBalanceAfterInOrder(t *testing.T) {
	t.Parallel()
	a := &Account{ID: 2, Currency: "USD", Balance: dec("100")}
	b := &Account{ID: 1, Currency: "EUR", Balance: dec("5")}
	p, err := Post([]*Account{a, b}, []Deal{
		{AccountID: 2, Type: fx.DealSwap, Amount: dec("-1.005"), IdempotencyKey: "k1"},
		{AccountID: 1, Type: fx.DealSwap, Amount: dec("0.5"), IdempotencyKey: "k2"},
		{AccountID: 2, Type: fx.DealSwap, Amount: dec("2.25"), IdempotencyKey: "k3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ amount, after, ccy string }{{"-1.01", "98.99", "USD"}, {"0.5", "5.5", "EUR"}, {"2.25", "101.24", "USD"}}
	for i, w := range want {
		d := p.Deals[i]
		if !d.Amount.Equal(dec(w.amount)) || !d.BalanceAfter.Equal(dec(w.after)) || d.Currency != w.ccy {
			t.Errorf("deal %d: amount %s after %s %s, want %s after %s %s", i, d.Amount, d.BalanceAfter, d.Currency, w.amount, w.after, w.ccy)
		}
	}
	if !a.Balance.Equal(dec("101.24")) || !b.Balance.Equal(dec("5.5")) {
		t.Errorf("balances moved to %s and %s, want 101.24 and 5.5", a.Balance, b.Balance)
	}
	if len(p.Stmts) != 2 || !strings.HasPrefix(p.Stmts[0].SQL, "UPDATE `fx_account`") || !strings.HasPrefix(p.Stmts[1].SQL, "INSERT INTO `fx_deal`") {
		t.Fatalf("statements %q: want the balance UPDATE, then one INSERT (last, for LAST_INSERT_ID)", p.Stmts)
	}
	if n := strings.Count(p.Stmts[0].SQL, "?"); n != len(p.Stmts[0].Args) {
		t.Errorf("balance UPDATE has %d placeholders and %d arguments: %s", n, len(p.Stmts[0].Args), p.Stmts[0].SQL)
	}
}

// What Post refuses, it refuses before moving any balance.
func TestPostRefusesBeforeMovingAnyBalance(t *testing.T) {
	t.Parallel()
	ok := Deal{AccountID: 1, Type: fx.DealDeposit, Amount: dec("1"), IdempotencyKey: "k"}
	with := func(f func(*Deal)) Deal { d := ok; f(&d); return d }
	cases := []struct {
		name     string
		accounts []*Account
		deal     Deal
	}{
		{"no type", nil, with(func(d *Deal) { d.Type = "" })},
		{"no key", nil, with(func(d *Deal) { d.IdempotencyKey = "" })},
		{"account not locked", nil, with(func(d *Deal) { d.AccountID = 9 })},
		{"not a session variable", nil, with(func(d *Deal) { d.IDsFrom = &SessionIDs{Order: "1); DROP TABLE x; --", Position: "@p"} })},
		{"account twice", []*Account{{ID: 1}, {ID: 1}}, ok},
		{"marks and moving equity", []*Account{{ID: 1, Marks: &Marks{}, EquityMoves: true}}, ok},
	}
	for _, c := range cases {
		accounts := c.accounts
		if accounts == nil {
			accounts = []*Account{{ID: 1, Currency: "USD", Balance: dec("10")}}
		}
		before := accounts[0].Balance
		if _, err := Post(accounts, []Deal{c.deal}); err == nil {
			t.Errorf("%s: posted", c.name)
		}
		if !accounts[0].Balance.Equal(before) {
			t.Errorf("%s: balance moved from %s to %s", c.name, before, accounts[0].Balance)
		}
	}
}

// A posting sent in a database/sql transaction writes what it computed: Σ deals = balance = the
// last balanceAfter on every account, marks as asked, and ids from session variables.
func TestPostInTransaction(t *testing.T) {
	ctx := context.Background()
	var ids [3]int64
	for i := range ids {
		res, err := testDB.ExecContext(ctx, "INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `equity`) VALUES (1, 'USD', 100, 3)")
		if err != nil {
			t.Fatal(err)
		}
		ids[i], _ = res.LastInsertId()
	}
	post := func(accounts []*Account, deals []Deal, before string) {
		t.Helper()
		tx, err := testDB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if before != "" {
			if _, err := tx.ExecContext(ctx, before); err != nil {
				t.Fatal(err)
			}
		}
		p, err := Post(accounts, deals)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Exec(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	acct := func(i int) *Account {
		var bal decimal.Decimal
		if err := testDB.QueryRowContext(ctx, "SELECT `balance` FROM `fx_account` WHERE `id` = ?", ids[i]).Scan(&bal); err != nil {
			t.Fatal(err)
		}
		return &Account{ID: ids[i], Currency: "USD", Balance: bal}
	}
	deal := func(i int, typ fx.DealType, amount, key string) Deal {
		return Deal{AccountID: ids[i], Type: typ, Amount: dec(amount), IdempotencyKey: key}
	}

	post([]*Account{acct(0), acct(1)}, []Deal{deal(0, fx.DealDeposit, "100", "d0"), deal(1, fx.DealDeposit, "50", "d1")}, "")
	a0, a1, a2 := acct(0), acct(1), acct(2)
	a0.EquityMoves, a1.EquityMoves = true, true
	post([]*Account{a0, a1, a2}, []Deal{deal(0, fx.DealSwap, "-0.75", "s0a"), deal(1, fx.DealSwap, "0.22", "s1"),
		deal(0, fx.DealSwap, "-2.25", "s0b")}, "")
	a2 = acct(2)
	a2.Marks = &Marks{Equity: dec("9.5"), UsedMargin: dec("1.25")}
	order := deal(2, fx.DealDeposit, "10", "d2")
	post([]*Account{a2}, []Deal{order}, "")
	a2 = acct(2)
	commission := deal(2, fx.DealCommission, "-0.5", "commission:order:")
	commission.IDsFrom = &SessionIDs{Order: "@test_order", Position: "@test_position"}
	post([]*Account{a2}, []Deal{commission}, "SET @test_order = 7, @test_position = 9")

	// Every account started with equity 3. Account 0's moved with its swaps (-3), account 1's with
	// its swap (+0.22); account 2 was marked, then posted a commission without new marks.
	for i, want := range []struct{ balance, equity, usedMargin string }{{"97", "0", "0"}, {"50.22", "3.22", "0"}, {"9.5", "9.5", "1.25"}} {
		var bal, sum, last, eq, um decimal.Decimal
		if err := testDB.QueryRowContext(ctx, "SELECT a.`balance`, a.`equity`, a.`usedMargin`, "+
			"(SELECT SUM(`amount`) FROM `fx_deal` WHERE `accountId` = a.`id`), "+
			"(SELECT `balanceAfter` FROM `fx_deal` WHERE `accountId` = a.`id` ORDER BY `id` DESC LIMIT 1) FROM `fx_account` a WHERE a.`id` = ?",
			ids[i]).Scan(&bal, &eq, &um, &sum, &last); err != nil {
			t.Fatal(err)
		}
		if !bal.Equal(dec(want.balance)) || !sum.Equal(bal) || !last.Equal(bal) || !eq.Equal(dec(want.equity)) || !um.Equal(dec(want.usedMargin)) {
			t.Errorf("account %d: balance %s Σ deals %s last balanceAfter %s equity %s usedMargin %s; want balance = Σ = last = %s, equity %s, usedMargin %s",
				i, bal, sum, last, eq, um, want.balance, want.equity, want.usedMargin)
		}
	}
	var order7, position9 int64
	var key string
	if err := testDB.QueryRowContext(ctx, "SELECT `orderId`, `positionId`, `idempotencyKey` FROM `fx_deal` WHERE `type` = 'COMMISSION' AND `accountId` = ?",
		ids[2]).Scan(&order7, &position9, &key); err != nil {
		t.Fatal(err)
	}
	if order7 != 7 || position9 != 9 || key != "commission:order:7" {
		t.Errorf("deal with session ids: order %d position %d key %q, want 7, 9, commission:order:7", order7, position9, key)
	}
}

// A posting over many accounts locks those accounts and no other: on a small table the
// optimizer would rather scan it whole, and an UPDATE locks every row it scans, so an account
// the posting does not move would wait for its transaction (a deposit behind a batch of fills;
// the committer's next batch behind the one committing).
func TestPostLocksOnlyItsAccounts(t *testing.T) {
	ctx := context.Background()
	var ids []int64
	for range 40 {
		res, err := testDB.ExecContext(ctx, "INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (2, 'USD', 100)")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		ids = append(ids, id)
	}
	untouched := ids[1]
	var accounts []*Account
	var deals []Deal
	for _, id := range ids {
		if id == untouched {
			continue
		}
		accounts = append(accounts, &Account{ID: id, Currency: "USD", Balance: decimal.Zero})
		deals = append(deals, Deal{AccountID: id, Type: fx.DealDeposit, Amount: dec("1"), IdempotencyKey: fmt.Sprintf("lock-only-%d", id)})
	}
	p, err := Post(accounts, deals)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := p.Exec(ctx, tx); err != nil {
		t.Fatal(err)
	}
	other, err := testDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := other.QueryRowContext(ctx, "SELECT `id` FROM `fx_account` WHERE `id` = ? FOR UPDATE", untouched).Scan(&id); err != nil {
		t.Fatalf("locking account %d, which the open posting does not move: %v", untouched, err)
	}
}

// A posting over more accounts than one UPDATE moves (maxCase) sends one UPDATE per maxCase
// accounts, in id order, then the one INSERT; written in a transaction, every account ends at
// the sum of its deals and its balanceVersion moves once.
func TestPostManyAccountsInChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 2*maxCase + 7
	var accounts []*Account
	var deals []Deal
	for i := range n {
		res, err := testDB.ExecContext(ctx, "INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`, `equity`) VALUES (3, 'USD', 100, 10, 10)")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		accounts = append(accounts, &Account{ID: id, Currency: "USD", Balance: dec("10"), EquityMoves: true})
		deals = append(deals, Deal{AccountID: id, Type: fx.DealSwap, Amount: dec(fmt.Sprintf("-0.%02d", i%100)), IdempotencyKey: fmt.Sprintf("chunks:%d:a", id)},
			Deal{AccountID: id, Type: fx.DealSwap, Amount: dec("1.50"), IdempotencyKey: fmt.Sprintf("chunks:%d:b", id)})
	}
	p, err := Post(accounts, deals)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stmts) != 4 || !strings.HasPrefix(p.Stmts[3].SQL, "INSERT INTO `fx_deal`") {
		t.Fatalf("%d statements, want 3 UPDATEs of at most %d accounts and the INSERT last", len(p.Stmts), maxCase)
	}
	for _, s := range p.Stmts[:3] {
		if n := strings.Count(s.SQL, "?"); n != len(s.Args) {
			t.Errorf("UPDATE has %d placeholders and %d arguments", n, len(s.Args))
		}
	}
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := p.Exec(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, a := range accounts {
		var bal, eq, sum decimal.Decimal
		var version int64
		if err := testDB.QueryRowContext(ctx, "SELECT a.`balance`, a.`equity`, a.`balanceVersion`, (SELECT SUM(`amount`) FROM `fx_deal` WHERE `accountId` = a.`id`) "+
			"FROM `fx_account` a WHERE a.`id` = ?", a.ID).Scan(&bal, &eq, &version, &sum); err != nil {
			t.Fatal(err)
		}
		want := dec("11.50").Sub(dec(fmt.Sprintf("0.%02d", i%100)))
		if !bal.Equal(want) || !eq.Equal(want) || !sum.Add(dec("10")).Equal(want) || version != 1 {
			t.Errorf("account %d: balance %s equity %s deals %s version %d, want %s, version 1", a.ID, bal, eq, sum, version, want)
		}
	}
}
