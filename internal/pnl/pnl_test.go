package pnl_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/pnl"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "pnl", &testDB)) }

// quotes quotes EURUSD at 1.2 / 1.2.
type quotes struct{}

func (quotes) LastTick(s string) (tick.Quote, bool) {
	return tick.Quote{Bid: 1.2, Ask: 1.2, ReceivedAt: time.Now()}, s == "EURUSD"
}

func (quotes) SymbolState(s string) tick.State {
	if s == "EURUSD" {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// The report's reads on rows dated by hand, over the four hours from T0: which deals count and
// from whose side, the book of each (a position's venue link), the range's bounds, the markup
// of openings and closes, fills without recorded markup, the hourly series, the floating P&L and
// the conversion of a EUR account's figures to USD — every figure worked out by hand.
func TestReadOnDatedRows(t *testing.T) {
	ctx := context.Background()
	// A run of its own day, so a second run (-count) reads its own rows alone.
	runs++
	t0 := time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC).AddDate(0, 0, runs)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	usd, eur := account(t, "USD"), account(t, "EUR")
	// P1: B-book, 0.01 lot EURUSD bought at 1.19, open (opened with 2.00 of markup); P2: A-book,
	// closed (3.00 at the open); P3: B-book, closed, opened before the desk recorded markup.
	p1 := position(t, usd, nil, "OPEN", "0.01", "1.19", ptr("2.00"), at(5))
	p2 := position(t, usd, ptr("T-1"), "CLOSED", "0", "1.19", ptr("3.00"), at(50))
	p3 := position(t, usd, nil, "CLOSED", "0", "1.19", nil, at(190))
	t.Cleanup(func() { testDB.Exec("UPDATE `fx_position` SET `status` = 'CLOSED', `volume` = 0 WHERE `id` = ?", p1) })
	position(t, usd, nil, "CLOSED", "0", "1.19", ptr("99.00"), at(240)) // opened at the range's end: out
	post(t, usd, []dated{
		{ledger.Deal{Type: fx.DealDeposit, Amount: d("5000"), IdempotencyKey: "deposit:1"}, at(-60)},
		{deal(fx.DealProfit, "-1000", p1, nil, "close:early"), at(-1)}, // before the range
		{deal(fx.DealProfit, "-100", p1, ptr("4.00"), "close:p1"), at(30)},
		{deal(fx.DealProfit, "50", p2, ptr("3.00"), "close:p2"), at(70)},
		{deal(fx.DealCommission, "-7", p2, nil, "commission:p2"), at(80)},
		{deal(fx.DealSwap, "-2", p1, nil, "swap:p1"), at(120)},
		{deal(fx.DealAdjustment, "20", p1, nil, "nbp:p1:0.01"), at(150)},
		{deal(fx.DealAdjustment, "5", p1, nil, "adj:goodwill"), at(160)}, // not negative balance protection
		{deal(fx.DealProfit, "15", p3, nil, "close:p3"), at(200)},
		{deal(fx.DealProfit, "-500", p1, ptr("1.00"), "close:late"), at(240)}, // at the range's end: out
	})
	post(t, eur, []dated{
		{ledger.Deal{Type: fx.DealDeposit, Amount: d("100"), IdempotencyKey: "deposit:2"}, at(-60)},
		{deal(fx.DealCommission, "-1", 0, nil, "commission:eur"), at(10)},
	})
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := pnl.Read(ctx, testDB, cat, quotes{}, t0, at(240), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Currencies) != 2 || rep.Currencies[0].Currency != "EUR" || rep.Currencies[1].Currency != "USD" ||
		len(rep.Currencies[1].Symbols) != 1 || rep.Currencies[1].Symbols[0].Symbol != "EURUSD" {
		t.Fatalf("currencies: %+v", rep.Currencies)
	}
	f := rep.Currencies[1].Symbols[0].Figures
	fl := "<nil>"
	if f.BBookFloating != nil {
		fl = f.BBookFloating.StringFixed(2)
	}
	for _, c := range []struct{ name, got, want string }{
		{"B-book realised: −(−100 + 15); A-book's +50 is the venue's", f.BBookRealised.StringFixed(2), "85.00"},
		{"floating: −(1.20 − 1.19) × 1,000", fl, "-10.00"},
		{"B-book markup: open 2 + close 4", f.MarkupBBook.StringFixed(2), "6.00"},
		{"A-book markup: open 3 + close 3", f.MarkupABook.StringFixed(2), "6.00"},
		{"commission", f.Commission.StringFixed(2), "7.00"},
		{"swaps", f.Swaps.StringFixed(2), "2.00"},
		{"NBP cost, the goodwill adjustment aside", f.NBPCost.StringFixed(2), "20.00"},
		{"USD total: 75 + 6 + 7 + 2 − 20", f.Total().StringFixed(2), "70.00"},
		{"EUR total: the commission", rep.Currencies[0].Total.Total().StringFixed(2), "1.00"},
		{"in USD: 70 + 1 × 1.2", rep.Total.StringFixed(2), "71.20"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}
	if rep.UnrecordedMarkup != 2 {
		t.Errorf("fills without recorded markup: %d, want P3's open and close", rep.UnrecordedMarkup)
	}
	// Hour 0: +100 (P1's close) + 1.20 (the EUR commission) + 3 (P2's A-book open); hour 1: 3 (P2's
	// close markup) + 7; hour 2: 2 − 20; hour 3: −15 (P3's close). The last cumulative is the total
	// less the floating: 71.20 + 10.
	want := []string{"104.20/104.20", "10.00/114.20", "-18.00/96.20", "-15.00/81.20"}
	if len(rep.Hours) != len(want) {
		t.Fatalf("hours: %+v", rep.Hours)
	}
	for i, h := range rep.Hours {
		if got := h.Amount.StringFixed(2) + "/" + h.Cumulative.StringFixed(2); got != want[i] || !h.Start.Equal(at(60*i)) {
			t.Errorf("hour %d (%s): %s, want %s", i, h.Start, got, want[i])
		}
	}
	// A past range is not marked, and a process with no prices cannot convert: the figures stay
	// per currency.
	rep, err = pnl.Read(ctx, testDB, cat, nil, t0, at(240), false)
	if err != nil || rep.Total != nil || rep.Hours != nil || len(rep.Unconverted) != 1 || rep.Unconverted[0] != "EUR" ||
		rep.Currencies[1].Symbols[0].BBookFloating != nil || !rep.Currencies[1].Total.Total().Equal(d("80")) {
		t.Errorf("unpriced, unmarked: %+v %v", rep, err)
	}
	// Σ deals = balance on both accounts.
	for _, id := range []int64{usd, eur} {
		var sum, balance decimal.Decimal
		if err := testDB.QueryRow("SELECT (SELECT SUM(`amount`) FROM `fx_deal` WHERE `accountId` = ?), `balance` FROM `fx_account` WHERE `id` = ?", id, id).Scan(&sum, &balance); err != nil || !sum.Equal(balance) {
			t.Errorf("account %d: Σ deals %s, balance %s, %v", id, sum, balance, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

var (
	user int64 = 100
	runs int
)

func account(t *testing.T, currency string) int64 {
	t.Helper()
	user++
	res, err := testDB.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (?, ?, 100)", user, currency)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

func position(t *testing.T, account int64, venueTrade *string, status, volume, price string, markup *string, openedAt time.Time) int64 {
	t.Helper()
	res, err := testDB.Exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `venueTradeId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, "+
		"`status`, `markup`, `openedAt`) VALUES (?, 0, ?, 'EURUSD', 'BUY', ?, 0.01, ?, ?, ?, ?)", account, venueTrade, volume, price, status, markup, openedAt)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

func deal(typ fx.DealType, amount string, position int64, markup *string, key string) ledger.Deal {
	sym := "EURUSD"
	out := ledger.Deal{Type: typ, Amount: d(amount), Symbol: &sym, IdempotencyKey: key}
	if position != 0 {
		out.PositionID = &position
	}
	if markup != nil {
		m := d(*markup)
		out.Markup = &m
	}
	return out
}

type dated struct {
	deal ledger.Deal
	at   time.Time
}

// post writes deals on account through the ledger, then dates each as the scenario says.
func post(t *testing.T, account int64, deals []dated) {
	t.Helper()
	ctx := context.Background()
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var ds []ledger.Deal
	for _, x := range deals {
		ds = append(ds, x.deal)
	}
	postIn(t, tx, account, ds)
	for _, x := range deals {
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_deal` SET `createdAt` = ? WHERE `idempotencyKey` = ?", x.at, fmt.Sprintf("%s:%d", x.deal.IdempotencyKey, account)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// postIn writes deals on account through the ledger in tx, dated by the database as they are
// inserted; each idempotency key gets ":account" appended.
func postIn(t *testing.T, tx *sql.Tx, account int64, deals []ledger.Deal) {
	t.Helper()
	ctx := context.Background()
	var ccy string
	var balance decimal.Decimal
	if err := tx.QueryRowContext(ctx, "SELECT `currency`, `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", account).Scan(&ccy, &balance); err != nil {
		t.Fatal(err)
	}
	var ds []ledger.Deal
	for _, x := range deals {
		x.AccountID = account
		x.IdempotencyKey += fmt.Sprintf(":%d", account) // unique per run; the kind stays its prefix
		ds = append(ds, x)
	}
	p, err := ledger.Post([]*ledger.Account{{ID: account, Currency: ccy, Balance: balance}}, ds)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exec(ctx, tx); err != nil {
		t.Fatal(err)
	}
}

// The hedge book's figure: the realised P&L of the hedge positions closed in the range, under
// their quote currency, each currency's symbol and hour rounded once — checked by hand. Hedge
// positions closed outside the range, or still open, are not in it; no trader's figure moves.
func TestHedgeBookRealisedInRange(t *testing.T) {
	ctx := context.Background()
	runs++
	t0 := time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC).AddDate(0, 0, runs)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	hedge := func(status string, pl *string, closedAt *time.Time) {
		t.Helper()
		res, err := testDB.Exec("INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `status`) VALUES ('EURUSD', 100000, 'HEDGER', 'FILLED')")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		if _, err := testDB.Exec("INSERT INTO `fx_hedge_position` (`orderId`, `symbol`, `units`, `venueTradeId`, `status`, `openPrice`, `openedAt`, `closePrice`, "+
			"`closedAt`, `realizedPl`, `plCurrency`) VALUES (?, 'EURUSD', 100000, ?, ?, 1.1, ?, 1.1, ?, ?, 'USD')", id, fmt.Sprintf("PNL-%d", id), status, at(-120), closedAt, pl); err != nil {
			t.Fatal(err)
		}
	}
	hedge("CLOSED", ptr("-20.0000"), ptr(at(30)))
	hedge("CLOSED", ptr("7.5050"), ptr(at(90)))
	hedge("CLOSED", ptr("100.0000"), ptr(at(-5)))  // before the range
	hedge("CLOSED", ptr("100.0000"), ptr(at(240))) // at its end: out
	hedge("OPEN", nil, nil)
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := pnl.Read(ctx, testDB, cat, quotes{}, t0, at(240), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Currencies) != 1 || rep.Currencies[0].Currency != "USD" || len(rep.Currencies[0].Symbols) != 1 {
		t.Fatalf("currencies: %+v", rep.Currencies)
	}
	f := rep.Currencies[0].Symbols[0].Figures
	// −20.00 + 7.51 (7.505 rounded half away from zero) = −12.49; nothing else moves.
	if !f.HedgeBook.Equal(d("-12.49")) || !f.Total().Equal(d("-12.49")) || !f.BBookRealised.IsZero() || rep.Total == nil || !rep.Total.Equal(d("-12.49")) {
		t.Fatalf("figures %+v, total %v; want the hedge book −12.49 alone", f, rep.Total)
	}
	want := []string{"-20.00", "7.51", "0.00", "0.00"}
	for i, h := range rep.Hours {
		if h.Amount.StringFixed(2) != want[i] {
			t.Errorf("hour %d: %s, want %s", i, h.Amount.StringFixed(2), want[i])
		}
	}
}
