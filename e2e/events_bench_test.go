package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchOrdersOutbox measures what the events outbox costs the order path: market orders per
// second through the HTTP API of two desks side by side in one run, identical but for
// FXDESK_OUTBOX — on (each fill writes order.filled and position.opened in its batch's last
// round trip) and off (no events). Each desk has its own database on the same server and is
// loaded alone: both warm up, then are measured twice, alternating (on, off, off, on), and each
// reports the mean of its two runs and the processor time per order.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchOrdersOutbox -v ./e2e/
//
// FXDESK_BENCH_SECONDS (default 5) sets each phase's length, FXDESK_BENCH_WORKERS (default 32)
// the concurrency. The ratio is reported, not asserted; the test fails on a refused order, on
// the desk with the outbox on writing no event per fill, or on the one with it off writing any.
func TestBenchOrdersOutbox(t *testing.T) {
	dbtest.SkipUnlessBench(t, "outbox")
	phase := envDuration("FXDESK_BENCH_SECONDS", 5) * time.Second
	workers := int(envDuration("FXDESK_BENCH_WORKERS", 32))
	procs := dbtest.BenchProcs(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * workers, MaxConnsPerHost: 4 * workers}}

	type side struct {
		name  string
		d     *tradingDesk
		tok   string
		accts []int64
		send  func(int64) error
		rate  float64
		cost  orderCost
	}
	newSide := func(name, outbox string) *side {
		d := newTradingDesk(t, append([]string{"FXDESK_OUTBOX=" + outbox, "FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info",
			fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates...)...)
		s := &side{name: name, d: d, tok: d.e.issueToken(9000, false)}
		d.setQuote(s.tok, "EURUSD", "1.10000", "1.10020")
		s.accts = d.fundedAccounts(s.tok, workers, "100000000.00")
		order := marketOrders(client, s.tok, name)
		s.send = func(acct int64) error { return order(d.web, acct) }
		return s
	}
	on, off := newSide("on", "on"), newSide("off", "off")
	run := func(s *side, length time.Duration, c *orderCost) float64 {
		s.d.setQuote(s.tok, "EURUSD", "1.10000", "1.10020") // a quote older than 30 s halts the symbol
		return c.measure(s.d.web.pid(), length, func() float64 { return closedLoop(t, workers, length, s.accts, s.send) })
	}
	run(on, phase/2, nil)
	run(off, phase/2, nil)
	for _, s := range []*side{on, off, off, on} {
		s.rate += run(s, phase, &s.cost) / 2
	}

	events := func(s *side) (events, fills int64) {
		db, err := store.Connect(s.d.e.db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM `fx_event` WHERE `type` = 'order.filled'), (SELECT COUNT(*) FROM `fx_order` WHERE `status` = 'FILLED')").Scan(&events, &fills); err != nil {
			t.Fatal(err)
		}
		return events, fills
	}
	if e, f := events(on); e != f || f == 0 {
		t.Fatalf("outbox on: %d order.filled events for %d fills, want one each", e, f)
	}
	if e, f := events(off); e != 0 || f == 0 {
		t.Fatalf("outbox off: %d order.filled events for %d fills, want none", e, f)
	}
	t.Logf("market orders/s through HTTP, %d workers, %s phases: outbox on %.0f (%v), off %.0f (%v): on/off = %.2f",
		workers, phase, on.rate, on.cost, off.rate, off.cost, on.rate/off.rate)
}
