package fix_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

// TestBenchFIXBurstOwnTime closes 360 trades at once through the session's writer (as a gap's
// burst of closes) and reports own time — from the close's trigger to its message handed to
// the session — p50/p95/max. Each close is decided on the holder's trades in memory and waits
// for its identity row's batch commit (docs/fix.md, «The burst on one session»); the venue runs
// in this process with no latency, so the reports' journaling competes with the burst. It
// asserts only that every close filled.
func TestBenchFIXBurstOwnTime(t *testing.T) {
	dbtest.SkipUnlessBench(t, "FIX burst")
	const n = 360
	var mu sync.Mutex
	var own []time.Duration
	r := newRig(t, 30*time.Second)
	r.halt()
	r.start(t, 30*time.Second, func(d time.Duration) {
		mu.Lock()
		own = append(own, d)
		mu.Unlock()
	})
	ctx := context.Background()
	trades := make([]string, n)
	for i := range n {
		out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("1000")})
		if err != nil || out.Fill == nil {
			t.Fatal(out, err)
		}
		trades[i] = out.Fill.TradeOpened
	}
	mu.Lock()
	own = own[:0]
	mu.Unlock()
	send := fix.Sender{S: r.session}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	for i, id := range trades {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = send.CloseTrade(ctx, id, nil, start)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	slices.Sort(own)
	q := func(p float64) time.Duration { return own[int(p*float64(len(own)-1))] }
	t.Logf("FIX burst of %d closes: own time p50 %s p95 %s max %s, wall %s", len(own), q(0.5), q(0.95), own[len(own)-1], wall)
}
