package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchOrdersRouting measures what routing costs the order path: market orders through the
// HTTP API of two desks side by side in one run, identical but for the default account group's
// routing rules — none on one; on the other ten that every order is asked against and none
// matches (symbols, accounts and volumes it does not have, and profile conditions, so each order
// also reads its trader's profile from the holder's memory), the most a rule list makes an order
// do before the group's mode routes it. Each desk has its own database on the same server and is
// loaded alone: both warm up, then are measured twice, alternating (rules, none, none, rules), and
// each reports the mean of its two runs and fxdesk-web's processor time per order.
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
	newSide := func(name string, withRules bool) *side {
		d := newTradingDesk(t, append([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info",
			fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates...)...)
		s := &side{name: name, d: d, tok: d.e.issueToken(9000, false)}
		d.setQuote(s.tok, "EURUSD", "1.10000", "1.10020")
		s.accts = d.fundedAccounts(s.tok, workers, "100000000.00")
		if withRules {
			for _, r := range rules {
				must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups/default/routing", r, http.StatusCreated, nil)
			}
		}
		order := marketOrders(client, s.tok, name)
		s.send = func(acct int64) error { return order(d.web, acct) }
		return s
	}
	with, without := newSide("rules", true), newSide("none", false)
	run := func(s *side, length time.Duration, c *orderCost) float64 {
		s.d.setQuote(s.tok, "EURUSD", "1.10000", "1.10020") // a quote older than 30 s halts the symbol
		return c.measure(s.d.web.pid(), length, func() float64 { return closedLoop(t, workers, length, s.accts, s.send) })
	}
	run(with, phase/2, nil)
	run(without, phase/2, nil)
	for _, s := range []*side{with, without, without, with} {
		s.rate += run(s, phase, &s.cost) / 2
	}
	for _, s := range []*side{with, without} {
		db, err := store.Connect(s.d.e.db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		var routed, filled int64
		err = db.QueryRow("SELECT (SELECT COUNT(*) FROM `fx_order` WHERE `routeRuleId` IS NOT NULL), (SELECT COUNT(*) FROM `fx_order` WHERE `status` = 'FILLED')").Scan(&routed, &filled)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if routed != 0 || filled == 0 {
			t.Fatalf("%s: %d orders routed by a rule, %d filled; want none routed and some filled", s.name, routed, filled)
		}
	}
	perOrder := func(c orderCost) float64 { return float64(c.web.Microseconds()) / max(c.orders, 1) }
	t.Logf("market orders/s through HTTP, %d workers, %s phases: 10 rules %.0f (%v), none %.0f (%v): fxdesk-web µs/order rules/none = %.3f",
		workers, phase, with.rate, with.cost, without.rate, without.cost, perOrder(with.cost)/perOrder(without.cost))
}
