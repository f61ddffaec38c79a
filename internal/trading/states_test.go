package trading

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// setState sets account id's state as an admin would.
func setState(t *testing.T, svc *Service, id int64, state fx.AccountState, reason string) {
	t.Helper()
	if err := adminOf(t, svc).SetAccountState(asAdmin(context.Background()), id, state, reason); err != nil {
		t.Fatal(err)
	}
}

// refusedBy checks that err is the state's refusal, naming the state and the reason.
func refusedBy(t *testing.T, what string, err error, state fx.AccountState, reason string) {
	t.Helper()
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), string(state)) || !strings.Contains(fx.ErrorMessage(err), reason) {
		t.Errorf("%s: %v; want %s naming %s and %q", what, err, fx.ECONFLICT, state, reason)
	}
}

// A CLOSE_ONLY account takes no new exposure — a market order, a resting order, a resting order
// it left that triggers — and writes nothing for them; its trader still closes, cancels, moves
// stops and withdraws.
func TestCloseOnlyRefusesNewExposureOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9801
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	open, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", ""))
	if err != nil {
		t.Fatal(err)
	}
	resting, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", ""))
	if err != nil {
		t.Fatal(err)
	}
	cancelMe, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.08", ""))
	if err != nil {
		t.Fatal(err)
	}
	const reason = "KYC documents expired"
	setState(t, svc, a.ID, fx.AccountCloseOnly, reason)

	before := counts(t, a.ID)
	_, err = svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "after"))
	refusedBy(t, "market order", err, fx.AccountCloseOnly, reason)
	_, err = svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", ""))
	refusedBy(t, "resting order", err, fx.AccountCloseOnly, reason)
	if after := counts(t, a.ID); after != before {
		t.Fatalf("refused orders wrote: %v → %v", before, after)
	}
	// The order it left resting is rejected at its trigger, not filled.
	if err := svc.fillPending(ctx, resting.Order.ID, tick.Quote{}); err == nil {
		t.Fatal("a resting order of a CLOSE_ONLY account filled at its trigger")
	}
	if o, err := svc.Orders(ctx, user, book.ListFilter{AccountID: a.ID, Status: fx.OrderRejected, Limit: 10}); err != nil || len(o) != 1 || o[0].ID != resting.Order.ID {
		t.Fatalf("rejected orders %+v, %v; want the triggered one", o, err)
	}

	if _, err := svc.ModifyPosition(ctx, user, open.Position.ID, StopChange{Set: true, Value: ptrDec("1.05")}, StopChange{}); err != nil {
		t.Errorf("moving a stop: %v", err)
	}
	if _, err := svc.ClosePosition(ctx, user, open.Position.ID, nil, fx.CloseClient); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := svc.CancelOrder(ctx, user, cancelMe.Order.ID); err != nil {
		t.Errorf("cancel: %v", err)
	}
	if _, _, err := svc.Accounts().Withdraw(ctx, user, a.ID, decimal.NewFromInt(10), ""); err != nil {
		t.Errorf("withdrawal: %v", err)
	}

	// Back to ACTIVE: it trades again.
	setState(t, svc, a.ID, fx.AccountActive, "")
	if _, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "")); err != nil {
		t.Fatalf("order after ACTIVE again: %v", err)
	}
}

// A DISABLED account is read-only for its trader — orders, closes, stop changes, cancels and
// withdrawals are refused and write nothing — while the risk engine still closes its positions.
func TestDisabledIsReadOnlyForTheTrader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9802
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	open, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", ""))
	if err != nil {
		t.Fatal(err)
	}
	resting, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", ""))
	if err != nil {
		t.Fatal(err)
	}
	const reason = "chargeback under investigation"
	setState(t, svc, a.ID, fx.AccountDisabled, reason)

	before := counts(t, a.ID)
	positionsBefore, _ := svc.Positions(ctx, user, book.ListFilter{AccountID: a.ID, Status: fx.PositionOpen, Limit: 10})
	_, err = svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", ""))
	refusedBy(t, "market order", err, fx.AccountDisabled, reason)
	_, err = svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", ""))
	refusedBy(t, "resting order", err, fx.AccountDisabled, reason)
	_, err = svc.ClosePosition(ctx, user, open.Position.ID, nil, fx.CloseClient)
	refusedBy(t, "close", err, fx.AccountDisabled, reason)
	_, err = svc.ModifyPosition(ctx, user, open.Position.ID, StopChange{Set: true, Value: ptrDec("1.05")}, StopChange{})
	refusedBy(t, "stop change", err, fx.AccountDisabled, reason)
	_, err = svc.CancelOrder(ctx, user, resting.Order.ID)
	refusedBy(t, "cancel", err, fx.AccountDisabled, reason)
	_, _, err = svc.Accounts().Withdraw(ctx, user, a.ID, decimal.NewFromInt(10), "")
	refusedBy(t, "withdrawal", err, fx.AccountDisabled, reason)
	positionsAfter, _ := svc.Positions(ctx, user, book.ListFilter{AccountID: a.ID, Status: fx.PositionOpen, Limit: 10})
	if after := counts(t, a.ID); after != before || fmt.Sprint(positionsAfter) != fmt.Sprint(positionsBefore) || pendingOf(t, a.ID) != 1 {
		t.Fatalf("refused requests wrote: %v → %v, positions %v → %v", before, after, positionsBefore, positionsAfter)
	}

	// The risk engine's stop-out is not the trader's: it closes.
	if _, err := svc.closePosition(ctx, 0, 0, open.Position.ID, nil, fx.CloseStopOut, nil, time.Now()); err != nil {
		t.Fatalf("stop-out of a DISABLED account: %v", err)
	}
}

// An account group's own cap on resting orders replaces the desk setting for its accounts,
// lower or higher; accounts of other groups keep the setting.
func TestGroupPendingOrderCapOverridesTheSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9803
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Settings: capsOf(3, 1000)})
	admin := adminOf(t, svc)
	group := fmt.Sprintf("cap-%d", time.Now().UnixNano()%1e9)
	if _, err := admin.CreateAccountGroup(asAdmin(ctx), group, catalog.AccountGroupPatch{SetMaxPendingOrders: true, MaxPendingOrders: ptrInt(1)}); err != nil {
		t.Fatal(err)
	}
	capped, other := fundedAccount(t, svc, user), fundedAccount(t, svc, user)
	if err := admin.MoveAccount(asAdmin(ctx), capped.ID, group); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PlaceOrder(ctx, user, buyLimit(capped.ID, "0.01", "1.09", "")); err != nil {
		t.Fatal(err)
	}
	_, err := svc.PlaceOrder(ctx, user, buyLimit(capped.ID, "0.01", "1.09", ""))
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), "group "+group+" may hold (its maxPendingOrders = 1)") {
		t.Fatalf("second order in the capped group: %v; want the group's cap", err)
	}
	if pendingOf(t, capped.ID) != 1 {
		t.Fatalf("%d orders rest; the group's cap is 1", pendingOf(t, capped.ID))
	}
	// Above the desk's 3 for the group's accounts once its cap is raised.
	if _, err := admin.UpdateAccountGroup(asAdmin(ctx), group, catalog.AccountGroupPatch{SetMaxPendingOrders: true, MaxPendingOrders: ptrInt(5)}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := svc.PlaceOrder(ctx, user, buyLimit(capped.ID, "0.01", "1.09", "")); err != nil {
			t.Fatalf("under the group's cap of 5: %v", err)
		}
	}
	for range 3 {
		if _, err := svc.PlaceOrder(ctx, user, buyLimit(other.ID, "0.01", "1.09", "")); err != nil {
			t.Fatal(err)
		}
	}
	_, err = svc.PlaceOrder(ctx, user, buyLimit(other.ID, "0.01", "1.09", ""))
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), catalog.SettingMaxPendingOrders+" = 3") {
		t.Fatalf("the default group's account: %v; want the desk setting's cap", err)
	}
}

// A new account is swap-free when its group's default says so. Not parallel: it changes the
// default group, where every test's accounts open, and puts it back.
func TestNewAccountTakesTheGroupsSwapFreeDefault(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	admin := adminOf(t, svc)
	swapFree := func(id int64) (b bool) {
		if err := testDB.QueryRow("SELECT `swapFree` FROM `fx_account` WHERE `id` = ?", id).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, err := svc.Accounts().Open(ctx, 9804, "USD", 100)
	if err != nil || swapFree(a.ID) {
		t.Fatalf("account %+v (%v): swap-free in a group whose default is not", a, err)
	}
	if _, err := admin.UpdateAccountGroup(asAdmin(ctx), catalog.DefaultAccountGroup, catalog.AccountGroupPatch{SwapFreeDefault: ptrBool(true)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.UpdateAccountGroup(asAdmin(ctx), catalog.DefaultAccountGroup, catalog.AccountGroupPatch{SwapFreeDefault: ptrBool(false)}); err != nil {
			t.Error(err)
		}
	})
	b, err := svc.Accounts().Open(ctx, 9804, "USD", 100)
	if err != nil || !swapFree(b.ID) {
		t.Fatalf("account %+v (%v): not swap-free in a group whose default is", b, err)
	}
}

func ptrDec(s string) *decimal.Decimal { d := decimal.RequireFromString(s); return &d }
func ptrInt(n int) *int                { return &n }
func ptrBool(b bool) *bool             { return &b }
