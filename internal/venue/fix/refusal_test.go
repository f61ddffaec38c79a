package fix_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/venue"
)

// An order the venue refuses as a message — a session-level Reject (35=3) naming the
// NewOrderSingle's MsgSeqNum, or a BusinessMessageReject (35=j) naming its ClOrdID — ends at
// once as a rejection carrying the LP's words: the sender hears a cancel, not an unknown outcome
// after the whole timeout; the journal ends the order REJECTED with the text; nothing asks the
// venue about it. A close refused so leaves the trade free for the next close.
func TestOrderRefusedAsAMessageEndsRejectedAtOnce(t *testing.T) {
	for _, c := range []struct {
		kind, text, refusal string
		reason              int
	}{
		{fixvenue.FaultSessionReject, "Value is incorrect (out of range) for this tag", "Reject (35=3) SessionRejectReason=5", 5},
		{fixvenue.FaultBusinessReject, "Unsupported security", "BusinessMessageReject (35=j) BusinessRejectReason=2", 2},
	} {
		t.Run(c.kind, func(t *testing.T) {
			// A timeout far longer than the answer may take: waiting it out is the defect.
			r := newRig(t, 20*time.Second)
			ctx := context.Background()
			refused := func(what string, out venue.Outcome, err error) {
				t.Helper()
				if err != nil || out.Cancelled == nil || out.Fill != nil {
					t.Fatalf("%s: %+v %v; want a cancel at once, not an unknown outcome", what, out, err)
				}
				for _, want := range []string{"VENUE_REFUSED", c.refusal, c.text} {
					if !strings.Contains(out.Cancelled.Reason, want) {
						t.Fatalf("%s: reason %q lacks %q", what, out.Cancelled.Reason, want)
					}
				}
			}
			journaled := func(clOrdID string) {
				t.Helper()
				var status, text string
				if err := testDB.QueryRow("SELECT `status`, COALESCE(`text`, '') FROM `fx_fix_order` WHERE `clOrdId` = ?", clOrdID).Scan(&status, &text); err != nil {
					t.Fatal(err)
				}
				if status != "REJECTED" || !strings.Contains(text, c.text) {
					t.Fatalf("journal order %s: %s %q; want REJECTED with the LP's text", clOrdID, status, text)
				}
			}

			if err := r.venue.InjectFault(fixvenue.Fault{Kind: c.kind, Reason: c.reason, Text: c.text}); err != nil {
				t.Fatal(err)
			}
			id := orderID()
			out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "NZDUSD", Units: dd("10000")})
			refused("open", out, err)
			journaled(id)
			info, found, err := r.session.OrderByClientID(ctx, id)
			if err != nil || !found || info.State != venue.OrderCancelled || !strings.Contains(info.CancelReason, c.text) {
				t.Fatalf("lookup of the refused order: %+v found=%v err=%v", info, found, err)
			}

			// A close refused so: the trade is not held by a close in flight.
			out, err = r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "NZDUSD", Units: dd("10000")})
			if err != nil || out.Fill == nil {
				t.Fatal(out, err)
			}
			trade := out.Fill.TradeOpened
			if err := r.venue.InjectFault(fixvenue.Fault{Kind: c.kind, Reason: c.reason, Text: c.text}); err != nil {
				t.Fatal(err)
			}
			out, err = r.session.CloseTrade(ctx, trade, nil)
			refused("close", out, err)
			if out, err = r.session.CloseTrade(ctx, trade, nil); err != nil || out.Fill == nil || len(out.Fill.TradesClosed) != 1 {
				t.Fatalf("the close after a refused one: %+v %v", out, err)
			}
			if q := r.venue.State().Queries; q.OrderStatus != 0 {
				t.Fatalf("the desk asked the venue %d status requests about orders it refused", q.OrderStatus)
			}
		})
	}
}

// A six-letter symbol the venue does not list is refused as an unknown symbol (OrdRejReason 1),
// not as a closed market (2), which would tell the trader to wait for a reopening.
func TestUnlistedSymbolIsRejectedAsUnknown(t *testing.T) {
	r := newRig(t, 5*time.Second)
	out, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "ABCXYZ", Units: dd("1000")})
	if err != nil || out.Cancelled == nil || !strings.HasPrefix(out.Cancelled.Reason, "OrdRejReason=1:") {
		t.Fatalf("an unlisted symbol: %+v %v; want a cancel with OrdRejReason=1 (unknown symbol)", out, err)
	}
}
