package trading

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// wantKeyReused checks that err is the 422 refusal of a reused requestNonce, naming the key.
func wantKeyReused(t *testing.T, what string, err error, nonce string) {
	t.Helper()
	if fx.ErrorCode(err) != fx.EKEYREUSED || !strings.Contains(fx.ErrorMessage(err), `requestNonce "`+nonce+`"`) {
		t.Fatalf("%s: %v; want %s naming requestNonce %q", what, err, fx.EKEYREUSED, nonce)
	}
}

// A requestNonce binds the order it came with: the same request again replays it (however its
// numbers were spelled), another request under the same nonce — a MARKET SELL after a BUY LIMIT,
// the same LIMIT at another price — is refused with 422 and writes nothing.
func TestNonceBindsItsRestingOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9605
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	first, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.1", "1.09", "rest-1"))
	if err != nil {
		t.Fatal(err)
	}
	again := buyLimit(a.ID, "0.10", "1.0900", "rest-1") // the same order, spelled otherwise
	again.TimeInForce = fx.GTC
	if res, err := svc.PlaceOrder(ctx, user, again); err != nil || !res.Replayed || res.Order.ID != first.Order.ID {
		t.Fatalf("identical retry: %+v, %v; want a replay of order %d", res, err, first.Order.ID)
	}
	before := counts(t, a.ID)
	sell := marketBuy(a.ID, "0.1", "rest-1")
	sell.Side = fx.Sell
	for what, r := range map[string]OrderRequest{
		"a MARKET SELL under the BUY LIMIT's nonce": sell,
		"the LIMIT at another price":                buyLimit(a.ID, "0.1", "1.08", "rest-1"),
		"the LIMIT with a stop loss": func() OrderRequest {
			r := buyLimit(a.ID, "0.1", "1.09", "rest-1")
			r.SL = ptr(decimal.RequireFromString("1.05"))
			return r
		}(),
		"the LIMIT good till a date": func() OrderRequest {
			r := buyLimit(a.ID, "0.1", "1.09", "rest-1")
			r.TimeInForce, r.ExpiresAt = fx.GTD, ptr(time.Now().Add(time.Hour))
			return r
		}(),
	} {
		_, err := svc.PlaceOrder(ctx, user, r)
		wantKeyReused(t, what, err, "rest-1")
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("refused reuses wrote: %v → %v", before, after)
	}

	// A process that cannot fill (no quote here) still answers a retry from the database, and
	// still tells it from another request.
	noQuotes := newService(t, Config{DB: testDB, Prices: fixedPrices{}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	if res, err := noQuotes.PlaceOrder(ctx, user, again); err != nil || !res.Replayed || res.Order.ID != first.Order.ID {
		t.Fatalf("identical retry where nothing is quoted: %+v, %v; want a replay", res, err)
	}
	_, err = noQuotes.PlaceOrder(ctx, user, buyLimit(a.ID, "0.2", "1.09", "rest-1"))
	wantKeyReused(t, "another volume where nothing is quoted", err, "rest-1")
}

// The same for MARKET orders, on both ways a batch commits: the retry of a remembered account's
// fill is sent in one round trip, refused by its check (a nonce an order holds) and run again on
// locked rows, which replay it or refuse it; and within one batch, the second of two writes
// under one nonce is replayed or refused by the first.
func TestNonceBindsItsMarketOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9606
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	if _, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "")); err != nil { // remembered from here
		t.Fatal(err)
	}
	orig, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "mkt-1"))
	if err != nil {
		t.Fatal(err)
	}
	if st := svc.CommitStats(); st.OneTrip != 1 {
		t.Fatalf("committer %+v: the nonce'd fill did not go in one round trip", st)
	}
	before := counts(t, a.ID)
	_, err = svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.2", "mkt-1"))
	wantKeyReused(t, "another volume, one round trip first", err, "mkt-1")
	if st := svc.CommitStats(); st.Stale != 1 {
		t.Fatalf("committer %+v: the reuse was not tried in one round trip first", st)
	}
	res, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "mkt-1"))
	if err != nil || !res.Replayed || res.Order.ID != orig.Order.ID {
		t.Fatalf("identical retry: %+v, %v; want a replay of order %d", res, err, orig.Order.ID)
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("a refused reuse wrote: %v → %v", before, after)
	}

	// Two writes under one new nonce in one batch: the first fills, the second is refused.
	inOneBatch(svc, 2)
	var errs [2]error
	var results [2]OrderResult
	sell := marketBuy(a.ID, "0.1", "mkt-2")
	sell.Side = fx.Sell
	concurrently(
		func() { results[0], errs[0] = svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "mkt-2")) },
		func() { results[1], errs[1] = svc.PlaceOrder(ctx, user, sell) },
	)
	inOneBatch(svc, 0)
	filled, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil && !results[i].Replayed:
			filled++
		case fx.ErrorCode(err) == fx.EKEYREUSED:
			refused++
		default:
			t.Errorf("write %d of the batch: %+v, %v", i, results[i], err)
		}
	}
	if filled != 1 || refused != 1 {
		t.Fatalf("one batch, one nonce, two requests: %d filled, %d refused; want 1 and 1", filled, refused)
	}
	wantLedgerBalanced(t, a.ID)
}

// A deposit's or withdrawal's requestNonce binds its amount: the same amount replays, another
// is refused with 422 and moves no money.
func TestNonceBindsItsAmount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9607
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user) // deposit nonce "seed": 1,000
	if _, replayed, err := svc.Accounts().Deposit(asAdmin(ctx), a.ID, decimal.RequireFromString("1000.00"), "seed"); err != nil || !replayed {
		t.Fatalf("identical deposit retry: replayed %v, %v", replayed, err)
	}
	before := counts(t, a.ID)
	_, _, err := svc.Accounts().Deposit(asAdmin(ctx), a.ID, decimal.NewFromInt(5000), "seed")
	wantKeyReused(t, "a deposit of another amount", err, "seed")

	if _, _, err := svc.Accounts().Withdraw(ctx, user, a.ID, decimal.NewFromInt(100), "out-1"); err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := svc.Accounts().Withdraw(ctx, user, a.ID, decimal.NewFromInt(100), "out-1"); err != nil || !replayed {
		t.Fatalf("identical withdrawal retry: replayed %v, %v", replayed, err)
	}
	mid := counts(t, a.ID)
	_, _, err = svc.Accounts().Withdraw(ctx, user, a.ID, decimal.NewFromInt(900), "out-1")
	wantKeyReused(t, "a withdrawal of another amount", err, "out-1")
	if after := counts(t, a.ID); after != mid || before[2] == mid[2] {
		t.Fatalf("ledger: %v, after the withdrawal %v, after the refused reuse %v", before, mid, after)
	}
	wantLedgerBalanced(t, a.ID)
}
