package fix_test

import (
	"context"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/venue"
)

// newBoundRig is a rig whose venue also quotes this file's own symbols (the journal is the
// whole database's, so each test keeps to its own): EURNOK 11.5000 / 11.5010, EURSEK 11.0000 /
// 11.0010, GBPNZD 2.1000 / 2.1003.
func newBoundRig(t *testing.T) *rig {
	return newRigWith(t, 2*time.Second, func(c *fixvenue.Config) {
		p := c.Prices.(prices)
		p["EURNOK"], p["EURSEK"], p["GBPNZD"] = [2]string{"11.5000", "11.5010"}, [2]string{"11.0000", "11.0010"}, [2]string{"2.1000", "2.1003"}
	})
}

// A price bound goes to the venue as an immediate LIMIT at the bound: within it the order fills
// at the venue's price; beyond it the venue cancels it whole and nothing opens there.
func TestPriceBoundIsALimitAtTheVenue(t *testing.T) {
	r := newBoundRig(t)
	ctx := context.Background()
	within, beyond := dd("11.5020"), dd("11.5005")
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "EURNOK", Units: dd("10000"), PriceBound: &within})
	if err != nil || out.Fill == nil || !out.Fill.Price.Equal(dd("11.5010")) {
		t.Fatalf("a buy bounded above the ask: %+v %v; want filled at the ask 11.5010", out, err)
	}
	out, err = r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "EURNOK", Units: dd("10000"), PriceBound: &beyond})
	if err != nil || out.Fill != nil || out.Cancelled == nil {
		t.Fatalf("a buy bounded below the ask: %+v %v; want cancelled", out, err)
	}
	sell := dd("11.5001")
	out, err = r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "EURNOK", Units: dd("-5000"), PriceBound: &sell, TimeInForce: venue.IOC})
	if err != nil || out.Fill != nil || out.Cancelled == nil {
		t.Fatalf("an IOC sell bounded above the bid: %+v %v; want cancelled", out, err)
	}
	if u, _ := r.venue.NetPosition("EURNOK"); !u.Equal(dd("10000")) {
		t.Fatalf("the venue holds %s EURNOK; want the one bounded fill's 10000", u)
	}
	for _, o := range r.venue.State().Orders {
		if o.Symbol == "EURNOK" && o.OrdType != "2" {
			t.Fatalf("venue order %+v was not sent as a LIMIT (OrdType=2)", o)
		}
	}
}

// An IOC order the venue can fill only part of books the part: the fill is the 6,000 units the
// venue executed, and its trade holds them; the same partial fault cancels a FOK whole.
func TestIOCPartialFillIsThePart(t *testing.T) {
	r := newBoundRig(t)
	ctx := context.Background()
	part := dd("6000")
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultPartial, Units: &part, Count: 2}); err != nil {
		t.Fatal(err)
	}
	id := orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "EURSEK", Units: dd("-10000"), TimeInForce: venue.IOC})
	if err != nil || out.Fill == nil || !out.Fill.Units.Equal(dd("-6000")) || out.Fill.TradeOpened == "" {
		t.Fatalf("IOC under a partial fault: %+v %v; want a fill of -6000 units opening a trade", out, err)
	}
	waitTrades(t, r, "EURSEK", map[string]string{id: "-6000"})
	out, err = r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "GBPNZD", Units: dd("10000")})
	if err != nil || out.Fill != nil || out.Cancelled == nil {
		t.Fatalf("FOK under a partial fault: %+v %v; want cancelled whole", out, err)
	}
	if u, _ := r.venue.NetPosition("GBPNZD"); !u.IsZero() {
		t.Fatalf("the venue holds %s GBPNZD after a killed FOK", u)
	}
}
