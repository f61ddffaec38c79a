package fix_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/venue"
)

// The venue's own order (a liquidation, its dealer's close) and the desk's close of the same
// trade cross: both execute at the netting venue, which ends short what the trade held. The
// journal allocates the venue's order to the trade first (oldest first, nothing else open), so
// the desk's close finds the trade at zero. It must not take the trade past zero — a short
// "trade" of the desk's that the next venue-side buy would be allocated against, and a desk
// position the reconciler cannot square with it (soak FIX lane, seed 14314818324366:
// venueNetMatches, the reconciler never settling) — but book what it executed past the trade
// as a trade of its own, keyed by the close, which a close of it takes back to flat.
func TestACloseCrossingTheVenuesOwnNeverTakesTheTradePastZero(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	key := open(t, r, "USDSGD", "10000")
	trade := r.session.LiveTrades()[key].ID
	// The venue closes the trade's units itself; its report is on its way (held).
	ten := dd("10000")
	own, err := r.venue.CloseVenueSideHeld("USDSGD", &ten)
	if err != nil {
		t.Fatal(err)
	}
	// The desk, not knowing, closes the trade whole; the venue executes it too (its report held).
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out venue.Outcome
		err error
	}
	closed := make(chan result, 1)
	go func() {
		out, err := r.session.CloseTrade(ctx, strconv.FormatInt(trade, 10), nil)
		closed <- result{out, err}
	}()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the venue executes the desk's close", func() bool {
		for _, o := range r.venue.State().Orders {
			if o.ClOrdID == key+".c1" && o.Status == "2" {
				return true
			}
		}
		return false
	})
	// The reports come in the venue's order: its own close first.
	if n := r.venue.Release(fixvenue.HeldKey(own)); n != 1 {
		t.Fatalf("released %d held reports of the venue's own close, want 1", n)
	}
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the venue's own close is journaled against the trade", func() bool {
		return r.session.LiveTrades()[key].Units.IsZero()
	})
	if n := r.venue.Release(key + ".c1"); n != 1 {
		t.Fatalf("released %d held reports, want 1", n)
	}
	got := <-closed
	if got.err != nil || got.out.Fill == nil || !got.out.Fill.Units.Abs().Equal(ten) {
		t.Fatalf("the desk's close: %+v %v; want its fill of 10,000 units", got.out, got.err)
	}
	if net, _ := r.venue.NetPosition("USDSGD"); !net.Equal(dd("-10000")) {
		t.Fatalf("the venue's net is %s, want -10000 (both closes executed)", net)
	}
	// The trade is flat; what the close executed past it is a tagged trade of its own.
	if tr, found, err := r.session.TradeByID(ctx, strconv.FormatInt(trade, 10)); err != nil || !found || tr.State != venue.TradeClosed || !tr.CurrentUnits.IsZero() {
		t.Fatalf("trade %d after the crossing: %+v found=%v %v; want closed at zero", trade, tr, found, err)
	}
	var past venue.Trade
	for _, tr := range openIn(t, r, "USDSGD") {
		if tr.ClientID != key+".c1" || tr.Tag != venue.Tag || !tr.CurrentUnits.Equal(dd("-10000")) {
			t.Fatalf("open in USDSGD: %+v; want only the close's own trade %s.c1 of -10000 units, tagged", tr, key)
		}
		past = tr
	}
	if past.ID == "" {
		t.Fatalf("no trade holds what the close executed past trade %d", trade)
	}
	if again, found, err := r.session.TradeByID(ctx, past.ID); err != nil || !found || again.ClientID != past.ClientID {
		t.Fatalf("trade %s by its id: %+v found=%v %v", past.ID, again, found, err)
	}
	// The reconciler's CloseOrphan: a close of it takes the venue back to flat.
	if out, err := r.session.CloseTrade(ctx, past.ID, nil); err != nil || out.Fill == nil {
		t.Fatalf("close of the orphan %s: %+v %v", past.ID, out, err)
	}
	if net, _ := r.venue.NetPosition("USDSGD"); !net.IsZero() {
		t.Fatalf("the venue's net is %s after the orphan's close, want 0", net)
	}
	if ts := openIn(t, r, "USDSGD"); len(ts) != 0 {
		t.Fatalf("open in USDSGD after the orphan's close: %+v", ts)
	}
}

// openIn is the session's open trades in symbol (untagged remainders included).
func openIn(t *testing.T, r *rig, symbol string) []venue.Trade {
	t.Helper()
	ts, err := r.session.OpenTrades(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []venue.Trade
	for _, tr := range ts {
		if tr.Symbol == symbol {
			out = append(out, tr)
		}
	}
	return out
}
