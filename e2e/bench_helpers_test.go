package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
		must(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", a.Account.ID), fmt.Sprintf(`{"amount":%q}`, amount), http.StatusCreated, nil)
		ids[i] = a.Account.ID
	}
	return ids
}

// marketOrders returns a sender of 0.01-lot EURUSD market buys for the trader tok through client,
// each with its own requestNonce (prefix-1, prefix-2, …); anything but 201 is an error. It is
// safe for concurrent use.
func marketOrders(client *http.Client, tok, prefix string) func(p *proc, acct int64) error {
	var seq atomic.Int64
	return func(p *proc, acct int64) error {
		body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.01","requestNonce":"%s-%d"}`, acct, prefix, seq.Add(1))
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
