package trading

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// A FIFO account: same-side orders open positions of their own; an opposite order closes the
// oldest first and reverses with what remains; a trader may close only the oldest; it never holds
// both sides.
func TestFIFOOldestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9911
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.FIFO)
	p1, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(openOf(t, a.ID)); n != 2 {
		t.Fatalf("%d open positions after two buys on FIFO, want 2", n)
	}
	if _, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.15")); err != nil {
		t.Fatal(err)
	}
	if p := positionOf(t, p1.Position.ID); p.Status != fx.PositionClosed || *p.CloseReason != string(fx.CloseNetted) {
		t.Fatalf("the oldest after a sell of 0.15: %s %v, want CLOSED NETTED", p.Status, p.CloseReason)
	}
	wantDecimal(t, "the second's volume", positionOf(t, p2.Position.ID).Volume, "0.15")

	p3, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.ClosePosition(ctx, user, p3.Position.ID, nil, fx.CloseClient)
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), "FIFO: close position "+itoa(p2.Position.ID)+" first") {
		t.Fatalf("closing the newest on FIFO: %v, want ECONFLICT naming %d", err, p2.Position.ID)
	}
	if p := positionOf(t, p3.Position.ID); p.Status != fx.PositionOpen {
		t.Fatalf("refused close changed position %d: %s", p.ID, p.Status)
	}
	// The oldest may be closed, in part too.
	half := decimal.RequireFromString("0.05")
	if _, err := svc.ClosePosition(ctx, user, p2.Position.ID, &half, fx.CloseClient); err != nil {
		t.Fatalf("closing part of the oldest: %v", err)
	}
	// Reverse: 0.1 + 0.1 open, selling 0.3 closes both and opens a SELL of 0.1.
	rev, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.3"))
	if err != nil {
		t.Fatal(err)
	}
	open := openOf(t, a.ID)
	if len(open) != 1 || open[0].Side != fx.Sell || open[0].ID != rev.Position.ID {
		t.Fatalf("after the reverse: %+v", open)
	}
	wantDecimal(t, "the reversal", open[0].Volume, "0.1")
	ledgerBalanced(t, a.ID)
}

// A stop that fires on a FIFO position that is not the oldest closes the same volume from the
// oldest positions first, with the stop's reason, and the stop is removed from the position it
// was set on, which stays open.
func TestFIFOStopClosesTheOldest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9912
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.FIFO)
	old, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	sl := decimal.RequireFromString("1.0900")
	req := market(a.ID, fx.Buy, "0.1")
	req.SL = &sl
	stopped, err := svc.PlaceOrder(ctx, user, req)
	if err != nil {
		t.Fatal(err)
	}
	// The risk engine's close of the newer position for its SL.
	if _, err := svc.closePosition(ctx, 0, a.ID, stopped.Position.ID, nil, fx.CloseSL, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	o := positionOf(t, old.Position.ID)
	if o.Status != fx.PositionClosed || *o.CloseReason != string(fx.CloseSL) {
		t.Fatalf("the oldest after the newer one's SL: %s %v, want CLOSED SL", o.Status, o.CloseReason)
	}
	s := positionOf(t, stopped.Position.ID)
	if s.Status != fx.PositionOpen || s.SL != nil {
		t.Fatalf("the position whose SL fired: %s, sl %v; want OPEN without its SL", s.Status, s.SL)
	}
	ledgerBalanced(t, a.ID)
	// A dealer's close closes what it names, FIFO or not.
	if n := len(openOf(t, a.ID)); n != 1 {
		t.Fatalf("%d open", n)
	}
}

// A stop-out that fires on a newer position of a FIFO account closes the oldest in its place, and
// tells the stop-out as such beside that close, naming the position it closed (the soak found
// such closes without their account.stop_out, seed 4243).
func TestFIFOStopOutTellsTheStopOutOfTheOldest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9913
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.FIFO)
	old, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	newer, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.closePosition(ctx, 0, a.ID, newer.Position.ID, nil, fx.CloseStopOut, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if o := positionOf(t, old.Position.ID); o.Status != fx.PositionClosed || *o.CloseReason != string(fx.CloseStopOut) {
		t.Fatalf("the oldest after the newer one's stop-out: %s %v, want CLOSED STOP_OUT", o.Status, o.CloseReason)
	}
	var stopOuts []storedEvent
	for _, e := range eventsOf(t, a.ID) {
		if e.typ == string(events.AccountStopOut) {
			stopOuts = append(stopOuts, e)
		}
	}
	if len(stopOuts) != 1 || stopOuts[0].payload["positionId"] != float64(old.Position.ID) || stopOuts[0].payload["closedVolume"] != "0.1" {
		t.Fatalf("account.stop_out events %+v, want one naming position %d, 0.1 closed", stopOuts, old.Position.ID)
	}
	ledgerBalanced(t, a.ID)
}
