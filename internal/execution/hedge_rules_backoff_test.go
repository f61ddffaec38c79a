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
)

// rejectedShares counts the REJECTED hedge orders of client position id: one per send the venue
// refused.
func rejectedShares(t *testing.T, id int64) int {
	t.Helper()
	var n int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_hedge_order` WHERE `clientPositionId` = ? AND `status` = 'REJECTED'", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A venue that refuses a HEDGE share gets it again only past the share's back-off, doubled per
// refusal, not on every sweep: a sweep runs on every fill the traders make, and without the
// back-off a refusing venue got one order per due position per fill.
func TestHedgeRulesBackOffAShareTheVenueRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 7303
	clock := time.Now()
	_, rules, a := e.hedgeRulesAccount(t, user, "hedge-backoff", 40, func() time.Time { return clock })
	res, err := e.desk.PlaceOrder(ctx, user, trading.OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("1")})
	if err != nil || res.Position == nil {
		t.Fatalf("buy: %+v %v", res, err)
	}
	id := res.Position.ID
	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultCancel, Count: 2, Reason: "INSUFFICIENT_MARGIN"}); err != nil {
		t.Fatal(err)
	}
	sweep := func(wantOpened, wantRejected int, when string) {
		t.Helper()
		opened, _, _, err := rules.Sweep(ctx)
		if err != nil || opened != wantOpened || rejectedShares(t, id) != wantRejected {
			t.Fatalf("%s: opened %d (%v), %d REJECTED; want opened %d, %d REJECTED", when, opened, err, rejectedShares(t, id), wantOpened, wantRejected)
		}
	}
	sweep(0, 1, "first sweep, the venue refusing")
	// Kicks by the traders' fills, within the back-off: nothing is sent.
	for range 5 {
		sweep(0, 1, "a sweep within the back-off")
	}
	clock = clock.Add(hedge.FirstBackoff)
	sweep(0, 2, "the first sweep past the back-off, the venue refusing again")
	clock = clock.Add(hedge.FirstBackoff) // the back-off doubled: still waiting
	sweep(0, 2, "a sweep within the doubled back-off")
	clock = clock.Add(hedge.FirstBackoff)
	sweep(1, 2, "the first sweep past the doubled back-off, the venue filling")
	// The venue is shared by the package's tests: its hedge closes with the client's position.
	if _, err := e.desk.ClosePosition(ctx, user, id, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if _, _, closed, err := rules.Sweep(ctx); err != nil || closed != 1 {
		t.Fatalf("sweep after the client's close: closed %d, %v", closed, err)
	}
}

// The sweep lists a client position due its hedge, and the client closes it before the hedge's
// identity row is written: the hedge book refuses the share (nothing written, nothing sent),
// because the statement that writes the row reads the position's committed state.
func TestHedgeRulesNeverOpenAShareOfAClosedClientPosition(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 7304
	b, _, a := e.hedgeRulesAccount(t, user, "hedge-closed", 50, nil)
	res, err := e.desk.PlaceOrder(ctx, user, trading.OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Sell, Type: fx.Market, Volume: decimal.RequireFromString("1")})
	if err != nil || res.Position == nil {
		t.Fatalf("sell: %+v %v", res, err)
	}
	// What the sweep read before the close: the position, due its 50,000-unit share.
	units := decimal.NewFromInt(-50000)
	if _, err := e.desk.ClosePosition(ctx, user, res.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	orders := e.sim.State().Requests["POST /orders"]
	_, err = b.Open(ctx, "EURUSD", units, hedge.ForPosition(res.Position.ID))
	if !errors.Is(err, hedge.ErrClientPositionClosed) {
		t.Fatalf("open of a closed client position's share: %v; want ErrClientPositionClosed", err)
	}
	var rows int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_hedge_order` WHERE `clientPositionId` = ?", res.Position.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if sent := e.sim.State().Requests["POST /orders"] - orders; rows != 0 || sent != 0 {
		t.Fatalf("%d hedge order rows written and %d orders sent for a closed client position; want none", rows, sent)
	}
}
