package fix_test

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/venue"
)

// The venue's own orders (venue-side closes) numbered as a liquidity provider numbers them —
// plain numbers, one of them equal to a desk order id — are the venue's: their executions are
// allocated to the desk's open trades in the symbol, oldest first, and never taken for a desk
// order (which would book nothing, or open a desk trade the desk never sent). The desk order
// whose id the venue reused keeps its own record.
func TestVenueOrdersNumberedLikeDeskOrdersAreTheVenues(t *testing.T) {
	r := newRigWith(t, 2*time.Second, func(c *fixvenue.Config) { c.OwnClOrdIDs = fixvenue.OwnNumeric })
	ctx := context.Background()
	k1, k2 := open(t, r, "EURJPY", "10000"), open(t, r, "EURJPY", "5000")
	four, one := dd("4000"), dd("1000")
	if o, err := r.venue.CloseVenueSideAs("EURJPY", &four, k2); err != nil || o.ClOrdID != k2 {
		t.Fatalf("venue-side close named %s: %+v %v", k2, o, err)
	}
	if o, err := r.venue.CloseVenueSide("EURJPY", &one); err != nil || !numeric(o.ClOrdID) {
		t.Fatalf("venue-side close with a numeric ClOrdID: %+v %v", o, err)
	}
	want := map[string]string{k1: "5000", k2: "5000"}
	waitTrades(t, r, "EURJPY", want)
	info, found, err := r.session.OrderByClientID(ctx, k2)
	if err != nil || !found || info.State != venue.OrderFilled || !info.Units.Equal(dd("5000")) || info.TradeOpenedID == "" {
		t.Fatalf("desk order %s after the venue reused its id: %+v found=%v err=%v", k2, info, found, err)
	}
}

// The venue's own orders without any ClOrdID: each execution is the venue's, booked once, and a
// second one is not taken for a resend of the first.
func TestVenueOrdersWithoutClOrdIDAreEachBooked(t *testing.T) {
	r := newRigWith(t, 2*time.Second, func(c *fixvenue.Config) { c.OwnClOrdIDs = fixvenue.OwnNone })
	k := open(t, r, "CADJPY", "10000")
	two := dd("2000")
	for range 2 {
		if o, err := r.venue.CloseVenueSide("CADJPY", &two); err != nil || o.ClOrdID != "" {
			t.Fatalf("venue-side close without ClOrdID: %+v %v", o, err)
		}
	}
	waitTrades(t, r, "CADJPY", map[string]string{k: "6000"})
}

// A venue that can fill only part of an order (12,345 of 20,000 units) never fills a part of
// the desk's: the desk's orders are fill-or-kill, so the order is cancelled whole and desk and
// venue hold the same units (a part would be units the desk's lots cannot book exactly).
func TestAPartOfADeskOrderIsNeverFilled(t *testing.T) {
	r := newRig(t, 2*time.Second)
	part := dd("12345")
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultPartial, Units: &part}); err != nil {
		t.Fatal(err)
	}
	out, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "AUDJPY", Units: dd("20000")})
	if err != nil || out.Fill != nil || out.Cancelled == nil {
		t.Fatalf("want the order cancelled whole, got fill %+v cancel %+v err %v", out.Fill, out.Cancelled, err)
	}
	if u, _ := r.venue.NetPosition("AUDJPY"); !u.IsZero() {
		t.Fatalf("the venue holds %s AUDJPY after a cancelled order", u)
	}
}

// open places a market order of units in symbol and answers its id (the trade's key).
func open(t *testing.T, r *rig, symbol, units string) string {
	t.Helper()
	id := orderID()
	out, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: id, Symbol: symbol, Units: dd(units)})
	if err != nil || out.Fill == nil {
		t.Fatalf("place %s %s: %+v %v", units, symbol, out, err)
	}
	return id
}

// waitTrades waits until the open trades in symbol are exactly want (key → units): desk trades
// only, and no untagged remainder of the venue's net.
func waitTrades(t *testing.T, r *rig, symbol string, want map[string]string) {
	t.Helper()
	var last []venue.Trade
	matches := func() bool {
		ts, err := r.session.OpenTrades(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		last = nil
		ok := true
		for _, tr := range ts {
			if tr.Symbol != symbol {
				continue
			}
			last = append(last, tr)
			w, mine := want[tr.ClientID]
			if tr.Tag != venue.Tag || !mine || !tr.CurrentUnits.Equal(decimal.RequireFromString(w)) {
				ok = false
			}
		}
		return ok && len(last) == len(want)
	}
	// The venue's unsolicited reports have no signal here: the journal is read until it holds them.
	for deadline := time.Now().Add(5 * time.Second); !matches(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("open %s trades %+v; want exactly %v and no untagged remainder", symbol, last, want)
		}
	}
}

func numeric(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
