package trading

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/venue"
)

func bookDesk(t *testing.T) *Service {
	return newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
}

// boundOf reads order id's stored priceBound, timeInForce and filledVolume.
func boundOf(t *testing.T, id int64) (bound *decimal.Decimal, tif string, filled *decimal.Decimal) {
	t.Helper()
	if err := testDB.QueryRow("SELECT `priceBound`, `timeInForce`, `filledVolume` FROM `fx_order` WHERE `id` = ?", id).Scan(&bound, &tif, &filled); err != nil {
		t.Fatal(err)
	}
	return bound, tif, filled
}

// On the B-book a MARKET order's bound is judged on the desk's fill price (the ask for a buy,
// the bid for a sell, EURUSD 1.10000 / 1.10020): at the bound or better it fills and the row
// keeps the bound; past it the order is refused 409 naming the price and the bound, and
// nothing is written.
func TestPriceBoundOnTheDesk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := bookDesk(t)
	a := fundedAccount(t, svc, 9391)
	for _, c := range []struct {
		side  fx.Side
		bound string
		fills bool
	}{
		{fx.Buy, "1.10020", true},
		{fx.Buy, "1.10500", true},
		{fx.Buy, "1.10019", false},
		{fx.Sell, "1.10000", true},
		{fx.Sell, "1.09000", true},
		{fx.Sell, "1.10001", false},
	} {
		name := fmt.Sprintf("%s bounded at %s", c.side, c.bound)
		before := counts(t, a.ID)
		bound := dd(c.bound)
		res, err := svc.PlaceOrder(ctx, 9391, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: c.side, Type: fx.Market, Volume: dd("0.01"), PriceBound: &bound})
		if !c.fills {
			if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), c.bound) {
				t.Fatalf("%s: %v, want ECONFLICT naming the bound", name, err)
			}
			if after := counts(t, a.ID); after != before {
				t.Fatalf("%s: a refused order wrote %v → %v", name, before, after)
			}
			continue
		}
		if err != nil || res.Order.Status != fx.OrderFilled || res.Position == nil {
			t.Fatalf("%s: %+v %v, want filled", name, res, err)
		}
		if b, _, _ := boundOf(t, res.Order.ID); b == nil || !b.Equal(bound) || res.Order.PriceBound == nil {
			t.Fatalf("%s: stored bound %v, answered %v", name, b, res.Order.PriceBound)
		}
	}
	ledgerOf(t, a.ID) // Σ deals = balance
}

// On the B-book the desk fills whole at its quote: IOC and FOK both fill the whole order (there
// is no part to fill) and are stored as asked; no filledVolume.
func TestIOCAndFOKOnTheDeskFillWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := bookDesk(t)
	a := fundedAccount(t, svc, 9392)
	for _, tif := range []fx.TimeInForce{fx.IOC, fx.FOK, ""} {
		res, err := svc.PlaceOrder(ctx, 9392, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.03"), TimeInForce: tif})
		if err != nil || res.Position == nil || !res.Position.Volume.Equal(dd("0.03")) {
			t.Fatalf("%q: %+v %v, want 0.03 lots filled", tif, res, err)
		}
		want := string(tif)
		if tif == "" {
			want = string(fx.GTC) // today's meaning, stored as today
		}
		if _, got, filled := boundOf(t, res.Order.ID); got != want || filled != nil {
			t.Fatalf("%q: stored timeInForce %s, filledVolume %v", tif, got, filled)
		}
	}
}

// What only a MARKET order takes is refused on a resting one, and a MARKET order's own fields
// are checked, each with a clear 400 and nothing written.
func TestBoundAndPolicyShapeRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := bookDesk(t)
	a := fundedAccount(t, svc, 9393)
	before := counts(t, a.ID)
	price, bound, fine := dd("1.09000"), dd("1.09500"), dd("1.123456")
	for name, r := range map[string]OrderRequest{
		"a bound on a LIMIT":            {Type: fx.Limit, Price: &price, PriceBound: &bound},
		"IOC on a LIMIT":                {Type: fx.Limit, Price: &price, TimeInForce: fx.IOC},
		"FOK on a STOP":                 {Type: fx.Stop, Price: &bound, TimeInForce: fx.FOK, Side: fx.Sell},
		"GTD on a MARKET":               {Type: fx.Market, TimeInForce: fx.GTD},
		"a bound finer than the quote":  {Type: fx.Market, PriceBound: &fine},
		"DAY on a MARKET with no bound": {Type: fx.Market, TimeInForce: fx.DAY},
	} {
		r.AccountID, r.Symbol, r.Volume = a.ID, "EURUSD", dd("0.01")
		if r.Side == "" {
			r.Side = fx.Buy
		}
		if _, err := svc.PlaceOrder(ctx, 9393, r); fx.ErrorCode(err) != fx.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("refusals wrote %v → %v", before, after)
	}
}

// A requestNonce binds the bound too: the same nonce with another bound is a different order.
func TestPriceBoundIsPartOfTheNonce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := bookDesk(t)
	a := fundedAccount(t, svc, 9394)
	b1, b2 := dd("1.10100"), dd("1.10200")
	r := OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.01"), PriceBound: &b1, RequestNonce: "bound-1"}
	first, err := svc.PlaceOrder(ctx, 9394, r)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.PlaceOrder(ctx, 9394, r)
	if err != nil || !again.Replayed || again.Order.ID != first.Order.ID {
		t.Fatalf("the same request again: %+v %v, want the original replayed", again, err)
	}
	r.PriceBound = &b2
	if _, err := svc.PlaceOrder(ctx, 9394, r); fx.ErrorCode(err) != fx.EKEYREUSED {
		t.Fatalf("the nonce with another bound: %v, want EKEYREUSED", err)
	}
}

// The venue is sent the trader's bound less the desk's markup (a buy; plus it for a sell), so
// that the venue's price plus the markup the desk books stays within the trader's bound; FOK
// unless the order is IOC.
func TestVenueMarketOrderCarriesTheBoundLessTheMarkup(t *testing.T) {
	t.Parallel()
	in := catalog.Instrument{Instrument: fx.Instrument{Symbol: "AUDUSD", ContractSize: dd("100000"), Point: dd("0.00001")}, Group: catalog.SymbolGroup{MarkupPoints: dd("20")}}
	bound := dd("0.65100")
	for _, c := range []struct {
		side      fx.Side
		tif       fx.TimeInForce
		wantBound string
		wantTIF   string
	}{
		{fx.Buy, fx.GTC, "0.6508", venue.FOK},
		{fx.Sell, fx.IOC, "0.6512", venue.IOC},
	} {
		m := venueMarketOrder(in, bookOrder(c.side, c.tif, &bound))
		if m.PriceBound == nil || !m.PriceBound.Equal(dd(c.wantBound)) || m.TimeInForce != c.wantTIF {
			t.Errorf("%s %s: sent bound %v, %s; want %s, %s", c.side, c.tif, m.PriceBound, m.TimeInForce, c.wantBound, c.wantTIF)
		}
	}
	if m := venueMarketOrder(in, bookOrder(fx.Buy, fx.FOK, nil)); m.PriceBound != nil || m.TimeInForce != venue.FOK {
		t.Errorf("an unbounded FOK: %+v", m)
	}
}

// At the venue the venue decides: a bound its price is beyond is cancelled there
// (BOUNDS_VIOLATION), the order REJECTED and nothing booked; within it the order fills at the
// venue's price.
func TestExternalPriceBoundIsTheVenues(t *testing.T) {
	b := newABook(t)
	const user = 9395
	a := b.externalAccount(user)
	b.prices.setSlip("EURUSD", "0.00005") // the venue's ask is 1.10025, the desk's 1.1002
	ctx := context.Background()
	// Within the desk's ask, beyond the venue's: the venue's price decides.
	tight := dd("1.10022")
	_, err := b.svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.1"), PriceBound: &tight})
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), "priceBound") {
		t.Fatalf("a bound the venue's price is beyond: %v, want ECONFLICT naming the priceBound", err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if st, _, reason := orderRow(t, id); st != fx.OrderRejected || reason == nil || *reason != venue.ReasonBoundsViolation {
		t.Fatalf("order %d: %s %v, want REJECTED %s", id, st, reason, venue.ReasonBoundsViolation)
	}
	if stored, _, _ := boundOf(t, id); stored == nil || !stored.Equal(tight) {
		t.Fatalf("the rejected order's stored bound: %v", stored)
	}
	wide := dd("1.10030")
	res, err := b.svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.1"), PriceBound: &wide})
	if err != nil || res.Position == nil || !res.Position.OpenPrice.Equal(dd("1.10025")) {
		t.Fatalf("a bound the venue's price is within: %+v %v, want filled at 1.10025", res, err)
	}
	if deals, _ := ledgerOf(t, a.ID); len(deals) != 2 {
		t.Fatalf("deals %v: want the deposit and one commission", deals)
	}
}

// An IOC order the venue fills 60 % of books the part: a position of 0.09 lots, the order
// FILLED with volume 0.15 (as asked) and filledVolume 0.09, its commission on the 0.09 lots;
// the venue's trade holds the same 9,000 units.
func TestExternalIOCBooksThePart(t *testing.T) {
	b := newABook(t)
	const user = 9396
	a := b.externalAccount(user)
	if err := b.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultPartial, Percent: 60}); err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.PlaceOrder(context.Background(), user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Sell, Type: fx.Market, Volume: dd("0.15"), TimeInForce: fx.IOC})
	if err != nil || res.Position == nil {
		t.Fatalf("IOC under a partial fill: %+v %v", res, err)
	}
	if !res.Position.Volume.Equal(dd("0.09")) || !res.Order.Volume.Equal(dd("0.15")) || res.Order.FilledVolume == nil || !res.Order.FilledVolume.Equal(dd("0.09")) {
		t.Fatalf("position %s lots, order volume %s filled %v; want 0.09 of 0.15", res.Position.Volume, res.Order.Volume, res.Order.FilledVolume)
	}
	if _, tif, filled := boundOf(t, res.Order.ID); tif != string(fx.IOC) || filled == nil || !filled.Equal(dd("0.09")) {
		t.Fatalf("stored timeInForce %s filledVolume %v", tif, filled)
	}
	if tr := b.venueTrade(res.Order.ID); !tr.CurrentUnits.Equal(dd("-9000")) {
		t.Fatalf("venue trade %+v, want -9000 units", tr)
	}
	// 7 per lot × 0.09 = 0.63.
	if deals, bal := ledgerOf(t, a.ID); fmt.Sprint(deals) != "[1000 -0.63]" || !bal.Equal(dd("999.37")) {
		t.Fatalf("deals %v, balance %s; want the commission of the 0.09 lots filled", deals, bal)
	}
}

// A FOK order (and an order with no timeInForce, FOK at the venue as before) never books a
// part: the venue that could fill only part of it cancels it whole and the order is REJECTED.
func TestExternalFOKNeverBooksAPart(t *testing.T) {
	b := newABook(t)
	const user = 9397
	a := b.externalAccount(user)
	for _, tif := range []fx.TimeInForce{fx.FOK, ""} {
		if err := b.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultPartial, Percent: 60}); err != nil {
			t.Fatal(err)
		}
		_, err := b.svc.PlaceOrder(context.Background(), user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.15"), TimeInForce: tif})
		if fx.ErrorCode(err) != fx.ECONFLICT {
			t.Fatalf("%q under a partial fill: %v, want ECONFLICT", tif, err)
		}
	}
	var positions, rejected int
	testDB.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ?", a.ID).Scan(&positions)
	testDB.QueryRow("SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ? AND `status` = 'REJECTED' AND `venueReason` = ?", a.ID, venue.ReasonInsufficientLiquidity).Scan(&rejected)
	if deals, _ := ledgerOf(t, a.ID); positions != 0 || rejected != 2 || len(deals) != 1 {
		t.Fatalf("%d positions, %d orders rejected for liquidity, deals %v; want none, 2, the deposit", positions, rejected, deals)
	}
}

// bookOrder is an EXTERNAL AUDUSD order of 0.1 lots as its batch wrote it.
func bookOrder(side fx.Side, tif fx.TimeInForce, bound *decimal.Decimal) book.Order {
	return book.Order{ID: 1, Symbol: "AUDUSD", Side: side, Type: fx.Market, Volume: dd("0.1"), TimeInForce: tif, PriceBound: bound}
}
