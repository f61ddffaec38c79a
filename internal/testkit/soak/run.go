package soak

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
	"fxdesk/internal/testkit/soak/invariant"
)

// Options are one soak's settings, as cmd/soak's flags give them.
type Options struct {
	Seed     uint64        // the fault schedule's seed (Plan replays it)
	Duration time.Duration // how long the load and the faults run
	Traders  int           // concurrent trader clients
	External int           // how many of them trade on the EXTERNAL account group (≤ Traders)
	Keep     bool          // keep the run folder and the database even when the soak passes
	// Cluster names the clusters the desk runs on, galera and/or sentinel (docs/cluster.md,
	// «The cluster soak»); none: the shared MariaDB and a private redis-server.
	Cluster []string
	// Venue forces the A-book's venue lane, rest or fix; "" picks it by seed (FIX for a third).
	Venue string
	// Prefill is the generated history the database starts with: month, small or none ("":
	// none) — docs/soak.md, «A pre-filled month».
	Prefill string
}

// Plan is the fault schedule of seed for a soak of d on clusters, with the venue lane venue
// forces ("" or "seed": the seed's), one fault a line, as the run logs it.
func Plan(seed uint64, d time.Duration, clusters []string, venue string) ([]string, error) {
	ch, err := parseClusters(clusters)
	if err != nil {
		return nil, err
	}
	lane, err := venueLaneOf(seed, venue)
	if err != nil {
		return nil, err
	}
	var out []string
	if lane == invariant.LaneFIX {
		k := fixVenueKnobsOf(seed)
		out = append(out, fmt.Sprintf("fix venue knobs: %s (cmd/fixvenue %s)", k, strings.Join(k.venueArgs(), " ")))
	}
	for _, f := range schedule(seed, d, ch, lane) {
		out = append(out, f.String())
	}
	return out, nil
}

// Run runs one soak and returns the process's exit status: 0 on PASS, 1 on FAIL, 2 when the
// soak could not be set up or was interrupted. Its last line on stdout is the summary.
func Run(ctx context.Context, o Options) int {
	ch, err := parseClusters(o.Cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 2
	}
	lane, err := venueLaneOf(o.Seed, o.Venue)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 2
	}
	prefill := o.Prefill
	if prefill == "" {
		prefill = "none"
	}
	if err := checkPrefill(prefill); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 2
	}
	return run(ctx, o.Seed, o.Duration, o.Traders, min(o.External, o.Traders), o.Keep, ch, lane, prefill)
}

// tally keeps, across the periodic checks, each invariant's last figures and every distinct row
// that broke it.
type tally struct {
	order   []string
	figures map[string]string
	broken  map[string][]string
	seen    map[string]int // invariant and violation key → index in broken
	checks  int
}

func newTally() *tally {
	return &tally{figures: map[string]string{}, broken: map[string][]string{}, seen: map[string]int{}}
}

func (t *tally) add(rs []invariant.Result) {
	t.checks++
	for _, r := range rs {
		if _, ok := t.figures[r.Name]; !ok {
			t.order = append(t.order, r.Name)
		}
		t.figures[r.Name] = r.Figures
		for _, v := range r.Violations {
			k := r.Name + "\x00" + v.Key
			if i, ok := t.seen[k]; ok {
				t.broken[r.Name][i] = v.Text // the latest evidence for the same row
				continue
			}
			t.seen[k] = len(t.broken[r.Name])
			t.broken[r.Name] = append(t.broken[r.Name], v.Text)
		}
	}
}

func (t *tally) violations() int {
	n := 0
	for _, v := range t.broken {
		n += len(v)
	}
	return n
}

func run(ctx context.Context, seed uint64, d time.Duration, nTraders, nExternal int, keep bool, ch clusterChoice, lane, prefill string) int {
	logger := log.New(os.Stdout, "", log.Ltime|log.Lmicroseconds)
	dir, err := os.MkdirTemp("", "fxdesk-soak-")
	if err != nil {
		logger.Printf("soak: %v", err)
		return 2
	}
	// A passing run's folder goes last, after everything that reads it on the way down: the
	// clusters' pid files are in it, and scripts/cluster.sh down stops only what they name.
	removeDir := false
	defer func() {
		if removeDir {
			os.RemoveAll(dir)
		}
	}()
	faults := schedule(seed, d, ch, lane)
	logger.Printf("soak: seed=%d seconds=%d venue=%s prefill=%s traders=%d (%d on the EXTERNAL group) folder=%s", seed, int(d.Seconds()), lane, prefill, nTraders, nExternal, dir)
	logger.Printf("soak: schedule (%d faults; the same seed replays it):", len(faults))
	for _, f := range faults {
		logger.Printf("soak:   %s", f)
	}
	if lane == invariant.LaneFIX {
		k := fixVenueKnobsOf(seed)
		logger.Printf("soak: fix venue knobs: %s (passed to cmd/fixvenue: %v)", k, k.venueArgs())
	}
	failed := func(format string, args ...any) int {
		logger.Printf("soak: "+format, args...)
		logger.Printf("soak: FAIL seed=%d (setup); logs kept in %s", seed, dir)
		return 2
	}

	binDir := filepath.Join(dir, "bin")
	os.MkdirAll(binDir, 0o755)
	logger.Printf("soak: building %s", binaryNames(lane))
	if err := buildBinaries(binDir, lane); err != nil {
		return failed("%v", err)
	}
	var ha *haCluster
	if ch.any() {
		logger.Printf("soak: starting the clusters (%s up; about 20 s)", clusterScript)
		ha, err = clusterUp(ctx, filepath.Join(dir, "cluster"), ch.galera, ch.sentinel)
		// Down at the end, whatever happened, after the summary (the last line stays the
		// summary); its logs stay in the run folder.
		defer ha.down()
		if err != nil {
			return failed("%v", err)
		}
	}
	if prefill != "none" {
		logger.Printf("soak: pre-filling the database with a generated %s (internal/yeargen)", prefill)
	}
	c, err := newCluster(ctx, dir, binDir, ha, lane, seed, prefill, logger.Printf)
	if err != nil {
		return failed("%v", err)
	}
	// The database is kept only for a soak that ran to a FAIL verdict (or with -keep): a setup
	// failure or an interrupted run has nothing in it worth reading, its logs are in the folder.
	keepDB := keep
	defer func() {
		c.close()
		if !keepDB {
			c.dropDatabase()
		}
	}()
	if ha != nil {
		logger.Printf("soak: database %s on %s, redis %s (desk through mysql proxy %s)", c.dbName, c.server.Addr, c.redisURL(), c.mysqlP.Addr())
	} else {
		logger.Printf("soak: database %s, redis %s (desk through mysql proxy %s, redis proxy %s)", c.dbName, c.redis.Addr, c.mysqlP.Addr(), c.redisP.Addr())
	}
	logger.Printf("soak: feed %s (primary), %s (backup), %s (the venue's market; market seed %d), %s", c.feed.url, c.backup.url, c.market.url, marketSeedOf(seed), c.venue.describe())

	j, err := newJournal(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return failed("%v", err)
	}
	defer j.close()
	web1, err := c.start(ctx, "web")
	if err != nil {
		return failed("%v", err)
	}
	if _, err := c.waitHolder(ctx, 15*time.Second, nil); err != nil {
		return failed("first web: %v", err)
	}
	if err := c.abookGroup(ctx, j, web1); err != nil {
		return failed("%v", err)
	}
	if _, err := c.start(ctx, "web"); err != nil {
		return failed("%v", err)
	}
	if _, err := c.start(ctx, "cron"); err != nil {
		return failed("%v", err)
	}
	smp, err := newSampler(c, filepath.Join(dir, "samples.jsonl"))
	if err != nil {
		return failed("%v", err)
	}
	defer smp.close()
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	var sampling sync.WaitGroup
	sampling.Go(func() { smp.run(sampleCtx) })
	defer func() { stopSampling(); sampling.Wait() }()

	// One USD account per trader, funded by finance; the last nExternal trade on the EXTERNAL
	// group (straight through to the venue). Every second trader signs in at the host and trades
	// with the host's token, which outlives the run; the others with a desk token.
	var traders []*trader
	external := map[string]bool{}
	nModes := modeTraders(nTraders)
	modes := map[*trader]string{}
	for i := range nTraders + 2*nModes {
		user := int64(1001 + i)
		var tok string
		if i%2 == 1 {
			tok, err = c.host.token(user, d+10*time.Minute)
		} else {
			tok, err = c.issueToken(ctx, user, auth.RoleTrader)
		}
		if err != nil {
			return failed("%v", err)
		}
		t := &trader{name: fmt.Sprintf("t%d", i+1), user: user, token: tok, j: j, c: c, holder: smp.currentHolder,
			rng: rand.New(rand.NewPCG(seed, uint64(i+1))), positions: map[int64]decimal.Decimal{}}
		if err := t.openAccount(ctx, web1, 100); err != nil {
			return failed("%v", err)
		}
		if g := modeGroupOf(i, nTraders, nModes); g != "" {
			modes[t] = g
		} else if i >= nTraders-nExternal {
			if err := c.joinGroup(ctx, t.account, abookGroup); err != nil {
				return failed("%v", err)
			}
			external[t.name] = true
		}
		// Above the four-eyes threshold: finance asks, a second finance user approves.
		if e := t.depositOf(ctx, c.staff[auth.RoleFinance], decimal.NewFromInt(100000)); !e.OK() {
			return failed("initial deposit: %d %s", e.Status, e.Resp)
		}
		traders = append(traders, t)
	}

	// The admin lane: its groups and thin accounts now, its traffic with the load.
	external[dealerABookClient] = true
	adm := &adminLane{j: j, c: c, staff: c.staff, traders: traders, external: external, rng: rand.New(rand.NewPCG(seed, 0xad4)),
		counts: newOpCounts(adminOps), group: map[int64]string{}, modes: modes}
	for _, t := range traders {
		if !external[t.name] && modes[t] == "" {
			adm.movable = append(adm.movable, t)
			adm.group[t.account] = "default"
		}
	}
	if err := adm.setup(ctx, web1, seed); err != nil {
		return failed("admin lane: %v", err)
	}
	// The refused-request lane last: its expiring token expires a few seconds into the load.
	refused := newRefusedLane(j, c, seed)
	if err := refused.setup(ctx, web1, smp.currentHolder, seed); err != nil {
		return failed("refused-request lane: %v", err)
	}
	logger.Printf("soak: refused-request lane: %s", refused.describe())

	tl := newTally()
	byName := map[string]*trader{}
	for _, t := range traders {
		byName[t.name] = t
	}
	walk, err := newRolloverWalk(time.Now())
	if err != nil {
		return failed("rollover walk: %v", err)
	}
	watch := newEODWatch()
	// The price lane listens from before the load to the final check.
	prices := newPriceWatch(c, smp)
	priceCtx, stopPrices := context.WithCancel(context.Background())
	var pricing sync.WaitGroup
	pricing.Go(func() { prices.run(priceCtx) })
	defer func() { stopPrices(); pricing.Wait() }()
	in := &injector{c: c, s: smp, log: logger, counts: map[string]int{}, j: j, traders: byName, walk: walk, eod: watch, prices: prices, fills: func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, t := range traders {
			wg.Go(func() { t.burst(ctx) })
		}
		wg.Wait()
	}}
	evidenceNow := func() *invariant.Evidence {
		desks, rows, mirrors := smp.snapshot()
		in.mu.Lock()
		defer in.mu.Unlock()
		procs := map[int]*invariant.Process{}
		for _, p := range c.all() {
			procs[p.pid] = p.record()
		}
		journal, inFlight := j.evidence()
		return &invariant.Evidence{Journal: journal, InFlight: inFlight, Procs: procs, Desks: desks, Rows: rows, Mirrors: mirrors,
			Runs: append([]invariant.RolloverRun(nil), in.runs...), ScheduledSwaps: c.scheduledSwapRuns(time.Now()), Windows: append([]invariant.Window(nil), in.windows...), External: external,
			Floods: append([]invariant.Flood(nil), in.floods...), Reuses: append([]invariant.Reuse(nil), in.reuses...), Refusals: refused.evidence(),
			EODSeen: watch.rows(), Prices: prices.evidence(), Trails: smp.trails.all(), Pages: smp.pages.all()}
	}
	var lastEOD invariant.EODTally
	var lastSnap *invariant.Snapshot // the last check's, for tradesAgain
	check := func(label string) {
		s, err := invariant.ReadSnapshot(ctx, c.direct, c.scope)
		if err != nil && ha != nil {
			// A Galera fault can leave the soak's own pool a connection to a node that is gone:
			// the next one goes through HAProxy to a live node.
			s, err = invariant.ReadSnapshot(ctx, c.direct, c.scope)
		}
		if err != nil {
			logger.Printf("soak: %s check: %v", label, err)
			return
		}
		lastSnap = s
		ev := evidenceNow()
		// Read after the snapshot: every order request the snapshot knows of has reached the venue.
		if ev.Venue, err = c.venue.state(); err != nil {
			logger.Printf("soak: %s check: %v", label, err)
		}
		// A frozen day's rows never change, so the desk's own reconciliation may read after the
		// snapshot.
		ev.Reconciled, ev.ReconcileErr = reconcileEOD(ctx, c.direct)
		rs := invariant.CheckAll(s, ev)
		tl.add(rs)
		watch.note(s.EOD.Rows(s.Taken))
		lastEOD = s.EOD.Tally(ev.Runs)
		bad := 0
		for _, r := range rs {
			bad += len(r.Violations)
		}
		logger.Printf("soak: %s check: %d invariants, %d violating rows", label, len(rs), bad)
	}

	// Each trader's events stream, held from before the load to after the desk went quiet.
	feeds := startEventFeeds(traders, seed)
	defer feeds.close()

	logger.Printf("soak: load and faults for %s", d)
	start := time.Now()
	// The load runs for d, and on until the last fault has played out: a schedule that runs late
	// (faults take their time) is still injected whole, under load.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var load sync.WaitGroup
	for _, t := range traders {
		load.Go(func() { t.run(loadCtx, c.staff[auth.RoleFinance]) })
	}
	load.Go(func() { adm.run(loadCtx) })
	load.Go(func() { refused.run(loadCtx, start) })
	// The loop below sets faultsDone to nil once it has fired (or on an interrupt): the
	// goroutine closes its own copy.
	faultsDone := make(chan struct{})
	go func(done chan struct{}) { in.run(ctx, start, faults); in.wait(); close(done) }(faultsDone)
	periodic := time.NewTicker(30 * time.Second)
	defer periodic.Stop()
	loadEnd := time.After(d)
	for loadEnd != nil || faultsDone != nil {
		select {
		case <-ctx.Done():
			loadEnd, faultsDone = nil, nil
		case <-loadEnd:
			loadEnd = nil
		case <-faultsDone:
			faultsDone = nil
		case <-periodic.C:
			check("periodic")
		}
	}
	stopLoad()
	load.Wait()
	if ctx.Err() != nil {
		logger.Printf("soak: interrupted; logs in %s", dir)
		return 2
	}

	// Restricted accounts back to ACTIVE, the thin accounts' positions closed by the dealer.
	adm.finish(ctx)
	// The desk must trade again within 30 s of the last fault.
	in.mu.Lock()
	lastFault := in.lastEnd
	in.mu.Unlock()
	logger.Printf("soak: probing for a fill from %s, %s after the last fault ended (%s)", invariant.TimeOfDay(time.Now()),
		time.Since(lastFault).Round(time.Millisecond), invariant.TimeOfDay(lastFault))
	probe(ctx, traders, lastFault)
	// A quiet run at the walk's next rollover, on time for it: every position open now must then
	// have every date due by it, whatever the runs under load skipped, and every day they priced
	// must be frozen, the one left to the next rollover's run too.
	in.rollover(ctx, walk.step().At.Add(time.Minute).UTC(), 0, "settling run after the load")
	// The A-book settles: held answers released, then reconciles until one started past
	// NOT_SENT_AFTER after the desk went quiet plans nothing more.
	quiet := time.Now()
	if err := settleVenue(ctx, c, logger, quiet); err != nil {
		in.fail("settle: %v", err)
	}
	// The hedger then brings net exposure inside its limits; what it sent, the reconciler settles.
	if settleHedger(ctx, c, logger) {
		quiet = time.Now()
		if err := settleVenue(ctx, c, logger, quiet); err != nil {
			in.fail("settle after the hedger: %v", err)
		}
	}
	time.Sleep(2 * invariant.SampleEvery)
	stopSampling()
	sampling.Wait()
	// The candles of the last ticks heard are flushed within a batch's time: the check judges
	// ticks older than invariant.PriceTolerance.Flush, so the lane stops listening that long
	// before the final snapshot.
	stopPrices()
	pricing.Wait()
	time.Sleep(invariant.PriceTolerance.Flush)
	logger.Printf("soak: price lane: %s", prices.describe())
	if err := prices.write(filepath.Join(dir, "prices.jsonl")); err != nil {
		logger.Printf("soak: price lane: prices.jsonl not written: %v", err)
	}
	check("final")
	tl.add(finalVenueCheck(ctx, c, logger, quiet))
	tl.add(finalFeedsCheck(ctx, c, feeds, logger))
	ev := evidenceNow()
	tl.add([]invariant.Result{invariant.CheckTradesAgain(lastSnap, ev, lastFault)})
	faultErrs := in.errs

	// Report.
	viol := tl.violations()
	logger.Printf("soak: invariants (figures from the last check; %d checks):", tl.checks)
	for _, name := range tl.order {
		status := "ok  "
		if n := len(tl.broken[name]); n > 0 {
			status = fmt.Sprintf("FAIL (%d rows)", n)
		}
		logger.Printf("soak:   %-15s %-13s %s", status, name, tl.figures[name])
		for i, v := range tl.broken[name] {
			if i == 20 {
				logger.Printf("soak:        … and %d more", len(tl.broken[name])-20)
				break
			}
			logger.Printf("soak:        %s", v)
		}
	}
	for _, e := range faultErrs {
		logger.Printf("soak:   fault trouble: %s", e)
	}
	ct := commitTotals(ev.Desks)
	logger.Printf("soak: group commit (last counters of each web process): %d batches carrying %d writes, %d in one round trip, "+
		"%d run again after a stale check, %d written row by row, %d retried", ct.Batches, ct.Writes, ct.OneTrip, ct.Stale, ct.Split, ct.Retried)
	var counts []string
	for _, r := range in.recoveries {
		logger.Printf("soak: cluster recovery: %s", r)
	}
	if ch.galera {
		logger.Printf("soak: cluster: %s", unknownOutcomes(ev.Journal, ev.Windows))
	}
	kinds := slices.Concat(faultKinds, ch.kinds())
	if lane == invariant.LaneFIX {
		kinds = append(kinds, faultLostJournalReply, faultVenueOddUnits)
	}
	kinds = append(kinds, priceFaultKinds...)
	for _, k := range kinds {
		counts = append(counts, fmt.Sprintf("%s:%d", k, in.counts[k]))
	}
	verdict := "PASS"
	if viol > 0 || len(faultErrs) > 0 {
		verdict = "FAIL"
	}
	var failing []string
	for _, name := range tl.order {
		if len(tl.broken[name]) > 0 {
			failing = append(failing, name)
		}
	}
	slices.Sort(failing)
	venueControls := ""
	if vc := c.venue.controls(); vc != "" {
		venueControls = " " + vc // what the venue's own controls did
	}
	summary := fmt.Sprintf("soak: %s seed=%d seconds=%d venue=%s prefill=%s requests=%d faults={%s}%s admin={%s} refused={%s} eod={%s} invariants=%d violations=%d",
		verdict, seed, int(d.Seconds()), lane, prefill, len(ev.Journal), strings.Join(counts, ","), venueControls, adm.counts, refused.counts, lastEOD, len(tl.order), viol)
	if len(failing) > 0 {
		summary += " failing=" + strings.Join(failing, ",")
	}
	if len(faultErrs) > 0 {
		summary += fmt.Sprintf(" faultTrouble=%d", len(faultErrs))
	}
	if verdict == "PASS" && !keep {
		removeDir = true
	} else {
		keepDB = true
		summary += " kept=" + dir
		if ch.galera {
			logger.Printf("soak: logs, journal.jsonl, samples.jsonl, prices.jsonl and the cluster's logs kept in %s; the database went with the cluster", dir)
		} else {
			logger.Printf("soak: logs, journal.jsonl, samples.jsonl and prices.jsonl kept in %s; database %s kept", dir, c.dbName)
		}
	}
	fmt.Println(summary)
	if verdict != "PASS" {
		return 1
	}
	return 0
}

// probe places small orders on the holder until one fills or 30 s pass after the last fault —
// or after the probe began, when the soak's own work after the load ended later than that
// (tradesAgain judges the desk from when it was first asked).
func probe(ctx context.Context, traders []*trader, lastFault time.Time) {
	deadline := lastFault.Add(30 * time.Second)
	if dl := time.Now().Add(30 * time.Second); deadline.Before(dl) {
		deadline = dl
	}
	// Each attempt from the next trader: one account may rightly refuse every open (its margin
	// level under the margin call after the load's losses: seed 14314818324366, 30 refusals in a
	// row), which says nothing about whether the desk trades.
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		t := traders[i%len(traders)]
		nonce := t.nonce("probe")
		e := t.callRetrying(ctx, "open", "/api/fx/orders", nonce, map[string]any{"accountId": t.account, "symbol": "EURUSD",
			"side": "BUY", "type": "MARKET", "volume": "0.05", "requestNonce": nonce}, t.deskWeb)
		if e.OK() {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}
