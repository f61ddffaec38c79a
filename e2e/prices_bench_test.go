package e2e

import (
	"slices"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// TestBenchPriceFailover measures, on one desk quoting EURUSD from two walking simulators (a
// quote every 50 ms each), how long the desk takes to quote from the backup when the primary
// dies: from the primary's SIGKILL to the first quote from the backup on the desk's markets rail,
// over FXDESK_BENCH_TRIALS trials (default 20; the primary is restarted and the desk back on it
// after the hold-down between two); the same when the primary stays connected but falls silent,
// over FXDESK_BENCH_SILENCES trials (default 10). Then the spike filter's confirmation delay for
// a real gap: from a 300-pip shift of both simulators to the first gapped quote on the rail, over
// FXDESK_BENCH_GAPS gaps (default 10, alternately up and down).
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchPriceFailover -v ./e2e/
//
// Reported, not asserted.
func TestBenchPriceFailover(t *testing.T) {
	dbtest.SkipUnlessBench(t, "price failover")
	trials := int(envDuration("FXDESK_BENCH_TRIALS", 20))
	silences := int(envDuration("FXDESK_BENCH_SILENCES", 10))
	gaps := int(envDuration("FXDESK_BENCH_GAPS", 10))
	d := newPriceDesk(t, "FXDESK_PRICE_HOLD_DOWN=1s", "LOG_LEVEL=info")
	rail := d.rail("EURUSD")

	var failover []time.Duration
	for range trials {
		from := d.web.lineCount()
		rail.latest()
		killed := time.Now()
		d.primary.kill()
		q := d.firstFromBackup(rail, from, killed)
		failover = append(failover, q.At.Sub(killed))
		from = d.web.lineCount()
		d.primary = startMarketSim(t, d.primary.addr())
		d.web.waitNth(15*time.Second, from, 1, isSwitch("EURUSD", "primary"))
	}
	slices.Sort(failover)
	t.Logf("failover (SIGKILL of the primary → first backup quote on the rail), %d trials: p50 %v p95 %v max %v",
		len(failover), percentile(failover, 0.50).Round(time.Millisecond), percentile(failover, 0.95).Round(time.Millisecond), failover[len(failover)-1].Round(time.Millisecond))

	// The primary stays connected but falls silent: the desk notices by the silence threshold it
	// derives from the tick rate (10 × 50 ms, at least FXDESK_PRICE_SILENT_MIN's 1s).
	var silent []time.Duration
	for range silences {
		from := d.web.lineCount()
		rail.latest()
		hushed := time.Now()
		d.primary.must("silence", `{"symbol":"*","seconds":60}`)
		q := d.firstFromBackup(rail, from, hushed)
		silent = append(silent, q.At.Sub(hushed))
		from = d.web.lineCount()
		d.primary.must("silence", `{"symbol":"*","seconds":0}`)
		d.web.waitNth(15*time.Second, from, 1, isSwitch("EURUSD", "primary"))
	}
	if len(silent) > 0 {
		slices.Sort(silent)
		t.Logf("failover on silence (primary connected, silent → first backup quote on the rail), %d trials: p50 %v p95 %v max %v",
			len(silent), percentile(silent, 0.50).Round(time.Millisecond), percentile(silent, 0.95).Round(time.Millisecond), silent[len(silent)-1].Round(time.Millisecond))
	}

	var confirm []time.Duration
	for i := range gaps {
		n := int64(300)
		if i%2 == 1 {
			n = -300
		}
		now := rail.latest()
		beyond := now.Ask.Add(pips(250))
		if n < 0 {
			beyond = now.Bid.Sub(pips(250))
		}
		delay, _ := d.gap(rail, n, beyond)
		confirm = append(confirm, delay)
	}
	slices.Sort(confirm)
	t.Logf("gap confirmation (300-pip shift on both sources → first gapped quote on the rail), %d gaps: p50 %v p95 %v max %v",
		len(confirm), percentile(confirm, 0.50).Round(time.Millisecond), percentile(confirm, 0.95).Round(time.Millisecond), confirm[len(confirm)-1].Round(time.Millisecond))
}

// firstFromBackup waits for the first quote the desk published from the backup after killed: by
// the rail's source where it names one, else the first quote the rail delivered after the switch
// to the backup (its log line read from index from; the selection's since is the engine's time
// of the switch).
func (d *priceDesk) firstFromBackup(rail *priceRail, from int, killed time.Time) railQuote {
	d.e.t.Helper()
	q := rail.next(10*time.Second, "after the kill", func(q railQuote) bool { return q.At.After(killed) })
	if q.Source != "" {
		if q.Source != "backup" {
			q = rail.next(10*time.Second, "from the backup", func(q railQuote) bool { return q.Source == "backup" })
		}
		return q
	}
	d.web.waitNth(10*time.Second, from, 1, isSwitch("EURUSD", "backup"))
	s := d.selection("EURUSD")
	if s.Source != "backup" || s.Since.Before(killed) {
		d.e.t.Fatalf("after the switch line EURUSD's selection is %+v", s)
	}
	if !q.At.After(s.Since) {
		q = rail.next(10*time.Second, "after the switch", func(q railQuote) bool { return q.At.After(s.Since) })
	}
	return q
}
