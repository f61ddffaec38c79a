package trading

import (
	"context"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
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

// minorUnitsTrip opens an account in currency, deposits, buys EURUSD 1.00 at 1.10000/1.10020
// (commission 7 USD converted at USD<currency> usd), closes 0.30 and then the remaining 0.70 at
// 1.10050/1.10070, and last asks for a deposit with one decimal too many, which must change
// nothing. It returns the results for the caller's figures.
type minorUnitsTrip struct {
	account        book.Account
	fill           OrderResult
	marks          AccountView
	partial, final CloseResult
	refusedDeposit string
}

func runMinorUnitsTrip(t *testing.T, user int64, currency, deposit, tooFine string, usd [2]float64) minorUnitsTrip {
	t.Helper()
	open := fixedPrices{"EURUSD": {1.10000, 1.10020}, "USD" + currency: usd}
	close := fixedPrices{"EURUSD": {1.10050, 1.10070}, "USD" + currency: usd}
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: open, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	later := newService(t, Config{DB: testDB, Prices: close, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	var r minorUnitsTrip
	var err error
	if r.account, err = svc.Accounts().Open(ctx, user, currency, 100); err != nil {
		t.Fatalf("open a %s account: %v", currency, err)
	}
	if _, _, err := svc.Accounts().Deposit(asAdmin(ctx), r.account.ID, decimal.RequireFromString(deposit), "seed"); err != nil {
		t.Fatalf("deposit %s %s: %v", deposit, currency, err)
	}
	r.fill, err = svc.PlaceOrder(ctx, user, OrderRequest{AccountID: r.account.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("1.00")})
	if err != nil {
		t.Fatal(err)
	}
	if r.marks, err = svc.Accounts().View(ctx, user, r.account.ID); err != nil || !r.marks.Live {
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
	_, _, err = svc.Accounts().Deposit(asAdmin(ctx), r.account.ID, decimal.RequireFromString(tooFine), "too-fine")
	if fx.ErrorCode(err) != fx.EINVALID {
		t.Errorf("deposit of %s %s = %v, want EINVALID", tooFine, currency, err)
	}
	r.refusedDeposit = fx.ErrorMessage(err)
	if after := counts(t, r.account.ID); after != before {
		t.Errorf("the refused deposit changed the database: %v → %v", before, after)
	}
	return r
}

// tripFigures are a minorUnitsTrip's amounts, in the account's currency.
type tripFigures struct {
	commission, positionCommission          string // the commission deal, and as the position carries it
	balance, equity, usedMargin, freeMargin string // marked after the fill
	partial, final, realised                string // the two close deals, and the position's realised profit
	after                                   string // the balance after the trip
}

// want checks the trip's figures, and that Σ deals = balance at the end.
func (r minorUnitsTrip) want(t *testing.T, f tripFigures) {
	t.Helper()
	if r.fill.Commission == nil {
		t.Fatal("no commission deal")
	}
	wantMoney(t, "commission deal", r.fill.Commission.Amount, f.commission)
	wantMoney(t, "position commission", r.fill.Position.Commission, f.positionCommission)
	m := r.marks.Metrics
	wantMoney(t, "balance", m.Balance, f.balance)
	wantMoney(t, "equity", m.Equity, f.equity)
	wantMoney(t, "used margin", m.UsedMargin, f.usedMargin)
	wantMoney(t, "free margin", m.FreeMargin, f.freeMargin)
	wantMoney(t, "partial close", r.partial.Deal.Amount, f.partial)
	wantMoney(t, "final close", r.final.Deal.Amount, f.final)
	wantMoney(t, "realised profit", r.final.Position.RealizedProfit, f.realised)
	// The closes' positions are in the account's currency — in their answers and in the
	// position.closed event, whose realizedProfit carries that currency's places.
	for _, c := range []CloseResult{r.partial, r.final} {
		if c.Position.Currency != r.account.Currency {
			t.Errorf("position %d after a close is in %q, want the account's %s", c.Position.ID, c.Position.Currency, r.account.Currency)
		}
	}
	var profit string
	if err := testDB.QueryRow("SELECT JSON_UNQUOTE(JSON_EXTRACT(`payload`, '$.realizedProfit')) FROM `fx_event` WHERE `accountId` = ? AND `type` = 'position.closed'",
		r.account.ID).Scan(&profit); err != nil {
		t.Fatal(err)
	}
	if profit != f.realised {
		t.Errorf("position.closed realizedProfit %q, want %q", profit, f.realised)
	}
	_, balance := ledgerOf(t, r.account.ID)
	wantMoney(t, "balance after the trip", balance, f.after)
}

func wantMoney(t *testing.T, what string, got decimal.Decimal, want string) {
	t.Helper()
	if !got.Equal(decimal.RequireFromString(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// An account's money is booked in its currency's minor units. A JPY account's money is whole
// yen (JPY has no minor unit): the commission of 7 USD at USDJPY mid 150.010 is 1050.07 yen,
// booked as 1050, and a deposit of 100.5 yen is refused naming the rule. A KWD account's money
// carries three places (fils): commission 7 USD at USDKWD mid 0.30750 is 2.1525 dinars, booked
// as 2.153, not 2.15; a deposit of 1000.125 is taken whole and one of 1.1255 is refused. Profits,
// marks and the ledger carry no finer fraction.
func TestAccountMoneyInMinorUnits(t *testing.T) {
	t.Parallel()
	// The default catalog has no pair for KWD; the hub needs one to open the account at all.
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_instrument` (`symbol`, `base`, `quote`, `digits`, `contractSize`, `point`, `enabled`, `symbolGroup`) " +
		"VALUES ('USDKWD', 'USD', 'KWD', 5, 100000, 0.00001, FALSE, 'exotics')"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		currency                  string
		places                    int32
		user                      int64
		deposit, tooFine, refusal string
		usd                       [2]float64 // USD<currency>
		want                      tripFigures
	}{
		{
			currency: "JPY", places: 0, user: 9100, deposit: "1000000", tooFine: "100.5", refusal: "JPY amounts are whole numbers",
			usd: [2]float64{150.000, 150.020},
			want: tripFigures{commission: "-1050", positionCommission: "1050", // 7 × 150.010 = 1050.07
				// Floating (1.10000 − 1.10020) × 100,000 = −20 USD = −3000.2 yen → −3000; margin
				// 100,000 × 1.1001 ÷ 100 = 1100.10 USD = 165026.001 yen → 165026.
				balance: "998950", equity: "995950", usedMargin: "165026", freeMargin: "830924",
				// (1.10050 − 1.10020) × 30,000 = 9 USD = 1350.09 yen → 1350; × 70,000 = 21 USD = 3150.21 → 3150.
				partial: "1350", final: "3150", realised: "4500", after: "1003450"},
		},
		{
			currency: "KWD", places: 3, user: 9101, deposit: "1000.125", tooFine: "1.1255", refusal: "more than 3 decimals, the most KWD allows",
			usd: [2]float64{0.30740, 0.30760},
			want: tripFigures{commission: "-2.153", positionCommission: "2.153", // 7 × 0.3075 = 2.1525
				// Floating −20 USD = −6.150; margin 1100.10 USD = 338.28075 → 338.281.
				balance: "997.972", equity: "991.822", usedMargin: "338.281", freeMargin: "653.541",
				// 9 USD = 2.7675 → 2.768; 21 USD = 6.4575 → 6.458.
				partial: "2.768", final: "6.458", realised: "9.226", after: "1007.198"},
		},
	} {
		t.Run(c.currency, func(t *testing.T) {
			t.Parallel()
			r := runMinorUnitsTrip(t, c.user, c.currency, c.deposit, c.tooFine, c.usd)
			if !strings.Contains(r.refusedDeposit, c.refusal) {
				t.Errorf("refusal %q does not contain %q", r.refusedDeposit, c.refusal)
			}
			r.want(t, c.want)
			amounts, _ := ledgerOf(t, r.account.ID)
			for _, a := range amounts {
				if !a.Equal(a.Truncate(c.places)) {
					t.Errorf("deal amount %s has a fraction finer than %s allows", a, c.currency)
				}
			}
		})
	}
}
