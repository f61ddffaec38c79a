package trading

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

func trailDec(s string) *decimal.Decimal { d := decimal.RequireFromString(s); return &d }

// trailOf reads position id's stored trailing stop ("" when none).
func trailOf(t *testing.T, id int64) (distance, level string) {
	t.Helper()
	p, err := book.LoadPosition(context.Background(), testDB, 0, id)
	if err != nil {
		t.Fatal(err)
	}
	if p.TrailDistance != nil {
		distance = p.TrailDistance.String()
	}
	if p.TrailLevel != nil {
		level = p.TrailLevel.String()
	}
	return distance, level
}

// TestTrailingStopSetChangedAndRemoved: a trail starts at bid − distance for a BUY (ask +
// distance for a SELL), in price units or pips; setting the distance it already has keeps the
// level; null removes it; bad distances are refused and change nothing; the engine is told.
func TestTrailingStopSetChangedAndRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 39301
	var told []risk.Change
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g,
		OnChange: func(_ context.Context, cs ...risk.Change) { told = append(told, cs...) }})
	a := fundedAccount(t, svc, user)
	buy, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "trail-buy"))
	if err != nil {
		t.Fatal(err)
	}
	id := buy.Position.ID
	p, err := svc.ModifyPositionTrail(ctx, user, id, StopChange{}, StopChange{}, TrailChange{Set: true, Distance: trailDec("0.002")})
	if err != nil {
		t.Fatal(err)
	}
	if d, l := trailOf(t, id); d != "0.002" || l != "1.098" {
		t.Fatalf("trail %s at %s, want 0.002 at 1.098 (bid 1.1 − 0.002)", d, l)
	}
	if p.TrailDistance == nil || p.TrailLevel == nil {
		t.Fatalf("answered position without its trail: %+v", p)
	}
	last := told[len(told)-1]
	if last.Kind != risk.TrailSet || last.Position.ID != id || last.Position.TrailDistance != 0.002 || last.Position.TrailLevel != 1.098 {
		t.Fatalf("engine told %+v, want TrailSet 0.002 at 1.098", last)
	}

	// The holder moved it; the same distance again (a retried modify) keeps the moved level.
	if err := svc.StoreTrailLevels(ctx, []risk.TrailLevel{{PositionID: id, Symbol: "EURUSD", Side: risk.Buy, Distance: 0.002, Level: 1.0991}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ModifyPositionTrail(ctx, user, id, StopChange{}, StopChange{}, TrailChange{Set: true, Distance: trailDec("0.00200")}); err != nil {
		t.Fatal(err)
	}
	if _, l := trailOf(t, id); l != "1.0991" {
		t.Fatalf("level %s after the same distance again, want 1.0991 kept", l)
	}

	// Refused, and nothing changes.
	for _, bad := range []TrailChange{
		{Set: true, Distance: trailDec("0.000001")}, // more decimals than EURUSD quotes
		{Set: true, Distance: trailDec("0.5")},      // more than a fifth of the price
		{Set: true, Distance: trailDec("0.001"), Pips: trailDec("10")},
	} {
		if _, err := svc.ModifyPositionTrail(ctx, user, id, StopChange{}, StopChange{}, bad); fx.ErrorCode(err) != fx.EINVALID {
			t.Fatalf("%+v: %v, want EINVALID", bad, err)
		}
	}
	if d, l := trailOf(t, id); d != "0.002" || l != "1.0991" {
		t.Fatalf("a refused change moved the trail to %s at %s", d, l)
	}

	// Pips: 15 pips of a 5-digit EURUSD is 0.0015.
	if _, err := svc.ModifyPositionTrail(ctx, user, id, StopChange{}, StopChange{}, TrailChange{Set: true, Pips: trailDec("15")}); err != nil {
		t.Fatal(err)
	}
	if d, l := trailOf(t, id); d != "0.0015" || l != "1.0985" {
		t.Fatalf("15 pips: %s at %s, want 0.0015 at 1.0985", d, l)
	}
	// Removed.
	if _, err := svc.ModifyPositionTrail(ctx, user, id, StopChange{}, StopChange{}, TrailChange{Set: true}); err != nil {
		t.Fatal(err)
	}
	if d, l := trailOf(t, id); d != "" || l != "" {
		t.Fatalf("removed trail still %s at %s", d, l)
	}
	if last := told[len(told)-1]; last.Kind != risk.TrailSet || last.Position.TrailDistance != 0 {
		t.Fatalf("engine told %+v, want the trail removed", last)
	}

	// A SELL trails above the ask.
	sell := marketBuy(a.ID, "0.1", "trail-sell")
	sell.Side = fx.Sell
	s, err := svc.PlaceOrder(ctx, user, sell)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ModifyPositionTrail(ctx, user, s.Position.ID, StopChange{}, StopChange{}, TrailChange{Set: true, Distance: trailDec("0.0030")}); err != nil {
		t.Fatal(err)
	}
	if d, l := trailOf(t, s.Position.ID); d != "0.003" || l != "1.1032" {
		t.Fatalf("SELL trail %s at %s, want 0.003 at 1.1032 (ask 1.1002 + 0.003)", d, l)
	}
}

// TestTrailLevelsOnlyTighten: a stored level moves only in the trader's favour (a stale or late
// write never loosens it), only while the position trails by the distance it was computed for,
// and not at all once the lease fence refuses.
func TestTrailLevelsOnlyTighten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 39302
	l := &switchLease{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: l, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	open := func(side fx.Side, nonce string) int64 {
		r := marketBuy(a.ID, "0.1", nonce)
		r.Side = side
		o, err := svc.PlaceOrder(ctx, user, r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ModifyPositionTrail(ctx, user, o.Position.ID, StopChange{}, StopChange{}, TrailChange{Set: true, Distance: trailDec("0.002")}); err != nil {
			t.Fatal(err)
		}
		return o.Position.ID
	}
	buy, sell := open(fx.Buy, "tighten-buy"), open(fx.Sell, "tighten-sell")
	store := func(id int64, side risk.Side, d, level float64) {
		t.Helper()
		if err := svc.StoreTrailLevels(ctx, []risk.TrailLevel{{PositionID: id, Symbol: "EURUSD", Side: side, Distance: d, Level: level}}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		what  string
		id    int64
		side  risk.Side
		d, lv float64
		want  string
	}{
		{"a BUY tightens up", buy, risk.Buy, 0.002, 1.0990, "1.099"},
		{"a stale BUY level is ignored", buy, risk.Buy, 0.002, 1.0985, "1.099"},
		{"another distance's level is ignored", buy, risk.Buy, 0.001, 1.0995, "1.099"},
		{"a SELL tightens down", sell, risk.Sell, 0.002, 1.1010, "1.101"},
		{"a stale SELL level is ignored", sell, risk.Sell, 0.002, 1.1020, "1.101"},
	}
	for _, c := range cases {
		store(c.id, c.side, c.d, c.lv)
		if _, got := trailOf(t, c.id); got != c.want {
			t.Fatalf("%s: level %s, want %s", c.what, got, c.want)
		}
	}
	l.fenced.Store(true)
	if err := svc.StoreTrailLevels(ctx, []risk.TrailLevel{{PositionID: buy, Symbol: "EURUSD", Side: risk.Buy, Distance: 0.002, Level: 1.0999}}); err == nil {
		t.Fatal("a fenced-out flush succeeded")
	}
	if _, got := trailOf(t, buy); got != "1.099" {
		t.Fatalf("a fenced-out flush wrote %s", got)
	}
}

// TestTrailingCloseRecordsItsReasonAndLevel: a trailing stop's close stores the level it fired
// at in the close's own transaction — the row and its position.closed event both carry it, not
// the last flushed level. The fired level used to be written by a second transaction after the
// close's commit, which a holder that lost the lease (or MySQL) in between never ran, and the
// event was written from the row before it: the soak's trailClosesAtTheirLevel met a SELL closed
// at 1.16024 whose stored level was still close + distance (docs/orders.md, «Trailing stops»).
func TestTrailingCloseRecordsItsReasonAndLevel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 39303
	lease := &switchLease{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: lease, Gate: newGate(t, &gatetest.Lease{}).g})
	rd := NewRiskDesk(svc, nil)
	a := fundedAccount(t, svc, user)
	o, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", "trail-close"))
	if err != nil {
		t.Fatal(err)
	}
	id := o.Position.ID
	// Set at the market: bid 1.1 − 0.002. The engine then trailed it up to 1.1003 and fired
	// there, and no flush stored the move: the row still holds 1.098.
	if _, err := svc.ModifyPositionTrail(ctx, user, id, StopChange{}, StopChange{}, TrailChange{Set: true, Distance: trailDec("0.002")}); err != nil {
		t.Fatal(err)
	}
	if _, l := trailOf(t, id); l != "1.098" {
		t.Fatalf("stored level %s before the close, want 1.098", l)
	}
	before := lease.calls.Load()
	if err := rd.CloseTrailing(ctx, id, a.ID, 1.1003, tick.Quote{Bid: 1.1, Ask: 1.1002}); err != nil {
		t.Fatal(err)
	}
	if n := lease.calls.Load() - before; n != 1 {
		t.Fatalf("the trailing close ran %d fenced transactions, want 1: the close and its fired level commit together", n)
	}
	p, err := book.LoadPosition(ctx, testDB, 0, id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != fx.PositionClosed || p.CloseReason == nil || *p.CloseReason != string(fx.CloseTrailingStop) {
		t.Fatalf("position %s, reason %v; want CLOSED by TRAILING_STOP", p.Status, p.CloseReason)
	}
	if d, l := trailOf(t, id); l != "1.1003" || d != "0.002" {
		t.Fatalf("stored trail %s at %s, want the fired level 1.1003 at distance 0.002", d, l)
	}
	var level string
	if err := testDB.QueryRowContext(ctx, "SELECT JSON_UNQUOTE(JSON_EXTRACT(`payload`, '$.trailingStop.level')) FROM `fx_event` "+
		"WHERE `accountId` = ? AND `type` = 'position.closed'", a.ID).Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "1.1003" {
		t.Fatalf("position.closed carries trailingStop.level %s, want the fired level 1.1003", level)
	}
}
