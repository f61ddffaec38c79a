package trading

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// raised records the alerts and resets a service reported.
type raised struct {
	mu     sync.Mutex
	alerts []string // code: message
	resets []string // currency amount
}

func (r *raised) Raise(_ context.Context, code string, _ alert.Severity, message string, _ any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alerts = append(r.alerts, code+": "+message)
	return nil
}

func (r *raised) ObserveNBPReset(currency string, amount decimal.Decimal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resets = append(r.resets, currency+" "+amount.String())
}

func (r *raised) counts() (alerts, resets int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.alerts), len(r.resets)
}

// groupAccount opens a funded USD account (1,000 at 1:100) for user in an account group of its
// own with negative balance protection as nbp says.
func groupAccount(t *testing.T, svc *Service, user int64, nbp bool) book.Account {
	t.Helper()
	group := fmt.Sprintf("nbp-%d", user)
	if _, err := testDB.Exec("INSERT INTO `fx_account_group` (`name`, `negativeBalanceProtection`) VALUES (?, ?) "+
		"ON DUPLICATE KEY UPDATE `negativeBalanceProtection` = VALUES(`negativeBalanceProtection`)", group, nbp); err != nil {
		t.Fatal(err)
	}
	a := fundedAccount(t, svc, user)
	if _, err := testDB.Exec("UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, a.ID); err != nil {
		t.Fatal(err)
	}
	a.Group = group
	return a
}

// gappedStopOut opens 0.5 lot EURUSD on a and gaps the bid 300 pips down, far past the account's
// equity, then stops it out as the risk engine does.
func gappedStopOut(t *testing.T, svc *Service, prices *liveQuotes, user int64, a book.Account) int64 {
	t.Helper()
	ctx := context.Background()
	prices.set("EURUSD", "1.1", "1.1002")
	o, err := svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.5")})
	if err != nil {
		t.Fatal(err)
	}
	prices.set("EURUSD", "1.07", "1.0702")
	// 0.5 lot × 100,000 × (1.07 − 1.1002) = −1,510.00 on a balance under 1,000.
	if err = NewRiskDesk(svc, nil).Close(ctx, o.Position.ID, fx.CloseStopOut, tick.Quote{ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	p, err := book.LoadPosition(ctx, testDB, user, o.Position.ID)
	if err != nil || p.Status != fx.PositionClosed || p.CloseReason == nil || *p.CloseReason != string(fx.CloseStopOut) {
		t.Fatalf("position after the stop-out: %+v %v", p, err)
	}
	return p.ID
}

func dealsOfType(t *testing.T, account int64, typ fx.DealType) []book.Deal {
	t.Helper()
	var out []book.Deal
	rows, err := testDB.Query("SELECT `id`, `amount`, `balanceAfter`, `idempotencyKey` FROM `fx_deal` WHERE `accountId` = ? AND `type` = ? ORDER BY `id`", account, typ)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d book.Deal
		if err := rows.Scan(&d.ID, &d.Amount, &d.BalanceAfter, &d.IdempotencyKey); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// A gap that stops out an account of a protected group below zero leaves its balance at
// exactly 0.00: one ADJUSTMENT deal, in the close's transaction, for what the close took below
// zero; Σ deals = balance; one alert and one count.
func TestNBPResetsAGappedStopOutToZero(t *testing.T) {
	t.Parallel()
	const user = 9801
	prices := newLiveQuotes()
	rep := &raised{}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Alerts: rep, NBP: rep})
	a := groupAccount(t, svc, user, true)
	since := time.Now().Add(-time.Second)
	pos := gappedStopOut(t, svc, prices, user, a)
	_, balance := ledgerOf(t, a.ID)
	if shown := fx.FormatMoney("USD", balance); !balance.IsZero() || shown != "0.00" {
		t.Fatalf("balance after a protected stop-out %s, want 0.00", shown)
	}
	wantLedgerBalanced(t, a.ID)
	profit := dealsOfType(t, a.ID, fx.DealProfit)
	adj := dealsOfType(t, a.ID, fx.DealAdjustment)
	if len(profit) != 1 || len(adj) != 1 {
		t.Fatalf("%d PROFIT and %d ADJUSTMENT deals, want one of each", len(profit), len(adj))
	}
	if !profit[0].BalanceAfter.IsNegative() || !adj[0].Amount.Equal(profit[0].BalanceAfter.Neg()) || !adj[0].BalanceAfter.IsZero() || adj[0].ID <= profit[0].ID {
		t.Fatalf("close left %s, adjustment %s → %s", profit[0].BalanceAfter, adj[0].Amount, adj[0].BalanceAfter)
	}
	if want := "nbp:" + itoa(pos) + ":0.5"; adj[0].IdempotencyKey != want {
		t.Fatalf("adjustment key %q, want %q", adj[0].IdempotencyKey, want)
	}
	if na, nr := rep.counts(); na != 1 || nr != 1 {
		t.Fatalf("%d alerts and %d counted resets, want 1 and 1: %v %v", na, nr, rep.alerts, rep.resets)
	}
	if rep.resets[0] != "USD "+adj[0].Amount.String() {
		t.Fatalf("counted %q, want USD %s", rep.resets[0], adj[0].Amount)
	}
	costs, err := svc.NBPCostSince(context.Background(), since)
	if err != nil || len(costs) == 0 || costs[0].Currency != "USD" || costs[0].Resets < 1 {
		t.Fatalf("NBP cost since the test began: %+v %v", costs, err)
	}
}

// The same gap on a group without protection leaves the negative balance, and a deposit after it
// simply adds: it never pays the past negative balance for the desk.
func TestNoNBPLeavesTheNegativeBalance(t *testing.T) {
	t.Parallel()
	const user = 9802
	prices := newLiveQuotes()
	rep := &raised{}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Alerts: rep, NBP: rep})
	a := groupAccount(t, svc, user, false)
	gappedStopOut(t, svc, prices, user, a)
	_, balance := ledgerOf(t, a.ID)
	if !balance.IsNegative() {
		t.Fatalf("balance after an unprotected stop-out %s, want below zero", balance)
	}
	wantLedgerBalanced(t, a.ID)
	if adj := dealsOfType(t, a.ID, fx.DealAdjustment); len(adj) != 0 {
		t.Fatalf("%d ADJUSTMENT deals on an unprotected group", len(adj))
	}
	if na, nr := rep.counts(); na != 0 || nr != 0 {
		t.Fatalf("%d alerts and %d resets on an unprotected group", na, nr)
	}
	if _, _, err := svc.Accounts().Deposit(asAdmin(context.Background()), a.ID, decimal.NewFromInt(100), "after-gap"); err != nil {
		t.Fatal(err)
	}
	_, after := ledgerOf(t, a.ID)
	if !after.Equal(balance.Add(decimal.NewFromInt(100))) {
		t.Fatalf("deposit of 100 on %s left %s", balance, after)
	}
	if adj := dealsOfType(t, a.ID, fx.DealAdjustment); len(adj) != 0 {
		t.Fatalf("a deposit posted %d ADJUSTMENT deals", len(adj))
	}
	wantLedgerBalanced(t, a.ID)
}
