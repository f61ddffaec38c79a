package fix_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/execution"
	"fxdesk/internal/fx"
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
// The venue's own close may take all of the trade or part of it: the desk's close then books
// what the trade still held to it, and only the rest past it.
func TestACloseCrossingTheVenuesOwnNeverTakesTheTradePastZero(t *testing.T) {
	for _, c := range []struct{ name, symbol, own string }{
		{"the venue closed all of it", "USDSGD", "10000"},
		{"the venue closed part of it", "USDHKD", "4000"},
	} {
		t.Run(c.name, func(t *testing.T) { crossClose(t, c.symbol, dd(c.own)) })
	}
}

// crossClose opens a trade of 10,000 units of symbol, has the venue close own units of it with
// its report held, the desk close it whole (its report held too), lets the reports in in the
// venue's order and checks the journal's trades: the trade closed at zero, what the desk's close
// executed past the units the venue left a trade of its own, which a close of it takes back.
func crossClose(t *testing.T, symbol string, own decimal.Decimal) {
	// The desk's close waits for its held report while the test lets the venue's in first: give it
	// the time a loaded machine needs (nothing here is timed).
	r := newRig(t, 30*time.Second)
	ctx := context.Background()
	key := open(t, r, symbol, "10000")
	trade := r.session.LiveTrades()[key].ID
	ten := dd("10000")
	// The venue closes own units of the trade itself while the desk, not knowing, closes it whole.
	got := closeAcross(t, r, symbol, key, strconv.FormatInt(trade, 10), own, nil)
	if got.Fill == nil || !got.Fill.Units.Abs().Equal(ten) {
		t.Fatalf("the desk's close: %+v; want its fill of 10,000 units", got)
	}
	if net, _ := r.venue.NetPosition(symbol); !net.Equal(own.Neg()) {
		t.Fatalf("the venue's net is %s, want %s (both closes executed)", net, own.Neg())
	}
	// The trade is flat; what the close executed past it is a tagged trade of its own.
	if tr, found, err := r.session.TradeByID(ctx, strconv.FormatInt(trade, 10)); err != nil || !found || tr.State != venue.TradeClosed || !tr.CurrentUnits.IsZero() {
		t.Fatalf("trade %d after the crossing: %+v found=%v %v; want closed at zero", trade, tr, found, err)
	}
	var past venue.Trade
	for _, tr := range openIn(t, r, symbol) {
		if tr.ClientID != key+".c1" || tr.Tag != venue.Tag || !tr.CurrentUnits.Equal(own.Neg()) {
			t.Fatalf("open in %s: %+v; want only the close's own trade %s.c1 of %s units, tagged", symbol, tr, key, own.Neg())
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
	if net, _ := r.venue.NetPosition(symbol); !net.IsZero() {
		t.Fatalf("the venue's net is %s after the orphan's close, want 0", net)
	}
	if ts := openIn(t, r, symbol); len(ts) != 0 {
		t.Fatalf("open in %s after the orphan's close: %+v", symbol, ts)
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

// closeAcross has the venue close own units of the 10,000-unit trade tradeID (opened by order
// key) itself, its report held, while the desk closes units of it (nil: whole), its report held
// too; lets the reports in in the venue's order — its own close first, journaled against the
// trade — and returns the desk's close as the session answered it.
func closeAcross(t *testing.T, r *rig, symbol, key, tradeID string, own decimal.Decimal, units *decimal.Decimal) venue.Outcome {
	t.Helper()
	ctx := context.Background()
	held, err := r.venue.CloseVenueSideHeld(symbol, &own)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultHold}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out venue.Outcome
		err error
	}
	closed := make(chan result, 1)
	go func() {
		out, err := r.session.CloseTrade(ctx, tradeID, units)
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
	if n := r.venue.Release(fixvenue.HeldKey(held)); n != 1 {
		t.Fatalf("released %d held reports of the venue's own close, want 1", n)
	}
	left := dd("10000").Sub(own)
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the venue's own close is journaled against the trade", func() bool {
		return r.session.LiveTrades()[key].Units.Equal(left)
	})
	if n := r.venue.Release(key + ".c1"); n != 1 {
		t.Fatalf("released %d held reports, want 1", n)
	}
	got := <-closed
	if got.err != nil {
		t.Fatalf("the desk's close: %+v %v", got.out, got.err)
	}
	return got.out
}

// A partial close of the desk crosses the venue's own close of the trade (soak FIX lane, seed
// 74061369: position 167069, 0.73 lots, trade 175796; the venue closed all 73,000 units itself,
// the trader's close of 0.36 executed past the trade and was booked on the position, which was
// left OPEN with 0.37 lots for ever while the venue no longer held its trade). The desk books its
// close whole, as it does every close; what the close executed past the trade is a trade of its
// own, an orphan. The reconciler's plan must then close what the position still holds at the
// venue's own close: the venue's fill closed more of the trade than the position holds by just
// what the desk's close executed past it, which the plan used to take for a fill it could not
// square, and waited for ever.
func TestAPartialCloseCrossingTheVenuesOwnLeavesTheRestToTheVenuesClose(t *testing.T) {
	for _, c := range []struct{ name, symbol, own string }{
		{"the venue closed all of it", "USDMXN", "10000"},
		{"the venue closed most of it", "USDZAR", "7000"},
	} {
		t.Run(c.name, func(t *testing.T) { crossPartialClose(t, c.symbol, dd(c.own)) })
	}
}

// crossPartialClose opens a trade of 10,000 units of symbol for a desk position of 0.1 lots, has
// the venue close own units of it (report held) while the desk closes 6,000 (report held), lets
// the reports in in the venue's order, books the desk's close on the position as trading does,
// and checks the plan: the orphan closed, the position's 0.04 lots closed at the venue's own fill.
func crossPartialClose(t *testing.T, symbol string, own decimal.Decimal) {
	r := newRig(t, 30*time.Second)
	ctx := context.Background()
	key := orderID()
	f := place(t, r.session, key, symbol, "10000")
	part := dd("6000")
	got := closeAcross(t, r, symbol, key, f.TradeOpened, own, &part)
	if got.Fill == nil || !got.Fill.Units.Equal(part.Neg()) {
		t.Fatalf("the desk's close: %+v; want its fill of -6,000 units", got)
	}
	tr, found, err := r.session.TradeByID(ctx, f.TradeOpened)
	if err != nil || !found || tr.State != venue.TradeClosed || len(tr.ClosingTransactionIDs) == 0 {
		t.Fatalf("trade %s after the crossing: %+v found=%v %v; want closed", f.TradeOpened, tr, found, err)
	}
	venueFill := tr.ClosingTransactionIDs[0] // the venue's own close, journaled first

	// Trading books the close whole: 0.06 of the position's 0.1 lots, from the close's fill.
	oid, _ := strconv.ParseInt(key, 10, 64)
	d := deskState(symbol)
	d.Positions = []execution.DeskPosition{{PositionID: 9, OrderID: oid, AccountID: 1, Symbol: symbol, Side: fx.Buy,
		Volume: dd("0.04"), TradeID: f.TradeOpened, Booked: got.Fill.Transactions()}}
	acts := planFor(t, r.session, d, symbol)
	var orphan, deskSide []execution.Action
	for _, a := range acts {
		switch a.Kind {
		case execution.CloseOrphan:
			orphan = append(orphan, a)
		case execution.CloseDeskSide:
			deskSide = append(deskSide, a)
		default:
			t.Fatalf("plan after the crossing: %+v; want only the orphan's close and the desk side's", acts)
		}
	}
	if len(deskSide) != 1 || deskSide[0].PositionID != 9 || !deskSide[0].Volume.Equal(dd("0.04")) || deskSide[0].TransactionID != venueFill {
		t.Fatalf("plan after the crossing: %+v; want the position's 0.04 lots closed at the venue's own fill %d", acts, venueFill)
	}
	if len(orphan) != 1 {
		t.Fatalf("plan after the crossing: %+v; want one orphan closed (what the desk's close executed past the trade)", acts)
	}
	// The reconciler's CloseOrphan takes the venue back to flat; with the desk side booked, the
	// plan has nothing left to do.
	if out, err := r.session.CloseTrade(ctx, orphan[0].TradeID, orphan[0].Units); err != nil || out.Fill == nil {
		t.Fatalf("close of the orphan %s: %+v %v", orphan[0].TradeID, out, err)
	}
	if net, _ := r.venue.NetPosition(symbol); !net.IsZero() {
		t.Fatalf("the venue's net in %s is %s after the orphan's close, want 0", symbol, net)
	}
	d.Positions = nil
	if acts := planFor(t, r.session, d, symbol); len(acts) != 0 {
		t.Fatalf("plan once the position is closed: %+v, want nothing", acts)
	}
}
