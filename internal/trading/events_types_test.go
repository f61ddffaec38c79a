package trading

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// typesOf is the types of account's events, in id order.
func typesOf(es []storedEvent) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.typ
	}
	return out
}

func wantTypes(t *testing.T, what string, es []storedEvent, want ...string) {
	t.Helper()
	got := typesOf(es)
	if len(got) != len(want) {
		t.Fatalf("after %s: %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("after %s: %v, want %v", what, got, want)
		}
	}
}

// A resting order's placement writes order.accepted with the id the batch assigned; its replay
// writes none. The order rejected at its trigger (the account can no longer carry it) writes
// order.rejected with the desk's refusal, and a second trigger of it writes nothing.
func TestRestingOrderAcceptedAndRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9721
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	rd := NewRiskDesk(svc, nil)
	a := fundedAccount(t, svc, user)
	// 0.5 lot at 1:100 needs 550 of margin: it fits the 1,000 deposited.
	limit, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.5", "1.09", "acc-1"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.5", "1.09", "acc-1")); err != nil || !again.Replayed {
		t.Fatalf("replayed placement: %+v %v", again, err)
	}
	es := eventsOf(t, a.ID)
	wantTypes(t, "a placement and its replay", es, "balance.deposit", "order.accepted")
	if p := es[1].payload; p["id"] != float64(limit.Order.ID) || p["status"] != fx.OrderPending || p["type"] != "LIMIT" || p["price"] != "1.09" ||
		p["requestNonce"] != "acc-1" || p["positionId"] != nil || es[1].term != 7 {
		t.Fatalf("order.accepted = %+v, want order %d PENDING", es[1], limit.Order.ID)
	}
	// A placement refused at the edge (no such symbol) or by the rules (a price above the ask)
	// changes nothing and tells nothing.
	if _, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.5", "1.2", "acc-2")); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("a buy limit above the ask: %v", err)
	}
	wantTypes(t, "a refused placement", eventsOf(t, a.ID), "balance.deposit", "order.accepted")

	if _, _, err := svc.Accounts().Withdraw(ctx, user, a.ID, decimal.NewFromInt(900), "acc-w"); err != nil {
		t.Fatal(err)
	}
	if err := rd.Fill(ctx, limit.Order.ID, tick.Quote{}); !errors.Is(err, risk.ErrAlreadyClosed) {
		t.Fatalf("trigger of an order the account cannot carry: %v", err)
	}
	if err := rd.Fill(ctx, limit.Order.ID, tick.Quote{}); !errors.Is(err, risk.ErrAlreadyClosed) {
		t.Fatalf("second trigger: %v", err)
	}
	es = eventsOf(t, a.ID)
	wantTypes(t, "a rejection", es, "balance.deposit", "order.accepted", "balance.withdrawal", "order.rejected")
	if p := es[3].payload; p["id"] != float64(limit.Order.ID) || p["status"] != fx.OrderRejected || p["reason"] == "" || p["reason"] == nil {
		t.Fatalf("order.rejected = %v", p)
	}
	var status string
	if err := testDB.QueryRow("SELECT `status` FROM `fx_order` WHERE `id` = ?", limit.Order.ID).Scan(&status); err != nil || status != fx.OrderRejected {
		t.Fatalf("order row %s %v", status, err)
	}
}

// The venue's refusal of an EXTERNAL order ends it REJECTED with order.rejected naming the
// venue's reason, in one transaction; ending it again, or ending an order as NOT_SENT, writes none.
func TestVenueRejectionTellsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9722
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	sending := func() int64 {
		res, err := testDB.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `timeInForce`, `status`, `execution`, `sentAt`) "+
			"VALUES (?, 'EURUSD', 'BUY', 'MARKET', 0.1, 'GTC', 'SENDING', 'EXTERNAL', NOW(3))", a.ID)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	refused, unsent := sending(), sending()
	for range 2 {
		if err := svc.ABook().EndVenueOrder(ctx, refused, fx.OrderRejected, "INSUFFICIENT_MARGIN"); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.ABook().EndVenueOrder(ctx, unsent, fx.OrderNotSent, "no trace at the venue"); err != nil {
		t.Fatal(err)
	}
	es := eventsOf(t, a.ID)
	wantTypes(t, "a venue's refusal ended twice and an order not sent", es, "balance.deposit", "order.rejected")
	if p := es[1].payload; p["id"] != float64(refused) || p["status"] != fx.OrderRejected || p["reason"] != "INSUFFICIENT_MARGIN" {
		t.Fatalf("order.rejected = %v", p)
	}
}

// A stop-out tells the stop-out itself beside its close, and negative balance protection's reset
// tells its ADJUSTMENT deal: both in the close's transaction, with the figures of its deals.
func TestStopOutAndAdjustmentTellTheirEvents(t *testing.T) {
	t.Parallel()
	const user = 9723
	prices := newLiveQuotes()
	rep := &raised{}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Alerts: rep, NBP: rep})
	a := groupAccount(t, svc, user, true)
	pos := gappedStopOut(t, svc, prices, user, a)
	es := eventsOf(t, a.ID)
	wantTypes(t, "a protected stop-out", es, "balance.deposit", "order.filled", "position.opened", "position.closed", "account.stop_out", "balance.adjustment")
	profit, adj := dealsOfType(t, a.ID, fx.DealProfit), dealsOfType(t, a.ID, fx.DealAdjustment)
	if len(profit) != 1 || len(adj) != 1 {
		t.Fatalf("%d PROFIT and %d ADJUSTMENT deals", len(profit), len(adj))
	}
	if p := es[3].payload; p["reason"] != string(fx.CloseStopOut) || p["id"] != float64(pos) {
		t.Fatalf("position.closed = %v", p)
	}
	so := es[4].payload
	if so["accountId"] != float64(a.ID) || so["positionId"] != float64(pos) || so["closedVolume"] != "0.5" || so["stopOutLevel"] != "50" ||
		so["profit"] != fx.FormatMoney("USD", profit[0].Amount) || so["balanceAfter"] != fx.FormatMoney("USD", profit[0].BalanceAfter) || es[4].term != 7 {
		t.Fatalf("account.stop_out = %v, want the close of deal %+v", so, profit[0])
	}
	// The engine's decision, as it decided it: levels and markups exactly, money in cents.
	decision, _ := json.Marshal(so["decision"])
	if want := `{"decidedAt":"2026-03-02T10:00:00.5Z","equity":"-526.95","group":"protected","marginLevel":"-98.49532710280374",` +
		`"stopOutLevel":"50","symbols":[{"leverage":100,"markup":"0.00001","symbol":"EURUSD"}],"usedMargin":"535.00"}`; string(decision) != want {
		t.Fatalf("account.stop_out decision = %s, want %s", decision, want)
	}
	ad := es[5].payload
	if ad["type"] != "ADJUSTMENT" || ad["amount"] != fx.FormatMoney("USD", adj[0].Amount) || ad["balanceAfter"] != "0.00" ||
		ad["idempotencyKey"] != adj[0].IdempotencyKey || ad["positionId"] != float64(pos) || ad["symbol"] != "EURUSD" {
		t.Fatalf("balance.adjustment = %v, want deal %+v", ad, adj[0])
	}
	// A stop-out's close refused (the position is closed) tells neither.
	if err := NewRiskDesk(svc, nil).Close(context.Background(), pos, a.ID, fx.CloseStopOut, tick.Quote{}); !errors.Is(err, risk.ErrAlreadyClosed) {
		t.Fatalf("second stop-out: %v", err)
	}
	if n := len(eventsOf(t, a.ID)); n != 6 {
		t.Fatalf("a refused stop-out wrote events: %d", n)
	}
}

// A margin call and its end are recorded on the account with their events, each once: a second
// record of the same state writes nothing, and one the fence refuses changes nothing. The risk
// view loads the account as margin-called while it is.
func TestMarginCallRecordedWithItsEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9724
	l := &termLease{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: l, Gate: newGate(t, &gatetest.Lease{}).g})
	rd := NewRiskDesk(svc, nil)
	a := fundedAccount(t, svc, user)
	if _, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.5", "mc-open")); err != nil {
		t.Fatal(err)
	}
	marked := func() bool {
		t.Helper()
		var on bool
		if err := testDB.QueryRow("SELECT `marginCallAt` IS NOT NULL FROM `fx_account` WHERE `id` = ?", a.ID).Scan(&on); err != nil {
			t.Fatal(err)
		}
		return on
	}
	loaded := func() bool {
		t.Helper()
		s, err := rd.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ra := range s.Accounts {
			if ra.ID == a.ID {
				return ra.MarginCalled
			}
		}
		t.Fatalf("account %d not in the risk view", a.ID)
		return false
	}

	l.fenced.Store(true)
	if changed, err := rd.MarginCall(ctx, a.ID, true); err == nil || changed {
		t.Fatalf("fenced margin call: %v %v", changed, err)
	}
	l.fenced.Store(false)
	if marked() {
		t.Fatal("a fenced margin call was recorded")
	}
	for i, want := range []bool{true, false} {
		if changed, err := rd.MarginCall(ctx, a.ID, true); err != nil || changed != want {
			t.Fatalf("margin call %d: changed %v, %v; want %v", i, changed, err, want)
		}
	}
	if !marked() || !loaded() {
		t.Fatal("the margin call is not on the account, or not in the risk view")
	}
	es := eventsOf(t, a.ID)
	wantTypes(t, "a margin call recorded twice", es, "balance.deposit", "order.filled", "position.opened", "account.margin_call")
	p := es[3].payload
	// 0.5 lot at the mid 1.1001 on 1:100: margin 550.05, at this process's prices.
	if p["accountId"] != float64(a.ID) || p["currency"] != "USD" || p["usedMargin"] != "550.05" || p["marginCallLevel"] != "100" || p["marginLevel"] == nil || es[3].term != 7 {
		t.Fatalf("account.margin_call = %+v", es[3])
	}
	for i, want := range []bool{true, false} {
		if changed, err := rd.MarginCall(ctx, a.ID, false); err != nil || changed != want {
			t.Fatalf("margin call end %d: changed %v, %v; want %v", i, changed, err, want)
		}
	}
	if marked() || loaded() {
		t.Fatal("the margin call's end is not on the account, or not in the risk view")
	}
	wantTypes(t, "its end recorded twice", eventsOf(t, a.ID), "balance.deposit", "order.filled", "position.opened", "account.margin_call", "account.margin_call_cleared")
}
