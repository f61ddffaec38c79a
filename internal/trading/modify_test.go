package trading

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// changesSeen records what a service tells the risk engine.
type changesSeen struct {
	mu  sync.Mutex
	all []risk.Change
}

func (c *changesSeen) add(_ context.Context, cs ...risk.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, cs...)
}

func (c *changesSeen) last() risk.Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.all) == 0 {
		return risk.Change{}
	}
	return c.all[len(c.all)-1]
}

// storedOrder is the stored order.
func storedOrder(t *testing.T, id int64) book.Order {
	t.Helper()
	o, err := loadOrderOf(context.Background(), testDB, 0, id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A modify changes the order in place: the same id, the new values, modifiedAt set, one
// order.modified carrying them, and the engine told the new price (OrderModified). Each bad
// modify — nothing to change, values already held, a price on the wrong side of the market, an
// SL above a buy's price, a volume off the step, a limitPrice on a LIMIT, an expiresAt on a GTC
// order, more margin than the account has, another trader's order — answers its error and
// changes nothing.
func TestModifyOrderInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9901
	seen := &changesSeen{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g, OnChange: seen.add})
	a := fundedAccount(t, svc, user)
	placed, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.2", "1.09", "mod-1"))
	if err != nil {
		t.Fatal(err)
	}
	id := placed.Order.ID
	before := counts(t, a.ID)
	eventsBefore := len(eventsOf(t, a.ID))

	for _, c := range []struct {
		name string
		user int64
		c    OrderChange
		code string
	}{
		{"nothing", user, OrderChange{}, fx.EINVALID},
		{"the values it has", user, OrderChange{Price: ptrDec("1.0900"), Volume: ptrDec("0.2")}, fx.EINVALID},
		{"a buy limit above the ask", user, OrderChange{Price: ptrDec("1.2")}, fx.EINVALID},
		{"an sl above the order's price", user, OrderChange{SL: StopChange{Set: true, Value: ptrDec("1.095")}}, fx.EINVALID},
		{"a volume off the step", user, OrderChange{Volume: ptrDec("0.205")}, fx.EINVALID},
		{"a limitPrice on a LIMIT", user, OrderChange{LimitPrice: ptrDec("1.08")}, fx.EINVALID},
		{"expiresAt on a GTC order", user, OrderChange{ExpiresAt: ptr(time.Now().Add(time.Hour))}, fx.EINVALID},
		{"more than the margin", user, OrderChange{Volume: ptrDec("5")}, fx.ECONFLICT},
		{"another trader's order", user + 1, OrderChange{Price: ptrDec("1.08")}, fx.ENOTFOUND},
	} {
		if _, err := svc.ModifyOrder(ctx, c.user, id, c.c); fx.ErrorCode(err) != c.code {
			t.Errorf("modify with %s: %v, want %s", c.name, err, c.code)
		}
	}
	if after := counts(t, a.ID); after != before || len(eventsOf(t, a.ID)) != eventsBefore || storedOrder(t, id).ModifiedAt != nil {
		t.Fatalf("refused modifies changed the database: %v → %v", before, after)
	}

	expires := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
	o, err := svc.ModifyOrder(ctx, user, id, OrderChange{Price: ptrDec("1.085"), Volume: ptrDec("0.3"), SL: StopChange{Set: true, Value: ptrDec("1.07")},
		TimeInForce: fx.GTD, ExpiresAt: &expires})
	if err != nil {
		t.Fatal(err)
	}
	row := storedOrder(t, id)
	if o.ID != id || row.Status != fx.OrderPending || !row.Price.Equal(dd("1.085")) || !row.Volume.Equal(dd("0.3")) || !row.SL.Equal(dd("1.07")) ||
		row.TimeInForce != fx.GTD || !row.ExpiresAt.Equal(expires) || row.ModifiedAt == nil {
		t.Fatalf("modified order %+v (answered %+v)", row, o)
	}
	es := eventsOf(t, a.ID)
	if len(es) != eventsBefore+1 || es[len(es)-1].typ != string("order.modified") {
		t.Fatalf("events after the modify: %v", typesOf(es))
	}
	if p := es[len(es)-1].payload; p["id"] != float64(id) || p["price"] != "1.085" || p["volume"] != "0.3" || p["modifiedAt"] == nil || p["status"] != fx.OrderPending {
		t.Fatalf("order.modified = %v", p)
	}
	if c := seen.last(); c.Kind != risk.OrderModified || c.Order.ID != id || c.Order.Price != 1.085 || !c.Order.ExpiresAt.Equal(expires) {
		t.Fatalf("the engine was told %+v", c)
	}
	// Removing the SL and making it GTC again: the expiry goes.
	if _, err := svc.ModifyOrder(ctx, user, id, OrderChange{SL: StopChange{Set: true}, TimeInForce: fx.GTC}); err != nil {
		t.Fatal(err)
	}
	if row := storedOrder(t, id); row.SL != nil || row.ExpiresAt != nil || row.TimeInForce != fx.GTC {
		t.Fatalf("after removing sl and expiry: %+v", row)
	}

	// Once it is no longer PENDING, a modify is refused with ECONFLICT.
	if _, err := svc.CancelOrder(ctx, user, id); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ModifyOrder(ctx, user, id, OrderChange{Price: ptrDec("1.08")}); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("modify of a cancelled order: %v", err)
	}
}

// The race with the order's own trigger has exactly one winner. A fill that commits first leaves
// the order FILLED and the modify is refused (ECONFLICT); a modify that commits first moves the
// price away from the quote that fired the fill, and the fill is dropped with nothing written
// (risk.ErrOrderModified) — the order rests at its new price, and fills there when the market
// reaches it.
func TestModifyRacesTheTrigger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9902
	prices := &movingPrices{bid: 1.1, ask: 1.1002}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	rd := NewRiskDesk(svc, nil)
	a := fundedAccount(t, svc, user)

	// Fill first: the engine fired at ask 1.0899 ≤ 1.09; the modify then finds it FILLED.
	first, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.1", "1.09", "race-1"))
	if err != nil {
		t.Fatal(err)
	}
	prices.set(1.0897, 1.0899)
	if err := rd.Fill(ctx, first.Order.ID, tick.Quote{Bid: 1.0897, Ask: 1.0899}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ModifyOrder(ctx, user, first.Order.ID, OrderChange{Price: ptrDec("1.08")}); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("modify after the fill: %v", err)
	}
	if row := storedOrder(t, first.Order.ID); row.Status != fx.OrderFilled || row.ModifiedAt != nil {
		t.Fatalf("filled order after a refused modify: %+v", row)
	}

	// Modify first: moved to 1.08, the fill the engine fired at ask 1.0899 is dropped.
	prices.set(1.1, 1.1002)
	second, err := svc.PlaceOrder(ctx, user, buyLimit(a.ID, "0.1", "1.09", "race-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ModifyOrder(ctx, user, second.Order.ID, OrderChange{Price: ptrDec("1.08")}); err != nil {
		t.Fatal(err)
	}
	before := counts(t, a.ID)
	if err := rd.Fill(ctx, second.Order.ID, tick.Quote{Bid: 1.0897, Ask: 1.0899}); !errors.Is(err, risk.ErrOrderModified) {
		t.Fatalf("fill fired at the old price after a modify: %v", err)
	}
	if after := counts(t, a.ID); after != before || storedOrder(t, second.Order.ID).Status != fx.OrderPending {
		t.Fatalf("a dropped fill changed the database: %v → %v", before, after)
	}
	// A quote that reaches the new price fills it.
	prices.set(1.0797, 1.0799)
	if err := rd.Fill(ctx, second.Order.ID, tick.Quote{Bid: 1.0797, Ask: 1.0799}); err != nil {
		t.Fatal(err)
	}
	if row := storedOrder(t, second.Order.ID); row.Status != fx.OrderFilled || row.ModifiedAt == nil {
		t.Fatalf("modified order after its fill: %+v", row)
	}
}

// stillTriggers judges the locked order as the engine's triggers do, for each side and type.
func TestStillTriggers(t *testing.T) {
	t.Parallel()
	q := tick.Quote{Bid: 1.1000, Ask: 1.1002}
	for _, c := range []struct {
		side  fx.Side
		typ   fx.OrderType
		price string
		fires bool
	}{
		{fx.Buy, fx.Limit, "1.1002", true}, {fx.Buy, fx.Limit, "1.1001", false},
		{fx.Buy, fx.Stop, "1.1002", true}, {fx.Buy, fx.Stop, "1.1003", false},
		{fx.Sell, fx.Limit, "1.1000", true}, {fx.Sell, fx.Limit, "1.1001", false},
		{fx.Sell, fx.Stop, "1.1000", true}, {fx.Sell, fx.Stop, "1.0999", false},
	} {
		o := book.Order{ID: 1, Side: c.side, Type: c.typ, Price: ptrDec(c.price)}
		err := stillTriggers(o, q)
		if (err == nil) != c.fires || (err != nil && !errors.Is(err, risk.ErrOrderModified)) {
			t.Errorf("%s %s at %s on %v: %v, want fires=%v", c.side, c.typ, c.price, q, err, c.fires)
		}
	}
	if err := stillTriggers(book.Order{Side: fx.Buy, Type: fx.Limit, Price: ptrDec("1")}, tick.Quote{}); err != nil {
		t.Errorf("a fill without its quote is not judged: %v", err)
	}
}

// A STOP_LIMIT whose stop triggered rests as a limit: a new stop is refused (ECONFLICT), its
// limit may move. The dealer's modify is audited; without an actor it changes nothing.
func TestModifyStopLimitAndDealer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9903
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	// Written as the stop-limit part writes a triggered one: PENDING, its stop reached.
	res, err := testDB.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `limitPrice`, `triggeredAt`, `timeInForce`, `status`) "+
		"VALUES (?, 'EURUSD', 'BUY', 'STOP_LIMIT', 0.1, 1.1050, 1.1000, NOW(3), 'GTC', 'PENDING')", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if _, err := svc.ModifyOrder(ctx, user, id, OrderChange{Price: ptrDec("1.106")}); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("new stop of a triggered STOP_LIMIT: %v", err)
	}
	if _, err := svc.ModifyOrder(ctx, user, id, OrderChange{LimitPrice: ptrDec("1.1003")}); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("a triggered buy's limit above the ask: %v", err)
	}
	if _, err := svc.ModifyOrder(ctx, user, id, OrderChange{LimitPrice: ptrDec("1.0990")}); err != nil {
		t.Fatal(err)
	}
	if row := storedOrder(t, id); !row.LimitPrice.Equal(dd("1.099")) || !row.Price.Equal(dd("1.105")) {
		t.Fatalf("triggered STOP_LIMIT after a limit modify: %+v", row)
	}

	if _, err := svc.Dealer().ModifyOrder(ctx, id, OrderChange{Volume: ptrDec("0.2")}); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("dealer modify with nobody named: %v", err)
	}
	if row := storedOrder(t, id); !row.Volume.Equal(dd("0.1")) || len(auditRows(t, "order", id)) != 0 {
		t.Fatalf("a refused dealer modify changed the order: %+v", row)
	}
	if _, err := svc.Dealer().ModifyOrder(asDealer("mod-d"), id, OrderChange{Volume: ptrDec("0.2")}); err != nil {
		t.Fatal(err)
	}
	rows := auditRows(t, "order", id)
	if len(rows) != 1 || rows[0].Action != "order.modify" || !storedOrder(t, id).Volume.Equal(dd("0.2")) {
		t.Fatalf("dealer modify audit %+v", rows)
	}
}

// A LIMIT the engine fired on a quote that reached it is not filled at a market that moved back
// past its price before the batch: the fill is refused for the state of the market, nothing is
// written, the order stays PENDING under watch, and fills at its price or better once the market
// reaches it again (soak modifiedOrders: a sell limit at 1.16176 fired, filled at 1.16169).
func TestLimitNeverFillsPastItsPrice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9903
	prices := &movingPrices{bid: 1.1, ask: 1.1002}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &termLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	rd := NewRiskDesk(svc, nil)
	a := fundedAccount(t, svc, user)
	for _, c := range []struct {
		name           string
		order          OrderRequest
		fired, movedTo [2]float64 // bid, ask
	}{
		{"buy limit 1.09", buyLimit(a.ID, "0.1", "1.09", "past-buy"), [2]float64{1.0897, 1.0899}, [2]float64{1.0899, 1.0901}},
		{"sell limit 1.11", func() OrderRequest { o := buyLimit(a.ID, "0.1", "1.11", "past-sell"); o.Side = fx.Sell; return o }(), [2]float64{1.1101, 1.1103}, [2]float64{1.1099, 1.1101}},
	} {
		prices.set(1.1, 1.1002)
		placed, err := svc.PlaceOrder(ctx, user, c.order)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		id := placed.Order.ID
		fired := tick.Quote{Bid: c.fired[0], Ask: c.fired[1]}
		prices.set(c.movedTo[0], c.movedTo[1])
		before := counts(t, a.ID)
		if err := rd.Fill(ctx, id, fired); !errors.Is(err, risk.ErrMarketUnavailable) {
			t.Fatalf("%s: fired at %v, filled with the market back at %v: %v", c.name, c.fired, c.movedTo, err)
		}
		if after := counts(t, a.ID); after != before || storedOrder(t, id).Status != fx.OrderPending {
			t.Fatalf("%s: a refused fill changed the database: %v → %v", c.name, before, after)
		}
		prices.set(c.fired[0], c.fired[1])
		if err := rd.Fill(ctx, id, fired); err != nil {
			t.Fatalf("%s: at its price again: %v", c.name, err)
		}
		row := storedOrder(t, id)
		if row.Status != fx.OrderFilled || row.FillPrice == nil || c.order.Side == fx.Buy && row.FillPrice.GreaterThan(*c.order.Price) ||
			c.order.Side == fx.Sell && row.FillPrice.LessThan(*c.order.Price) {
			t.Fatalf("%s: filled %+v", c.name, row)
		}
	}
}
