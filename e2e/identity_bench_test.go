package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// TestBenchHostTokenOrders measures market orders per second authenticated with a host-issued
// JWT against the same orders with a desk token, on one desk in one run: the same trader, the
// same accounts, the same concurrency, phases alternated so neither side always meets the warmer
// tables. A JWT costs one signature check per token per process per cache period (5 s), and
// never a read of the host's key set on the request path; the ratio shows what is left.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchHostTokenOrders -v ./e2e/
//
// FXDESK_BENCH_SECONDS (default 5) sets each phase's length, FXDESK_BENCH_WORKERS (default 32)
// the concurrency; fxdesk-web runs at FXDESK_BENCH_GOMAXPROCS (default 1). Reported, not
// asserted: the figures depend on the machine.
func TestBenchHostTokenOrders(t *testing.T) {
	dbtest.SkipUnlessBench(t, "host-token orders")
	phase := envDuration("FXDESK_BENCH_SECONDS", 5) * time.Second
	workers := int(envDuration("FXDESK_BENCH_WORKERS", 32))
	procs := dbtest.BenchProcs(t)
	host := newHostProvider(t)
	env := append([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info", fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates...)
	d := newTradingDesk(t, append(env, host.env...)...)
	const user = 9100
	desk := d.e.issueToken(user, false)
	jwt := host.mint(t, user, nil, time.Hour).Token
	d.setQuote(desk, "EURUSD", "1.10000", "1.10020")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * workers, MaxConnsPerHost: 4 * workers}}
	accts := d.fundedAccounts(desk, workers, "100000000.00")
	viaDesk, viaJWT := marketOrders(client, desk, "desk"), marketOrders(client, jwt, "jwt")
	run := func(order func(*proc, int64) error, length time.Duration) float64 {
		d.setQuote(desk, "EURUSD", "1.10000", "1.10020")
		return closedLoop(t, workers, length, accts, func(acct int64) error { return order(d.web, acct) })
	}
	run(viaDesk, phase/2)
	run(viaJWT, phase/2)
	var deskRate, jwtRate float64
	for round := range 4 {
		if round%2 == 0 {
			deskRate += run(viaDesk, phase) / 4
			jwtRate += run(viaJWT, phase) / 4
		} else {
			jwtRate += run(viaJWT, phase) / 4
			deskRate += run(viaDesk, phase) / 4
		}
	}
	t.Logf("market orders/s, %d workers, fxdesk-web GOMAXPROCS=%d, 4 × %s per side: desk token %.0f, host JWT %.0f → JWT/desk %.2f×",
		workers, procs, phase, deskRate, jwtRate, jwtRate/deskRate)
}
