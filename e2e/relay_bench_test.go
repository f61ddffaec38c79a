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

	"fxdesk/internal/testkit/dbtest"
)

// TestBenchRelayBurst measures whether the events relay keeps up with a burst of closes: the real
// fxdesk-web holder opens FXDESK_BENCH_RELAY_CLOSES (default 5,000) B-book positions with a stop
// loss, a gap through the stop closes them all (the risk engine, the group commit: one
// position.closed event each), and the test reports, on the database's clock, how long after
// the burst's last commit the Redis Stream relay's position reached the newest event (target:
// within 2 s), and how long the burst itself took.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchRelayBurst -v ./e2e/
//
// It fails when a position is left open or the stream does not hold every event of the table;
// the figures are reported, not asserted.
func TestBenchRelayBurst(t *testing.T) {
	dbtest.SkipUnlessBench(t, "relay burst")
	n := int(envDuration("FXDESK_BENCH_RELAY_CLOSES", 5000))
	d := newTradingDesk(t, append([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info",
		fmt.Sprintf("GOMAXPROCS=%d", dbtest.BenchProcs(t))}, unlimitedRates...)...)
	waitRiskReady(d.web)
	tok := d.e.issueToken(9400, false)
	accts := d.fundedAccounts(tok, 64, "10000000.00")
	var bid atomic.Value
	bid.Store(1.10000)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	defer d.keepQuoting(t, func() float64 { return bid.Load().(float64) })()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, MaxConnsPerHost: 32}}
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n) && failed.Load() == nil; i = next.Add(1) {
				body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.01","sl":"1.09000"}`, accts[(w+int(i))%len(accts)])
				req, _ := http.NewRequest("POST", "http://"+d.web.addr+"/api/fx/orders", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						err = fmt.Errorf("order = %d %s", resp.StatusCode, b)
					}
				}
				if err != nil {
					failed.Store(&err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
	newest := func() int64 {
		var id int64
		if err := d.e.sql.QueryRow("SELECT COALESCE(MAX(`id`), 0) FROM `fx_event`").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	caughtUp := func() bool { return streamPosition(t, d.e.sql) == newest() }
	eventually(t, 30*time.Second, 10*time.Millisecond, "the relay caught up with the opens", caughtUp)
	before := newest()

	// The gap: every stop is crossed at once.
	bid.Store(1.08000)
	d.simQuote("EURUSD", "1.08000", "1.08020")
	eventually(t, 120*time.Second, 20*time.Millisecond, "every position closed", func() bool {
		var open int
		if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'OPEN'").Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open == 0
	})
	eventually(t, 60*time.Second, 5*time.Millisecond, "the relay caught up with the closes", caughtUp)

	var closes int
	var first, last, relayed time.Time
	if err := d.e.sql.QueryRow("SELECT COUNT(*), MIN(`createdAt`), MAX(`createdAt`) FROM `fx_event` WHERE `id` > ? AND `type` = 'position.closed'", before).Scan(&closes, &first, &last); err != nil {
		t.Fatal(err)
	}
	if err := d.e.sql.QueryRow("SELECT `updatedAt` FROM `fx_event_relay` WHERE `name` = 'stream'").Scan(&relayed); err != nil {
		t.Fatal(err)
	}
	var events int64
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event`").Scan(&events); err != nil {
		t.Fatal(err)
	}
	if xlen, err := d.e.rdb.XLen(t.Context(), d.e.names.Events()).Result(); err != nil || xlen != events {
		t.Fatalf("the stream holds %d entries (%v), the table %d events", xlen, err, events)
	}
	if closes != n {
		t.Fatalf("%d position.closed events, want %d", closes, n)
	}
	t.Logf("%d closes committed over %s; the stream relay's position reached the last one %s after it committed (target: within 2s); %d events in the stream",
		closes, last.Sub(first).Round(time.Millisecond), relayed.Sub(last).Round(time.Millisecond), events)
}
