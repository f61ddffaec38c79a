package marks

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/schedule"
)

// driftInbox records what the ledger check raised and resolved.
type driftInbox struct {
	raised   []drift // the accounts of the last raise
	resolved int
}

func (i *driftInbox) Raise(_ context.Context, code string, _ alert.Severity, _ string, details any) error {
	if code == AlertDrift {
		i.raised = details.(map[string]any)["accounts"].([]drift)
	}
	return nil
}

func (i *driftInbox) Resolve(_ context.Context, code string) error {
	if code == AlertDrift {
		i.raised = nil
		i.resolved++
	}
	return nil
}

// fullScanDrift is the ledger check as it was: every account whose balance is not the sum of all
// its deals — the reference the checkpointed check must agree with.
func fullScanDrift(t *testing.T) map[int64]string {
	t.Helper()
	rows, err := testDB.Query("SELECT a.`id`, a.`balance` - COALESCE(d.`total`, 0) FROM `fx_account` a " +
		"LEFT JOIN (SELECT `accountId`, SUM(`amount`) AS `total` FROM `fx_deal` GROUP BY `accountId`) d ON d.`accountId` = a.`id` " +
		"WHERE a.`balance` <> COALESCE(d.`total`, 0)")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var diff decimal.Decimal
		if err := rows.Scan(&id, &diff); err != nil {
			t.Fatal(err)
		}
		out[id] = diff.StringFixed(2)
	}
	return out
}

// The checkpointed ledger check raises ledger-drift for exactly the accounts whose balance is not
// the sum of all their deals, with the same difference, whatever happens between checks: deals
// posted with their balance (as the ledger does), balances moved behind the desk, deals written
// without their balance, either put right again. Each step is compared with a full scan of the
// ledger; the alert resolves once nothing drifts.
func TestLedgerCheckRaisesExactlyOnDrift(t *testing.T) {
	ctx := context.Background()
	inbox := &driftInbox{}
	job := New(Config{DB: testDB, Alerts: inbox, LedgerBatch: 3}, slog.New(slog.DiscardHandler))
	var accounts []int64
	for i := range 7 {
		res, err := testDB.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (?, 'USD', 100)", 900+i)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		accounts = append(accounts, id)
	}
	seq := 0
	// post writes a deal and moves the balance with it, as the ledger does; stray writes the deal
	// alone; shift moves the balance alone.
	post := func(account int64, amount string, withBalance bool) {
		seq++
		if _, err := testDB.Exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) "+
			"SELECT `id`, 'ADJUSTMENT', ?, `balance` + ?, 'USD', ? FROM `fx_account` WHERE `id` = ?", amount, amount, fmt.Sprintf("check:%d:%d", account, seq), account); err != nil {
			t.Fatal(err)
		}
		if withBalance {
			shift(t, account, amount)
		}
	}
	check := func(step string) {
		t.Helper()
		res := schedule.Result{}
		if err := job.checkLedger(ctx, res); err != nil {
			t.Fatal(err)
		}
		want := fullScanDrift(t)
		got := map[int64]string{}
		for _, d := range inbox.raised {
			got[d.AccountID] = d.Difference
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || res["drifted"] != len(want) {
			t.Fatalf("%s: drift raised %v (%d counted), a full scan of the ledger finds %v", step, got, res["drifted"], want)
		}
	}

	for _, a := range accounts {
		post(a, "1000.00", true)
	}
	check("funded")
	post(accounts[0], "-12.50", true)
	post(accounts[1], "3.25", true)
	check("deals posted with their balances")
	shift(t, accounts[0], "12.34")
	check("a balance moved behind the desk")
	check("the same drift, checked again") // the checkpoint never takes the drifted balance in
	post(accounts[0], "-1.00", true)
	check("a deal posted on the drifted account")
	shift(t, accounts[0], "-12.34")
	check("the balance put right")
	if inbox.raised != nil || inbox.resolved == 0 {
		t.Fatalf("ledger-drift still raised (%v) once nothing drifts", inbox.raised)
	}
	post(accounts[2], "5.00", false)
	check("a deal written without its balance")

	// Random steps, each followed by a check: the checkpointed check and the full scan agree.
	rng := rand.New(rand.NewPCG(7, 42))
	for step := range 40 {
		a := accounts[rng.IntN(len(accounts))]
		amount := decimal.New(rng.Int64N(20000)-10000, -2).StringFixed(2)
		switch rng.IntN(4) {
		case 0, 1:
			post(a, amount, true)
		case 2:
			post(a, amount, false)
		case 3:
			shift(t, a, amount)
		}
		if rng.IntN(3) == 0 {
			continue // several changes between two checks
		}
		check(fmt.Sprintf("random step %d", step))
	}
	// Put every balance right: the alert resolves.
	for id := range fullScanDrift(t) {
		if _, err := testDB.Exec("UPDATE `fx_account` a SET a.`balance` = (SELECT COALESCE(SUM(d.`amount`), 0) FROM `fx_deal` d WHERE d.`accountId` = a.`id`) WHERE a.`id` = ?", id); err != nil {
			t.Fatal(err)
		}
	}
	check("every balance put right")
	if inbox.raised != nil {
		t.Fatalf("ledger-drift still raised: %v", inbox.raised)
	}
}

// A checkpoint holds the sum of the account's deals through its deal id, computed from the deals:
// after a check, each account's row names its last deal and their sum, whatever its balance.
func TestLedgerCheckpointIsTheDealsSum(t *testing.T) {
	ctx := context.Background()
	res, err := testDB.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `balance`) VALUES (950, 'USD', 100, 99.99)")
	if err != nil {
		t.Fatal(err)
	}
	account, _ := res.LastInsertId()
	for i, amount := range []string{"100.00", "-0.01", "2.50"} {
		if _, err := testDB.Exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES (?, 'ADJUSTMENT', ?, 0, 'USD', ?)",
			account, amount, fmt.Sprintf("cp:%d:%d", account, i)); err != nil {
			t.Fatal(err)
		}
	}
	job := New(Config{DB: testDB}, slog.New(slog.DiscardHandler))
	got := schedule.Result{}
	if err := job.checkLedger(ctx, got); err != nil {
		t.Fatal(err)
	}
	var through, last int64
	var sum decimal.Decimal
	if err := testDB.QueryRow("SELECT c.`throughDealId`, c.`dealsSum`, (SELECT MAX(`id`) FROM `fx_deal` WHERE `accountId` = c.`accountId`) "+
		"FROM `fx_ledger_checkpoint` c WHERE c.`accountId` = ?", account).Scan(&through, &sum, &last); err != nil {
		t.Fatal(err)
	}
	if through != last || !sum.Equal(decimal.RequireFromString("102.49")) {
		t.Fatalf("checkpoint through deal %d summing %s, want the last deal %d and 102.49", through, sum, last)
	}
	if drifted := fullScanDrift(t); !slices.Contains(mapsKeys(drifted), account) || got["drifted"] < 1 {
		t.Fatalf("account %d (balance 99.99, deals 102.49) not reported: %v", account, got)
	}
	// Put right, so the other test's full scans see only their own accounts' drift.
	if _, err := testDB.Exec("UPDATE `fx_account` SET `balance` = 102.49 WHERE `id` = ?", account); err != nil {
		t.Fatal(err)
	}
}

func shift(t *testing.T, account int64, amount string) {
	t.Helper()
	if _, err := testDB.Exec("UPDATE `fx_account` SET `balance` = `balance` + ? WHERE `id` = ?", amount, account); err != nil {
		t.Fatal(err)
	}
}

func mapsKeys(m map[int64]string) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	return out
}
