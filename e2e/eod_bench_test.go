package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/swaps"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchEndOfDay measures, in each on-time processFxSwaps run of the real fxdesk-cron, the
// rollover's charge and the end of day it then freezes over the same book: 100,000 accounts with
// one open EURUSD position each (half in EUR, converted through the quote mirror). Two
// consecutive weekday rollovers are run: the desk's first frozen day, and the next, which every
// later day resembles (the previous day's rows are there, the reconciliation chains onto them
// and checks both days). For each it reports positions charged per second beside accounts
// frozen per second and the reconciliation's time, then reruns the second instant and checks
// that nothing more is charged or frozen and that every account has exactly one row a day.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchEndOfDay -v ./e2e/
//
// FXDESK_BENCH_ACCOUNTS (default 100000) sets the size.
func TestBenchEndOfDay(t *testing.T) {
	dbtest.SkipUnlessBench(t, "end of day")
	total := int(envDuration("FXDESK_BENCH_ACCOUNTS", 100000))
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", append(mirrorEnv("CRON_MODE=off"), unlimitedRates...)...)
	web.waitLog(10*time.Second, msgHas("fx quote mirror publishing"))
	seedStart := time.Now()
	e.seedPositionsIn("USD", total/2, 1)
	e.seedPositionsIn("EUR", total-total/2, 1)
	t.Logf("seeded %d accounts with one position each in %v", total, time.Since(seedStart).Round(time.Millisecond))

	type run struct {
		counts                 map[string]int
		job, freeze, reconcile time.Duration
	}
	// A minute after a rollover still to come: on time, so the run captures the mirror's prices
	// as the day's close and freezes the book as it stands.
	once := func(ro fx.Rollover) run {
		at := ro.At.Add(time.Minute).UTC().Format(time.RFC3339)
		out, err := runOnceWithin(5*time.Minute, e.env(mirrorEnv("LOG_LEVEL=info")...), "fxdesk-cron", "run", swaps.JobName, "--at", at)
		if err != nil {
			t.Fatalf("run at %s: %v\n%s", at, err, out)
		}
		r := run{counts: parseCounts(t, swaps.JobName, out)}
		for line := range strings.SplitSeq(out, "\n") {
			var l logLine
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			ns, _ := l["took"].(float64)
			switch l.msg() {
			case "job ran":
				r.job = time.Duration(ns)
			case "end of day frozen":
				r.freeze += time.Duration(ns)
			case "end of day reconciled":
				r.reconcile = time.Duration(ns)
			}
		}
		return r
	}
	first := firstWeekdayRolloverAfter(time.Now())
	days := []fx.Rollover{first, firstWeekdayRolloverAfter(first.At)}
	for i, ro := range days {
		got := once(ro)
		if got.counts["charged"] != total || got.counts["accountsFrozen"] != total || got.counts["unreconciled"] != 0 {
			t.Fatalf("%s: counts %v, want %d charged and frozen, none unreconciled", ro.Date, got.counts, total)
		}
		// The rest of the job is the charge, the capture of the closing prices and a few reads.
		charge := got.job - got.freeze - got.reconcile
		charged, frozen := float64(total)/charge.Seconds(), float64(total)/got.freeze.Seconds()
		t.Logf("rollover of %s over %d accounts, one position each (frozen day %d): job %v", ro.Date, total, i+1, got.job.Round(time.Millisecond))
		t.Logf("  swap charge (the job less the end of day) %v: %.0f positions/s", charge.Round(time.Millisecond), charged)
		t.Logf("  freeze %v: %.0f accounts/s (%.1f× the charge's pace)", got.freeze.Round(time.Millisecond), frozen, frozen/charged)
		t.Logf("  reconciliation of %d day(s) %v: %.0f account-days/s", i+1, got.reconcile.Round(time.Millisecond),
			float64(total*(i+1))/got.reconcile.Seconds())
	}

	again := once(days[1])
	if again.counts["charged"] != 0 || again.counts["accountsFrozen"] != 0 || again.counts["unreconciled"] != 0 {
		t.Fatalf("rerun counts %v, want nothing charged or frozen, none unreconciled", again.counts)
	}
	t.Logf("rerun of the second instant: job %v, reconciliation %v", again.job.Round(time.Millisecond), again.reconcile.Round(time.Millisecond))
	for _, ro := range days {
		var rows, distinct int
		if err := e.sql.QueryRow("SELECT COUNT(*), COUNT(DISTINCT `accountId`) FROM `fx_eod_account` WHERE `tradingDay` = ?", ro.Date).Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if rows != total || distinct != total {
			t.Fatalf("%d rows over %d accounts for %s, want one for each of %d", rows, distinct, ro.Date, total)
		}
	}
	e.checkAllLedgers()
}
