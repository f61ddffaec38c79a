package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/lease"
	"fxdesk/internal/ledger"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchMarketOrders measures market orders per second through the HTTP API of the real
// binary against MariaDB, and in the same run two raw ceilings sent straight over SQL from this
// process: one transaction per order — the statements of a fill (account lock, nonce look-up,
// exposures, order, position, balance, commission deal, fence) in two round trips, with the same
// concurrency — and the group commit's own writes — the statements the committer sends for a
// batch of orders on accounts it remembers, one round trip per batch (locks, the check, the
// writes, fence, COMMIT), one batch at a time, at the mean batch size the HTTP phases reached
// (read from the desk report). All three are warmed up, then measured twice, alternating. Then,
// once InnoDB has purged what those phases left, it offers half the HTTP peak as an open-loop
// arrival stream (one second unmeasured, then the phase) and reports p50/p99 latency, next to the
// latency of a one-row commit sent alongside: the part of any commit's latency that is the
// server's and the disk's alone. Last, at the same rate and next to a control window of its own,
// the design's floor: the same one-round-trip statements sent by a bare committer in this
// process (rawCommitter), without HTTP, rules or the desk.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchMarketOrders -v ./e2e/
//
// FXDESK_BENCH_SECONDS (default 5) sets each phase's length, FXDESK_BENCH_WORKERS (default 32)
// the concurrency, FXDESK_BENCH_GOMAXPROCS (default 1) fxdesk-web's GOMAXPROCS (0: Go's default). It fails on any refused order; the figures are reported, not asserted, since
// they depend on the machine.
func TestBenchMarketOrders(t *testing.T) {
	dbtest.SkipUnlessBench(t, "market-order")
	phase := envDuration("FXDESK_BENCH_SECONDS", 5) * time.Second
	workers := int(envDuration("FXDESK_BENCH_WORKERS", 32))

	// The lease timing and log level of a production install (the suite's defaults renew every
	// second and log at debug, which would be part of what is measured), and the processor
	// setting docs/operations.md gives a web process sharing a small machine with MariaDB, as
	// here; FXDESK_BENCH_GOMAXPROCS=0 runs it with the Go default instead.
	procs := dbtest.BenchProcs(t)
	d := newTradingDesk(t, append([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info", fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates...)...)
	tok := d.e.issueToken(9000, false)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * workers, MaxConnsPerHost: 4 * workers}}
	accounts := func(n int) []int64 { return d.fundedAccounts(tok, n, "100000000.00") }
	order := marketOrders(client, tok, "b")
	send := func(acct int64) error { return order(d.web, acct) }
	var nonce atomic.Int64 // the raw phases' nonces

	db, err := store.Connect(d.e.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var instance string
	var term int64
	if err := db.QueryRow("SELECT `instanceId`, `term` FROM `engine_lease` WHERE `id` = ?", lease.Key).Scan(&instance, &term); err != nil {
		t.Fatal(err)
	}
	raw := func(acct int64) error { return rawFill(db, instance, term, acct, fmt.Sprintf("r-%d", nonce.Add(1))) }
	httpAccts, rawAccts, batchAccts := accounts(workers), accounts(workers), accounts(workers)

	// The desk's group commit counters, to size the raw batches like the HTTP phases' batches.
	commits := func() (batches, writes float64) {
		var r struct {
			Commits *struct {
				Batches uint64 `json:"batches"`
				Writes  uint64 `json:"writes"`
				OneTrip uint64 `json:"oneTrip"`
				Stale   uint64 `json:"stale"`
			} `json:"commits"`
		}
		must(t, d.web, d.admin, "GET", "/api/admin/fx/desk", "", http.StatusOK, &r)
		if r.Commits == nil {
			t.Fatal("the desk report has no group commit")
		}
		return float64(r.Commits.Batches), float64(r.Commits.Writes)
	}

	// Phases 1 and 2: the HTTP peak and the raw SQL ceilings of the same writes (same concurrency,
	// one account per worker), closed loop. Whichever runs first meets a colder buffer pool and
	// smaller tables, so all are warmed up unmeasured and then measured twice, alternating, and
	// each side reports the mean of its two runs.
	// The simulator does not walk here, so the quote is set again before each HTTP phase: a
	// quote older than fxTradingQuoteStaleSecondsFx (30 s) would halt the symbol.
	// Each measured phase also adds up the processor time each process spent: on this shared
	// machine the rates move with whatever else runs, the time per order much less.
	var httpCost, rawCost, batchCost orderCost
	var httpBatches, httpWrites float64
	viaHTTP := func(length time.Duration, c *orderCost) float64 {
		d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
		b0, w0 := commits()
		rate := c.measure(d.web.pid(), length, func() float64 { return closedLoop(t, workers, length, httpAccts, send) })
		b1, w1 := commits()
		httpBatches, httpWrites = httpBatches+b1-b0, httpWrites+w1-w0
		return rate
	}
	viaSQL := func(length time.Duration, c *orderCost) float64 {
		return c.measure(d.web.pid(), length, func() float64 { return closedLoop(t, workers, length, rawAccts, raw) })
	}
	batchSize := func() int { return max(1, int(httpWrites/max(httpBatches, 1)+0.5)) }
	rawKnown := map[int64]*rawAccount{}
	viaBatches := func(length time.Duration, c *orderCost) float64 {
		size := batchSize()
		return c.measure(d.web.pid(), length, func() float64 {
			return batchLoop(t, length, batchAccts, size, func(accts []int64) error {
				return rawBatchFill(db, instance, term, accts, func() string { return fmt.Sprintf("g-%d", nonce.Add(1)) }, rawKnown)
			})
		})
	}
	purgeBase := historyLength(t, db)
	viaHTTP(phase/2, nil)
	viaSQL(phase/2, nil)
	viaBatches(phase/2, nil)
	var httpRate, rawRate, batchRate float64
	for round := range 2 {
		if round%2 == 0 {
			httpRate += viaHTTP(phase, &httpCost) / 2
			rawRate += viaSQL(phase, &rawCost) / 2
			batchRate += viaBatches(phase, &batchCost) / 2
		} else {
			batchRate += viaBatches(phase, &batchCost) / 2
			rawRate += viaSQL(phase, &rawCost) / 2
			httpRate += viaHTTP(phase, &httpCost) / 2
		}
	}

	// Phase 3: half the HTTP peak as an open-loop stream; latency measured per request. The
	// closed-loop phases leave the server behind on background work (InnoDB purges the undo of
	// every transaction they committed), which would otherwise be measured here as order
	// latency: wait until purge has caught up, then offer the rate for one unmeasured second
	// before measuring. A one-row commit sent on its own connection every 20 ms during the
	// measured window is the control: its latency is what the server and the disk alone add to
	// any commit at that moment.
	waitPurged(t, db, purgeBase)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020") // after the wait: a quote older than 30 s halts the symbol
	target := httpRate / 2
	accts := accounts(workers)
	if _, err := db.Exec("CREATE TABLE `bench_commit_probe` (`id` INT PRIMARY KEY, `n` INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO `bench_commit_probe` VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	warm := time.Second
	withControl := func(fn func(i int) error) (lat []time.Duration, achieved float64, control []time.Duration) {
		controlCtx, stopControl := context.WithCancel(context.Background())
		controlDone := make(chan struct{})
		defer func() { stopControl(); <-controlDone }() // also when openLoop fails the test
		go func() {
			defer close(controlDone)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			measureFrom := time.Now().Add(warm)
			deadline := measureFrom.Add(phase)
			for {
				select {
				case <-controlCtx.Done():
					return
				case now := <-tick.C:
					if now.After(deadline) {
						return
					}
				}
				t0 := time.Now()
				if _, err := db.ExecContext(controlCtx, "UPDATE `bench_commit_probe` SET `n` = `n` + 1 WHERE `id` = 1"); err != nil {
					if controlCtx.Err() == nil {
						t.Error(err)
					}
					return
				}
				if !t0.Before(measureFrom) {
					control = append(control, time.Since(t0))
				}
			}
		}()
		lat, achieved = openLoop(t, target, warm, phase, fn)
		<-controlDone
		if len(control) == 0 {
			t.Fatal("the control commit was never measured")
		}
		slices.Sort(control)
		return lat, achieved, control
	}
	lat, achieved, control := withControl(func(i int) error { return send(accts[i%len(accts)]) })

	// The design's floor at the same rate: the committer's one-round-trip statements sent by a
	// bare committer in this process (rawCommitter: natural batching, one batch at a time, each
	// arrival answered when its batch committed) — no HTTP, no JSON, no rules, no desk process.
	// An arrival waits for the batch in flight and then its own, each at least one commit: what
	// this shows next to its own control window is that wait, which the HTTP orders carry too.
	// Then the same with two batches in flight, each on its own connection: the alternative to
	// waiting for the batch in flight.
	bare := func(depth int) (lat []time.Duration, achieved float64, control []time.Duration) {
		accts, known := accounts(workers), map[int64]*rawAccount{}
		var mu sync.Mutex // rawBatchFill's memory, shared by the drainers
		c := &rawCommitter{depth: depth, fill: func(batch []int64) error {
			mu.Lock()
			k := map[int64]*rawAccount{}
			for _, id := range batch {
				if known[id] != nil {
					v := *known[id]
					k[id] = &v
				}
			}
			mu.Unlock()
			err := rawBatchFill(db, instance, term, batch, func() string { return fmt.Sprintf("f-%d", nonce.Add(1)) }, k)
			if err == nil {
				mu.Lock()
				maps.Copy(known, k)
				mu.Unlock()
			}
			return err
		}}
		return withControl(func(i int) error { return c.submit(accts[i%len(accts)]) })
	}
	floorLat, floorAchieved, floorControl := bare(1)
	twoLat, twoAchieved, twoControl := bare(2)
	pct := func(l []time.Duration, p float64) time.Duration { return percentile(l, p).Round(10 * time.Microsecond) }

	t.Logf("market orders through HTTP (peak, %d workers, fxdesk-web GOMAXPROCS=%d): %.0f/s, %.1f orders per batch", workers, procs, httpRate, httpWrites/max(httpBatches, 1))
	t.Logf("raw SQL ceiling, one transaction per order (%d workers):  %.0f/s", workers, rawRate)
	t.Logf("raw SQL ceiling of the group commit's writes (batches of %d, one at a time):  %.0f/s", batchSize(), batchRate)
	t.Logf("ratio HTTP / raw one per order: %.2f (target ≥ 2)", httpRate/rawRate)
	t.Logf("ratio HTTP / raw batched: %.2f (target ≥ 0.80)", httpRate/batchRate)
	t.Logf("processor time per order, HTTP: %s", httpCost)
	t.Logf("processor time per order, raw one per order:  %s", rawCost)
	t.Logf("processor time per order, raw batched:  %s", batchCost)
	t.Logf("at half the peak (%.0f/s offered, %.0f/s done, %d orders): p50 %s, p99 %s, max %s ",
		target, achieved, len(lat), pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1))
	t.Logf("control, a one-row commit every 20ms in the same window (%d): p50 %s, p99 %s, max %s",
		len(control), pct(control, 0.50), pct(control, 0.99), pct(control, 1))
	t.Logf("p99 orders / p99 control: %.2f (target ≤ 2)", float64(pct(lat, 0.99))/float64(pct(control, 0.99)))
	t.Logf("the floor: a bare one-trip committer at the same rate (%.0f/s done, %d orders, no HTTP, no rules): p50 %s, p99 %s, max %s",
		floorAchieved, len(floorLat), pct(floorLat, 0.50), pct(floorLat, 0.99), pct(floorLat, 1))
	t.Logf("control in the floor's window (%d): p50 %s, p99 %s, max %s; p99 floor / p99 control: %.2f",
		len(floorControl), pct(floorControl, 0.50), pct(floorControl, 0.99), pct(floorControl, 1), float64(pct(floorLat, 0.99))/float64(pct(floorControl, 0.99)))
	t.Logf("the alternative: a bare committer with two batches in flight (%.0f/s done, %d orders): p50 %s, p99 %s, max %s",
		twoAchieved, len(twoLat), pct(twoLat, 0.50), pct(twoLat, 0.99), pct(twoLat, 1))
	t.Logf("control in its window (%d): p50 %s, p99 %s, max %s; p99 two in flight / p99 control: %.2f",
		len(twoControl), pct(twoControl, 0.50), pct(twoControl, 0.99), pct(twoControl, 1), float64(pct(twoLat, 0.99))/float64(pct(twoControl, 0.99)))
}

// rawCommitter is the group commit reduced to its queue: arrivals wait while depth batches are
// in flight (the desk's committer: 1), and a drainer sends everything queued (one order per
// account per batch, as the desk's batches of distinct traders are) the moment its last batch
// answered, with fill.
type rawCommitter struct {
	fill  func(accts []int64) error
	depth int

	mu       sync.Mutex
	queue    []rawArrival
	running  int
	inFlight map[int64]bool // accounts of the batches in flight: a batch never waits on another's locks
}

type rawArrival struct {
	acct int64
	done chan error
}

// submit queues an order for acct and returns when its batch committed (or failed).
func (c *rawCommitter) submit(acct int64) error {
	a := rawArrival{acct: acct, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, a)
	start := c.running < c.depth
	if start {
		c.running++
	}
	c.mu.Unlock()
	if start {
		go c.drain()
	}
	return <-a.done
}

func (c *rawCommitter) drain() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		if c.inFlight == nil {
			c.inFlight = map[int64]bool{}
		}
		var batch, rest []rawArrival
		for _, a := range c.queue {
			if c.inFlight[a.acct] {
				rest = append(rest, a)
				continue
			}
			c.inFlight[a.acct] = true
			batch = append(batch, a)
		}
		c.queue = rest
		if len(batch) == 0 {
			// Everything queued is on accounts the other batch in flight holds: it takes them.
			c.running--
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		accts := make([]int64, 0, len(batch))
		for _, a := range batch {
			accts = append(accts, a.acct)
		}
		err := c.fill(accts)
		c.mu.Lock()
		for _, id := range accts {
			delete(c.inFlight, id)
		}
		c.mu.Unlock()
		for _, a := range batch {
			a.done <- err
		}
	}
}

// openLoop offers fn at rate calls/s, each call in its own goroutine on a fixed arrival
// schedule whatever the earlier calls are doing, for warm and then length. It returns the
// latencies of the calls that started after warm, sorted, and how many of them completed per
// second of length.
func openLoop(t *testing.T, rate float64, warm, length time.Duration, fn func(i int) error) ([]time.Duration, float64) {
	t.Helper()
	interval := time.Duration(float64(time.Second) / rate)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	measureFrom := start.Add(warm)
	for i := 0; time.Since(start) < warm+length; i++ {
		next := start.Add(time.Duration(i) * interval)
		if w := time.Until(next); w > 0 {
			time.Sleep(w) // pacing the arrival schedule, not waiting for a result
		}
		wg.Go(func() {
			t0 := time.Now()
			if err := fn(i); err != nil {
				failed.Store(&err)
				return
			}
			if t0.Before(measureFrom) {
				return
			}
			el := time.Since(t0)
			mu.Lock()
			lat = append(lat, el)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
	if len(lat) == 0 {
		t.Fatal("open loop measured no call")
	}
	slices.Sort(lat)
	return lat, float64(len(lat)) / length.Seconds()
}

// historyLength is InnoDB's history list length: committed transactions whose undo purge has
// not yet removed.
func historyLength(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitPurged waits until InnoDB's purge is back within 1,000 transactions of base, polling the
// server's own counter, for at most a minute (then it says so and goes on).
func waitPurged(t *testing.T, db *sql.DB, base int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for n := historyLength(t, db); n > base+1000; n = historyLength(t, db) {
		if time.Now().After(deadline) {
			t.Logf("InnoDB purge still %d transactions behind after a minute; measuring anyway", n-base)
			return
		}
		time.Sleep(100 * time.Millisecond) // polling the server's counter; it has no notification
	}
}

// orderCost adds up, over measured phases, the orders done and the processor time fxdesk-web,
// the MySQL server and this process (the load generator, and the raw client) spent on them.
type orderCost struct {
	orders         float64
	web, db, bench time.Duration
}

// measure runs phase (which returns orders/s over length) and, when c is not nil, adds its
// orders and processor times to c. It returns the rate.
func (c *orderCost) measure(webPID int, length time.Duration, phase func() float64) float64 {
	web0, _ := dbtest.ProcessCPU(webPID)
	cpu0 := dbtest.ReadCPU()
	rate := phase()
	web1, _ := dbtest.ProcessCPU(webPID)
	cpu := dbtest.ReadCPU().Sub(cpu0)
	if c != nil {
		c.orders += rate * length.Seconds()
		c.web += web1 - web0
		c.db += cpu.Server
		c.bench += cpu.Self
	}
	return rate
}

func (c orderCost) String() string {
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.0fµs", float64(d.Microseconds())/max(c.orders, 1))
	}
	return fmt.Sprintf("fxdesk-web %s, mariadbd %s, load generator %s", per(c.web), per(c.db), per(c.bench))
}

func envDuration(key string, def int) time.Duration {
	var n int
	if _, err := fmt.Sscan(os.Getenv(key), &n); err != nil || n <= 0 {
		return time.Duration(def)
	}
	return time.Duration(n)
}

// closedLoop runs fn from workers goroutines (worker i on accts[i]) for d and returns calls/s.
func closedLoop(t *testing.T, workers int, d time.Duration, accts []int64, fn func(int64) error) float64 {
	t.Helper()
	var done atomic.Int64
	var failed atomic.Pointer[error]
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := fn(accts[i]); err != nil {
					failed.Store(&err)
					cancel()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
	return float64(done.Load()) / time.Since(start).Seconds()
}

// rawFill is the statements of one market fill, as internal/trading sends them — two
// multi-statement round trips on one connection (START TRANSACTION, account lock, nonce
// look-up, exposures; then order, position, balance, commission deal, the ids, fence and
// COMMIT) — with the values a fill of 0.01 EURUSD at 1.1002 computes; no rules, no HTTP, no
// JSON.
func rawFill(db *sql.DB, instance string, term int64, acct int64, nonce string) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(ctx, "ROLLBACK")
		}
	}()
	rows, err := conn.QueryContext(ctx, "START TRANSACTION;\n"+
		"SELECT `id`, `userId`, `accountGroup`, `currency`, `leverage`, `balance`, `equity`, `usedMargin`, `markedAt`, `createdAt` FROM `fx_account` WHERE `id` = ? FOR UPDATE;\n"+
		"SELECT o.`id` FROM `fx_order` o WHERE o.`accountId` = ? AND o.`requestNonce` = ?;\n"+
		"SELECT `symbol`, `side`, SUM(`volume`), SUM(`volume` * `openPrice`) FROM `fx_position` "+
		"WHERE `accountId` = ? AND `status` = 'OPEN' GROUP BY `symbol`, `side` ORDER BY `symbol`, `side`",
		acct, acct, nonce, acct)
	if err != nil {
		return err
	}
	var balance decimal.Decimal
	var id, user int64
	var group, ccy string
	var lev int
	var eq, um decimal.Decimal
	var marked, created sql.NullTime
	if !rows.Next() {
		rows.Close()
		return fmt.Errorf("account %d: %v", acct, rows.Err())
	}
	if err := rows.Scan(&id, &user, &group, &ccy, &lev, &balance, &eq, &um, &marked, &created); err != nil {
		rows.Close()
		return err
	}
	for rows.Next() {
	}
	if !rows.NextResultSet() {
		rows.Close()
		return fmt.Errorf("nonce look-up: %v", rows.Err())
	}
	if rows.Next() {
		rows.Close()
		return fmt.Errorf("nonce %s seen before", nonce)
	}
	if !rows.NextResultSet() {
		rows.Close()
		return fmt.Errorf("exposures: %v", rows.Err())
	}
	for rows.Next() {
		var s, side string
		var v, vp decimal.Decimal
		if err := rows.Scan(&s, &side, &v, &vp); err != nil {
			rows.Close()
			return err
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	price, vol := decimal.RequireFromString("1.1002"), decimal.RequireFromString("0.01")
	after := balance.Sub(decimal.RequireFromString("0.07"))
	var oid, pid, did int64
	err = conn.QueryRowContext(ctx, "INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `sl`, `tp`, `timeInForce`, "+
		"`expiresAt`, `status`, `requestNonce`, `fillPrice`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);\n"+
		"SET @fx_order_id = LAST_INSERT_ID();\n"+
		"INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, "+
		"`sl`, `tp`, `commission`) VALUES (?, @fx_order_id, ?, ?, ?, ?, ?, ?, ?, ?);\n"+
		"SET @fx_position_id = LAST_INSERT_ID();\n"+
		"UPDATE `fx_account` SET `balance` = ?, `equity` = ?, `usedMargin` = ?, `markedAt` = NOW(3) WHERE `id` = ?;\n"+
		"INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, "+
		"`symbol`, `side`, `volume`, `price`, `idempotencyKey`, `comment`) VALUES (?, ?, ?, ?, ?, @fx_order_id, @fx_position_id, ?, ?, ?, ?, CONCAT(?, @fx_order_id), ?);\n"+
		"SELECT @fx_order_id, @fx_position_id, LAST_INSERT_ID();\n"+
		lease.FenceSQL+";\n"+
		"COMMIT",
		acct, "EURUSD", "BUY", "MARKET", vol, nil, nil, nil, "GTC", nil, "FILLED", nonce, price,
		acct, "EURUSD", "BUY", vol, vol, price, nil, nil, "0.07",
		after, after, "0.00", acct,
		acct, "COMMISSION", "-0.07", after, "USD", "EURUSD", "BUY", vol, price, "commission:order:", "commission at open",
		lease.Key, instance, term).Scan(&oid, &pid, &did)
	if err != nil {
		return err
	}
	committed = true
	return nil
}

// batchLoop calls fn with size accounts of accts at a time, one call after the other, for d,
// and returns accounts served per second (orders/s).
func batchLoop(t *testing.T, d time.Duration, accts []int64, size int, fn func([]int64) error) float64 {
	t.Helper()
	size = min(size, len(accts))
	start := time.Now()
	done := 0
	for next := 0; time.Since(start) < d; next = (next + size) % len(accts) {
		batch := make([]int64, 0, size)
		for i := range size {
			batch = append(batch, accts[(next+i)%len(accts)])
		}
		if err := fn(batch); err != nil {
			t.Fatal(err)
		}
		done += size
	}
	return float64(done) / time.Since(start).Seconds()
}

// rawAccount is what the raw batched client remembers of one account, as its last batch left
// it: what the committer remembers to send a batch of fills in one round trip.
type rawAccount struct {
	user                int64
	group, currency     string
	leverage            int
	balance             decimal.Decimal
	version             int64
	volume, volumePrice decimal.Decimal // the account's open EURUSD BUY exposure
}

// rawBatchFill is the statements of one group-committed batch of market fills, one per account
// of accts, as internal/trading's committer sends them for accounts it remembers — one
// multi-statement round trip on one connection: START TRANSACTION, the accounts locked in id
// order, the check that every account is as remembered (owner, group, currency, leverage,
// balanceVersion, open exposures) and that no order holds the batch's request nonces, each order and its position, the ledger's one balance UPDATE
// and one deal INSERT, the ids, the fence and COMMIT — with the values a fill of 0.01 EURUSD at
// 1.1002 computes; no rules, no HTTP, no JSON. An account it does not remember yet is read
// first, outside the measured transaction (the warm-up phase reads them all).
func rawBatchFill(db *sql.DB, instance string, term int64, accts []int64, nonce func() string, known map[int64]*rawAccount) error {
	ctx := context.Background()
	ids := slices.Sorted(slices.Values(accts))
	for _, id := range ids {
		if known[id] != nil {
			continue
		}
		k := &rawAccount{}
		if err := db.QueryRowContext(ctx, "SELECT `userId`, `accountGroup`, `currency`, `leverage`, `balance`, `balanceVersion`, "+
			"(SELECT COALESCE(SUM(`volume`), 0) FROM `fx_position` WHERE `accountId` = ? AND `status` = 'OPEN'), "+
			"(SELECT COALESCE(SUM(`volume` * `openPrice`), 0) FROM `fx_position` WHERE `accountId` = ? AND `status` = 'OPEN') "+
			"FROM `fx_account` WHERE `id` = ?", id, id, id).Scan(&k.user, &k.group, &k.currency, &k.leverage, &k.balance, &k.version, &k.volume, &k.volumePrice); err != nil {
			return fmt.Errorf("account %d: %w", id, err)
		}
		known[id] = k
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(ctx, "ROLLBACK")
		}
	}()
	in := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	var sb strings.Builder
	var args []any
	sb.WriteString("START TRANSACTION;\nSELECT `id` FROM `fx_account` FORCE INDEX (PRIMARY) WHERE `id` IN (" + in + ") ORDER BY `id` FOR UPDATE;\n")
	for _, id := range ids {
		args = append(args, id)
	}
	var accountRows, exposureRows []string
	groups := 0
	for _, id := range ids {
		k := known[id]
		accountRows = append(accountRows, "(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, id, k.version, k.user, k.group, k.currency, k.leverage, "ACTIVE")
	}
	args = append(args, len(ids))
	nonces := make([]string, len(ids))
	var nonceRows []string
	for i, id := range ids {
		nonces[i] = nonce()
		nonceRows = append(nonceRows, "(?, ?)")
		args = append(args, id, nonces[i])
	}
	var exposureArgs []any
	for _, id := range ids {
		if k := known[id]; k.volume.IsPositive() {
			exposureRows = append(exposureRows, "(?, ?, ?, CAST(? AS DECIMAL(65,20)), CAST(? AS DECIMAL(65,20)))")
			exposureArgs = append(exposureArgs, id, "EURUSD", "BUY", k.volume.String(), k.volumePrice.String())
			groups++
		}
	}
	matched := "0"
	if groups > 0 {
		matched = "COALESCE(SUM((e.`accountId`, e.`symbol`, e.`side`, e.`v`, e.`vp`) IN (" + strings.Join(exposureRows, ", ") + ")), 0)"
		args = append(args, exposureArgs...)
	}
	sb.WriteString("SELECT 18446744073709551615 + COALESCE((SELECT COUNT(*) FROM `fx_account` a WHERE (a.`id`, a.`balanceVersion`, a.`userId`, a.`accountGroup`, a.`currency`, a.`leverage`, a.`state`) IN (" +
		strings.Join(accountRows, ", ") + ") AND (SELECT g.`executionMode` FROM `fx_account_group` g WHERE g.`name` = a.`accountGroup` LIMIT 1) = 'INTERNAL') <> ? " +
		"OR EXISTS (SELECT 1 FROM `fx_order` o WHERE (o.`accountId`, o.`requestNonce`) IN (" + strings.Join(nonceRows, ", ") + ")) " +
		"OR (SELECT COUNT(*), " + matched + " FROM (SELECT p.`accountId`, p.`symbol`, p.`side`, SUM(p.`volume`) AS `v`, SUM(p.`volume` * p.`openPrice`) AS `vp` " +
		"FROM `fx_position` p WHERE p.`accountId` IN (" + in + ") AND p.`status` = 'OPEN' GROUP BY p.`accountId`, p.`symbol`, p.`side`) e) <> (?, ?), 1);\n")
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, groups, groups)

	price, vol, commission := decimal.RequireFromString("1.1002"), decimal.RequireFromString("0.01"), decimal.RequireFromString("0.07")
	var las []*ledger.Account
	var deals []ledger.Deal
	var vars []string
	for i, id := range ids {
		ov, pv := fmt.Sprintf("@fx_o%d", 2*i+1), fmt.Sprintf("@fx_p%d", 2*i+2)
		sb.WriteString("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `sl`, `tp`, `timeInForce`, " +
			"`expiresAt`, `status`, `requestNonce`, `fillPrice`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);\n" +
			"SET " + ov + " = LAST_INSERT_ID();\n" +
			"INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, " +
			"`sl`, `tp`, `commission`) VALUES (?, " + ov + ", ?, ?, ?, ?, ?, ?, ?, ?);\n" +
			"SET " + pv + " = LAST_INSERT_ID();\n")
		args = append(args, id, "EURUSD", "BUY", "MARKET", vol, nil, nil, nil, "GTC", nil, "FILLED", nonces[i], price,
			id, "EURUSD", "BUY", vol, vol, price, nil, nil, commission)
		k := known[id]
		after := k.balance.Sub(commission)
		las = append(las, &ledger.Account{ID: id, Currency: "USD", Balance: k.balance, Marks: &ledger.Marks{Equity: after, UsedMargin: decimal.Zero}})
		side, sym := fx.Buy, "EURUSD"
		deals = append(deals, ledger.Deal{AccountID: id, Type: fx.DealCommission, Amount: commission.Neg(), Symbol: &sym, Side: &side,
			Volume: &vol, Price: &price, IdempotencyKey: "commission:order:", Comment: "commission at open", IDsFrom: &ledger.SessionIDs{Order: ov, Position: pv}})
		vars = append(vars, ov, pv)
	}
	posting, err := ledger.Post(las, deals)
	if err != nil {
		return err
	}
	for _, st := range posting.Stmts {
		sb.WriteString(st.SQL + ";\n")
		args = append(args, st.Args...)
	}
	sb.WriteString("SELECT LAST_INSERT_ID(), " + strings.Join(vars, ", ") + ";\n" + lease.FenceSQL + ";\nCOMMIT")
	args = append(args, lease.Key, instance, term)
	rows, err := conn.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return err
	}
	for more := true; more; more = rows.NextResultSet() {
		for rows.Next() {
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	committed = true
	for _, id := range ids {
		k := known[id]
		k.balance, k.version = k.balance.Sub(commission), k.version+1
		k.volume, k.volumePrice = k.volume.Add(vol), k.volumePrice.Add(vol.Mul(price))
	}
	return nil
}
