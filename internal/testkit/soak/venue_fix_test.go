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
// carried it, the venue's own orders (by its word, Own: here a numeric ClOrdID equal to a desk
// order's, and none at all) not counted, every execution of a split fill listed, sides and
// statuses spelled as the desk does, flat symbols absent from the net.
func TestFIXVenueStateCountsMessagesPerClOrdIDAndKeepsTheNet(t *testing.T) {
	d := decimal.RequireFromString
	until := time.Now().Add(time.Second)
	st := fixvenue.State{
		DownUntil: &until,
		Held:      []string{"12"},
		Orders: []fixvenue.Order{
			{ClOrdID: "12", OrderID: "Vx-1", Symbol: "EURUSD", Side: "1", Status: "2", Qty: d("1000"), CumQty: d("1000"), AvgPx: d("1.1"), SeqNums: []int{4},
				Executions: []fixvenue.Execution{{ExecID: "Ex-2", Qty: d("333"), Px: d("1.1")}, {ExecID: "Ex-3", Qty: d("333"), Px: d("1.1")}, {ExecID: "Ex-4", Qty: d("334"), Px: d("1.1")}}},
			{ClOrdID: "12.c1", Symbol: "EURUSD", Side: "2", Status: "4", Qty: d("1000"), SeqNums: []int{7, 9}},
			{ClOrdID: "12", OrderID: "Vx-3", Own: true, Symbol: "EURUSD", Side: "2", Status: "2", Qty: d("300"), CumQty: d("300"), AvgPx: d("1.09"),
				Executions: []fixvenue.Execution{{ExecID: "Ex-5", Qty: d("300"), Px: d("1.09")}}},
			{OrderID: "Vx-6", Own: true, Symbol: "EURUSD", Side: "2", Status: "2", Qty: d("200"), CumQty: d("200"), AvgPx: d("1.09")},
		},
		Positions: []fixvenue.Position{{Symbol: "EURUSD", Units: d("500")}, {Symbol: "GBPUSD", Units: d("0")}},
	}
	vs := fixVenueState(st, time.Now())
	if vs.Lane != invariant.LaneFIX || vs.Held != 1 || vs.OutageUntil == nil {
		t.Fatalf("lane %s, held %d, outage %v", vs.Lane, vs.Held, vs.OutageUntil)
	}
	if len(vs.OrderRequests) != 2 || vs.OrderRequests["12"] != 1 || vs.OrderRequests["12.c1"] != 2 {
		t.Fatalf("order requests %v, want 12:1 12.c1:2 and none of the venue's own", vs.OrderRequests)
	}
	if o := vs.Orders[1]; o.Side != "SELL" || o.Status != "CANCELED" || vs.Orders[0].Side != "BUY" || vs.Orders[0].Status != "FILLED" {
		t.Fatalf("orders %+v", vs.Orders)
	}
	if o := vs.Orders[0]; o.Own || len(o.Executions) != 3 || o.Executions[2].ExecID != "Ex-4" || !o.Executions[2].Qty.Equal(d("334")) {
		t.Fatalf("desk order 12 %+v, want its 3 executions", o)
	}
	if o := vs.Orders[2]; !o.Own || o.OrderID != "Vx-3" || len(o.Executions) != 1 || !vs.Orders[3].Own {
		t.Fatalf("the venue's own orders %+v %+v", o, vs.Orders[3])
	}
	if len(vs.Net) != 1 || !vs.Net["EURUSD"].Equal(d("500")) {
		t.Fatalf("net %v, want EURUSD 500 only", vs.Net)
	}
}
