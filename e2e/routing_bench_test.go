package e2e

import (
	"net/http"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// TestBenchOrdersRouting measures what routing costs the order path: market orders through the
// HTTP API of two desks side by side in one run (sideBySide), identical but for the default
// account group's routing rules — none on one; on the other ten that every order is asked against
// and none matches (symbols, accounts and volumes it does not have, and profile conditions, so
// each order also reads its trader's profile from the holder's memory), the most a rule list makes
// an order do before the group's mode routes it.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchOrdersRouting -v ./e2e/
//
// FXDESK_BENCH_SECONDS (default 5) sets each phase's length, FXDESK_BENCH_WORKERS (default 32)
// the concurrency. The ratio is reported, not asserted; the test fails on a refused order or an
// order a rule routed.
func TestBenchOrdersRouting(t *testing.T) {
	dbtest.SkipUnlessBench(t, "routing")
	phase := envDuration("FXDESK_BENCH_SECONDS", 5) * time.Second
	workers := int(envDuration("FXDESK_BENCH_WORKERS", 32))
	rules := []string{
		`{"symbols":["GBPUSD"],"action":"B_BOOK"}`,
		`{"symbols":["USDJPY","AUDUSD"],"action":"B_BOOK"}`,
		`{"accounts":[1],"volumeMin":"1000","action":"B_BOOK"}`,
		`{"volumeMin":"50","action":"B_BOOK"}`,
		`{"volumeMax":"0.005","action":"B_BOOK"}`,
		`{"symbols":["EURUSD"],"volumeMin":"10","action":"B_BOOK"}`,
		`{"minTrades":20,"profitFactorMin":"1.5","action":"B_BOOK"}`,
		`{"winRateMin":"60","action":"B_BOOK"}`,
		`{"avgHoldSecondsMax":"60","underMinuteShareMin":"50","action":"B_BOOK"}`,
		`{"symbols":["EURUSD"],"minTrades":1,"profitFactorMin":"0","action":"B_BOOK"}`,
	}
	with := &benchSide{name: "rules", setup: func(s *benchSide) {
		for _, r := range rules {
			must(t, s.d.web, s.d.admin, "POST", "/api/admin/fx/account-groups/default/routing", r, http.StatusCreated, nil)
		}
	}}
	without := &benchSide{name: "none"}
	sideBySide(t, workers, phase, with, without)
	for _, s := range []*benchSide{with, without} {
		routed := s.count(t, "SELECT COUNT(*) FROM `fx_order` WHERE `routeRuleId` IS NOT NULL")
		filled := s.count(t, "SELECT COUNT(*) FROM `fx_order` WHERE `status` = 'FILLED'")
		if routed != 0 || filled == 0 {
			t.Fatalf("%s: %d orders routed by a rule, %d filled; want none routed and some filled", s.name, routed, filled)
		}
	}
	perOrder := func(c orderCost) float64 { return float64(c.web.Microseconds()) / max(c.orders, 1) }
	t.Logf("market orders/s through HTTP, %d workers, %s phases: 10 rules %.0f (%v), none %.0f (%v): fxdesk-web µs/order rules/none = %.3f",
		workers, phase, with.rate, with.cost, without.rate, without.cost, perOrder(with.cost)/perOrder(without.cost))
}
