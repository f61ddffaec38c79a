package e2e

import (
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// TestBenchOrdersOutbox measures what the events outbox costs the order path: market orders per
// second through the HTTP API of two desks side by side in one run (sideBySide), identical but
// for FXDESK_OUTBOX — on (each fill writes order.filled and position.opened in its batch's last
// round trip) and off (no events).
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
	on := &benchSide{name: "on", env: []string{"FXDESK_OUTBOX=on"}}
	off := &benchSide{name: "off", env: []string{"FXDESK_OUTBOX=off"}}
	sideBySide(t, workers, phase, on, off)

	for _, s := range []*benchSide{on, off} {
		events := s.count(t, "SELECT COUNT(*) FROM `fx_event` WHERE `type` = 'order.filled'")
		fills := s.count(t, "SELECT COUNT(*) FROM `fx_order` WHERE `status` = 'FILLED'")
		if want := map[bool]int64{true: fills, false: 0}[s == on]; events != want || fills == 0 {
			t.Fatalf("outbox %s: %d order.filled events for %d fills, want %d", s.name, events, fills, want)
		}
	}
	perOrder := func(c orderCost) float64 { return float64(c.web.Microseconds()) / max(c.orders, 1) }
	t.Logf("market orders/s through HTTP, %d workers, %s phases: outbox on %.0f (%v), off %.0f (%v): on/off = %.2f, fxdesk-web µs/order on/off = %.3f",
		workers, phase, on.rate, on.cost, off.rate, off.cost, on.rate/off.rate, perOrder(on.cost)/perOrder(off.cost))
}
