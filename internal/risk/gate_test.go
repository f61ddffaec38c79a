package risk

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
)

// gateDrops is how many drops of w the rig's gate counted.
func (r *rig) gateDrops(w gate.Work) float64 {
	return testutil.ToFloat64(r.gateDropped.WithLabelValues(w.String(), "gate"))
}

// wantDropped fails unless w was dropped n times and warned about with the gate's message.
func (r *rig) wantDropped(w gate.Work, n float64, parts ...string) {
	r.t.Helper()
	if got := r.gateDrops(w); got != n {
		r.t.Fatalf("fxdesk_gate_dropped_total{work=%q} = %v, want %v", w, got, n)
	}
	want := append([]string{`msg="lease not confirmed; work not executed`, "work=" + w.String()}, parts...)
	if r.logs.lines(want...) == 0 {
		r.t.Fatalf("no gate warning for %s with %q:\n%s", w, parts, r.logs)
	}
}

// Ticks and sweeps on a process whose lease is not confirmed are dropped at the gate: counted
// every time, logged (a tick once per gap).
func TestGateDropsTicksAndSweeps(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
		{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
	}}
	r := newRig(t, snap, 1, nil)
	r.gate.Lose()
	r.tick("EURUSD", 1.18, 1.18)
	r.tick("EURUSD", 1.17, 1.17)
	r.e.Sweep(context.Background(), SweepLeaseRestored)
	r.settle()
	r.wantCalls()
	r.wantDropped(gate.RiskTick, 2)
	if n := r.logs.lines("work=risk_tick"); n != 1 {
		t.Fatalf("%d warnings for two dropped ticks in one gap, want 1:\n%s", n, r.logs)
	}
	r.wantDropped(gate.RiskSweep, 1, "reason=lease_restored")
}

// A close, a stop-out and a fill queued while the lease was confirmed, but picked by a worker
// after it lapsed, are each dropped at the gate under their own kind, logged and counted.
func TestGateDropsQueuedClosesStopOutsAndFills(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		work  gate.Work
		snap  Snapshot
		parts []string
	}{
		{gate.RiskClose, Snapshot{Accounts: []Account{rich(1)}, Positions: []Position{
			{ID: 2, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.18},
		}}, []string{"position_id=2", "reason=SL"}},
		{gate.StopOut, Snapshot{Accounts: []Account{rich(1), {ID: 3, Currency: "USD", Balance: 1500, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}},
			Positions: []Position{{ID: 9, AccountID: 3, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2}}},
			[]string{"position_id=9", "reason=STOP_OUT"}},
		{gate.RiskFill, Snapshot{Accounts: []Account{rich(1)}, Orders: []Order{
			{ID: 11, AccountID: 1, Symbol: "EURUSD", Side: Sell, Type: Stop, Price: 1.185},
		}}, []string{"order_id=11"}},
	} {
		t.Run(c.work.String(), func(t *testing.T) {
			t.Parallel()
			// Position 1 triggers first and holds the one worker while the lease lapses.
			snap := c.snap
			snap.Instruments = instruments()
			snap.Positions = append([]Position{{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19}}, snap.Positions...)
			block := make(chan struct{})
			entered := make(chan call, 8)
			r := newRig(t, snap, 1, func(r *rig) {
				r.prices.set("EURUSD", 1.2, 1.2)
				r.exec.block, r.exec.entered = block, entered
			})
			u := r.prices.set("EURUSD", 1.17, 1.17)
			r.e.onTick(context.Background(), u, time.Now())
			if first := recv(t, entered); first.id != 1 {
				t.Fatalf("first job picked = %+v, want position 1", first)
			}
			r.gate.Lose()
			close(block)
			r.settle()
			r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL})
			r.wantDropped(c.work, 1, c.parts...)
		})
	}
}

// A margin call sent after the lease lapsed is dropped at the gate, logged and counted: the
// first of two accounts' alerts shuts the lease, so the other's is picked with the gate shut.
func TestGateDropsMarginCalls(t *testing.T) {
	t.Parallel()
	called := func(id int64) Account {
		return Account{ID: id, Currency: "USD", Balance: 1500, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 5}
	}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{called(3), called(4)}, Positions: []Position{
		{ID: 9, AccountID: 3, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
		{ID: 10, AccountID: 4, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
	}}
	r := newRig(t, snap, 1, func(rr *rig) {
		rr.prices.set("EURUSD", 1.2, 1.2)
		rr.alerts.fail = func(int64, int) bool { rr.gate.Lose(); return false }
	})
	r.tick("EURUSD", 1.193, 1.193)
	r.settle()
	if n := r.alerts.count(3) + r.alerts.count(4); n != 1 {
		t.Fatalf("%d margin calls raised, want 1 (the second is dropped)", n)
	}
	r.wantDropped(gate.MarginCall, 1, "account_id=")
}
