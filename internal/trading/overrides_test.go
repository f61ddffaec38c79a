package trading

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// An account group's overrides reach every path the resolver serves: the fill price carries
// the group's markup, the commission deal its commission, the stored margin its leverage cap;
// a CLOSE_ONLY symbol refuses an open and lets a close through; a bad override changes nothing.
func TestAccountGroupOverridesPriceChargeAndGate(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: 1, Via: "cli"})
	cache := catalog.NewCache(testDB, 0)
	admin, err := catalog.NewAdmin(catalog.AdminConfig{DB: testDB, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	prices := fixedPrices{"EURUSD": {1.1000, 1.1002}, "GBPUSD": {1.2500, 1.2502}}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Catalog: cache})
	if _, err := testDB.Exec("INSERT INTO `fx_account_group` (`name`) VALUES ('ov-test')"); err != nil {
		t.Fatal(err)
	}
	a := fundedAccount(t, svc, 9401)
	b := fundedAccount(t, svc, 9402)
	if _, err := testDB.Exec("UPDATE `fx_account` SET `accountGroup` = 'ov-test' WHERE `id` IN (?, ?)", a.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	cache.Invalidate()
	held, err := svc.PlaceOrder(ctx, 9402, marketBuyOf(b.ID, "GBPUSD", "0.1"))
	if err != nil {
		t.Fatal(err)
	}

	d := func(s string) *decimal.Decimal { v := decimal.RequireFromString(s); return &v }
	lev, closeOnly := 50, catalog.TradeCloseOnly
	if _, _, err := admin.PutOverride(ctx, catalog.Override{AccountGroup: "ov-test", SymbolGroup: "majors", MarkupPoints: d("4"), CommissionPerLot: d("3")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.PutOverride(ctx, catalog.Override{AccountGroup: "ov-test", Symbol: "EURUSD", MarkupPoints: d("10"), LeverageMax: &lev}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.PutOverride(ctx, catalog.Override{AccountGroup: "ov-test", Symbol: "GBPUSD", TradeMode: &closeOnly}); err != nil {
		t.Fatal(err)
	}

	// EURUSD: markup 10 points (the symbol's override beats the symbol group's 4), commission 3
	// per lot (the symbol group's override), leverage 1:50 (the account's is 1:100).
	res, err := svc.PlaceOrder(ctx, 9401, marketBuyOf(a.ID, "EURUSD", "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "1.1003"; !res.Position.OpenPrice.Equal(decimal.RequireFromString(want)) {
		t.Errorf("fill price %s, want %s (ask 1.1002 + 10 points)", res.Position.OpenPrice, want)
	}
	if res.Commission == nil || !res.Commission.Amount.Equal(decimal.RequireFromString("-0.30")) {
		t.Errorf("commission deal %+v, want -0.30 (3 per lot × 0.1)", res.Commission)
	}
	var used decimal.Decimal
	if err := testDB.QueryRow("SELECT `usedMargin` FROM `fx_account` WHERE `id` = ?", a.ID).Scan(&used); err != nil {
		t.Fatal(err)
	}
	if want := "220.02"; !used.Equal(decimal.RequireFromString(want)) {
		t.Errorf("used margin %s, want %s (10,000 × 1.1001 ÷ 50)", used, want)
	}

	// GBPUSD is close-only for the group: an open is refused, the held position closes at the
	// bid less the group's 4 points of markup.
	before := counts(t, b.ID)
	if _, err := svc.PlaceOrder(ctx, 9402, marketBuyOf(b.ID, "GBPUSD", "0.1")); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("open on a close-only symbol: %v", err)
	}
	if after := counts(t, b.ID); after != before {
		t.Fatalf("a refused open changed the database: %v → %v", before, after)
	}
	closed, err := svc.ClosePosition(ctx, 9402, held.Position.ID, nil, fx.CloseClient)
	if err != nil {
		t.Fatalf("close on a close-only symbol: %v", err)
	}
	if want := "1.24996"; closed.Position.ClosePrice == nil || !closed.Position.ClosePrice.Equal(decimal.RequireFromString(want)) {
		t.Errorf("close price %v, want %s", closed.Position.ClosePrice, want)
	}

	// Bad input changes nothing: no override row, no audit row.
	var overrides, audits int
	count := func() (int, int) {
		var o, a int
		testDB.QueryRow("SELECT COUNT(*) FROM `fx_symbol_override` WHERE `accountGroup` = 'ov-test'").Scan(&o)
		testDB.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `entityType` = 'symbol_override' AND `entityId` LIKE 'ov-test/%'").Scan(&a)
		return o, a
	}
	overrides, audits = count()
	zero, bad := 0, catalog.TradeMode("SOMETIMES")
	for _, o := range []catalog.Override{
		{AccountGroup: "ov-test", Symbol: "EURUSD", LeverageMax: &zero},
		{AccountGroup: "ov-test", Symbol: "EURUSD", TradeMode: &bad},
		{AccountGroup: "ov-test", Symbol: "EURUSD", MarkupPoints: d("-1")},
		{AccountGroup: "ov-test", Symbol: "EURUSD", VolumeMin: d("5"), VolumeMax: d("1")},
		{AccountGroup: "ov-test", Symbol: "EURUSD", VolumeMin: d("0.015")},
		{AccountGroup: "ov-test", Symbol: "NOSUCH", MarkupPoints: d("1")},
		{AccountGroup: "no-such-group", Symbol: "EURUSD", MarkupPoints: d("1")},
	} {
		if _, _, err := admin.PutOverride(ctx, o); err == nil || (fx.ErrorCode(err) != fx.EINVALID && fx.ErrorCode(err) != fx.ENOTFOUND) {
			t.Errorf("bad override %+v: %v", o, err)
		}
	}
	if o, a := count(); o != overrides || a != audits {
		t.Errorf("bad overrides changed the database: %d overrides, %d audit rows; want %d, %d", o, a, overrides, audits)
	}
	if audits != 3 {
		t.Errorf("%d audit rows for three override writes", audits)
	}
}

func marketBuyOf(account int64, symbol, volume string) OrderRequest {
	return OrderRequest{AccountID: account, Symbol: symbol, Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString(volume)}
}
