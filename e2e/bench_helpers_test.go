package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// fundedAccounts opens n USD accounts at 1:100 for the trader tok and deposits amount in each.
// A benchmark's one trader holds more accounts than a user may by default: the cap is raised to
// its top first.
func (d *tradingDesk) fundedAccounts(tok string, n int, amount string) []int64 {
	t := d.e.t
	t.Helper()
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/settings", `{"fxMaxAccountsPerUser":"1000"}`, http.StatusOK, nil)
	ids := make([]int64, n)
	for i := range ids {
		var a accountResp
		must(t, d.web, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`, http.StatusCreated, &a)
		d.fund(a.Account.ID, amount)
		ids[i] = a.Account.ID
	}
	return ids
}

// marketOrders returns a sender of 0.01-lot EURUSD market buys for the trader tok through client,
// each with its own requestNonce (prefix-1, prefix-2, …); anything but 201 is an error. It is
// safe for concurrent use.
func marketOrders(client *http.Client, tok, prefix string) func(p *proc, acct int64) error {
	return marketOrdersWith(client, tok, prefix, "")
}

// marketOrdersWith is marketOrders whose bodies carry extra fields: a JSON fragment starting
// with a comma (`,"priceBound":"1.2"`), or "".
func marketOrdersWith(client *http.Client, tok, prefix, extra string) func(p *proc, acct int64) error {
	var seq atomic.Int64
	return func(p *proc, acct int64) error {
		body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.01","requestNonce":"%s-%d"%s}`, acct, prefix, seq.Add(1), extra)
		req, _ := http.NewRequest("POST", "http://"+p.addr+"/api/fx/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("order via %s = %d %s", p.name, resp.StatusCode, b)
		}
		return nil
	}
}

// percentile is the p quantile of the sorted latencies l: the element at p·len, the last for p 1.
func percentile(l []time.Duration, p float64) time.Duration {
	return l[min(len(l)-1, int(p*float64(len(l))))]
}

// keepQuoting sends the simulator bid() and bid()+2 pips for EURUSD every 5 s until stop returns:
// with the simulator's walk off, that keeps EURUSD inside the 30 s trading staleness for a whole
// benchmark. It runs off the test's goroutine, so it reports a failure with t.Error, never t.Fatal.
func (d *tradingDesk) keepQuoting(t *testing.T, bid func() float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Second):
				b := bid()
				if err := d.sim.control("quote", fmt.Sprintf(`{"symbol":"EURUSD","bid":%.5f,"ask":%.5f}`, b, b+0.0002)); err != nil {
					t.Error(err)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// benchSide is one of the two desks a side-by-side benchmark compares: identical but for env
// and setup.
type benchSide struct {
	name  string
	env   []string         // added to the desk's environment
	setup func(*benchSide) // run once the desk is up and funded; nil: nothing
	d     *tradingDesk
	tok   string
	accts []int64
	send  func(int64) error
	rate  float64 // market orders/s through HTTP, the mean of its two measured runs
	cost  orderCost
}

// sideBySide starts a desk for each side (a production install's lease timing and log level,
// GOMAXPROCS as the benchmarks set it, no rate limits), funds one account per worker on each and
// measures market orders through HTTP on each side alone: both warm up for half a phase, then are
// measured for a phase twice, alternating (a, b, b, a), each side keeping the mean of its runs.
func sideBySide(t *testing.T, workers int, phase time.Duration, a, b *benchSide) {
	t.Helper()
	procs := dbtest.BenchProcs(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * workers, MaxConnsPerHost: 4 * workers}}
	for _, s := range []*benchSide{a, b} {
		s.d = newTradingDesk(t, slices.Concat([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info",
			fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates, s.env)...)
		s.tok = s.d.e.issueToken(9000, false)
		s.d.setQuote(s.tok, "EURUSD", "1.10000", "1.10020")
		s.accts = s.d.fundedAccounts(s.tok, workers, "100000000.00")
		if s.setup != nil {
			s.setup(s)
		}
		order := marketOrders(client, s.tok, s.name)
		s.send = func(acct int64) error { return order(s.d.web, acct) }
	}
	run := func(s *benchSide, length time.Duration, c *orderCost) float64 {
		s.d.setQuote(s.tok, "EURUSD", "1.10000", "1.10020") // a quote older than 30 s halts the symbol
		return c.measure(s.d.web.pid(), length, func() float64 { return closedLoop(t, workers, length, s.accts, s.send) })
	}
	run(a, phase/2, nil)
	run(b, phase/2, nil)
	for _, s := range []*benchSide{a, b, b, a} {
		s.rate += run(s, phase, &s.cost) / 2
	}
}

// count reads one number from s's database.
func (s *benchSide) count(t *testing.T, query string) int64 {
	t.Helper()
	db, err := store.Connect(s.d.e.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
