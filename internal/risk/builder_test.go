package risk

import (
	"context"
	"slices"
	"testing"
	"time"

	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// streamLoader hands its snapshot over in parts, as a StreamLoader: the terms, the accounts, then
// the positions and the orders in interleaved batches of 7.
type streamLoader struct{ s Snapshot }

func (l streamLoader) Load(context.Context) (Snapshot, error) { return l.s, nil }

func (l streamLoader) LoadInto(_ context.Context, sink ViewSink) error {
	sink.AddTerms(l.s.Instruments, l.s.Groups)
	sink.AddAccounts(l.s.Accounts)
	ps, os := l.s.Positions, l.s.Orders
	for len(ps) > 0 || len(os) > 0 {
		n := min(7, len(ps))
		sink.AddPositions(ps[:n])
		ps = ps[n:]
		m := min(7, len(os))
		sink.AddOrders(os[:m])
		os = os[m:]
	}
	return nil
}

// A view built from its parts as a loader streams them (StreamLoader) watches the desk exactly as
// the same view installed whole: the same stops, take-profits, resting orders and stop-outs fire
// on the same ticks.
func TestAViewBuiltFromPartsWatchesAsOneInstalledWhole(t *testing.T) {
	run := func(stream bool) (Stats, []call) {
		// Thin accounts, so the burst's losses stop some of them out; resting orders on the
		// plain symbols, half of them within reach of the ticks below.
		snap, prices, plain := benchDesk(3000, 400, 300)
		for i, sym := range plain[:60] {
			q, _ := prices.LastTick(sym)
			side, typ, px := Buy, Limit, q.Ask*0.999
			if i%2 == 1 {
				side, typ, px = Sell, Stop, q.Bid*0.95
			}
			snap.Orders = append(snap.Orders, Order{ID: int64(i + 1), AccountID: int64(i%benchAccounts + 1), Symbol: sym, Side: side, Type: typ, Price: px})
		}
		var l Loader = loaderFunc(func(context.Context) (Snapshot, error) { return snap, nil })
		if stream {
			l = streamLoader{snap}
		}
		exec := &fakeExec{}
		e, err := New(Config{Loader: l, Prices: prices, Updates: make(chan tick.Update), Executor: exec,
			Gate: realGate(t, &gatetest.Lease{}, nil, nil), Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		recv(t, e.Ready())
		settle := func() {
			e.work.waitIdle()
			e.mu.Lock()
			e.drainLocked(ctx)
			e.mu.Unlock()
		}
		for _, sym := range plain[:60] {
			q, _ := prices.LastTick(sym)
			e.onTick(ctx, prices.set(sym, q.Bid*0.998, q.Ask*0.998), time.Now())
			settle()
		}
		e.onTick(ctx, prices.set(burstSymbol, 0.97, 0.9701), time.Now())
		settle()
		calls := exec.got()
		slices.SortFunc(calls, func(a, b call) int { return cmpCall(a, b) })
		return e.Stats(), calls
	}
	wholeStats, whole := run(false)
	streamStats, streamed := run(true)
	if len(whole) == 0 {
		t.Fatal("the ticks fired nothing: the test shows nothing")
	}
	var stopOuts, fills int
	for _, c := range whole {
		if c.stop != nil {
			stopOuts++
		}
		if c.kind == jobFill {
			fills++
		}
	}
	if stopOuts == 0 || fills == 0 {
		t.Fatalf("the ticks fired %d stop-outs and %d fills: the test needs both", stopOuts, fills)
	}
	if len(streamed) != len(whole) {
		t.Fatalf("a view built from parts made %d executor calls, installed whole %d", len(streamed), len(whole))
	}
	for i := range whole {
		if cmpCall(whole[i], streamed[i]) != 0 {
			t.Fatalf("call %d: built from parts %+v, installed whole %+v", i, streamed[i], whole[i])
		}
	}
	if wholeStats.Positions != streamStats.Positions || wholeStats.Orders != streamStats.Orders || wholeStats.Accounts != streamStats.Accounts {
		t.Fatalf("stats built from parts %+v, installed whole %+v", streamStats, wholeStats)
	}
}

func cmpCall(a, b call) int {
	switch {
	case a.kind != b.kind:
		return int(a.kind) - int(b.kind)
	case a.id != b.id:
		if a.id < b.id {
			return -1
		}
		return 1
	case a.reason != b.reason:
		if a.reason < b.reason {
			return -1
		}
		return 1
	}
	return 0
}
