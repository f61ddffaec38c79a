package trading

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// capsOf is desk settings holding the given caps, never reloaded from fx_setting (nothing runs
// it): the package's tests share one database, whose stored settings other tests must not see
// changed.
func capsOf(pendingOrders, accountsPerUser int) *catalog.Settings {
	return catalog.NewSettingsHolding(testDB, slog.New(slog.DiscardHandler), pendingOrders, accountsPerUser)
}

func buyLimit(account int64, volume, price, nonce string) OrderRequest {
	p := decimal.RequireFromString(price)
	return OrderRequest{AccountID: account, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Limit, Volume: decimal.RequireFromString(volume), Price: &p, RequestNonce: nonce}
}

func pendingOf(t *testing.T, account int64) int {
	t.Helper()
	var n int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ? AND `status` = 'PENDING'", account).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Ten placements racing for the last three places of an account's pending-order cap: three
// rest, seven are refused with a text naming the cap and its setting. The count is taken under
// the account lock every placement holds, so none squeezes past.
func TestPendingOrderCapHoldsUnderRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9602
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Settings: capsOf(3, 1000)})
	a := fundedAccount(t, svc, user)
	var errs [10]error
	var fns []func()
	for i := range errs {
		fns = append(fns, func() {
			_, errs[i] = svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", fmt.Sprintf("cap-%d", i)))
		})
	}
	concurrently(fns...)
	placed := 0
	for i, err := range errs {
		switch {
		case err == nil:
			placed++
		case fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), catalog.SettingMaxPendingOrders+" = 3"):
			t.Errorf("placement %d answered %v; want success or the cap's refusal", i, err)
		}
	}
	if placed != 3 || pendingOf(t, a.ID) != 3 {
		t.Fatalf("%d placements succeeded and %d orders rest; the cap is 3", placed, pendingOf(t, a.ID))
	}
	// A cancelled order frees its place.
	os, err := svc.Orders(ctx, user, book.ListFilter{AccountID: a.ID, Status: fx.OrderPending, Limit: 1})
	if err != nil || len(os) != 1 {
		t.Fatal(os, err)
	}
	if _, err := svc.CancelOrder(ctx, user, os[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", "after-cancel")); err != nil {
		t.Fatalf("placement after a cancel: %v", err)
	}
}

// Eight creations racing for a user's last two places: two are opened, six refused with a text
// naming the cap and its setting. On the first run the user has no account, and the first two
// race on an empty range of the user index, whose gap both lock: the server rolls one back as a
// deadlock victim and the retry counts the other's account.
func TestAccountCapHoldsUnderRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9603
	held, err := book.ListAccounts(ctx, testDB, user, maxList) // from an earlier run of the test
	if err != nil {
		t.Fatal(err)
	}
	limit := len(held) + 2
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Settings: capsOf(100, limit)})
	var errs [8]error
	var fns []func()
	for i := range errs {
		fns = append(fns, func() { _, errs[i] = svc.Accounts().Open(ctx, user, "USD", 100) })
	}
	concurrently(fns...)
	opened := 0
	for i, err := range errs {
		switch {
		case err == nil:
			opened++
		case fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), fmt.Sprintf("%s = %d", catalog.SettingMaxAccountsPerUser, limit)):
			t.Errorf("creation %d answered %v; want success or the cap's refusal", i, err)
		}
	}
	as, err := svc.Accounts().List(ctx, user, 0)
	if err != nil {
		t.Fatal(err)
	}
	if opened != 2 || len(as) != limit {
		t.Fatalf("%d creations succeeded and the user holds %d accounts; the cap is %d", opened, len(as), limit)
	}
}

// A resting order must fit the account's free margin when it is placed, as a MARKET order of its
// size would now: 100 lots on 1,000 USD are refused — however far below the market the LIMIT
// waits, its better price is not credited as profit — and so is a 0.01 lot on an empty account;
// an order the free margin covers rests. Nothing is written by a refusal.
func TestPendingOrderMarginCheckedAtPlacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9604
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	funded := fundedAccount(t, svc, user) // 1,000 USD at 1:100
	empty, err := svc.Accounts().Open(ctx, user, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		account        int64
		volume, price  string
		typ            fx.OrderType
		wantMarginText string // "" when the order rests
	}{
		{funded.ID, "100", "1.09", fx.Limit, "needs 110010.00 USD of margin"},
		{funded.ID, "100", "0.5", fx.Limit, "needs 110010.00 USD of margin"}, // 6,000,000 USD "better" than the ask
		{funded.ID, "10", "1.12", fx.Stop, "needs 11001.00 USD of margin"},
		{empty.ID, "0.01", "1.09", fx.Limit, "needs 11.00 USD of margin"},
		{funded.ID, "0.5", "1.09", fx.Limit, ""}, // 550.05 USD of margin, 3.50 commission
	} {
		before := counts(t, tc.account)
		r := buyLimit(tc.account, tc.volume, tc.price, "")
		r.Type = tc.typ
		_, err := svc.PlaceOrder(ctx, user, r)
		if tc.wantMarginText == "" {
			if err != nil {
				t.Errorf("%s %s lots at %s: %v; want it to rest", tc.typ, tc.volume, tc.price, err)
			}
			continue
		}
		if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), "Not enough free margin") ||
			!strings.Contains(fx.ErrorMessage(err), tc.wantMarginText) {
			t.Errorf("%s %s lots at %s on account %d: %v; want the free-margin refusal (%s)", tc.typ, tc.volume, tc.price, tc.account, err, tc.wantMarginText)
		}
		if after := counts(t, tc.account); after != before {
			t.Errorf("a refused placement wrote: %v → %v", before, after)
		}
	}
}
