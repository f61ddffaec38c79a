package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// TestBenchPriceBound measures, in one run against one desk, market orders per second through
// the HTTP API of the real binary with a priceBound (far enough from the quote that every order
// fills, so both sides do the same work but the bound's check and its stored column) and without
// one. Both are warmed up, then measured twice, alternating, each reporting the mean of its
// runs. The issue's target is bounded ≥ 0.95 × plain; the figures are reported, not asserted.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchPriceBound -v ./e2e/
//
// FXDESK_BENCH_SECONDS (default 5) sets each phase's length, FXDESK_BENCH_WORKERS (default 32)
// the concurrency, FXDESK_BENCH_GOMAXPROCS (default 1) fxdesk-web's GOMAXPROCS.
func TestBenchPriceBound(t *testing.T) {
	dbtest.SkipUnlessBench(t, "price-bound")
	phase := envDuration("FXDESK_BENCH_SECONDS", 5) * time.Second
	workers := int(envDuration("FXDESK_BENCH_WORKERS", 32))
	procs := dbtest.BenchProcs(t)
	d := newTradingDesk(t, append([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info", fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates...)...)
	tok := d.e.issueToken(9000, false)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * workers, MaxConnsPerHost: 4 * workers}}
	plainAccts := d.fundedAccounts(tok, workers, "100000000.00")
	boundAccts := d.fundedAccounts(tok, workers, "100000000.00")
	plain, bounded := marketOrdersWith(client, tok, "p", ""), marketOrdersWith(client, tok, "q", `,"priceBound":"1.20000","timeInForce":"FOK"`)
	// Each measured phase also adds up the processor time each process spent per order: on a
	// shared machine the rates move with whatever else runs, the time per order much less.
	run := func(length time.Duration, accts []int64, send func(*proc, int64) error, c *orderCost) float64 {
		// The simulator does not walk: the quote is set again so that it never goes stale.
		d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
		return c.measure(d.web.pid(), length, func() float64 {
			return closedLoop(t, workers, length, accts, func(acct int64) error { return send(d.web, acct) })
		})
	}
	run(phase/2, plainAccts, plain, nil)
	run(phase/2, boundAccts, bounded, nil)
	var plainRate, boundRate float64
	var plainCost, boundCost orderCost
	for round := range 2 {
		if round == 0 {
			plainRate += run(phase, plainAccts, plain, &plainCost) / 2
			boundRate += run(phase, boundAccts, bounded, &boundCost) / 2
		} else {
			boundRate += run(phase, boundAccts, bounded, &boundCost) / 2
			plainRate += run(phase, plainAccts, plain, &plainCost) / 2
		}
	}
	t.Logf("market orders/s over HTTP (%d workers, GOMAXPROCS=%d, %s phases): without a priceBound %.0f, with one %.0f; ratio %.3f (target ≥ 0.95)",
		workers, procs, phase, plainRate, boundRate, boundRate/plainRate)
	t.Logf("processor time per order: without a priceBound %s; with one %s", plainCost, boundCost)
}
