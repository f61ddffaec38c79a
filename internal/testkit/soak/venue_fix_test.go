package soak

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/testkit/soak/invariant"
)

func TestVenueLaneIsFIXForAThirdOfTheSeedsUnlessForced(t *testing.T) {
	fix := 0
	for seed := uint64(1); seed <= 300; seed++ {
		lane, err := venueLaneOf(seed, "")
		if err != nil {
			t.Fatal(err)
		}
		if lane == invariant.LaneFIX {
			fix++
		}
	}
	if fix != 100 {
		t.Fatalf("%d of 300 seeds on FIX, want 100", fix)
	}
	for _, forced := range []string{invariant.LaneREST, invariant.LaneFIX} {
		if lane, err := venueLaneOf(3, forced); err != nil || lane != forced {
			t.Fatalf("forced %s: %s, %v", forced, lane, err)
		}
	}
	if _, err := venueLaneOf(3, "oanda"); err == nil {
		t.Fatal("an unknown lane was accepted")
	}
}

// The FIX venue's state as the checks read it: each ClOrdID counted once per message that
// carried it, the venue's own orders not counted, sides and statuses spelled as the desk does,
// flat symbols absent from the net.
func TestFIXVenueStateCountsMessagesPerClOrdIDAndKeepsTheNet(t *testing.T) {
	d := decimal.RequireFromString
	until := time.Now().Add(time.Second)
	st := fixvenue.State{
		DownUntil: &until,
		Held:      []string{"12"},
		Orders: []fixvenue.Order{
			{ClOrdID: "12", Symbol: "EURUSD", Side: "1", Status: "2", Qty: d("1000"), CumQty: d("1000"), AvgPx: d("1.1"), SeqNums: []int{4}},
			{ClOrdID: "12.c1", Symbol: "EURUSD", Side: "2", Status: "8", Qty: d("1000"), SeqNums: []int{7, 9}},
			{ClOrdID: "VENUE-x-3", Symbol: "EURUSD", Side: "2", Status: "2", Qty: d("500"), CumQty: d("500"), AvgPx: d("1.09")},
		},
		Positions: []fixvenue.Position{{Symbol: "EURUSD", Units: d("500")}, {Symbol: "GBPUSD", Units: d("0")}},
	}
	vs := fixVenueState(st, time.Now())
	if vs.Lane != invariant.LaneFIX || vs.Held != 1 || vs.OutageUntil == nil {
		t.Fatalf("lane %s, held %d, outage %v", vs.Lane, vs.Held, vs.OutageUntil)
	}
	if len(vs.OrderRequests) != 2 || vs.OrderRequests["12"] != 1 || vs.OrderRequests["12.c1"] != 2 {
		t.Fatalf("order requests %v, want 12:1 12.c1:2 and no VENUE- order", vs.OrderRequests)
	}
	if o := vs.Orders[1]; o.Side != "SELL" || o.Status != "REJECTED" || vs.Orders[0].Side != "BUY" || vs.Orders[0].Status != "FILLED" {
		t.Fatalf("orders %+v", vs.Orders)
	}
	if len(vs.Net) != 1 || !vs.Net["EURUSD"].Equal(d("500")) {
		t.Fatalf("net %v, want EURUSD 500 only", vs.Net)
	}
}
