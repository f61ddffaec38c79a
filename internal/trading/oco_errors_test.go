package trading

import (
	"context"
	"testing"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// A pair whose leg cannot be priced now is answered with the documented 503 text a client
// retries on (fx.MsgPricingUnavailable), as a single order is — not with the leg's name in front
// of it (the soak found "legs[0]: Pricing is temporarily unavailable…", an undocumented 503).
// A leg's own mistake still names the leg.
func TestOCOUnavailableKeepsTheDocumentedText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9932
	prices := &movingPrices{bid: 1.1000, ask: 1.1002} // quotes EURUSD only
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	r := breakout(a.ID, "")
	r.Legs[0].Symbol = "GBPUSD"
	_, err := svc.PlaceOCO(ctx, user, r)
	if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
		t.Fatalf("an unpriceable leg answered %v (%s), want %s %q", err, fx.ErrorCode(err), fx.EUNAVAILABLE, fx.MsgPricingUnavailable)
	}
	r = breakout(a.ID, "")
	r.Legs[1].Price = ptrDec("1.20000") // a sell stop above the market
	if _, err := svc.PlaceOCO(ctx, user, r); fx.ErrorCode(err) != fx.EINVALID || fx.ErrorMessage(err)[:9] != "legs[1]: " {
		t.Fatalf("a wrong leg answered %v, want EINVALID naming legs[1]", err)
	}
}
