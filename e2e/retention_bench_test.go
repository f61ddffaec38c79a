package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchRetentionPrune measures a large prune of the events outbox while the desk trades: the
// real fxdesk-web holder runs with FXDESK_EVENTS_RETENTION=720h and a retention pass a minute;
// once traders send FXDESK_BENCH_PRUNE_RATE (default 100) market orders a second, the test adds
// FXDESK_BENCH_PRUNE_EVENTS (default 1,000,000) events 40 days old below the desk's own ids,
// already relayed, in one statement, and the runner's next pass prunes them. Beside it the test samples, every 100 ms, the stream relay's lag (how long ago the
// oldest event it has not relayed was written, on the database clock: what
// fxdesk_events_relay_lag_seconds reports) and, every 500 ms, GET /api/admin/fx/desk; and it
// reports both with the fills' latencies, during the prune and for as long again after it.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchRetentionPrune -v -timeout 30m ./e2e/
//
// It fails when an old event is left or a new one is gone, or when the stream lacks an event
// the desk wrote; the figures are reported, not asserted (the issue's target: lag ≤ 2 s).
//
// With FXDESK_YEAR_DB naming a generated year (`make year`), the desk runs on it instead and
// prunes the year's own events older than 30 days (millions), which stays done:
//
//	FXDESK_BENCH=1 FXDESK_YEAR_DB=fxdesk_year go test -count=1 -run TestBenchRetentionPrune -v -timeout 90m ./e2e/
func TestBenchRetentionPrune(t *testing.T) {
	dbtest.SkipUnlessBench(t, "retention prune")
	rate := int(envDuration("FXDESK_BENCH_PRUNE_RATE", 100))
	env := append([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info",
		"FXDESK_EVENTS_RETENTION=720h", "FXDESK_RETENTION_EVERY=1m", fmt.Sprintf("GOMAXPROCS=%d", dbtest.BenchProcs(t))}, unlimitedRates...)
	ctx := context.Background()
	began := time.Now()
	var (
		d      *tradingDesk
		e      *deskEnv
		n      int64  // the events the prune is to remove
		base   int64  // the outbox's last id before the desk's own events
		addOld func() // puts the old events in place once the load runs; nil when they are there already
		bid    = 1.10000
	)
	if os.Getenv("FXDESK_YEAR_DB") != "" {
		// A generated year (docs/operations.md, «A year of data»): its events span the year, the
		// relay's cursors past them; the holder's first retention pass prunes every one older
		// than 30 days. The database is changed for good: run this after the year's reads.
		year := yearDatabase(t)
		d = startDeskOn(t, year.db, env...)
		e = d.e
		if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `createdAt` < NOW(3) - INTERVAL 720 HOUR").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if err := e.sql.QueryRow("SELECT COALESCE(MAX(`id`), 0) FROM `fx_event`").Scan(&base); err != nil {
			t.Fatal(err)
		}
		bid = year.lastPrice(t, "EURUSD")
		t.Logf("year database %s: %s; %d events older than 30 days to prune", year.db.Name, year.sizes, n)
		defer quoteBookEverySecond(t, d, map[string]float64{"EURUSD": bid})()
	} else {
		n = int64(envDuration("FXDESK_BENCH_PRUNE_EVENTS", 1_000_000))
		base = n
		e = newDeskEnv(t)
		if err := store.Migrate(ctx, e.sql, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		// The desk's own events take ids above n; the stream's cursor starts there.
		if _, err := e.sql.Exec("UPDATE `fx_event_seq` SET `last` = ?", n); err != nil {
			t.Fatal(err)
		}
		if _, err := e.sql.Exec("UPDATE `fx_event_relay` SET `position` = ? WHERE `name` = 'stream'", n); err != nil {
			t.Fatal(err)
		}
		stage := stageOldEvents(t, e, n)
		addOld = func() {
			t0 := time.Now()
			if _, err := e.sql.Exec("INSERT INTO `fx_event` SELECT * FROM `" + stage + "`"); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d events 40 days old added in %s while the desk trades", n, time.Since(t0).Round(time.Second))
		}
		sim := startFeedSim(t)
		web := e.start("web", "fxdesk-web", append([]string{"FXDESK_FEED=" + sim.url, "FXDESK_FEED_KEY=test"}, env...)...)
		web.waitLog(10*time.Second, msgHas("role: holder"))
		web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
		d = &tradingDesk{e: e, sim: sim, web: web, admin: e.adminToken()}
		waitRiskReady(d.web)
	}
	tok := d.e.issueToken(9500, false)
	accts := d.fundedAccounts(tok, 8, "100000000.00")
	quote := fmt.Sprintf("%.5f", bid)
	d.setQuote(tok, "EURUSD", quote, fmt.Sprintf("%.5f", bid+0.0002))
	defer d.keepQuoting(t, func() float64 { return bid })()

	// The load and the samplers run until stop; phase says which part a sample belongs to.
	var phase atomic.Int32 // 0: the prune runs, 1: after it, 2: before it (not reported)
	phase.Store(2)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	fills := [3][]time.Duration{}
	lags := [3][]time.Duration{}
	desks := [3][]time.Duration{}
	var failures atomic.Int64
	send := marketOrders(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}, tok, "prune")
	for w := range 4 {
		wg.Go(func() {
			tick := time.NewTicker(time.Duration(4 * int64(time.Second) / int64(rate)))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				p := phase.Load()
				s := time.Now()
				if err := send(d.web, accts[(w*2+i)%len(accts)]); err != nil {
					failures.Add(1)
					continue
				}
				mu.Lock()
				fills[p] = append(fills[p], time.Since(s))
				mu.Unlock()
			}
		})
	}
	wg.Go(func() { // the stream relay's lag
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var us *int64
			err := e.sql.QueryRow("SELECT TIMESTAMPDIFF(MICROSECOND, `createdAt`, NOW(3)) FROM `fx_event` WHERE `id` > " +
				"(SELECT `position` FROM `fx_event_relay` WHERE `name` = 'stream') ORDER BY `id` LIMIT 1").Scan(&us)
			lag := time.Duration(0)
			if err == nil && us != nil {
				lag = time.Duration(*us) * time.Microsecond
			}
			mu.Lock()
			lags[phase.Load()] = append(lags[phase.Load()], lag)
			mu.Unlock()
		}
	})
	wg.Go(func() { // the dealer's screen
		client := &http.Client{Timeout: 10 * time.Second}
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			req, _ := http.NewRequest("GET", "http://"+d.web.addr+"/api/admin/fx/desk", nil)
			req.Header.Set("Authorization", "Bearer "+d.admin)
			s := time.Now()
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("desk = %d", resp.StatusCode)
				}
			}
			if err != nil {
				failures.Add(1)
				continue
			}
			mu.Lock()
			desks[phase.Load()] = append(desks[phase.Load()], time.Since(s))
			mu.Unlock()
		}
	})

	if addOld != nil {
		addOld()
	}
	// The prune's progress, as an operator sees it: the retention runner's metrics.
	eventually(t, 3*time.Minute, 100*time.Millisecond, "the prune started", func() bool {
		return scrapeRetention(t, d)[`fxdesk_retention_rows_total{task="events"}`] > 0
	})
	phase.Store(0)
	started := time.Now()
	var pruned, backlog float64
	var maxBatch float64
	eventually(t, 60*time.Minute, 250*time.Millisecond, "the prune finished", func() bool {
		m := scrapeRetention(t, d)
		pruned, backlog = m[`fxdesk_retention_rows_total{task="events"}`], m[`fxdesk_retention_backlog_rows{task="events"}`]
		maxBatch = max(maxBatch, m[`fxdesk_retention_last_batch_seconds{task="events"}`])
		return m[`fxdesk_retention_passes_total{outcome="done",task="events"}`] >= 1 && pruned >= float64(n)
	})
	took := time.Since(started)
	phase.Store(1)
	time.Sleep(min(took, 60*time.Second)) // the same load after the prune, for comparison: a measured span, not a wait for a state
	close(stop)
	wg.Wait()

	var old, kept int64
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `createdAt` < ? - INTERVAL 720 HOUR", began.UTC()).Scan(&old); err != nil || old != 0 {
		t.Fatalf("%d events older than the retention at the start left (%v)", old, err)
	}
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event`").Scan(&kept); err != nil {
		t.Fatal(err)
	}
	var newest int64
	eventually(t, 30*time.Second, 50*time.Millisecond, "the relay caught up", func() bool {
		if err := e.sql.QueryRow("SELECT COALESCE(MAX(`id`), 0) FROM `fx_event`").Scan(&newest); err != nil {
			t.Fatal(err)
		}
		return streamPosition(t, e.sql) == newest
	})
	// The stream holds every event the desk wrote (the history's were relayed before it); with
	// staged events nothing else is kept.
	if xlen, err := e.rdb.XLen(ctx, e.names.Events()).Result(); err != nil || xlen != newest-base || addOld != nil && kept != newest-base {
		t.Fatalf("the stream holds %d entries (%v), the outbox %d events after the prune, the desk wrote %d", xlen, err, kept, newest-base)
	}
	for p, name := range []string{"during the prune", "after it"} {
		slices.Sort(fills[p])
		slices.Sort(lags[p])
		slices.Sort(desks[p])
		if len(fills[p]) == 0 || len(lags[p]) == 0 || len(desks[p]) == 0 {
			t.Fatalf("%s: %d fills, %d lag samples, %d desk reads", name, len(fills[p]), len(lags[p]), len(desks[p]))
		}
		t.Logf("%-16s  fills %6d p50 %6s p99 %6s | relay lag p50 %6s p99 %6s max %6s | /desk %4d reads p50 %6s p99 %6s max %6s",
			name, len(fills[p]), percentile(fills[p], 0.5).Round(100*time.Microsecond), percentile(fills[p], 0.99).Round(100*time.Microsecond),
			percentile(lags[p], 0.5).Round(time.Millisecond), percentile(lags[p], 0.99).Round(time.Millisecond), lags[p][len(lags[p])-1].Round(time.Millisecond),
			len(desks[p]), percentile(desks[p], 0.5).Round(100*time.Microsecond), percentile(desks[p], 0.99).Round(100*time.Microsecond), desks[p][len(desks[p])-1].Round(time.Millisecond))
	}
	t.Logf("pruned %.0f events in %s (%.0f/s; backlog now %.0f; the slowest batch seen %.0f ms); %d requests failed; %d events kept, all relayed",
		pruned, took.Round(time.Second), pruned/took.Seconds(), backlog, maxBatch*1000, failures.Load(), kept)
}

// stageOldEvents writes n events with ids 1..n, 40 days old, into a table shaped like the outbox
// and returns its name, for one INSERT … SELECT to add them at once: a realistic position.closed
// payload, 1,000 rows by hand, then the table doubled in chunks.
func stageOldEvents(t *testing.T, e *deskEnv, n int64) string {
	t.Helper()
	const stage = "bench_old_events"
	if _, err := e.sql.Exec("CREATE TABLE `" + stage + "` LIKE `fx_event`"); err != nil {
		t.Fatal(err)
	}
	const payload = `{"id":%d,"accountId":%d,"symbol":"EURUSD","side":"BUY","volume":"0.01","openPrice":"1.10020","closePrice":"1.10110",` +
		`"sl":null,"tp":null,"commission":"-0.07","swap":"0.00","realizedProfit":"0.90","status":"CLOSED","openedAt":"2025-05-01T10:00:00.000Z",` +
		`"closedAt":"2025-05-01T10:05:00.000Z","closedVolume":"0.01","price":"1.10000","profit":"0.90","reason":"CLIENT"}`
	seed := min(n, 1000)
	var b strings.Builder
	args := []any{}
	b.WriteString("INSERT INTO `" + stage + "` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) VALUES ")
	for i := int64(1); i <= seed; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		b.WriteString("(?, ?, ?, 'position.closed', ?, 1, NOW(3) - INTERVAL 40 DAY)")
		args = append(args, i, 1000+i%500, 2000+i%300, fmt.Sprintf(payload, i, 1000+i%500))
	}
	if _, err := e.sql.Exec(b.String(), args...); err != nil {
		t.Fatal(err)
	}
	for have := seed; have < n; {
		chunk := min(have, n-have, 100_000)
		// Rows 1..chunk copied to have+1..have+chunk, a millisecond younger per id, still 40 days old.
		if _, err := e.sql.Exec("INSERT INTO `"+stage+"` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) "+
			"SELECT `id` + ?, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt` + INTERVAL ? MICROSECOND FROM `"+stage+"` WHERE `id` <= ?",
			have, have*1000, chunk); err != nil {
			t.Fatal(err)
		}
		have += chunk
	}
	return stage
}

// scrapeRetention reads the fxdesk_retention_* series from the desk's /metrics.
func scrapeRetention(t *testing.T, d *tradingDesk) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.web.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "fxdesk_retention_") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if f, err := strconv.ParseFloat(v, 64); ok && err == nil {
			out[name] = f
		}
	}
	return out
}
