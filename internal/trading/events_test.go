package trading

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// termLease is a switchLease that names its term, as the lease keeper does.
type termLease struct{ switchLease }

func (*termLease) Term() int64 { return 7 }

type storedEvent struct {
	id      int64
	user    int64
	typ     string
	payload map[string]any
	term    int64
}

// eventsOf reads account's events in id order, straight from the table.
func eventsOf(t *testing.T, account int64) []storedEvent {
	t.Helper()
	rows, err := testDB.Query("SELECT `id`, `userId`, `type`, `payload`, `term` FROM `fx_event` WHERE `accountId` = ? ORDER BY `id`", account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		var text string
		if err := rows.Scan(&e.id, &e.user, &e.typ, &text, &e.term); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(text), &e.payload); err != nil {
			t.Fatalf("event %d payload %q: %v", e.id, text, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A fill, a close, a deposit and a withdrawal each write their events in their own
// transaction, with the ids the transaction assigned and the writer's term; a replayed nonce
// writes no second event, and a write the fence or the rules refuse leaves none.
func TestEventsAreWrittenWithTheirChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9711
	l := &termLease{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: l, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	step := func(what string, want ...string) []storedEvent {
		t.Helper()
		es := eventsOf(t, a.ID)
		if len(es) != len(want) {
			t.Fatalf("after %s: %d events %+v, want %v", what, len(es), es, want)
		}
		for i, e := range es {
			if e.typ != want[i] || e.user != user || e.term != 7 || (i > 0 && e.id <= es[i-1].id) {
				t.Fatalf("after %s: event %d = %+v, want %s of user %d, term 7, ids increasing", what, i, e, want[i], user)
			}
		}
		return es
	}
	es := step("the seed deposit", "balance.deposit")
	if p := es[0].payload; p["amount"] != "1000.00" || p["balanceAfter"] != "1000.00" || p["type"] != "DEPOSIT" || p["currency"] != "USD" {
		t.Fatalf("deposit payload = %v", p)
	}

	res, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "ev-1"))
	if err != nil {
		t.Fatal(err)
	}
	es = step("a fill", "balance.deposit", "order.filled", "position.opened")
	order, pos := es[1].payload, es[2].payload
	if order["id"] != float64(res.Order.ID) || order["positionId"] != float64(res.Position.ID) || order["status"] != fx.OrderFilled || order["volume"] != "0.1" {
		t.Fatalf("order.filled payload = %v, want order %d of position %d", order, res.Order.ID, res.Position.ID)
	}
	if pos["id"] != float64(res.Position.ID) || pos["orderId"] != float64(res.Order.ID) || pos["status"] != fx.PositionOpen || pos["openPrice"] != res.Position.OpenPrice.String() {
		t.Fatalf("position.opened payload = %v, want position %+v", pos, *res.Position)
	}
	if again, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "ev-1")); err != nil || !again.Replayed {
		t.Fatalf("replay: %+v %v", again, err)
	}
	step("a replayed fill", "balance.deposit", "order.filled", "position.opened")

	// Refused by the fence at COMMIT: the fill's events roll back with it.
	l.fenced.Store(true)
	if _, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "ev-2")); fx.ErrorCode(err) != fx.EUNAVAILABLE {
		t.Fatalf("fenced fill: %v", err)
	}
	if _, err := svc.ClosePosition(ctx, user, res.Position.ID, nil, fx.CloseClient); fx.ErrorCode(err) != fx.EUNAVAILABLE {
		t.Fatalf("fenced close: %v", err)
	}
	l.fenced.Store(false)
	step("fenced writes", "balance.deposit", "order.filled", "position.opened")

	half := decimal.RequireFromString("0.04")
	if _, err := svc.ClosePosition(ctx, user, res.Position.ID, &half, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	closed, err := svc.ClosePosition(ctx, user, res.Position.ID, nil, fx.CloseClient)
	if err != nil {
		t.Fatal(err)
	}
	es = step("two closes", "balance.deposit", "order.filled", "position.opened", "position.partly_closed", "position.closed")
	if p := es[3].payload; p["closedVolume"] != "0.04" || p["volume"] != "0.06" || p["reason"] != string(fx.CloseClient) || p["status"] != fx.PositionOpen {
		t.Fatalf("partly closed payload = %v", p)
	}
	if p := es[4].payload; p["closedVolume"] != "0.06" || p["volume"] != "0" || p["closeReason"] != string(fx.CloseClient) || p["status"] != fx.PositionClosed ||
		p["price"] != closed.Deal.Price.String() || p["profit"] != fx.FormatMoney("USD", closed.Deal.Amount) {
		t.Fatalf("closed payload = %v, want the close of deal %+v", p, closed.Deal)
	}
	// Refused by the rules: a closed position closes no more, and writes nothing.
	if _, err := svc.ClosePosition(ctx, user, res.Position.ID, nil, fx.CloseClient); err == nil {
		t.Fatal("a closed position closed again")
	}

	d, _, err := svc.Accounts().Withdraw(ctx, user, a.ID, decimal.RequireFromString("10"), "ev-w")
	if err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := svc.Accounts().Withdraw(ctx, user, a.ID, decimal.RequireFromString("10"), "ev-w"); err != nil || !replayed {
		t.Fatalf("withdrawal replay: %v %v", replayed, err)
	}
	if _, _, err := svc.Accounts().Withdraw(ctx, user, a.ID, decimal.RequireFromString("1000000"), "ev-w2"); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("withdrawal beyond the balance: %v", err)
	}
	if _, replayed, err := svc.Accounts().Deposit(asAdmin(ctx), a.ID, decimal.NewFromInt(1000), "seed"); err != nil || !replayed {
		t.Fatalf("deposit replay: %v %v", replayed, err)
	}
	es = step("a withdrawal and replays", "balance.deposit", "order.filled", "position.opened", "position.partly_closed", "position.closed", "balance.withdrawal")
	if p := es[5].payload; p["amount"] != "-10.00" || p["balanceAfter"] != fx.FormatMoney("USD", d.BalanceAfter) || p["idempotencyKey"] != d.IdempotencyKey {
		t.Fatalf("withdrawal payload = %v, want deal %+v", p, d)
	}
	wantLedgerBalanced(t, a.ID)
}

// A cancel (the trader's and the dealer's) and an SL/TP change write their events in their own
// transaction; one refused (the order no longer PENDING, the position closed) writes none.
func TestCancelAndModifyWriteTheirEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9712
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	types := func() []string {
		var out []string
		for _, e := range eventsOf(t, a.ID) {
			out = append(out, e.typ)
		}
		return out
	}
	want := func(what string, ts ...string) []storedEvent {
		t.Helper()
		if got := types(); len(got) != len(ts) || (len(ts) > 0 && got[len(got)-1] != ts[len(ts)-1]) {
			t.Fatalf("after %s: %v, want %v", what, got, ts)
		}
		return eventsOf(t, a.ID)
	}
	limit, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", "ev-limit"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CancelOrder(ctx, user, limit.Order.ID); err != nil {
		t.Fatal(err)
	}
	es := want("a cancel", "balance.deposit", "order.accepted", "order.cancelled")
	if p := es[2].payload; p["id"] != float64(limit.Order.ID) || p["status"] != fx.OrderCancelled || p["price"] != "1.09" || es[2].term != 7 {
		t.Fatalf("order.cancelled = %+v", es[2])
	}
	if _, err := svc.CancelOrder(ctx, user, limit.Order.ID); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("second cancel: %v", err)
	}
	other, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.08", "ev-limit-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Dealer().CancelOrder(asAdmin(ctx), other.Order.ID); err != nil {
		t.Fatal(err)
	}
	es = want("a dealer's cancel", "balance.deposit", "order.accepted", "order.cancelled", "order.accepted", "order.cancelled")
	if p := es[4].payload; p["id"] != float64(other.Order.ID) || p["status"] != fx.OrderCancelled {
		t.Fatalf("dealer's order.cancelled = %v", p)
	}

	open, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "ev-open"))
	if err != nil {
		t.Fatal(err)
	}
	sl := decimal.RequireFromString("1.05")
	if _, err := svc.ModifyPosition(ctx, user, open.Position.ID, StopChange{Set: true, Value: &sl}, StopChange{}); err != nil {
		t.Fatal(err)
	}
	es = want("a modify", "balance.deposit", "order.accepted", "order.cancelled", "order.accepted", "order.cancelled", "order.filled", "position.opened", "position.modified")
	if p := es[7].payload; p["id"] != float64(open.Position.ID) || p["sl"] != "1.05" || p["tp"] != nil || p["status"] != fx.PositionOpen {
		t.Fatalf("position.modified = %v", p)
	}
	if _, err := svc.ClosePosition(ctx, user, open.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ModifyPosition(ctx, user, open.Position.ID, StopChange{Set: true, Value: &sl}, StopChange{}); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("modify of a closed position: %v", err)
	}
	want("a refused modify", "balance.deposit", "order.accepted", "order.cancelled", "order.accepted", "order.cancelled", "order.filled", "position.opened", "position.modified", "position.closed")
}

// The risk engine's writes tell theirs too: a resting order it triggers (order.triggered, then
// position.opened, with the ids the batch assigned) and a stop's close (position.closed, SL).
func TestRiskWritesTellTheirEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9713
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	rd := NewRiskDesk(svc, nil)
	a := fundedAccount(t, svc, user)
	limit, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.01", "1.09", "ev-trigger"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.Fill(ctx, limit.Order.ID, tick.Quote{}); err != nil {
		t.Fatal(err)
	}
	es := eventsOf(t, a.ID)
	if len(es) != 4 || es[1].typ != "order.accepted" || es[2].typ != "order.triggered" || es[3].typ != "position.opened" {
		t.Fatalf("after a trigger: %+v, want deposit, order.accepted, order.triggered, position.opened", es)
	}
	order, pos := es[2].payload, es[3].payload
	if order["id"] != float64(limit.Order.ID) || order["status"] != fx.OrderFilled || order["positionId"] != pos["id"] || pos["orderId"] != float64(limit.Order.ID) {
		t.Fatalf("order.triggered %v and position.opened %v do not name each other", order, pos)
	}
	posID := int64(pos["id"].(float64))
	if err := rd.Close(ctx, posID, a.ID, fx.CloseSL, tick.Quote{}); err != nil {
		t.Fatal(err)
	}
	es = eventsOf(t, a.ID)
	if len(es) != 5 || es[4].typ != "position.closed" || es[4].payload["reason"] != string(fx.CloseSL) || es[4].payload["id"] != float64(posID) {
		t.Fatalf("after a stop's close: %+v", es)
	}
}
