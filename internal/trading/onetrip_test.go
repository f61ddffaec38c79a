package trading

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/gatetest"
)

// wantLedgerBalanced fails unless account's deals add up to its balance.
func wantLedgerBalanced(t *testing.T, account int64) {
	t.Helper()
	amounts, balance := ledgerOf(t, account)
	sum := decimal.Zero
	for _, d := range amounts {
		sum = sum.Add(d)
	}
	if !sum.Equal(balance) {
		t.Fatalf("account %d: Σ deals %s ≠ balance %s", account, sum, balance)
	}
}

// A fill on an account the committer remembers commits in one round trip what the two-round-trip
// batch would have: the order, the position, the commission deal and the balance it leaves.
func TestOneTripFillOnRememberedAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9201)
	first, err := svc.PlaceOrder(ctx, 9201, marketBuy(a.ID, "0.1", "one"))
	if err != nil {
		t.Fatal(err)
	}
	if st := svc.CommitStats(); st.OneTrip != 0 {
		t.Fatalf("committer %+v: the account's first fill went in one round trip, with nothing book.Remembered", st)
	}
	second, err := svc.PlaceOrder(ctx, 9201, marketBuy(a.ID, "0.2", "two"))
	if err != nil {
		t.Fatal(err)
	}
	if st := svc.CommitStats(); st.OneTrip != 1 || st.Stale != 0 {
		t.Fatalf("committer %+v: want the second fill in one round trip", st)
	}
	if second.Position == nil || second.Commission == nil || !second.Position.Volume.Equal(decimal.RequireFromString("0.2")) ||
		second.Position.OrderID != second.Order.ID || second.Order.ID == first.Order.ID {
		t.Fatalf("one-trip fill answered %+v", second)
	}
	stored, err := book.LoadPosition(ctx, testDB, 9201, second.Position.ID)
	if err != nil || !stored.OpenPrice.Equal(decimal.RequireFromString("1.1002")) || stored.OrderID != second.Order.ID {
		t.Fatalf("stored position %+v, %v", stored, err)
	}
	if c := counts(t, a.ID); c[0] != "2" || c[1] != "3" {
		t.Fatalf("orders, deals = %v: want two orders and their commissions next to the deposit", c)
	}
	wantLedgerBalanced(t, a.ID)
}

// Whatever changed an account behind the committer's memory — its balance, its positions, its
// leverage, its group's execution mode — the one-round-trip check refuses it with nothing
// written, and the batch runs again on locked rows, whose rules see the change. Each case's
// order would fill on the remembered rows and must not on the real ones.
func TestOneTripCheckSeesChangesBehindIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exec := func(t *testing.T, q string, args ...any) {
		t.Helper()
		if _, err := testDB.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		user   int64
		before func(t *testing.T, a book.Account) // before the account is remembered
		change func(t *testing.T, svc *Service, a book.Account)
		volume string
		want   string // what the refusal says
	}{
		{"withdrawal", 9211, nil, func(t *testing.T, svc *Service, a book.Account) {
			if _, _, err := svc.Accounts().Withdraw(ctx, 9211, a.ID, decimal.NewFromInt(400), ""); err != nil {
				t.Fatal(err)
			}
		}, "0.1", "Not enough free margin"},
		{"position written by another holder", 9212, nil, func(t *testing.T, svc *Service, a book.Account) {
			exec(t, "INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`) "+
				"VALUES (?, 0, 'EURUSD', 'BUY', 0.3, 0.3, 1.1002)", a.ID)
		}, "0.2", "Not enough free margin"},
		{"partial close by another holder", 9213, nil, func(t *testing.T, svc *Service, a book.Account) {
			// The remembered 0.5 lot is now 0.05: the same order that fits on the real rows is
			// refused on the remembered ones, so the check must send it to the locked rows.
			exec(t, "UPDATE `fx_position` SET `volume` = 0.05 WHERE `accountId` = ? AND `status` = 'OPEN'", a.ID)
		}, "0.45", ""},
		{"leverage lowered", 9214, nil, func(t *testing.T, svc *Service, a book.Account) {
			exec(t, "UPDATE `fx_account` SET `leverage` = 10 WHERE `id` = ?", a.ID)
		}, "0.1", "margin"},
		{"moved to a venue group", 9215, nil, func(t *testing.T, svc *Service, a book.Account) {
			group := fmt.Sprintf("onetrip-%d", a.ID)
			exec(t, "INSERT INTO `fx_account_group` (`name`, `executionMode`) VALUES (?, 'EXTERNAL')", group)
			exec(t, "UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, a.ID)
		}, "0.1", "trades through an execution venue"},
		{"its group switched to the venue", 9216, func(t *testing.T, a book.Account) {
			// The account is in a group of its own before it is remembered, so only the group's
			// execution mode changes behind the memory, not the account row.
			group := fmt.Sprintf("onetrip-%d", a.ID)
			exec(t, "INSERT INTO `fx_account_group` (`name`) VALUES (?)", group)
			exec(t, "UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, a.ID)
		}, func(t *testing.T, svc *Service, a book.Account) {
			exec(t, "UPDATE `fx_account_group` SET `executionMode` = 'EXTERNAL' WHERE `name` = ?", fmt.Sprintf("onetrip-%d", a.ID))
		}, "0.1", "trades through an execution venue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
			a := fundedAccount(t, svc, tc.user) // 1,000 USD at 1:100
			if tc.before != nil {
				tc.before(t, a)
			}
			first, err := svc.PlaceOrder(ctx, tc.user, marketBuy(a.ID, "0.5", "")) // remembered: 0.5 lot, 550.10 of margin
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, svc, a)
			before := counts(t, a.ID)
			res, err := svc.PlaceOrder(ctx, tc.user, marketBuy(a.ID, tc.volume, ""))
			st := svc.CommitStats()
			if st.Stale != 1 || st.OneTrip != 0 {
				t.Fatalf("committer %+v: want one stale one-trip attempt, and no one-trip commit", st)
			}
			if tc.want == "" {
				if err != nil || res.Position == nil {
					t.Fatalf("order on the real rows: %+v, %v; want it filled", res, err)
				}
			} else {
				if err == nil || !strings.Contains(fx.ErrorMessage(err), tc.want) {
					t.Fatalf("order after the change: %+v, %v; want it refused with %q", res, err, tc.want)
				}
				if after := counts(t, a.ID); after != before {
					t.Fatalf("orders, deals, balance %v → %v: the refused order wrote something", before, after)
				}
			}
			if first.Position == nil {
				t.Fatal("the first order opened nothing")
			}
			wantLedgerBalanced(t, a.ID)
		})
	}
}

// The check itself, against the rows as they are: it passes on exactly what is stored and
// refuses (error 1690, never the fence's 1242) any one remembered figure that differs.
func TestStaleCheckRefusesEveryDifference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9231)
	for _, o := range []OrderRequest{marketBuy(a.ID, "0.1", "held"), marketBuy(a.ID, "0.2", ""),
		{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Sell, Type: fx.Market, Volume: decimal.RequireFromString("0.3")}} {
		if _, err := svc.PlaceOrder(ctx, 9231, o); err != nil {
			t.Fatal(err)
		}
	}
	stored, ok := svc.commits.Remembered(a.ID)
	if !ok || len(stored.Exposures) != 2 {
		t.Fatalf("book.Remembered %+v, %v: want the account with its two exposures", stored, ok)
	}
	check := func(k book.Remembered, nonces ...string) error {
		var keys []book.NonceKey
		for _, n := range nonces {
			keys = append(keys, book.NonceKey{Account: a.ID, Nonce: n})
		}
		q, args := book.StaleCheck([]int64{a.ID}, map[int64]book.Remembered{a.ID: k}, keys)
		rows, err := testDB.Query(q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var n uint64
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != math.MaxUint64 {
			return fmt.Errorf("the check answered %d", n)
		}
		return nil
	}
	if err := check(stored); err != nil {
		t.Fatalf("the check refused the rows as stored: %v", err)
	}
	if err := check(stored, "new", "other"); err != nil {
		t.Fatalf("the check refused request nonces no order holds: %v", err)
	}
	if err := check(stored, "new", "held"); !store.IsStale(err) {
		t.Errorf("a request nonce an order holds: the check answered %v, want its refusal", err)
	}
	clone := func(edit func(k *book.Remembered)) book.Remembered {
		k := stored
		k.Exposures = append([]book.Exposure(nil), stored.Exposures...)
		edit(&k)
		return k
	}
	tiny := decimal.RequireFromString("0.0001")
	for name, k := range map[string]book.Remembered{
		"balanceVersion":      clone(func(k *book.Remembered) { k.Version-- }),
		"owner":               clone(func(k *book.Remembered) { k.Account.UserID++ }),
		"group":               clone(func(k *book.Remembered) { k.Account.Group = "other" }),
		"currency":            clone(func(k *book.Remembered) { k.Account.Currency = "EUR" }),
		"leverage":            clone(func(k *book.Remembered) { k.Account.Leverage = 50 }),
		"state":               clone(func(k *book.Remembered) { k.Account.State = fx.AccountCloseOnly }),
		"volume":              clone(func(k *book.Remembered) { k.Exposures[0].Volume = k.Exposures[0].Volume.Add(tiny) }),
		"volume × price":      clone(func(k *book.Remembered) { k.Exposures[1].VolumePrice = k.Exposures[1].VolumePrice.Sub(tiny) }),
		"side":                clone(func(k *book.Remembered) { k.Exposures[0].Side = k.Exposures[1].Side }),
		"an exposure missing": clone(func(k *book.Remembered) { k.Exposures = k.Exposures[:1] }),
		"an exposure too many": clone(func(k *book.Remembered) {
			k.Exposures = append(k.Exposures, book.Exposure{Symbol: "GBPUSD", Side: fx.Buy, Volume: tiny, VolumePrice: tiny})
		}),
		"no exposures": clone(func(k *book.Remembered) { k.Exposures = nil }),
	} {
		if err := check(k); !store.IsStale(err) || store.IsFenceRefusal(err) {
			t.Errorf("%s differs: the check answered %v, want its refusal", name, err)
		}
	}
}

// A one-round-trip batch the fence refuses is answered with the pricing text like any fenced
// batch, writes nothing and is not run again: the check's refusal and the fence's are different
// errors, and only the check's sends a batch to the locked rows.
func TestOneTripFenceRefusalIsNotRunAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &switchLease{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: l, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9241)
	if _, err := svc.PlaceOrder(ctx, 9241, marketBuy(a.ID, "0.1", "")); err != nil {
		t.Fatal(err)
	}
	before := counts(t, a.ID)
	l.fenced.Store(true)
	_, err := svc.PlaceOrder(ctx, 9241, marketBuy(a.ID, "0.1", ""))
	if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
		t.Fatalf("fenced one-trip fill: %v", err)
	}
	if st := svc.CommitStats(); st.Stale != 0 || st.OneTrip != 0 || st.Batches != 1 {
		t.Fatalf("committer %+v: want the fenced batch neither committed nor run again", st)
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("the fenced batch changed the database: %v → %v", before, after)
	}
	// Remembered rows are not trusted after a failed batch: the next fill reads them again.
	l.fenced.Store(false)
	if _, err := svc.PlaceOrder(ctx, 9241, marketBuy(a.ID, "0.1", "")); err != nil {
		t.Fatal(err)
	}
	if st := svc.CommitStats(); st.OneTrip != 0 {
		t.Fatalf("committer %+v: the fill after a failed batch went in one round trip on forgotten rows", st)
	}
	wantLedgerBalanced(t, a.ID)
}

// A client's retry of a request nonce whose original filled, sent when the account is
// remembered, is answered with the original: whether the rules would take it again as a new
// order (it would then fail on the nonce's unique key) or refuse it (no free margin left for a
// second 0.5 lot: nothing would reach the key). The one-round-trip check refuses a batch carrying
// a nonce an order holds, and the locked rows answer the retry before any rule.
func TestOneTripRetriedNonceIsReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for i, volume := range []string{"0.1", "0.5"} {
		user := int64(9251 + i)
		svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
		a := fundedAccount(t, svc, user) // 1,000 USD at 1:100
		if _, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "a")); err != nil {
			t.Fatal(err)
		}
		orig, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, volume, "b"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, volume, "b"))
		if err != nil || !again.Replayed || again.Order.ID != orig.Order.ID {
			t.Fatalf("retry of %s lot answered %+v, %v; want a replay of order %d", volume, again, err, orig.Order.ID)
		}
		if st := svc.CommitStats(); st.OneTrip != 1 || st.Stale != 1 || st.Refused != 0 {
			t.Fatalf("committer %+v: want the original in one trip, the retry's one trip refused and replayed", st)
		}
		if c := counts(t, a.ID); c[0] != "2" {
			t.Fatalf("orders = %s, want 2", c[0])
		}
		wantLedgerBalanced(t, a.ID)
	}
}

// A batch of fills on several remembered accounts goes in one round trip; when one of them
// changed behind the memory, the whole batch runs again on locked rows, and every fill in it is
// judged on its own account's real rows.
func TestOneTripBatchOfSeveralAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a, b := fundedAccount(t, svc, 9261), fundedAccount(t, svc, 9261)
	for _, id := range []int64{a.ID, b.ID} {
		if _, err := svc.PlaceOrder(ctx, 9261, marketBuy(id, "0.5", "")); err != nil { // remembered: 550.10 of margin each
			t.Fatal(err)
		}
	}
	both := func(volume string) [2]error {
		inOneBatch(svc, 2)
		var errs [2]error
		concurrently(
			func() { _, errs[0] = svc.PlaceOrder(ctx, 9261, marketBuy(a.ID, volume, "")) },
			func() { _, errs[1] = svc.PlaceOrder(ctx, 9261, marketBuy(b.ID, volume, "")) },
		)
		return errs
	}
	if errs := both("0.1"); errs[0] != nil || errs[1] != nil {
		t.Fatalf("fills on two book.Remembered accounts: %v", errs)
	}
	if st := svc.CommitStats(); st.OneTrip != 1 || st.Stale != 0 || st.LastSize != 2 {
		t.Fatalf("committer %+v: want both fills in one batch, in one round trip", st)
	}
	// b loses 300 behind the memory: 0.2 lot more (880 of margin in all) no longer fits its
	// equity, and still fits a's.
	if _, _, err := svc.Accounts().Withdraw(ctx, 9261, b.ID, decimal.NewFromInt(300), ""); err != nil {
		t.Fatal(err)
	}
	errs := both("0.2")
	if errs[0] != nil || !strings.Contains(fx.ErrorMessage(errs[1]), "Not enough free margin") {
		t.Fatalf("after b's withdrawal: a %v, b %v; want a filled and b refused for margin", errs[0], errs[1])
	}
	if st := svc.CommitStats(); st.OneTrip != 1 || st.Stale != 1 {
		t.Fatalf("committer %+v: want the second batch's check refused and the batch run on locked rows", st)
	}
	wantLedgerBalanced(t, a.ID)
	wantLedgerBalanced(t, b.ID)
}
