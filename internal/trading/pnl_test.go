package trading

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/pnl"
	"fxdesk/internal/tick"
)

// The dealer's P&L on a small scenario, every figure worked out by hand (docs/pnl.md, «A worked
// example»). NZDUSD, which no other test in this package trades, quotes USD, so every account
// (USD) books it without conversion; its symbol group adds 10 points (0.00010) of markup and
// charges 7 USD a lot. The report is read for the scenario's own time range, and NZDUSD's row is
// the scenario alone.
func TestDealerPnLByHand(t *testing.T) {
	ctx := context.Background()
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_symbol_group` (`name`, `markupPoints`, `commissionPerLot`, `commissionCurrency`) VALUES ('pnl-markup', 10, 7, 'USD')"); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_instrument` SET `symbolGroup` = 'pnl-markup' WHERE `symbol` = 'NZDUSD'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDB.Exec("UPDATE `fx_instrument` SET `symbolGroup` = 'majors' WHERE `symbol` = 'NZDUSD'") })
	var from time.Time
	if err := testDB.QueryRow("SELECT NOW(3)").Scan(&from); err != nil {
		t.Fatal(err)
	}
	b := newABook(t)
	svc := b.svc
	const sym = "NZDUSD"
	order := func(user int64, a book.Account, side fx.Side, lots string) OrderResult {
		t.Helper()
		res, err := svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: sym, Side: side, Type: fx.Market, Volume: dd(lots)})
		if err != nil || res.Position == nil {
			t.Fatalf("%s %s %s: %+v %v", a.Group, side, lots, res, err)
		}
		return res
	}
	closeAll := func(user, position int64, lots *decimal.Decimal) CloseResult {
		t.Helper()
		cl, err := svc.ClosePosition(ctx, user, position, lots, fx.CloseClient)
		if err != nil {
			t.Fatalf("close %d: %v", position, err)
		}
		return cl
	}

	// At 0.60000 / 0.60020 a buy fills at 0.60030 and a sell at 0.59990.
	b.prices.set(sym, "0.6", "0.6002")
	const userA, userB, userC, userD = 9801, 9802, 9803, 9804
	a := fundedAccount(t, svc, userA)      // B-book: buys 1 lot; commission 7.00, markup 10.00
	bb := fundedAccount(t, svc, userB)     // B-book: sells 0.2 lot; commission 1.40, markup 2.00
	c := b.externalAccount(userC)          // A-book: buys 0.1 lot at the venue's 0.60020 + markup; commission 0.70, markup 1.00
	d := groupAccount(t, svc, userD, true) // B-book, protected: buys 0.5 lot; commission 3.50, markup 5.00
	posA := order(userA, a, fx.Buy, "1").Position.ID
	posB := order(userB, bb, fx.Sell, "0.2").Position.ID
	resC := order(userC, c, fx.Buy, "0.1")
	if resC.Position.VenueTradeID == nil || !resC.Position.OpenPrice.Equal(dd("0.6003")) {
		t.Fatalf("the A-book open: %+v", resC.Position)
	}
	posD := order(userD, d, fx.Buy, "0.5").Position.ID

	// A gap to 0.57000 / 0.57020 stops D out at 0.56990: (0.56990 − 0.60030) × 50,000 = −1,520.00
	// on a balance of 996.50, and negative balance protection gives back the 523.50 below zero.
	b.prices.set(sym, "0.57", "0.5702")
	if err := NewRiskDesk(svc, nil).Close(ctx, posD, d.ID, fx.CloseStopOut, tick.Quote{ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// At 0.60100 / 0.60120 a buy closes at 0.60090 and a sell at 0.60130.
	b.prices.set(sym, "0.601", "0.6012")
	half := dd("0.5")
	closeAll(userA, posA, &half)                                                   // (0.60090 − 0.60030) × 50,000 = +30.00; markup 5.00
	closeAll(userB, posB, nil)                                                     // (0.59990 − 0.60130) × 20,000 = −28.00; markup 2.00
	closeAll(userC, resC.Position.ID, nil)                                         // at the venue's 0.60100 − markup: +6.00 to the trader, the venue's to pay; markup 1.00
	t.Cleanup(func() { svc.ClosePosition(ctx, userA, posA, nil, fx.CloseClient) }) // a rerun (-count) starts flat
	// One rollover charges A's open half 1.50, through the ledger as the swap job posts it.
	postSwap(t, a.ID, posA, sym, dd("-1.50"))

	var to time.Time
	if err := testDB.QueryRow("SELECT NOW(3) + INTERVAL 1 SECOND").Scan(&to); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := pnl.Read(ctx, testDB, cat, b.prices, from, to, true)
	if err != nil {
		t.Fatal(err)
	}
	var row *pnl.Symbol
	for _, cur := range rep.Currencies {
		for i := range cur.Symbols {
			if cur.Currency == "USD" && cur.Symbols[i].Symbol == sym {
				row = &cur.Symbols[i]
			}
		}
	}
	if row == nil {
		t.Fatalf("no USD %s row in %+v", sym, rep.Currencies)
	}
	// A's open half is marked at 0.60090: +30.00 to A, −30.00 to the desk.
	floating := "<nil>"
	if row.BBookFloating != nil {
		floating = row.BBookFloating.StringFixed(2)
	}
	for _, c := range []struct{ name, got, want string }{
		{"B-book realised: −(30.00 − 28.00 − 1,520.00)", row.BBookRealised.StringFixed(2), "1518.00"},
		{"B-book floating", floating, "-30.00"},
		{"B-book client", row.BBookClient().StringFixed(2), "1488.00"},
		{"B-book markup: opens 10 + 2 + 5, closes 5 + 2 + 5", row.MarkupBBook.StringFixed(2), "29.00"},
		{"A-book markup: open 1 + close 1", row.MarkupABook.StringFixed(2), "2.00"},
		{"commission: 7 + 1.40 + 0.70 + 3.50", row.Commission.StringFixed(2), "12.60"},
		{"swaps", row.Swaps.StringFixed(2), "1.50"},
		{"NBP cost", row.NBPCost.StringFixed(2), "523.50"},
		{"hedge book", row.HedgeBook.StringFixed(2), "0.00"},
		// D's whole 1,000 + A's −51.50 (7 − 30 − 30 + 1.50) + B's 29.40 + C's 2.70.
		{"total: 1,488 + 2 + 12.60 + 1.50 − 523.50", row.Total().StringFixed(2), "980.60"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}
	// Each account's ledger adds up to its balance: A 1,000 − 7 + 30 − 1.50, B 1,000 − 1.40 − 28,
	// C 1,000 − 0.70 + 6, D reset to zero.
	for _, c := range []struct {
		account int64
		want    string
	}{{a.ID, "1021.50"}, {bb.ID, "970.60"}, {c.ID, "1005.30"}, {d.ID, "0.00"}} {
		deals, bal := ledgerOf(t, c.account)
		sum := decimal.Zero
		for _, x := range deals {
			sum = sum.Add(x)
		}
		if !sum.Equal(bal) || bal.StringFixed(2) != c.want {
			t.Errorf("account %d: Σ deals %s, balance %s, want %s", c.account, sum, bal, c.want)
		}
	}
}

// postSwap posts one rollover charge of amount on position, through the ledger under the
// account's lock, as the swap job does.
func postSwap(t *testing.T, account, position int64, symbol string, amount decimal.Decimal) {
	t.Helper()
	ctx := context.Background()
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var balance decimal.Decimal
	if err := tx.QueryRowContext(ctx, "SELECT `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", account).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	acc := &ledger.Account{ID: account, Currency: "USD", Balance: balance, EquityMoves: true}
	post, err := ledger.Post([]*ledger.Account{acc}, []ledger.Deal{{AccountID: account, Type: fx.DealSwap, Amount: amount,
		PositionID: &position, Symbol: &symbol, IdempotencyKey: "swap:" + itoa(position) + ":" + time.Now().UTC().Format("2006-01-02T15:04:05.000")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := post.Exec(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
