package fix_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/venue"
)

// closeOrders counts the venue's orders that close trade key (<key>.c…).
func closeOrders(v *fixvenue.Server, key string) int {
	n := 0
	for _, o := range v.State().Orders {
		if strings.HasPrefix(o.ClOrdID, key+".c") {
			n++
		}
	}
	return n
}

// Two closes of one trade decided at once send one order: a netting venue would execute both and
// flip the trade. The other is refused (409) with nothing sent; after a close the venue rejected,
// the next one goes.
func TestRacingClosesOfOneTradeSendOneOrder(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	id := orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "EURUSD", Units: dd("10000")})
	if err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	trade := out.Fill.TradeOpened

	// A close the venue rejects, then one that fills: a refused close does not hold the next back.
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultReject, Reason: fixvenue.RejectExceedsLimit}); err != nil {
		t.Fatal(err)
	}
	part := dd("4000")
	if out, err := r.session.CloseTrade(ctx, trade, &part); err != nil || out.Cancelled == nil {
		t.Fatalf("a rejected close: %+v %v", out, err)
	}

	// The first close's report is held, so the second is decided while it is in flight.
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]error, 2)
	fills := make([]bool, 2)
	returned := make(chan int, 2)
	for i := range 2 {
		wg.Go(func() {
			out, err := r.session.CloseTrade(ctx, trade, nil)
			results[i], fills[i] = err, out.Fill != nil
			returned <- i
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(r.venue.State().Held) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no close reached the venue")
		}
		time.Sleep(10 * time.Millisecond) // polls the venue's state, a deadline away
	}
	// The refused one returns without the venue; then the held report goes out.
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("neither close returned while the first was held")
	}
	r.venue.Release("")
	wg.Wait()
	refused := 0
	for i, err := range results {
		var verr *venue.Error
		switch {
		case fills[i] && err == nil:
		case errors.As(err, &verr) && verr.Status == 409:
			refused++
		default:
			t.Fatalf("close %d: fill=%v err=%v", i, fills[i], err)
		}
	}
	if refused != 1 || !(fills[0] || fills[1]) {
		t.Fatalf("fills %v, errors %v: want one fill and one 409", fills, results)
	}
	if n := closeOrders(r.venue, id); n != 2 {
		t.Fatalf("the venue holds %d closes of trade %s, want 2 (the rejected one and one full close)", n, id)
	}
	if u, _ := r.venue.NetPosition("EURUSD"); !u.IsZero() {
		t.Fatalf("venue net %s, want 0: the trade closed once", u)
	}
}
