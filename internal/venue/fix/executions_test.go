package fix_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/execution"
	"fxdesk/internal/fx"
	"fxdesk/internal/sim/fixvenue"
)

// A desk close the venue fills in several executions (docs/fix.md, «Fills in several
// executions»): the answer is every execution, summed — the units and the average price of the
// order, and each execution's id — so that the desk records each as booked. The reconciler's
// plan then adds up: when the venue closes the rest of the trade itself, the desk side is
// closed at the venue's price instead of waiting forever on a share nobody booked.
func TestACloseInSeveralExecutionsIsBookedWholeAndTheVenuesCloseOfTheRestAddsUp(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	key := orderID()
	f := place(t, r.session, key, "GBPAUD", "10000")
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultSplit, Executions: 3}); err != nil {
		t.Fatal(err)
	}
	part := dd("6000")
	out, err := r.session.CloseTrade(ctx, f.TradeOpened, &part)
	if err != nil || out.Fill == nil {
		t.Fatalf("close of 6000 in three executions: %+v %v", out, err)
	}
	tr, found, err := r.session.TradeByID(ctx, f.TradeOpened)
	if err != nil || !found {
		t.Fatalf("trade %s: %v found=%v", f.TradeOpened, err, found)
	}
	if !out.Fill.Units.Equal(dd("-6000")) || !out.Fill.Price.Equal(dd("1.12")) || len(tr.ClosingTransactionIDs) != 3 ||
		!slices.Equal(out.Fill.Transactions(), tr.ClosingTransactionIDs) || out.Fill.TransactionID != tr.ClosingTransactionIDs[2] {
		t.Fatalf("close answered %+v (transactions %v); the trade's closing executions are %v: want -6000 at the bid 1.12, every execution answered",
			out.Fill, out.Fill.Transactions(), tr.ClosingTransactionIDs)
	}
	if lt := r.session.LiveTrades()[key]; !lt.Units.Equal(dd("4000")) || lt.Pending != "" {
		t.Fatalf("the holder keeps trade %s as %+v, want 4000 open and no close pending", key, lt)
	}

	// The desk booked the close from every execution it was answered; the venue closes the rest.
	oid, _ := strconv.ParseInt(key, 10, 64)
	d := deskState("GBPAUD")
	d.Positions = []execution.DeskPosition{{PositionID: 8, OrderID: oid, AccountID: 1, Symbol: "GBPAUD", Side: fx.Buy,
		Volume: dd("0.04"), TradeID: f.TradeOpened, Booked: out.Fill.Transactions()}}
	if acts := planFor(t, r.session, d, "GBPAUD"); len(acts) != 0 {
		t.Fatalf("plan with the desk in line after the split close: %+v, want nothing", acts)
	}
	if _, err := r.venue.CloseVenueSide("GBPAUD", nil); err != nil {
		t.Fatal(err)
	}
	var acts []execution.Action
	eventually(t, func() bool { acts = planFor(t, r.session, d, "GBPAUD"); return len(acts) > 0 })
	if len(acts) != 1 || acts[0].Kind != execution.CloseDeskSide || !acts[0].Volume.Equal(dd("0.04")) || !acts[0].Price.Equal(dd("1.12")) {
		t.Fatalf("plan after the venue closed the rest: %+v; want CloseDeskSide of 0.04 at the bid 1.12", acts)
	}
}

// An open the venue fills in several executions answers every one, its trade opened by the
// first (its public id) and holding all of their units.
func TestAnOpenInSeveralExecutionsOpensOneTradeOfAllTheirUnits(t *testing.T) {
	r := newRig(t, 5*time.Second)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultSplit, Executions: 2}); err != nil {
		t.Fatal(err)
	}
	key := orderID()
	f := place(t, r.session, key, "SGDJPY", "-5001")
	ids := f.Transactions()
	if len(ids) != 2 || f.TradeOpened != strconv.FormatInt(ids[0], 10) || f.TransactionID != ids[1] || !f.Units.Equal(dd("-5001")) || !f.Price.Equal(dd("160")) {
		t.Fatalf("open in two executions answered %+v (transactions %v); want -5001 at the bid 160, the trade opened by the first of two", f, ids)
	}
	if lt := r.session.LiveTrades()[key]; !lt.Units.Equal(dd("-5001")) || strconv.FormatInt(lt.ID, 10) != f.TradeOpened {
		t.Fatalf("the holder keeps trade %s as %+v, want -5001 under id %s", key, lt, f.TradeOpened)
	}
	if out, err := r.session.CloseTrade(context.Background(), f.TradeOpened, nil); err != nil || out.Fill == nil || !out.Fill.Units.Equal(dd("5001")) {
		t.Fatalf("close of the split open: %+v %v; want 5001 bought back", out, err)
	}
}
