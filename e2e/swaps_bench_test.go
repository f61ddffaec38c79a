package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/swaps"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchSwapRollover measures one processFxSwaps run of the real fxdesk-cron over 100,000 open
// positions (10,000 accounts × 10; half the accounts in EUR, so half the charges convert USD → EUR
// through the quote mirror), reports positions charged per second, then reruns the same instant
// and checks that nothing more is charged and every position has exactly one deal.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchSwapRollover -v ./e2e/
//
// FXDESK_BENCH_POSITIONS (default 100000) sets the size.
func TestBenchSwapRollover(t *testing.T) {
	dbtest.SkipUnlessBench(t, "rollover")
	total := int(envDuration("FXDESK_BENCH_POSITIONS", 100000))
	const per = 10
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", append(mirrorEnv("CRON_MODE=off"), unlimitedRates...)...)
	web.waitLog(10*time.Second, msgHas("fx quote mirror publishing"))
	seedStart := time.Now()
	e.seedPositionsIn("USD", total/per/2, per)
	e.seedPositionsIn("EUR", total/per/2, per)
	t.Logf("seeded %d positions in %v", total, time.Since(seedStart).Round(time.Millisecond))

	at := firstWeekdayRolloverAfter(time.Now()).At.Add(time.Hour)
	run := func() (map[string]int, time.Duration, time.Duration) {
		start := time.Now()
		out, err := runOnce(e.env(mirrorEnv("LOG_LEVEL=info")...), "fxdesk-cron", "run", swaps.JobName, "--at", at.UTC().Format(time.RFC3339))
		wall := time.Since(start)
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out)
		}
		var took time.Duration
		for line := range strings.SplitSeq(out, "\n") {
			var l logLine
			if json.Unmarshal([]byte(line), &l) == nil && l.msg() == "job ran" {
				if ns, ok := l["took"].(float64); ok {
					took = time.Duration(ns)
				}
			}
		}
		return parseCounts(t, swaps.JobName, out), took, wall
	}
	got, took, wall := run()
	if got["charged"] != total {
		t.Fatalf("charged %v, want %d", got, total)
	}
	t.Logf("rollover over %d open positions: job %v (%.0f positions charged/s), process wall time %v (%.0f/s)",
		total, took.Round(time.Millisecond), float64(total)/took.Seconds(), wall.Round(time.Millisecond), float64(total)/wall.Seconds())
	again, took2, _ := run()
	if again["charged"] != 0 {
		t.Fatalf("rerun charged %v", again)
	}
	t.Logf("rerun of the same instant: %v in %v", again, took2.Round(time.Millisecond))
	var n, distinct int
	if err := e.sql.QueryRow("SELECT COUNT(*), COUNT(DISTINCT `positionId`) FROM `fx_deal` WHERE `type` = 'SWAP'").Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != total || distinct != total {
		t.Fatalf("%d swap deals over %d positions, want %d", n, distinct, total)
	}
	e.checkAllLedgers()
}
