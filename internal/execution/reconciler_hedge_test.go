package execution_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/execution"
	"fxdesk/internal/fx"
	"fxdesk/internal/hedge"
	"fxdesk/internal/routing"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// The hedge book (internal/hedge) against the real venue simulator and the real reconciler.

func (e *env) hedgeBook() *hedge.Book {
	e.t.Helper()
	b, err := hedge.NewBook(hedge.Config{DB: testDB, Venue: e.sender, Gate: e.gate, Fence: heldLease{}, Alerts: e.inbox, Bound: 10 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) hedgeReconciler(b *hedge.Book, now func() time.Time) *execution.Reconciler {
	e.t.Helper()
	r, err := execution.NewReconciler(execution.ReconcilerConfig{Venue: e.client, Closer: e.sender, Desk: e.desk.ABook(), Hedge: b, Gate: e.gate, Alerts: e.inbox,
		Account: e.sim.AccountID(), Plan: execution.Config{NotSentAfter: time.Minute}, Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func hedgeOrderRow(t *testing.T, id int64) (status string, position *int64) {
	t.Helper()
	if err := testDB.QueryRow("SELECT o.`status`, p.`id` FROM `fx_hedge_order` o LEFT JOIN `fx_hedge_position` p ON p.`orderId` = o.`id` WHERE o.`id` = ?", id).
		Scan(&status, &position); err != nil {
		t.Fatalf("hedge order %d: %v", id, err)
	}
	return status, position
}

func openAlert(t *testing.T, in *alert.Inbox, code string) bool {
	t.Helper()
	list, err := in.List(context.Background(), alert.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		if a.Code == code && a.ResolvedAt == nil {
			return true
		}
	}
	return false
}

// A hedge opened and closed through the book: the venue holds one trade under client id H<id>,
// Net counts it while open, the reconciler leaves it alone (no orphan close, no adoption for a
// client), the hedge monitor expects it, and the close books the venue's price and the P&L in
// the quote currency.
func TestHedgeBookOpenReconcileClose(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.hedgeBook()
	before, err := b.Net(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Open(ctx, "EURUSD", decimal.NewFromInt(-100000), hedge.ByHedger)
	if err != nil {
		t.Fatal(err)
	}
	trades := e.trades(hedge.ClientID(p.OrderID))
	if len(trades) != 1 || trades[0].ID != p.TradeID || !p.Units.Equal(decimal.NewFromInt(-100000)) || !p.OpenPrice.Equal(decimal.RequireFromString("1.1")) {
		t.Fatalf("hedge position %+v, venue trades %+v; want one trade sold at the bid 1.1", p, trades)
	}
	net, err := b.Net(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := net["EURUSD"].Sub(before["EURUSD"]); !got.Equal(decimal.NewFromInt(-100000)) {
		t.Fatalf("Net moved by %s, want -100000", got)
	}

	res, err := e.hedgeReconciler(b, nil).Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []execution.ActionKind{execution.CloseOrphan, execution.Adopt, execution.ReportHedge, execution.AdoptHedge} {
		if res.Planned[k] != 0 {
			t.Fatalf("reconcile planned %v; want nothing for a booked hedge", res.Planned)
		}
	}
	if tr := e.tradeByID(p.TradeID); tr.State != venue.TradeOpen {
		t.Fatalf("the reconciler touched the hedge trade: %+v", tr)
	}
	mon, err := execution.NewHedgeMonitor(execution.HedgeConfig{Venue: e.client, Desk: e.desk.ABook(), Hedge: b, Gate: e.gate, Alerts: e.inbox})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Check(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range mon.Last().Symbols {
		if s.Symbol == "EURUSD" && (s.Mismatch || s.HedgeUnits.IsZero()) {
			t.Fatalf("hedge monitor EURUSD = %+v; want the hedge book counted, no mismatch", s)
		}
	}

	if err := b.Close(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	closed, err := b.PositionByID(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Sold at 1.1, bought back at the ask 1.1002: (1.1002 − 1.1) × −100,000 = −20 USD.
	if closed.Status != hedge.PositionClosed || closed.ClosePrice == nil || !closed.ClosePrice.Equal(decimal.RequireFromString("1.1002")) ||
		closed.RealizedPL == nil || !closed.RealizedPL.Equal(decimal.NewFromInt(-20)) || closed.PLCurrency != "USD" || closed.CloseReason != hedge.CloseDesk {
		t.Fatalf("closed hedge position = %+v", closed)
	}
	if tr := e.tradeByID(p.TradeID); tr.State != venue.TradeClosed {
		t.Fatalf("venue trade after the close: %+v", tr)
	}
	if err := b.Close(ctx, p.ID); err == nil {
		t.Fatal("a second close of a closed hedge position was accepted")
	}
}

// The venue executes a hedge order and its answer never comes: the row stays SENDING, Net
// counts it, hedge-unknown-outcome is raised; the reconciler adopts the trade into the hedge
// book by its client id (the venue saw one request) and the alert resolves.
func TestHedgeUnknownOutcomeIsAdoptedNeverResent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.hedgeBook()
	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Open(ctx, "EURUSD", decimal.NewFromInt(50000), hedge.ByHedger)
	if !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("open through a cut answer: %v, want venue.ErrOutcomeUnknown", err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT MAX(`id`) FROM `fx_hedge_order` WHERE `status` = 'SENDING'").Scan(&id); err != nil || id == 0 {
		t.Fatalf("no SENDING hedge order: %v", err)
	}
	if !openAlert(t, e.inbox, hedge.AlertUnknownOutcome) {
		t.Fatal("hedge-unknown-outcome not raised")
	}
	net, err := b.Net(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if net["EURUSD"].LessThan(decimal.NewFromInt(50000)) {
		t.Fatalf("Net %v does not count the SENDING hedge order", net)
	}
	res, err := e.hedgeReconciler(b, nil).Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Planned[execution.AdoptHedge] != 1 || res.Planned[execution.CloseOrphan] != 0 || res.Failed != 0 {
		t.Fatalf("reconcile = %+v; want one hedge adoption", res)
	}
	status, pos := hedgeOrderRow(t, id)
	trades := e.trades(hedge.ClientID(id))
	if status != hedge.StatusFilled || pos == nil || len(trades) != 1 || e.sim.State().OrderRequests[hedge.ClientID(id)] != 1 {
		t.Fatalf("after the reconcile: order %s position %v, venue trades %+v, requests %d", status, pos, trades, e.sim.State().OrderRequests[hedge.ClientID(id)])
	}
	if openAlert(t, e.inbox, hedge.AlertUnknownOutcome) {
		t.Fatal("hedge-unknown-outcome still open after the reconciler resolved the order")
	}
	if err := b.Close(ctx, *pos); err != nil {
		t.Fatal(err)
	}
}

// A SENDING hedge order the venue never heard of is NOT_SENT past the threshold, not before,
// and never sent; a hedge trade the venue closed itself is closed in the hedge book at the
// venue's price.
func TestHedgeNotSentAndClosedAtVenue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.hedgeBook()
	res, err := testDB.Exec("INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `status`, `sentAt`) VALUES ('EURUSD', 10000, 'HEDGER', 'SENDING', NOW(3))")
	if err != nil {
		t.Fatal(err)
	}
	lost, _ := res.LastInsertId()
	var dbNow time.Time
	if err := testDB.QueryRow("SELECT NOW(3)").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hedgeReconciler(b, func() time.Time { return dbNow.Add(30 * time.Second) }).Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if status, _ := hedgeOrderRow(t, lost); status != hedge.StatusSending {
		t.Fatalf("hedge order %d is %s before the threshold", lost, status)
	}
	if _, err := e.hedgeReconciler(b, func() time.Time { return dbNow.Add(2 * time.Minute) }).Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if status, _ := hedgeOrderRow(t, lost); status != hedge.StatusNotSent || e.sim.State().OrderRequests[hedge.ClientID(lost)] != 0 {
		t.Fatalf("hedge order %d is %s with %d requests; want NOT_SENT, never sent", lost, status, e.sim.State().OrderRequests[hedge.ClientID(lost)])
	}

	p, err := b.Open(ctx, "EURUSD", decimal.NewFromInt(20000), hedge.ByHedger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.CloseTradeAtVenue(p.TradeID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hedgeReconciler(b, nil).Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	closed, err := b.PositionByID(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Bought at the ask 1.1002, closed by the venue at the bid 1.1: −0.0002 × 20,000 = −4.
	if closed.Status != hedge.PositionClosed || closed.CloseReason != hedge.CloseVenue || !closed.ClosePrice.Equal(decimal.RequireFromString("1.1")) ||
		!closed.RealizedPL.Equal(decimal.NewFromInt(-4)) {
		t.Fatalf("hedge position after the venue's close = %+v", closed)
	}
}

// HEDGE n% rules on the real desk and venue simulator: a routed buy is booked on the desk and
// its share opened by a sweep, once (a second sweep sends nothing); a share the venue refuses is
// REJECTED and opened by the first sweep past its back-off; the client's close closes its hedge
// at the next sweep.
func TestHedgeRulesSweep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 7301
	const pct = 30
	clock := time.Now()
	_, rules, a := e.hedgeRulesAccount(t, user, "hedge-rules", pct, func() time.Time { return clock })
	sell := func(lots string) trading.OrderResult {
		t.Helper()
		res, err := e.desk.PlaceOrder(ctx, user, trading.OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Sell, Type: fx.Market, Volume: decimal.RequireFromString(lots)})
		if err != nil || res.Position == nil || res.Order.HedgePercent == nil || *res.Order.HedgePercent != pct {
			t.Fatalf("sell %s: %+v %v; want a desk position routed HEDGE %d%%", lots, res.Order, err, pct)
		}
		return res
	}
	first := sell("1.5")
	if opened, _, _, err := rules.Sweep(ctx); err != nil || opened != 1 {
		t.Fatalf("sweep: opened %d, %v", opened, err)
	}
	var hid int64
	var units decimal.Decimal
	if err := testDB.QueryRow("SELECT `id`, `units` FROM `fx_hedge_order` WHERE `clientPositionId` = ? AND `status` = 'FILLED'", first.Position.ID).Scan(&hid, &units); err != nil {
		t.Fatal(err)
	}
	// 30 % of a 1.5-lot sell: the desk sells 45,000 units at the venue.
	if !units.Equal(decimal.NewFromInt(-45000)) || len(e.trades(hedge.ClientID(hid))) != 1 {
		t.Fatalf("hedge order %d: %s units, venue trades %+v", hid, units, e.trades(hedge.ClientID(hid)))
	}
	if opened, reduced, closed, err := rules.Sweep(ctx); err != nil || opened != 0 || reduced != 0 || closed != 0 || e.sim.State().OrderRequests[hedge.ClientID(hid)] != 1 {
		t.Fatalf("second sweep: opened %d closed %d (%v); the hedge must not be sent again", opened, closed, err)
	}

	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultCancel, Reason: "INSUFFICIENT_MARGIN"}); err != nil {
		t.Fatal(err)
	}
	second := sell("1")
	if opened, _, _, err := rules.Sweep(ctx); err != nil || opened != 0 {
		t.Fatalf("sweep with the venue cancelling: opened %d, %v", opened, err)
	}
	var rejected int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_hedge_order` WHERE `clientPositionId` = ? AND `status` = 'REJECTED' AND `reason` = 'INSUFFICIENT_MARGIN'", second.Position.ID).Scan(&rejected); err != nil {
		t.Fatalf("the refused share is not REJECTED: %v", err)
	}
	clock = clock.Add(hedge.FirstBackoff)
	if opened, _, _, err := rules.Sweep(ctx); err != nil || opened != 1 {
		t.Fatalf("the REJECTED share was not tried again past its back-off: opened %d, %v", opened, err)
	}
	if opened, _, _, err := rules.Sweep(ctx); err != nil || opened != 0 {
		t.Fatalf("the retried share was opened twice: opened %d, %v", opened, err)
	}

	if _, err := e.desk.ClosePosition(ctx, user, first.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if _, _, closed, err := rules.Sweep(ctx); err != nil || closed != 1 {
		t.Fatalf("sweep after the client's close: closed %d, %v", closed, err)
	}
	if tr := e.trades(hedge.ClientID(hid)); len(tr) != 1 || tr[0].State != venue.TradeClosed {
		t.Fatalf("hedge trade after the client's close: %+v", tr)
	}
	if _, err := e.desk.ClosePosition(ctx, user, second.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if _, _, closed, err := rules.Sweep(ctx); err != nil || closed != 1 {
		t.Fatalf("sweep after the second client's close: closed %d, %v", closed, err)
	}
}

// The venue closes part of a hedge trade itself (a netting venue's own close falls on it): the
// reconciler books the share — the position keeps what the venue holds, its P&L from the venue's
// price — and the desk's own close of the rest adds its part; a second reconcile changes nothing.
func TestHedgeTradeReducedAtTheVenueIsBookedAsItsShare(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.hedgeBook()
	p, err := b.Open(ctx, "EURUSD", decimal.NewFromInt(-50000), hedge.ByHedger)
	if err != nil {
		t.Fatal(err)
	}
	share := decimal.NewFromInt(13500)
	if _, err := e.sim.CloseTradeAtVenue(p.TradeID, &share); err != nil {
		t.Fatal(err)
	}
	rec := e.hedgeReconciler(b, nil)
	res, err := rec.Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Planned[execution.BookHedgePartial] != 1 || res.Failed != 0 {
		t.Fatalf("reconcile planned %v (failed %d); want one hedge partial booked", res.Planned, res.Failed)
	}
	got, err := b.PositionByID(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Sold at the bid 1.1, the venue bought 13,500 back at the ask 1.1002: (1.1002 − 1.1) × −13,500 = −2.70.
	if got.Status != hedge.PositionOpen || !got.Units.Equal(decimal.NewFromInt(-36500)) || got.RealizedPL == nil || !got.RealizedPL.Equal(decimal.RequireFromString("-2.7")) {
		t.Fatalf("after the venue's share: %+v; want OPEN, -36500 units, realised -2.70", got)
	}
	if res, err := rec.Reconcile(ctx, "test"); err != nil || res.Planned[execution.BookHedgePartial] != 0 {
		t.Fatalf("a second reconcile planned %v (%v); want nothing", res.Planned, err)
	}
	if err := b.Close(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	closed, err := b.PositionByID(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The rest, 36,500 bought back at 1.1002: −7.30 more, −10.00 in all.
	if closed.Status != hedge.PositionClosed || closed.RealizedPL == nil || !closed.RealizedPL.Equal(decimal.NewFromInt(-10)) {
		t.Fatalf("closed hedge position = %+v; want realised -10.00", closed)
	}
}

// hedgeRulesAccount is the HEDGE tests' setup: the hedge book and its rules on e, account group
// group with one rule HEDGE pct%, and a funded USD account of user in it.
func (e *env) hedgeRulesAccount(t *testing.T, user int64, group string, pct int, now func() time.Time) (*hedge.Book, *hedge.Rules, book.Account) {
	t.Helper()
	ctx := context.Background()
	b := e.hedgeBook()
	rules, err := hedge.NewRules(b, time.Hour, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_account_group` (`name`) VALUES (?)", group); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CreateRoutingRule(asAdmin(ctx), group, routing.Rule{Action: routing.Hedge, HedgePercent: &pct}); err != nil {
		t.Fatal(err)
	}
	a, err := e.desk.Accounts().Open(ctx, user, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.desk.Accounts().Deposit(asAdmin(ctx), a.ID, decimal.NewFromInt(100000), "seed"); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, a.ID); err != nil {
		t.Fatal(err)
	}
	return b, rules, a
}
