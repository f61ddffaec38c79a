package trading

import (
	"context"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate/gatetest"
)

// ledgerOf returns every deal amount of account, Σ of them and the account's balance, and fails
// the test unless Σ deals = balance = the last deal's balanceAfter.
func ledgerOf(t *testing.T, account int64) (amounts []decimal.Decimal, balance decimal.Decimal) {
	t.Helper()
	rows, err := testDB.Query("SELECT `amount`, `balanceAfter` FROM `fx_deal` WHERE `accountId` = ? ORDER BY `id`", account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sum, last := decimal.Zero, decimal.Zero
	for rows.Next() {
		var a, after decimal.Decimal
		if err := rows.Scan(&a, &after); err != nil {
			t.Fatal(err)
		}
		amounts = append(amounts, a)
		sum, last = sum.Add(a), after
	}
	if err := testDB.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", account).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	if !sum.Equal(balance) || !last.Equal(balance) {
		t.Fatalf("account %d: Σ deals %s, last balanceAfter %s, balance %s", account, sum, last, balance)
	}
	return amounts, balance
}

// minorUnitsTrip opens an account in currency, deposits, buys EURUSD 1.00 at open prices
// (commission 7 USD converted), closes 0.30 and then the remaining 0.70 at close prices, and
// last asks for a deposit with one decimal too many, which must change nothing. It returns the
// results for the caller's figures.
type minorUnitsTrip struct {
	account                Account
	fill                   OrderResult
	marks                  AccountView
	partial, final         CloseResult
	refusedDeposit, places string
}

func runMinorUnitsTrip(t *testing.T, user int64, currency, deposit, tooFine string, open, close fixedPrices) minorUnitsTrip {
	t.Helper()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: open, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	later := newService(t, Config{DB: testDB, Prices: close, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	var r minorUnitsTrip
	var err error
	if r.account, err = svc.CreateAccount(ctx, user, currency, 100); err != nil {
		t.Fatalf("open a %s account: %v", currency, err)
	}
	if _, _, err := svc.Deposit(ctx, r.account.ID, decimal.RequireFromString(deposit), "seed"); err != nil {
		t.Fatalf("deposit %s %s: %v", deposit, currency, err)
	}
	r.fill, err = svc.PlaceOrder(ctx, user, OrderRequest{AccountID: r.account.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("1.00")})
	if err != nil {
		t.Fatal(err)
	}
	if r.marks, err = svc.Account(ctx, user, r.account.ID); err != nil || !r.marks.Live {
		t.Fatalf("account marks: %+v, %v", r.marks, err)
	}
	part := decimal.RequireFromString("0.30")
	if r.partial, err = later.ClosePosition(ctx, user, r.fill.Position.ID, &part, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if r.final, err = later.ClosePosition(ctx, user, r.fill.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	before := counts(t, r.account.ID)
	_, _, err = svc.Deposit(ctx, r.account.ID, decimal.RequireFromString(tooFine), "too-fine")
	if fx.ErrorCode(err) != fx.EINVALID {
		t.Errorf("deposit of %s %s = %v, want EINVALID", tooFine, currency, err)
	}
	r.refusedDeposit = fx.ErrorMessage(err)
	if after := counts(t, r.account.ID); after != before {
		t.Errorf("the refused deposit changed the database: %v → %v", before, after)
	}
	return r
}

func wantMoney(t *testing.T, what string, got decimal.Decimal, want string) {
	t.Helper()
	if !got.Equal(decimal.RequireFromString(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// A JPY account's money is whole yen (JPY has no minor unit): the commission of 7 USD at USDJPY
// mid 150.010 is 1050.07 yen, booked as 1050; profits, marks and the ledger carry no fraction,
// and a deposit of 100.5 yen is refused naming the rule.
func TestJPYAccountMoneyIsWholeYen(t *testing.T) {
	t.Parallel()
	open := fixedPrices{"EURUSD": {1.10000, 1.10020}, "USDJPY": {150.000, 150.020}}
	close := fixedPrices{"EURUSD": {1.10050, 1.10070}, "USDJPY": {150.000, 150.020}}
	r := runMinorUnitsTrip(t, 9100, "JPY", "1000000", "100.5", open, close)
	if !strings.Contains(r.refusedDeposit, "JPY amounts are whole numbers") {
		t.Errorf("refusal %q does not say JPY amounts are whole numbers", r.refusedDeposit)
	}
	if r.fill.Commission == nil {
		t.Fatal("no commission deal")
	}
	wantMoney(t, "commission deal", r.fill.Commission.Amount, "-1050") // 7 × 150.010 = 1050.07
	wantMoney(t, "position commission", r.fill.Position.Commission, "1050")
	// Floating (1.10000 − 1.10020) × 100,000 = −20 USD = −3000.2 yen → −3000; margin
	// 100,000 × 1.1001 ÷ 100 = 1100.10 USD = 165026.001 yen → 165026.
	m := r.marks.Metrics
	wantMoney(t, "balance", m.Balance, "998950")
	wantMoney(t, "equity", m.Equity, "995950")
	wantMoney(t, "used margin", m.UsedMargin, "165026")
	wantMoney(t, "free margin", m.FreeMargin, "830924")
	// (1.10050 − 1.10020) × 30,000 = 9 USD = 1350.09 yen → 1350; × 70,000 = 21 USD = 3150.21 → 3150.
	wantMoney(t, "partial close", r.partial.Deal.Amount, "1350")
	wantMoney(t, "final close", r.final.Deal.Amount, "3150")
	wantMoney(t, "realised profit", r.final.Position.RealizedProfit, "4500")
	amounts, balance := ledgerOf(t, r.account.ID)
	for _, a := range amounts {
		if !a.Equal(a.Truncate(0)) {
			t.Errorf("deal amount %s has a fraction of a yen", a)
		}
	}
	wantMoney(t, "balance after the trip", balance, "1003450")
}

// A KWD account's money carries three places (fils): commission 7 USD at USDKWD mid 0.30750
// is 2.1525 dinars, booked as 2.153, not 2.15; a deposit of 1000.125 is taken whole and one of
// 1.1255 is refused.
func TestKWDAccountMoneyHasThreePlaces(t *testing.T) {
	t.Parallel()
	// The default catalog has no pair for KWD; the hub needs one to open the account at all.
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_instrument` (`symbol`, `base`, `quote`, `digits`, `contractSize`, `point`, `enabled`, `symbolGroup`) " +
		"VALUES ('USDKWD', 'USD', 'KWD', 5, 100000, 0.00001, FALSE, 'exotics')"); err != nil {
		t.Fatal(err)
	}
	open := fixedPrices{"EURUSD": {1.10000, 1.10020}, "USDKWD": {0.30740, 0.30760}}
	close := fixedPrices{"EURUSD": {1.10050, 1.10070}, "USDKWD": {0.30740, 0.30760}}
	r := runMinorUnitsTrip(t, 9101, "KWD", "1000.125", "1.1255", open, close)
	if !strings.Contains(r.refusedDeposit, "more than 3 decimals, the most KWD allows") {
		t.Errorf("refusal %q does not name KWD's three places", r.refusedDeposit)
	}
	wantMoney(t, "commission deal", r.fill.Commission.Amount, "-2.153") // 7 × 0.3075 = 2.1525
	// Floating −20 USD = −6.150; margin 1100.10 USD = 338.28075 → 338.281.
	m := r.marks.Metrics
	wantMoney(t, "balance", m.Balance, "997.972")
	wantMoney(t, "equity", m.Equity, "991.822")
	wantMoney(t, "used margin", m.UsedMargin, "338.281")
	wantMoney(t, "free margin", m.FreeMargin, "653.541")
	// 9 USD = 2.7675 → 2.768; 21 USD = 6.4575 → 6.458.
	wantMoney(t, "partial close", r.partial.Deal.Amount, "2.768")
	wantMoney(t, "final close", r.final.Deal.Amount, "6.458")
	_, balance := ledgerOf(t, r.account.ID)
	wantMoney(t, "balance after the trip", balance, "1007.198")
}
