package trading

import (
	"context"
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

func stopLimit(account int64, side fx.Side, stop, limit string) OrderRequest {
	return OrderRequest{AccountID: account, Symbol: "EURUSD", Side: side, Type: fx.StopLimit, Volume: decimal.RequireFromString("0.01"),
		Price: ptrDec(stop), LimitPrice: ptrDec(limit)}
}

// A STOP_LIMIT is checked as MT5 checks one (the stop as a STOP's price, the limit on the
// pull-back side of it) and refused whole, writing nothing, when it is not.
func TestStopLimitShapeRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9901
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	before := counts(t, a.ID)
	limitOnLimit := buyLimit(a.ID, "0.01", "1.09", "")
	limitOnLimit.LimitPrice = ptrDec("1.08")
	noLimit := stopLimit(a.ID, fx.Buy, "1.1050", "1.1040")
	noLimit.LimitPrice = nil
	for name, r := range map[string]OrderRequest{
		"buy limit above its stop":   stopLimit(a.ID, fx.Buy, "1.1050", "1.1060"),
		"sell limit below its stop":  stopLimit(a.ID, fx.Sell, "1.0950", "1.0940"),
		"buy stop below the ask":     stopLimit(a.ID, fx.Buy, "1.0990", "1.0980"),
		"limitPrice on a LIMIT":      limitOnLimit,
		"no limitPrice":              noLimit,
		"limit with too many digits": stopLimit(a.ID, fx.Buy, "1.1050", "1.104055"),
	} {
		if _, err := svc.PlaceOrder(ctx, user, r); fx.ErrorCode(err) != fx.EINVALID {
			t.Errorf("%s: %v; want %s", name, err, fx.EINVALID)
		}
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("refused orders wrote: %v → %v", before, after)
	}
}

// A buy stop-limit gapped past its limit triggers (triggeredAt, order.stop_triggered) and rests
// as a LIMIT at its limit — it is not filled at the gapped price — and fills once the desk's
// price comes back to the limit, never worse than it.
func TestStopLimitGapRestsAtItsLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9902
	prices := newLiveQuotes()
	prices.set("EURUSD", "1.10000", "1.10020")
	var changes changeLog
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, OnChange: changes.add})
	a := fundedAccount(t, svc, user)
	res, err := svc.PlaceOrder(ctx, user, stopLimit(a.ID, fx.Buy, "1.10500", "1.10400"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Order.ID
	if c := changes.last(); c.Kind != risk.OrderPlaced || c.Order.Type != risk.Stop || c.Order.Price != 1.105 {
		t.Fatalf("placed as %+v; want a STOP at the stop", c)
	}

	prices.set("EURUSD", "1.10800", "1.10820") // a gap through the stop and past the limit
	if err := svc.fillPending(ctx, id, tick.Quote{}); err != nil {
		t.Fatalf("trigger: %v", err)
	}
	o := storedOrder(t, id)
	if o.Status != fx.OrderPending || o.TriggeredAt == nil || o.PositionID != nil {
		t.Fatalf("after the gap: %s triggeredAt=%v position=%v; want PENDING, triggered, no position", o.Status, o.TriggeredAt, o.PositionID)
	}
	if n := countEvents(t, a.ID, "order.stop_triggered"); n != 1 {
		t.Fatalf("%d order.stop_triggered events; want 1", n)
	}
	if c := changes.last(); c.Kind != risk.OrderPlaced || c.Order.Type != risk.Limit || c.Order.Price > 1.104 {
		t.Fatalf("re-keyed as %+v; want a LIMIT at or below its limit", c)
	}
	// A new holder's view (a takeover) loads it as the LIMIT it has become.
	snap, err := NewRiskDesk(svc, nil).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ro := range snap.Orders {
		if ro.ID == id {
			found = true
			if ro.Type != risk.Limit || ro.Price > 1.104 || ro.Price < 1.1039 {
				t.Fatalf("loaded as %+v; want a LIMIT at its limit", ro)
			}
		}
	}
	if !found {
		t.Fatalf("the triggered stop-limit %d is not in the loaded view", id)
	}
	// Handed over again while the price is still past the limit: refused for the market, not
	// filled, not triggered twice.
	if err := svc.fillPending(ctx, id, tick.Quote{}); !errors.Is(err, risk.ErrMarketUnavailable) {
		t.Fatalf("fill past the limit: %v; want ErrMarketUnavailable", err)
	}
	prices.set("EURUSD", "1.10350", "1.10370")
	if err := svc.fillPending(ctx, id, tick.Quote{}); err != nil {
		t.Fatalf("fill at the limit: %v", err)
	}
	o = storedOrder(t, id)
	if o.Status != fx.OrderFilled || o.FillPrice == nil || o.FillPrice.GreaterThan(decimal.RequireFromString("1.104")) {
		t.Fatalf("filled %s at %v; want FILLED at or below 1.10400", o.Status, o.FillPrice)
	}
	if n := countEvents(t, a.ID, "order.stop_triggered"); n != 1 {
		t.Fatalf("%d order.stop_triggered events; want 1", n)
	}
}

// A sell stop-limit whose stop is reached with the desk's price at its limit fills at once, in
// the trigger's transaction.
func TestStopLimitFillsAtOnceWhenTheLimitIsReached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9903
	prices := newLiveQuotes()
	prices.set("EURUSD", "1.10000", "1.10020")
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	res, err := svc.PlaceOrder(ctx, user, stopLimit(a.ID, fx.Sell, "1.09500", "1.09500"))
	if err != nil {
		t.Fatal(err)
	}
	prices.set("EURUSD", "1.09500", "1.09520")
	if err := svc.fillPending(ctx, res.Order.ID, tick.Quote{}); err != nil {
		t.Fatal(err)
	}
	o := storedOrder(t, res.Order.ID)
	if o.Status != fx.OrderFilled || o.TriggeredAt == nil || o.FillPrice.LessThan(decimal.RequireFromString("1.095")) {
		t.Fatalf("%s triggeredAt=%v at %v; want FILLED at once at or above 1.09500", o.Status, o.TriggeredAt, o.FillPrice)
	}
	if n := countEvents(t, a.ID, "order.stop_triggered"); n != 1 {
		t.Fatalf("%d order.stop_triggered events; want 1", n)
	}
}
