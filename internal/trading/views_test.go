package trading

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// Every read of an account marks it alike (Views): live where this process prices every open
// position — always for an account without one, whose equity is its balance even before any
// mark — else the stored marks, and, for an account never marked, no figures at all (Marked
// false) rather than the columns' zero defaults.
func TestAccountViewsMarkEveryReadAlike(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holder := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	blind := newService(t, Config{DB: testDB, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	const user = 9811
	flat := fundedAccount(t, holder, user)
	trading := fundedAccount(t, holder, user)
	if _, err := holder.PlaceOrder(ctx, user, OrderRequest{AccountID: trading.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.1")}); err != nil {
		t.Fatal(err)
	}
	views := func(svc *Service) map[int64]AccountView {
		t.Helper()
		as, err := svc.Accounts().List(ctx, user, 0)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := svc.Accounts().Views(ctx, as)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]AccountView{}
		for _, v := range vs {
			out[v.ID] = v
			single, err := svc.Accounts().View(ctx, user, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			if single.Live != v.Live || single.Marked != v.Marked || !single.Metrics.Equity.Equal(v.Metrics.Equity) || !single.Metrics.UsedMargin.Equal(v.Metrics.UsedMargin) {
				t.Fatalf("account %d: listed %+v, read alone %+v", v.ID, v.Metrics, single.Metrics)
			}
		}
		return out
	}
	thousand := decimal.NewFromInt(1000)
	for name, svc := range map[string]*Service{"holder": holder, "no prices": blind} {
		if v := views(svc)[flat.ID]; !v.Live || !v.Marked || !v.Metrics.Equity.Equal(thousand) || !v.FreeMargin.Equal(thousand) || v.MarginLevel != nil {
			t.Errorf("%s: an account without positions, never marked: %+v live=%v marked=%v; want equity = balance = 1000, live", name, v.Metrics, v.Live, v.Marked)
		}
	}
	if v := views(holder)[trading.ID]; !v.Live || !v.Marked || v.MarginLevel == nil {
		t.Errorf("holder: the trading account %+v live=%v, want live figures", v.Metrics, v.Live)
	}
	stored := views(blind)[trading.ID]
	if stored.Live || !stored.Marked || !stored.Metrics.Equity.Equal(stored.Account.Equity) || stored.MarginLevel == nil {
		t.Errorf("no prices: the trading account %+v live=%v marked=%v, want its stored marks", stored.Metrics, stored.Live, stored.Marked)
	}
	if _, err := testDB.Exec("UPDATE `fx_account` SET `markedAt` = NULL, `equity` = 0, `usedMargin` = 0 WHERE `id` = ?", trading.ID); err != nil {
		t.Fatal(err)
	}
	if v := views(blind)[trading.ID]; v.Live || v.Marked {
		t.Errorf("no prices, never marked: live=%v marked=%v, want neither (unknown, not zero)", v.Live, v.Marked)
	}
}
