package trading

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
)

// TestRiskViewLoadTakesWhatTheBookHolds: the risk view's own reads (docs/boot.md, «The risk
// view's read») — the open positions' eleven columns parsed straight to floats, the resting
// orders without their position, the accounts with their versions in one pass — give the engine
// exactly what the desk's full reads give it: each position and order as riskPosition and
// riskOrder make them from book.LoadPosition and book.LoadOrder, each account's balance and the
// balanceVersion the balance refresh starts from.
func TestRiskViewLoadTakesWhatTheBookHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 39411
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	buy := marketBuy(a.ID, "0.1", "view-buy")
	buy.SL, buy.TP = ptrDec("1.08765"), ptrDec("1.12345")
	sell := OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Sell, Type: fx.Market, Volume: decimal.RequireFromString("0.03"), TP: ptrDec("1.05001")}
	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	limit := OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Limit, Volume: decimal.RequireFromString("0.02"), Price: ptrDec("1.04321"),
		TimeInForce: fx.GTD, ExpiresAt: &expires}
	var positions []int64
	for _, r := range []OrderRequest{buy, sell} {
		res, err := svc.PlaceOrder(ctx, user, r)
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, res.Position.ID)
	}
	res, err := svc.PlaceOrder(ctx, user, limit)
	if err != nil {
		t.Fatal(err)
	}
	resting := res.Order.ID
	if _, err := svc.ModifyPositionTrail(ctx, user, positions[0], StopChange{}, StopChange{}, TrailChange{Set: true, Distance: trailDec("0.00215")}); err != nil {
		t.Fatal(err)
	}
	if err := svc.StoreTrailLevels(ctx, []risk.TrailLevel{{PositionID: positions[0], Symbol: "EURUSD", Side: risk.Buy, Distance: 0.00215, Level: 1.09787}}); err != nil {
		t.Fatal(err)
	}

	rd := NewRiskDesk(svc, nil)
	s, err := rd.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[int64]risk.Position{}
	for _, p := range s.Positions {
		loaded[p.ID] = p
	}
	for _, id := range positions {
		p, err := book.LoadPosition(ctx, testDB, user, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := riskPosition(p); loaded[id] != want {
			t.Errorf("position %d loaded as %+v; want %+v", id, loaded[id], want)
		}
	}
	if got := loaded[positions[0]]; got.SL == 0 || got.TP == 0 || got.TrailDistance == 0 || got.TrailLevel == 0 || loaded[positions[1]].SL != 0 {
		t.Errorf("the buy's stops and trail, the sell's missing SL: %+v, %+v", got, loaded[positions[1]])
	}
	o, err := book.LoadOrder(ctx, testDB, user, resting)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ro := range s.Orders {
		if ro.ID == resting {
			found = true
			if want := riskOrder(o); ro != want || ro.ExpiresAt.IsZero() || ro.Price != 1.04321 {
				t.Errorf("order %d loaded as %+v; want %+v", resting, ro, want)
			}
		}
	}
	if !found {
		t.Errorf("resting order %d is not in the view", resting)
	}
	var balance decimal.Decimal
	var version int64
	if err := testDB.QueryRow("SELECT `balance`, `balanceVersion` FROM `fx_account` WHERE `id` = ?", a.ID).Scan(&balance, &version); err != nil {
		t.Fatal(err)
	}
	for _, ra := range s.Accounts {
		if ra.ID == a.ID && (ra.Balance != balance.InexactFloat64() || ra.Currency != "USD" || ra.Leverage != 100 || ra.MarginCalled) {
			t.Errorf("account loaded as %+v; want balance %s", ra, balance)
		}
	}
	if rd.versions[a.ID] != version {
		t.Errorf("balance refresh starts at version %d; the account is at %d", rd.versions[a.ID], version)
	}
}
