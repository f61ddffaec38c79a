package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// TestBenchWebTierForwarding measures what forwarding costs: market orders sent to the follower
// (forwarded to the holder) against the same orders sent to the holder directly, at the same
// offered load, in the same run. It first finds the holder's closed-loop peak, then offers a
// fraction of it (FXDESK_BENCH_LOAD percent, default 25: latency is measured below saturation) as an open-loop arrival stream to the
// holder and to the follower, twice each in the order holder, follower, follower, holder, and reports orders/s and p50/p99 of each,
// the throughput ratio (target ≥ 0.85) and the p50 the hop adds (target ≤ 1 ms). The closed-loop
// peak through the follower is reported beside the holder's: on one machine the follower's proxy
// work competes with the holder and MariaDB for the same processors.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchWebTierForwarding -v ./e2e/
//
// FXDESK_BENCH_SECONDS (default 5) sets each phase's length, FXDESK_BENCH_WORKERS (default 32)
// the closed-loop concurrency, FXDESK_BENCH_GOMAXPROCS (default 1) each fxdesk-web's GOMAXPROCS.
// It fails on any refused order; the figures are reported, not asserted: they depend on the
// machine.
func TestBenchWebTierForwarding(t *testing.T) {
	dbtest.SkipUnlessBench(t, "web-tier forwarding")
	phase := envDuration("FXDESK_BENCH_SECONDS", 5) * time.Second
	workers := int(envDuration("FXDESK_BENCH_WORKERS", 32))
	load := float64(envDuration("FXDESK_BENCH_LOAD", 25)) / 100
	procs := dbtest.BenchProcs(t)
	w := newWebTier(t, append([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info", fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates...)...)
	tok := w.d.e.issueToken(9100, false)
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	// The simulator's walk is off: the same price again every 5 s keeps EURUSD inside the 30 s
	// trading staleness for the whole run.
	defer w.d.keepQuoting(t, func() float64 { return 1.10000 })()
	accts := w.d.fundedAccounts(tok, workers, "100000000.00")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 1024}}
	order := marketOrders(client, tok, "wb")

	closedLoop(t, workers, phase/2, accts, func(a int64) error { return order(w.d.web, a) }) // warm-up
	peak := closedLoop(t, workers, phase, accts, func(a int64) error { return order(w.d.web, a) })
	peakFollower := closedLoop(t, workers, phase, accts, func(a int64) error { return order(w.follower, a) })
	rate := peak * load
	if v, err := strconv.ParseFloat(os.Getenv("FXDESK_BENCH_RATE"), 64); err == nil && v > 0 {
		rate = v
	}
	type result struct {
		rate     float64
		p50, p99 time.Duration
	}
	run := func(p *proc) result {
		lat, achieved := openLoop(t, rate, time.Second, phase, func(i int) error { return order(p, accts[i%len(accts)]) })
		return result{achieved, percentile(lat, 0.50), percentile(lat, 0.99)}
	}
	// Holder, follower, follower, holder: a drift over the run (the tables grow) weighs on both
	// sides alike.
	var holder, follower []result
	holder = append(holder, run(w.d.web))
	follower = append(follower, run(w.follower), run(w.follower))
	holder = append(holder, run(w.d.web))
	mean := func(rs []result) result {
		var m result
		for _, r := range rs {
			m.rate += r.rate / float64(len(rs))
			m.p50 += r.p50 / time.Duration(len(rs))
			m.p99 += r.p99 / time.Duration(len(rs))
		}
		return m
	}
	h, f := mean(holder), mean(follower)
	t.Logf("closed-loop peak with %d workers, GOMAXPROCS=%d: holder %.0f orders/s, through the follower %.0f orders/s (ratio %.3f); offered %.0f orders/s (%.0f%% of the holder's), phases of %s",
		workers, procs, peak, peakFollower, peakFollower/peak, rate, load*100, phase)
	for i := range holder {
		t.Logf("round %d: holder %.0f orders/s p50 %s p99 %s · follower %.0f orders/s p50 %s p99 %s", i+1,
			holder[i].rate, holder[i].p50, holder[i].p99, follower[i].rate, follower[i].p50, follower[i].p99)
	}
	t.Logf("sent to the holder:   %.0f orders/s, p50 %s, p99 %s", h.rate, h.p50, h.p99)
	t.Logf("sent to the follower: %.0f orders/s, p50 %s, p99 %s", f.rate, f.p50, f.p99)
	t.Logf("ratio follower/holder %.3f (target ≥ 0.85); p50 added by the hop %s (target ≤ 1ms)", f.rate/h.rate, f.p50-h.p50)
}
