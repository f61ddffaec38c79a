package execution_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/hedge"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// A HEDGE n% share follows its client position down (docs/routing.md, «Hedge book»), on the real
// desk, venue simulator and reconciler: each partial close of the client position reduces the
// hedge to n% of what is left at the next sweep, once; nothing is decided while a hedge order of
// the position is SENDING; a reduction whose answer was lost is never re-sent and the reconciler
// resolves it from the trade; the full close closes the rest.
func TestHedgeRulesReduceTheShareWithPartialCloses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 7302
	const pct = 50
	b, rules, a := e.hedgeRulesAccount(t, user, "hedge-reduce", pct, nil)
	res, err := e.desk.PlaceOrder(ctx, user, trading.OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.NewFromInt(2)})
	if err != nil || res.Position == nil {
		t.Fatalf("buy: %+v %v", res, err)
	}
	client := res.Position.ID
	if opened, _, _, err := rules.Sweep(ctx); err != nil || opened != 1 {
		t.Fatalf("sweep: opened %d, %v", opened, err)
	}
	var hp hedge.Position
	if err := testDB.QueryRow("SELECT `id` FROM `fx_hedge_position` WHERE `clientPositionId` = ?", client).Scan(&hp.ID); err != nil {
		t.Fatal(err)
	}
	// hedgeAt reads the hedge position and its trade at the venue; both must hold units.
	hedgeAt := func(step string, units int64) {
		t.Helper()
		var err error
		if hp, err = b.PositionByID(ctx, hp.ID); err != nil {
			t.Fatal(err)
		}
		tr := e.tradeByID(hp.TradeID)
		if hp.Status != hedge.PositionOpen || !hp.Units.Equal(decimal.NewFromInt(units)) || !tr.CurrentUnits.Equal(decimal.NewFromInt(units)) {
			t.Fatalf("%s: hedge position %+v, venue trade %+v; want both at %d units", step, hp, tr, units)
		}
	}
	closeLots := func(lots string) {
		t.Helper()
		v := decimal.RequireFromString(lots)
		if _, err := e.desk.ClosePosition(ctx, user, client, &v, fx.CloseClient); err != nil {
			t.Fatal(err)
		}
	}
	sweep := func(step string, wantReduced int) {
		t.Helper()
		if opened, reduced, closed, err := rules.Sweep(ctx); err != nil || opened != 0 || reduced != wantReduced || closed != 0 {
			t.Fatalf("%s: sweep opened %d reduced %d closed %d (%v); want %d reduced", step, opened, reduced, closed, err, wantReduced)
		}
	}
	hedgeAt("opened", 100000)

	// 2 → 1.5 lots: 50 % of 150,000 units.
	closeLots("0.5")
	sweep("first partial close", 1)
	hedgeAt("first partial close", 75000)
	var status string
	var leave decimal.Decimal
	if err := testDB.QueryRow("SELECT `status`, `leaveUnits` FROM `fx_hedge_order` WHERE `reducesPositionId` = ?", hp.ID).Scan(&status, &leave); err != nil ||
		status != hedge.StatusFilled || !leave.Equal(decimal.NewFromInt(75000)) {
		t.Fatalf("reduction order: %s leaving %s (%v); want FILLED leaving 75000", status, leave, err)
	}
	// Bought at the ask 1.1002, 25,000 sold at the bid 1.1: −0.0002 × 25,000 = −5.
	if hp.RealizedPL == nil || !hp.RealizedPL.Equal(decimal.NewFromInt(-5)) {
		t.Fatalf("realised P&L after the reduction = %v, want -5", hp.RealizedPL)
	}
	sweep("deciding again", 0)
	hedgeAt("deciding again", 75000)

	// A hedge order of the client position SENDING (its outcome unknown): nothing is decided.
	inFlight, err := testDB.Exec("INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `clientPositionId`, `status`, `sentAt`) VALUES ('EURUSD', 1, 'RULE', ?, 'SENDING', NOW(3))", client)
	if err != nil {
		t.Fatal(err)
	}
	inFlightID, _ := inFlight.LastInsertId()
	closeLots("0.7") // 1.5 → 0.8 lots: 40,000 units
	sweep("a hedge order SENDING", 0)
	hedgeAt("a hedge order SENDING", 75000)
	if err := b.Reduce(ctx, hp.ID, decimal.NewFromInt(75000), decimal.NewFromInt(40000)); !errors.Is(err, hedge.ErrReduceNotDue) {
		t.Fatalf("Reduce with a hedge order SENDING: %v, want ErrReduceNotDue", err)
	}
	if _, err := testDB.Exec("UPDATE `fx_hedge_order` SET `status` = 'NOT_SENT' WHERE `id` = ?", inFlightID); err != nil {
		t.Fatal(err)
	}
	sweep("once it is resolved", 1)
	hedgeAt("once it is resolved", 40000)
	// A decision on stale units writes nothing and sends nothing.
	if err := b.Reduce(ctx, hp.ID, decimal.NewFromInt(75000), decimal.NewFromInt(20000)); !errors.Is(err, hedge.ErrReduceNotDue) {
		t.Fatalf("Reduce from stale units: %v, want ErrReduceNotDue", err)
	}
	hedgeAt("a stale decision", 40000)

	// The venue reduces the trade and the answer is lost: SENDING, never re-sent; the reconciler
	// resolves it from the trade.
	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	closeLots("0.3") // 0.8 → 0.5 lots: 25,000 units
	if _, reduced, _, err := rules.Sweep(ctx); err != nil || reduced != 0 {
		t.Fatalf("sweep with the answer lost: reduced %d, %v", reduced, err)
	}
	var lost int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_hedge_order` WHERE `reducesPositionId` = ? AND `status` = 'SENDING'", hp.ID).Scan(&lost); err != nil {
		t.Fatalf("the reduction with its answer lost is not SENDING: %v", err)
	}
	sweep("a reduction SENDING", 0)
	if tr := e.tradeByID(hp.TradeID); !tr.CurrentUnits.Equal(decimal.NewFromInt(25000)) {
		t.Fatalf("venue trade while the reduction is SENDING: %+v; want it reduced once, to 25000", tr)
	}
	if _, err := e.hedgeReconciler(b, nil).Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if err := testDB.QueryRow("SELECT `status` FROM `fx_hedge_order` WHERE `id` = ?", lost).Scan(&status); err != nil || status != hedge.StatusFilled {
		t.Fatalf("reduction %d after the reconcile: %s (%v), want FILLED", lost, status, err)
	}
	hedgeAt("resolved by the reconciler", 25000)
	sweep("after the resolution", 0)

	// Two open hedges of one client position (a NOT_SENT open the venue filled after all): a
	// partial close reduces neither, as sizing them one by one would hedge the share twice.
	twin, err := testDB.Exec("INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `clientPositionId`, `status`) VALUES ('EURUSD', 100000, 'RULE', ?, 'FILLED')", client)
	if err != nil {
		t.Fatal(err)
	}
	twinOrder, _ := twin.LastInsertId()
	if _, err := testDB.Exec("INSERT INTO `fx_hedge_position` (`orderId`, `symbol`, `units`, `venueTradeId`, `clientPositionId`, `openPrice`, `openedAt`, `plCurrency`) "+
		"VALUES (?, 'EURUSD', 100000, 'twin-of-a-test', ?, 1.1002, NOW(3), 'USD')", twinOrder, client); err != nil {
		t.Fatal(err)
	}
	closeLots("0.1") // 0.5 → 0.4 lots: 20,000 units
	sweep("two open hedges", 0)
	hedgeAt("two open hedges", 25000)
	if _, err := testDB.Exec("DELETE FROM `fx_hedge_position` WHERE `orderId` = ?", twinOrder); err != nil {
		t.Fatal(err)
	}
	sweep("one open hedge again", 1)
	hedgeAt("one open hedge again", 20000)

	// The full close closes the rest.
	if _, err := e.desk.ClosePosition(ctx, user, client, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if _, _, closed, err := rules.Sweep(ctx); err != nil || closed != 1 {
		t.Fatalf("sweep after the full close: closed %d, %v", closed, err)
	}
	if tr := e.tradeByID(hp.TradeID); tr.State != venue.TradeClosed {
		t.Fatalf("hedge trade after the full close: %+v", tr)
	}
}
