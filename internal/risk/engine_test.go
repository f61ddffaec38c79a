package risk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/tick"
)

func q(bid, ask float64) tick.Quote { return tick.Quote{Bid: bid, Ask: ask} }

// TestTriggersFireOnTheirSideOfTheSpreadAtTheGappedQuote covers every trigger on both sides, on the
// side of the quote it belongs to: a case that reaches the price on the other side of the spread
// must not fire, and a gap hands the executor the gapped quote, never the stop price.
func TestTriggersFireOnTheirSideOfTheSpreadAtTheGappedQuote(t *testing.T) {
	t.Parallel()
	past := time.Now().Add(-time.Hour)
	cases := []struct {
		name     string
		pos      *Position
		ord      *Order
		bid, ask float64
		want     *call
	}{
		{"buy SL on the bid, exactly", &Position{Side: Buy, OpenPrice: 1.1, SL: 1.09}, nil, 1.09, 1.0902, &call{kind: jobClose, reason: fx.CloseSL}},
		{"buy SL: only the ask reached it", &Position{Side: Buy, OpenPrice: 1.1, SL: 1.09}, nil, 1.0899, 1.0899, &call{kind: jobClose, reason: fx.CloseSL}},
		{"buy SL not reached", &Position{Side: Buy, OpenPrice: 1.1, SL: 1.09}, nil, 1.0901, 1.0903, nil},
		{"buy SL gap fills at the gapped bid", &Position{Side: Buy, OpenPrice: 1.1, SL: 1.09}, nil, 1.05, 1.0502, &call{kind: jobClose, reason: fx.CloseSL, at: q(1.05, 1.0502)}},
		{"buy TP on the bid", &Position{Side: Buy, OpenPrice: 1.1, TP: 1.11}, nil, 1.11, 1.1102, &call{kind: jobClose, reason: fx.CloseTP}},
		{"buy TP: ask reached it, bid did not", &Position{Side: Buy, OpenPrice: 1.1, TP: 1.11}, nil, 1.1099, 1.1101, nil},
		{"buy TP gap", &Position{Side: Buy, OpenPrice: 1.1, TP: 1.11}, nil, 1.15, 1.1502, &call{kind: jobClose, reason: fx.CloseTP, at: q(1.15, 1.1502)}},
		{"sell SL on the ask", &Position{Side: Sell, OpenPrice: 1.1, SL: 1.11}, nil, 1.1098, 1.11, &call{kind: jobClose, reason: fx.CloseSL}},
		{"sell SL: bid below, ask not reached", &Position{Side: Sell, OpenPrice: 1.1, SL: 1.11}, nil, 1.1097, 1.1099, nil},
		{"sell SL gap fills at the gapped ask", &Position{Side: Sell, OpenPrice: 1.1, SL: 1.11}, nil, 1.1598, 1.16, &call{kind: jobClose, reason: fx.CloseSL, at: q(1.1598, 1.16)}},
		{"sell TP on the ask", &Position{Side: Sell, OpenPrice: 1.1, TP: 1.09}, nil, 1.0898, 1.09, &call{kind: jobClose, reason: fx.CloseTP}},
		{"sell TP: bid reached it, ask did not", &Position{Side: Sell, OpenPrice: 1.1, TP: 1.09}, nil, 1.0899, 1.0901, nil},
		{"buy limit: ask ≤ price", nil, &Order{Side: Buy, Type: Limit, Price: 1.09}, 1.0898, 1.09, &call{kind: jobFill}},
		{"buy limit: only the bid reached it", nil, &Order{Side: Buy, Type: Limit, Price: 1.09}, 1.0899, 1.0901, nil},
		{"buy stop: ask ≥ price", nil, &Order{Side: Buy, Type: Stop, Price: 1.11}, 1.1099, 1.11, &call{kind: jobFill}},
		{"buy stop not reached", nil, &Order{Side: Buy, Type: Stop, Price: 1.11}, 1.1097, 1.1099, nil},
		{"buy stop gap", nil, &Order{Side: Buy, Type: Stop, Price: 1.11}, 1.13, 1.1302, &call{kind: jobFill, at: q(1.13, 1.1302)}},
		{"sell limit: bid ≥ price", nil, &Order{Side: Sell, Type: Limit, Price: 1.11}, 1.11, 1.1102, &call{kind: jobFill}},
		{"sell limit: only the ask reached it", nil, &Order{Side: Sell, Type: Limit, Price: 1.11}, 1.1099, 1.1101, nil},
		{"sell stop: bid ≤ price", nil, &Order{Side: Sell, Type: Stop, Price: 1.09}, 1.09, 1.0902, &call{kind: jobFill}},
		{"sell stop not reached", nil, &Order{Side: Sell, Type: Stop, Price: 1.09}, 1.0901, 1.0903, nil},
		{"expired GTD order is not filled", nil, &Order{Side: Sell, Type: Stop, Price: 1.09, ExpiresAt: past}, 1.08, 1.0802, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}}
			var id int64 = 42
			if tc.pos != nil {
				p := *tc.pos
				p.ID, p.AccountID, p.Symbol, p.Volume = id, 1, "EURUSD", 1
				snap.Positions = append(snap.Positions, p)
			} else {
				o := *tc.ord
				o.ID, o.AccountID, o.Symbol = id, 1, "EURUSD"
				snap.Orders = append(snap.Orders, o)
			}
			r := newRig(t, snap, 2, nil)
			r.tick("EURUSD", 1.1, 1.1002) // in the middle: nothing fires
			r.wantCalls()
			r.tick("EURUSD", tc.bid, tc.ask)
			if tc.want == nil {
				r.wantCalls()
				return
			}
			w := *tc.want
			w.id = id
			if w.at == (tick.Quote{}) {
				w.at = q(tc.bid, tc.ask)
			}
			r.wantCalls(w)
			// Fired once: the same price again does nothing.
			r.tick("EURUSD", tc.bid, tc.ask)
			r.wantCalls(w)
			if w.kind == jobClose && r.owns.Load() != 1 {
				t.Fatalf("own time observed %d times, want 1", r.owns.Load())
			}
		})
	}
}

// TestModifiedStopsFireOnlyAtTheirNewLevels moves, removes and adds stops through Apply and checks
// that only the new levels fire.
func TestModifiedStopsFireOnlyAtTheirNewLevels(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
		{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.1, SL: 1.09, TP: 1.12},
		{ID: 2, AccountID: 1, Symbol: "EURUSD", Side: Sell, Volume: 1, OpenPrice: 1.1, SL: 1.12, TP: 1.08},
	}}
	r := newRig(t, snap, 1, nil)
	ctx := context.Background()
	// Tighten 1's SL above the next price, drop 2's SL and TP entirely.
	r.e.Apply(ctx,
		Change{Kind: PositionModified, Position: Position{ID: 1, SL: 1.095, TP: 1.12}},
		Change{Kind: PositionModified, Position: Position{ID: 2}})
	r.tick("EURUSD", 1.0949, 1.0951)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL})
	r.tick("EURUSD", 1.05, 1.0502) // far past 2's old TP: removed, so nothing
	r.tick("EURUSD", 1.15, 1.1502) // far past 2's old SL
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL})
	// Add a TP to 2 again; it fires on the ask.
	r.e.Apply(ctx, Change{Kind: PositionModified, Position: Position{ID: 2, TP: 1.13}})
	r.tick("EURUSD", 1.1298, 1.13)
	r.wantCalls(call{kind: jobClose, id: 1, account: 1, reason: fx.CloseSL}, call{kind: jobClose, id: 2, account: 1, reason: fx.CloseTP})
}

// TestStopOutLargestLoserFirst drives a USD account below its stop-out level with one tick:
// the engine closes the largest loser, recomputes with it handed off, closes the next largest,
// and stops as soon as the level is above 50 % — the third position stays open.
func TestStopOutLargestLoserFirst(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 7, Currency: "USD", Balance: 9000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{acc}, Positions: []Position{
		{ID: 1, AccountID: 7, Symbol: "GBPUSD", Side: Buy, Volume: 0.2, OpenPrice: 1.3}, // −600 at 1.27
		{ID: 2, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},   // −5000 at 1.15
		{ID: 3, AccountID: 7, Symbol: "GBPUSD", Side: Buy, Volume: 1, OpenPrice: 1.3},   // −3000 at 1.27
	}}
	r := newRig(t, snap, 1, func(r *rig) {
		r.prices.set("EURUSD", 1.2, 1.2)
		r.prices.set("GBPUSD", 1.3, 1.3)
	})
	r.tick("EURUSD", 1.2, 1.2) // 9000 / 2760 = 326 %
	r.wantCalls()
	r.prices.set("GBPUSD", 1.27, 1.27)
	// Equity 9000 − 5000 − 3000 − 600 = 400; margin 1150 + 1524 = 2674: 15 %.
	// Without 2: 400 / 1524 = 26 %. Without 3 as well: 400 / 254 = 157 %: stop.
	r.tick("EURUSD", 1.15, 1.15)
	r.wantCalls(
		call{kind: jobClose, id: 2, account: 7, reason: fx.CloseStopOut, at: q(1.15, 1.15)},
		call{kind: jobClose, id: 3, account: 7, reason: fx.CloseStopOut, at: q(1.27, 1.27)})
	if n := r.alerts.count(7); n != 1 {
		t.Fatalf("margin call alerts = %d, want 1", n)
	}
}

// TestStopOutUntilNothingOpen: a level that cannot recover closes everything, each once.
func TestStopOutUntilNothingOpen(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 7, Currency: "USD", Balance: 1000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{acc}, Positions: []Position{
		{ID: 1, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
		{ID: 2, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 0.5, OpenPrice: 1.2},
	}}
	r := newRig(t, snap, 1, nil)
	r.tick("EURUSD", 1.1, 1.1) // equity 1000 − 15000 < 0
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseStopOut}, call{kind: jobClose, id: 2, reason: fx.CloseStopOut})
	r.tick("EURUSD", 1.0, 1.0)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseStopOut}, call{kind: jobClose, id: 2, reason: fx.CloseStopOut})
}

// TestMarginCallOncePerCrossing: one alert per fall below the margin-call level, re-armed only
// when the level is back at or above it.
func TestMarginCallOncePerCrossing(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 3, Currency: "USD", Balance: 1500, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{acc}, Positions: []Position{
		{ID: 1, AccountID: 3, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
	}}
	r := newRig(t, snap, 1, nil)
	steps := []struct {
		bid            float64
		alerts, clears int
	}{
		{1.2, 0, 0},   // 1500 / 1200 = 125 %
		{1.197, 0, 0}, // 1200 / 1197 = 100.25 %
		{1.195, 1, 0}, // 1000 / 1195 = 84 %: crossing
		{1.194, 1, 0}, // 75 %: still below, no second alert
		{1.196, 1, 0}, // 92 %
		{1.2, 1, 1},   // 125 %: re-armed, and the margin call's end recorded
		{1.201, 1, 1}, // still above: nothing more to record
		{1.195, 2, 1}, // crossing again
	}
	for i, s := range steps {
		r.tick("EURUSD", s.bid, s.bid)
		if got, ends := r.alerts.count(3), r.alerts.clears(3); got != s.alerts || ends != s.clears {
			t.Fatalf("step %d (bid %v): alerts = %d, ends = %d, want %d and %d", i, s.bid, got, ends, s.alerts, s.clears)
		}
	}
	r.wantCalls()
}

// TestMarginCallFromSnapshot: the engine starts from the margin calls its snapshot says are
// recorded — one below the level is not recorded again, one above it is ended once.
func TestMarginCallFromSnapshot(t *testing.T) {
	t.Parallel()
	below := Account{ID: 3, Currency: "USD", Balance: 1000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50, MarginCalled: true}
	above := Account{ID: 4, Currency: "USD", Balance: 5000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50, MarginCalled: true}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{below, above}, Positions: []Position{
		{ID: 1, AccountID: 3, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
		{ID: 2, AccountID: 4, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
	}}
	r := newRig(t, snap, 1, nil)
	r.tick("EURUSD", 1.199, 1.199) // account 3: 900 / 1199 = 75 %; account 4: 4900 / 1199 = 409 %
	if got := r.alerts.count(3) + r.alerts.count(4); got != 0 {
		t.Fatalf("margin calls recorded again: %d", got)
	}
	if got := r.alerts.clears(4); got != 1 {
		t.Fatalf("ends of account 4's margin call = %d, want 1", got)
	}
	if got := r.alerts.clears(3); got != 0 {
		t.Fatalf("ends of account 3's margin call = %d, want 0: it is still below", got)
	}
	r.wantCalls()
}

// TestConversionLegExposure: a EUR account holding USDJPY is re-evaluated on a EURUSD tick
// (its profit converts JPY → USD → EUR), and stopped out by it at USDJPY's own quote.
func TestConversionLegExposure(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 9, Currency: "EUR", Balance: 7000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{acc, rich(1)}, Positions: []Position{
		{ID: 5, AccountID: 9, Symbol: "USDJPY", Side: Buy, Volume: 1, OpenPrice: 150},
		{ID: 6, AccountID: 1, Symbol: "GBPUSD", Side: Buy, Volume: 1, OpenPrice: 1.3},
	}}
	r := newRig(t, snap, 1, func(r *rig) {
		r.prices.set("USDJPY", 140, 140)
		r.prices.set("EURUSD", 1.2, 1.2)
		r.prices.set("GBPUSD", 1.3, 1.3)
	})
	// Loss 1,000,000 JPY = 7142.86 USD = 5952.38 EUR at 1.2; margin 1000 USD = 833.33 EUR: 126 %.
	r.tick("EURUSD", 1.2, 1.2)
	r.wantCalls()
	if n := r.alerts.count(9); n != 0 {
		t.Fatalf("alerts at 126 %% = %d", n)
	}
	r.tick("GBPUSD", 1.3, 1.3) // not exposed: nothing to decide
	// At 1.05: loss 6802.72 EUR, equity 197.28, margin 952.38 EUR: 20.7 %.
	r.tick("EURUSD", 1.05, 1.05)
	r.wantCalls(call{kind: jobClose, id: 5, reason: fx.CloseStopOut, at: q(140, 140)})
	if n := r.alerts.count(9); n != 1 {
		t.Fatalf("margin call alerts = %d, want 1", n)
	}
	if listedOn(r.e, "GBPUSD", 9) {
		t.Fatal("the EUR account is listed on GBPUSD, which it does not depend on")
	}
}

// TestConversionLegIndex checks the symbol → accounts index through opens and closes.
func TestConversionLegIndex(t *testing.T) {
	t.Parallel()
	eur := Account{ID: 9, Currency: "EUR", Balance: 1e6, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	r := newRig(t, Snapshot{Instruments: instruments(), Accounts: []Account{eur}}, 1, nil)
	ctx := context.Background()
	listed := func() (out []string) {
		for _, s := range []string{"EURUSD", "GBPUSD", "USDJPY"} {
			if listedOn(r.e, s, 9) {
				out = append(out, s)
			}
		}
		return out
	}
	r.e.Apply(ctx, Change{Kind: PositionOpened, Position: Position{ID: 1, AccountID: 9, Symbol: "USDJPY", Side: Sell, Volume: 1, OpenPrice: 150}})
	if got := fmt.Sprint(listed()); got != "[EURUSD USDJPY]" {
		t.Fatalf("after USDJPY: listed on %s", got)
	}
	r.e.Apply(ctx, Change{Kind: PositionOpened, Position: Position{ID: 2, AccountID: 9, Symbol: "GBPUSD", Side: Buy, Volume: 1, OpenPrice: 1.3}})
	if got := fmt.Sprint(listed()); got != "[EURUSD GBPUSD USDJPY]" {
		t.Fatalf("after GBPUSD: listed on %s", got)
	}
	r.e.Apply(ctx, Change{Kind: PositionClosed, Position: Position{ID: 1}})
	if got := fmt.Sprint(listed()); got != "[EURUSD GBPUSD]" {
		t.Fatalf("after closing USDJPY: listed on %s", got)
	}
	r.e.Apply(ctx, Change{Kind: PositionClosed, Position: Position{ID: 2}})
	if got := listed(); len(got) != 0 {
		t.Fatalf("after closing everything: listed on %v", got)
	}
}

// Updates the subscription lost are made good by a sweep at current prices: a stop crossed by a
// price the engine never received as a tick still closes, at that price.
func TestLostUpdatesSweep(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
		{ID: 7, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
	}}
	r := newRig(t, snap, 1, func(r *rig) {
		r.prices.set("EURUSD", 1.2, 1.2002)
		r.exec.entered = make(chan call, 4)
	})
	// The price crosses the stop, and its tick is lost.
	r.prices.set("EURUSD", 1.18, 1.1802)
	r.dropped.Add(3)
	c := recv(t, r.exec.entered)
	if c.kind != jobClose || c.id != 7 || c.reason != fx.CloseSL || c.at.Bid != 1.18 {
		t.Fatalf("after lost updates: %+v, want position 7 closed by SL at bid 1.18", c)
	}
	r.settle()
	if r.logs.lines("risk engine lost tick updates", "lost=3") != 1 || r.logs.lines(`msg="risk sweep"`, "reason=updates_dropped") != 1 {
		t.Fatalf("want one warning and one updates_dropped sweep:\n%s", r.logs)
	}
}

// TestGateClosedDropsAndSweepRestores: with the lease unconfirmed a triggering tick executes
// nothing and the warning names the position and the reason, once per gap; the lease_restored
// sweep then closes it at the price current at that moment.
func TestGateClosedDropsAndSweepRestores(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 3, Currency: "USD", Balance: 1500, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1), acc}, Positions: []Position{
		{ID: 7, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
		{ID: 8, AccountID: 1, Symbol: "EURUSD", Side: Sell, Volume: 1, OpenPrice: 1.2, SL: 1.25},
		{ID: 9, AccountID: 3, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
	}, Orders: []Order{{ID: 11, AccountID: 1, Symbol: "EURUSD", Side: Sell, Type: Stop, Price: 1.185}}}
	r := newRig(t, snap, 2, func(r *rig) { r.prices.set("EURUSD", 1.2, 1.2) })
	r.gate.Lose()
	r.tick("EURUSD", 1.18, 1.18)
	r.tick("EURUSD", 1.17, 1.17)
	r.wantCalls()
	if n := r.alerts.count(3); n != 0 {
		t.Fatalf("alert raised with the gate shut")
	}
	for _, want := range [][]string{
		{`msg="lease not confirmed; close not executed"`, "position_id=7 reason=SL"},
		{`msg="lease not confirmed; fill not executed"`, "order_id=11"},
		{`msg="lease not confirmed; close not executed"`, "position_id=9 reason=STOP_OUT"},
		{`msg="lease not confirmed; margin call alert not raised"`, "account_id=3"},
	} {
		if n := r.logs.lines(want...); n != 1 {
			t.Fatalf("want exactly one line with %q, got %d:\n%s", want, n, r.logs)
		}
	}
	if r.logs.lines("position_id=8") != 0 {
		t.Fatalf("warned about position 8, which did not trigger:\n%s", r.logs)
	}

	// A sweep while still shut does nothing either.
	r.e.Sweep(context.Background(), SweepLeaseRestored)
	r.settle()
	r.wantCalls()

	// The lease comes back; meanwhile the market moved on, and only the current price counts.
	r.prices.set("EURUSD", 1.16, 1.1602)
	r.gate.Restore()
	r.e.Sweep(context.Background(), SweepLeaseRestored)
	r.settle()
	got := r.exec.got()
	seen := map[string]tick.Quote{}
	for _, c := range got {
		seen[fmt.Sprintf("%d/%d/%s", c.kind, c.id, c.reason)] = c.at
	}
	for _, k := range []string{
		fmt.Sprintf("%d/7/SL", jobClose), fmt.Sprintf("%d/11/", jobFill), fmt.Sprintf("%d/9/STOP_OUT", jobClose),
	} {
		at, ok := seen[k]
		if !ok {
			t.Fatalf("sweep did not execute %s: %+v", k, got)
		}
		if at.Bid != 1.16 || at.Ask != 1.1602 {
			t.Fatalf("%s executed at %v/%v, want the then-current 1.16/1.1602", k, at.Bid, at.Ask)
		}
	}
	if len(got) != 3 {
		t.Fatalf("sweep executed %+v, want exactly 3 calls", got)
	}
	if n := r.alerts.count(3); n != 1 {
		t.Fatalf("margin call alerts after restore = %d, want 1", n)
	}
}

// TestGateCheckedWhenWorkerPicks: a close queued while the lease was confirmed, but picked by
// a worker after it lapsed, is dropped with a warning and stays under watch — not replayed by
// itself, re-derived by the sweep.
func TestGateCheckedWhenWorkerPicks(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
		{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
		{ID: 2, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.18},
	}}
	block := make(chan struct{})
	entered := make(chan call, 8)
	r := newRig(t, snap, 1, func(r *rig) { r.exec.block, r.exec.entered = block, entered })
	u := r.prices.set("EURUSD", 1.17, 1.17)
	r.e.onTick(context.Background(), u, time.Now()) // queues 1 then 2; one worker
	if c := recv(t, entered); c.id != 1 {
		t.Fatalf("first close picked = %d, want 1", c.id)
	}
	r.gate.Lose()
	close(block)
	r.settle()
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL})
	if r.logs.lines(`msg="lease not confirmed; work not executed" work=risk_close position_id=2 reason=SL`) != 1 {
		t.Fatalf("drop not warned:\n%s", r.logs.String())
	}
	r.gate.Restore()
	r.e.Sweep(context.Background(), SweepLeaseRestored)
	r.settle()
	recv(t, entered)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL}, call{kind: jobClose, id: 2, reason: fx.CloseSL})
}

// TestNeverQueuedTwice: while a close is in flight, further ticks past its stop, a stop-out of
// its account and a sweep must not queue it again; a trader's close racing it ends the watch
// and the executor's "already closed" is taken in stride.
func TestNeverQueuedTwice(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 3, Currency: "USD", Balance: 1000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{acc}, Positions: []Position{
		{ID: 1, AccountID: 3, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
	}}
	block := make(chan struct{})
	entered := make(chan call, 8)
	r := newRig(t, snap, 4, func(r *rig) {
		r.exec.block, r.exec.entered = block, entered
		r.exec.answer = func(call) error { return fmt.Errorf("close position 1: %w", ErrAlreadyClosed) }
	})
	ctx := context.Background()
	u := r.prices.set("EURUSD", 1.185, 1.185)
	r.e.onTick(ctx, u, time.Now())
	recv(t, entered)
	for _, bid := range []float64{1.18, 1.1, 1.0} { // deeper, and far into stop-out
		u := r.prices.set("EURUSD", bid, bid)
		r.e.onTick(ctx, u, time.Now())
	}
	r.e.Sweep(ctx, SweepLeaseRestored)
	// The trader's close commits first.
	r.e.Apply(ctx, Change{Kind: PositionClosed, Position: Position{ID: 1}}, Change{Kind: BalanceChanged, Account: Account{ID: 3, Balance: -500}})
	close(block)
	r.settle()
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL})
	r.tick("EURUSD", 0.9, 0.9)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL})
	if s := r.e.Stats(); s.Positions != 0 || s.AlreadyClosed != 1 || s.ExecutorErrors != 0 {
		t.Fatalf("stats = %+v", s)
	}
	if strings.Contains(r.logs.String(), "level=ERROR") {
		t.Fatalf("already closed logged as an error:\n%s", r.logs.String())
	}
}

// TestExecutorFailurePutsThePositionBackUnderWatch: "already closed" ends the watch; any other
// failure puts the position back under watch so the next tick closes it again.
func TestExecutorFailurePutsThePositionBackUnderWatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		err        error
		wantCalls  int
		wantErrLog bool
	}{
		{"committed", nil, 1, false},
		{"already closed", fmt.Errorf("close: %w", ErrAlreadyClosed), 1, false},
		{"failed", errors.New("deadlock"), 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
				{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
			}}
			n := 0
			r := newRig(t, snap, 1, func(r *rig) {
				r.exec.answer = func(call) error {
					n++
					if n == 1 {
						return tc.err
					}
					return nil
				}
			})
			r.tick("EURUSD", 1.18, 1.18)
			r.tick("EURUSD", 1.17, 1.17)
			if got := len(r.exec.got()); got != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", got, tc.wantCalls)
			}
			if got := strings.Contains(r.logs.String(), "level=ERROR"); got != tc.wantErrLog {
				t.Fatalf("error logged = %v, want %v:\n%s", got, tc.wantErrLog, r.logs.String())
			}
			if s := r.e.Stats(); s.Positions != 0 {
				t.Fatalf("positions still watched: %d", s.Positions)
			}
		})
	}
}

// TestBootLoadsBeforeFirstTick: a tick that arrives while the view is loading is evaluated
// against the loaded view (with changes applied during the load), never against an empty one.
func TestBootLoadsBeforeFirstTick(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	exec := &fakeExec{entered: make(chan call, 4)}
	prices := &fakePrices{}
	prices.set("EURUSD", 1.2, 1.2) // where it is now: the boot sweep closes nothing
	updates := make(chan tick.Update, 4)
	e := runHeldLoad(t, release, []Position{
		{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
	}, prices, updates, exec, 2)
	ctx := context.Background()
	// Committed during the load: SL raised to 1.195.
	e.Apply(ctx, Change{Kind: PositionModified, Position: Position{ID: 1, SL: 1.195}})
	updates <- tick.Update{Symbol: "EURUSD", Quote: tick.Quote{Bid: 1.194, Ask: 1.1942}}
	close(release)
	c := recv(t, exec.entered)
	if c.id != 1 || c.reason != fx.CloseSL || c.at.Bid != 1.194 {
		t.Fatalf("close = %+v, want position 1 SL at the buffered tick", c)
	}
}

// TestReplayOntoReadsOfDifferentInstants: the loader's reads need not share one instant
// (docs/boot.md, «The risk view's read»). Here the open positions were read after a fill of
// resting order 7, and the account and the resting orders before it and before a deposit; the
// engine kept the fill's and the deposit's changes during the load. Replayed, they leave order 7
// unwatched, the fill's position watched once and the balance after the deposit: at 1.1999 the
// boot sweep fills nothing and stops nothing out. Without the replay the order would fill and
// the balance read (1,000 on 2,400 of margin) stop the account out; with the position counted
// twice the margin (3,600) would.
func TestReplayOntoReadsOfDifferentInstants(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	exec, alerts := &fakeExec{}, &fakeAlerts{}
	prices := &fakePrices{}
	prices.set("EURUSD", 1.1999, 1.1999)
	acc := Account{ID: 7, Currency: "USD", Balance: 1000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 100}
	opened := Position{ID: 2, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2}
	e, err := New(Config{
		Loader: loaderFunc(func(context.Context) (Snapshot, error) {
			<-release
			return Snapshot{Instruments: instruments(), Accounts: []Account{acc},
				Positions: []Position{{ID: 1, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2}, opened},
				Orders:    []Order{{ID: 7, AccountID: 7, Symbol: "EURUSD", Side: Buy, Type: Limit, Price: 1.2}}}, nil
		}),
		Prices: prices, Updates: make(chan tick.Update), Executor: exec, Alerts: alerts, Gate: realGate(t, &gatetest.Lease{}, nil, nil), Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); poll.Receive(t, done, 10*time.Second, "Run returning after its context ended") }()
	// Committed while the reads ran, in this order: the fill, then a deposit.
	e.Apply(ctx, Change{Kind: OrderFilled, Order: Order{ID: 7}}, Change{Kind: PositionOpened, Position: opened},
		Change{Kind: BalanceChanged, Account: Account{ID: 7, Balance: 1000}})
	e.Apply(ctx, Change{Kind: BalanceChanged, Account: Account{ID: 7, Balance: 3000}})
	close(release)
	recv(t, e.Ready())
	e.work.waitIdle()
	e.alerts.waitIdle()
	if got := exec.got(); len(got) != 0 {
		t.Fatalf("the boot sweep at 1.1999 called %+v; want nothing: equity 2,980 on 2,399.80 of margin, order 7 filled", got)
	}
	if n := alerts.count(7); n != 0 {
		t.Fatalf("%d margin calls; want none at 124 %%", n)
	}
	if s := e.Stats(); s.Positions != 2 || s.Orders != 0 || s.Accounts != 1 {
		t.Fatalf("watching %d positions, %d orders, %d accounts; want 2, 0, 1", s.Positions, s.Orders, s.Accounts)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Loader: loaderFunc(nil), Prices: &fakePrices{}, Updates: make(chan tick.Update),
		Executor: &fakeExec{}, Gate: realGate(t, &gatetest.Lease{}, nil, nil)}); err == nil || !strings.Contains(err.Error(), "Workers") {
		t.Fatalf("New without Workers: %v", err)
	}
}

// ExposedSymbols follows the positions and resting orders the engine watches: a symbol is
// listed while one of either is on it, and only then.
func TestExposedSymbolsFollowPositionsAndRestingOrders(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)},
		Positions: []Position{{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.1}},
		Orders:    []Order{{ID: 7, AccountID: 1, Symbol: "USDJPY", Side: Buy, Type: Limit, Price: 140}}}
	r := newRig(t, snap, 1, nil)
	ctx := context.Background()
	want := func(syms ...string) {
		t.Helper()
		got, ok := r.e.ExposedSymbols()
		if !ok || !slices.Equal(got, syms) {
			t.Fatalf("ExposedSymbols = %v, %v; want %v", got, ok, syms)
		}
	}
	want("EURUSD", "USDJPY")
	r.e.Apply(ctx, Change{Kind: PositionOpened, Position: Position{ID: 2, AccountID: 1, Symbol: "GBPUSD", Side: Sell, Volume: 1, OpenPrice: 1.3}},
		Change{Kind: PositionOpened, Position: Position{ID: 3, AccountID: 1, Symbol: "EURUSD", Side: Sell, Volume: 1, OpenPrice: 1.1}})
	want("EURUSD", "GBPUSD", "USDJPY")
	r.e.Apply(ctx, Change{Kind: PositionClosed, Position: Position{ID: 1}})
	want("EURUSD", "GBPUSD", "USDJPY") // position 3 is still open on EURUSD
	r.e.Apply(ctx, Change{Kind: PositionClosed, Position: Position{ID: 3}}, Change{Kind: OrderCancelled, Order: Order{ID: 7}})
	want("GBPUSD")
}

// An engine started by a standby takeover runs its first sweep as lease_restored: the positions
// it loads were last watched by another process, and the sweep closes what crossed in between.
func TestFirstSweepCarriesTheConfiguredReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ first, want string }{{"", SweepBoot}, {SweepLeaseRestored, SweepLeaseRestored}} {
		logs := &logBuffer{}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		prices := &fakePrices{}
		prices.set("EURUSD", 1.18, 1.18) // below the SL: the first sweep closes it
		exec := &fakeExec{entered: make(chan call, 4)}
		e, err := New(Config{
			Loader: loaderFunc(func(context.Context) (Snapshot, error) {
				return Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
					{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2, SL: 1.19},
				}}, nil
			}),
			Prices: prices, Updates: make(chan tick.Update), Executor: exec, Gate: realGate(t, &gatetest.Lease{}, log, nil),
			Workers: 1, Log: log, FirstSweep: tc.first,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		recv(t, e.Ready())
		if c := recv(t, exec.entered); c.id != 1 || c.reason != fx.CloseSL {
			t.Errorf("first sweep %q closed %+v, want position 1 at its SL", tc.want, c)
		}
		cancel()
		<-done
		if logs.lines("risk sweep", "reason="+tc.want) != 1 || (tc.want != SweepBoot && logs.lines("risk sweep", "reason="+SweepBoot) != 0) {
			t.Errorf("FirstSweep %q: sweeps logged:\n%s", tc.first, logs.String())
		}
	}
}

// TestAccountTermsApplyAtOnce: an account moved to a stricter group (or its group made stricter)
// is judged by the new levels at the next tick, and the change keeps the balance the engine
// holds: a terms change carries no balance to apply.
func TestAccountTermsApplyAtOnce(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 7, Currency: "USD", Balance: 9000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{acc}, Positions: []Position{
		{ID: 1, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2},
	}}
	r := newRig(t, snap, 1, nil)
	r.tick("EURUSD", 1.13, 1.13) // equity 9000 − 7000 = 2000 over 1130: 177 %
	r.wantCalls()
	ctx := context.Background()
	// The same levels, and a zero the engine must not take for the balance.
	r.e.Apply(ctx, Change{Kind: AccountTermsChanged, Account: Account{ID: 7, MarginCallLevel: 100, StopOutLevel: 50}})
	r.tick("EURUSD", 1.13, 1.13)
	r.wantCalls()
	// A stop-out level of 200 %: the next tick stops the account out.
	r.e.Apply(ctx, Change{Kind: AccountTermsChanged, Account: Account{ID: 7, MarginCallLevel: 250, StopOutLevel: 200}})
	r.tick("EURUSD", 1.13, 1.13)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseStopOut, at: q(1.13, 1.13)})
}

// TestAccountTermsCarryTheGroup: a terms change names the account's group, and the engine
// marks the account with that group's own symbol terms from then on — a move out of a group
// whose EURUSD is capped at 1:10 into one without terms of its own, the reverse move, and a
// group's own leverage cap lowered. 9000 USD, 1 lot EURUSD bought at 1.10, marked at 1.05:
// equity 4000 over 1050 of margin at 1:100 (381 %), over 10500 at 1:10 (38 %); stop-out at 50 %.
func TestAccountTermsCarryTheGroup(t *testing.T) {
	t.Parallel()
	acc := func(id int64, group string, groupLeverage int) Account {
		return Account{ID: id, Currency: "USD", Balance: 9000, Leverage: 100, GroupLeverage: groupLeverage, MarginCallLevel: 100, StopOutLevel: 50, Group: group}
	}
	snap := Snapshot{Instruments: instruments(),
		Groups:   []GroupTerms{{Group: "capped", Symbols: map[string]SymbolTerms{"EURUSD": {LeverageMax: 10}}}},
		Accounts: []Account{acc(1, "capped", 500), acc(2, "plain", 500), acc(3, "plain", 500)},
		Positions: []Position{
			{ID: 11, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.1},
			{ID: 12, AccountID: 2, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.1},
			{ID: 13, AccountID: 3, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.1},
		}}
	r := newRig(t, snap, 1, nil)
	r.tick("EURUSD", 1.1, 1.1) // 818 %, 818 %, and 82 % for the capped account
	r.wantCalls()
	ctx := context.Background()
	r.e.Apply(ctx,
		Change{Kind: AccountTermsChanged, Account: Account{ID: 1, Group: "plain", GroupLeverage: 500, MarginCallLevel: 100, StopOutLevel: 50}},
		Change{Kind: AccountTermsChanged, Account: Account{ID: 2, Group: "capped", GroupLeverage: 500, MarginCallLevel: 100, StopOutLevel: 50}},
		Change{Kind: AccountTermsChanged, Account: Account{ID: 3, Group: "plain", GroupLeverage: 10, MarginCallLevel: 100, StopOutLevel: 50}})
	r.tick("EURUSD", 1.05, 1.05)
	// Account 1 is at 381 % under its new group; 2 and 3 at 38 %.
	r.wantCalls(call{kind: jobClose, id: 12, reason: fx.CloseStopOut, at: q(1.05, 1.05)},
		call{kind: jobClose, id: 13, reason: fx.CloseStopOut, at: q(1.05, 1.05)})
}
