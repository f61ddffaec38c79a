package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/trading"
	"fxdesk/internal/yeargen"
)

// TestBenchBootAndTakeover measures, on the real fxdesk-web, the time from a holder's start to
// its first fill and from a holder's SIGKILL to the standby's first fill, each with the risk
// view's load time, on an empty database and on a database with a book: the open positions of a
// year's broker seeded alone (FXDESK_BOOT_BOOK, default 50,000 over 5,000 accounts), a generated
// Month (internal/yeargen) and, when FXDESK_YEAR_DB
// names an existing generated year database, that year. It also times the risk view's read of
// the open positions alone (the loader's own statement) for the database's row rate, and prints
// the issue's target: boot to first fill ≤ 2 × the empty database's + open positions ÷ row rate.
// Figures are printed, never asserted (docs/operations.md, «Boot and takeover»).
//
//	FXDESK_BENCH=1 go test -count=1 -timeout 60m -run TestBenchBootAndTakeover -v ./e2e/
//
// FXDESK_BOOT_RUNS (default 3) boots each database that many times; FXDESK_BOOT_SETS lists the
// databases to measure (default "empty,book,month,year").
func TestBenchBootAndTakeover(t *testing.T) {
	dbtest.SkipUnlessBench(t, "boot and takeover")
	runs := int(envDuration("FXDESK_BOOT_RUNS", 3))
	sets := map[string]bool{}
	for s := range strings.SplitSeq(cmpOr(os.Getenv("FXDESK_BOOT_SETS"), "empty,book,month,year"), ",") {
		sets[strings.TrimSpace(s)] = true
	}
	var out []bootFigures
	var empty *bootFigures
	for _, set := range []string{"empty", "book", "month", "year"} {
		if !sets[set] {
			continue
		}
		t.Run(set, func(t *testing.T) {
			f, ok := benchBootSet(t, set, runs)
			if !ok {
				return
			}
			out = append(out, f)
			if set == "empty" {
				empty = &out[len(out)-1]
			}
		})
	}
	t.Log("\n" + bootTable(out, empty))
}

// bootFigures is one database's measurements.
type bootFigures struct {
	set                           string
	positions, orders, accounts   int     // what the risk view loaded
	closed                        int64   // closed positions in the database
	rowRate                       float64 // open positions read per second by the loader's statement
	readOpen                      time.Duration
	plan                          string        // the key EXPLAIN names for that read
	bootFill, bootWatch, bootLoad time.Duration // medians: start → first fill, → watching, the load's own took
	takeFill, takeover, takeLoad  time.Duration // SIGKILL → first fill, → "took over", the load's took
	takeWatch                     time.Duration // SIGKILL → watching
	sameHostFill                  time.Duration // SIGKILL → first fill on one host (the dead-pid shortcut)
	loadFailures                  int           // failed loads over the boots (each retried after 1 s, doubling)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// benchBootSet prepares one database and measures it; ok false when the set is not available.
func benchBootSet(t *testing.T, set string, runs int) (bootFigures, bool) {
	f := bootFigures{set: set}
	e := newDeskEnv(t)
	switch set {
	case "empty":
		e.migrate()
	case "book":
		e.migrate()
		n := int(envDuration("FXDESK_BOOT_BOOK", 50000))
		start := time.Now()
		e.seedPositionsIn("USD", n/10, 10)
		t.Logf("seeded %d open positions over %d accounts in %v", n, n/10, time.Since(start).Round(time.Millisecond))
	case "month":
		db, err := store.OpenMigrated(context.Background(), e.db.DSN, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = yeargen.Fill(context.Background(), db, yeargen.Month(), 42, time.Now().UTC(), slog.New(slog.DiscardHandler))
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("generated a month in %v", time.Since(start).Round(time.Second))
	case "year":
		name := os.Getenv("FXDESK_YEAR_DB")
		if name == "" {
			t.Skip("FXDESK_YEAR_DB names no generated year database")
		}
		e.useDatabase(name)
	}
	ensureAnalyzed(t, e.sql)
	f.rowRate, f.readOpen, f.plan = readOpenPositions(t, e.sql)
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'CLOSED'").Scan(&f.closed); err != nil {
		t.Fatal(err)
	}

	sim := startFeedSim(t)
	// The simulator's own EURUSD: a generated history ends at the simulator's starting prices, and
	// its stops and resting orders are far from them (docs/operations.md, «A year of data»).
	bid, ask := simPrice(t, sim, "EURUSD")
	prod := []string{"FXDESK_FEED=" + sim.url, "FXDESK_FEED_KEY=test", "FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info",
		"FXDESK_RATE_PER_TOKEN=0", "FXDESK_RATE_PER_ADDR=0"}
	d := &tradingDesk{e: e, sim: sim}
	// The bench trader, opened by a holder that is then stopped: not part of any measured boot.
	d.web = e.start("setup", "fxdesk-web", prod...)
	d.web.waitLog(5*time.Minute, msgIs(msgRiskWatching))
	d.admin = e.adminToken()
	// On a kept database (FXDESK_YEAR_DB) the trader of an earlier run goes on with its account:
	// a user may hold only so many.
	const benchUser = 990001
	var acct int64
	tok := e.issueToken(benchUser, false)
	if err := e.sql.QueryRow("SELECT COALESCE(MIN(`id`), 0) FROM `fx_account` WHERE `userId` = ?", benchUser).Scan(&acct); err != nil {
		t.Fatal(err)
	}
	if acct == 0 {
		tok, acct = d.newTrader(benchUser, "USD", "100", "1000000.00")
	}
	d.setQuote(tok, "EURUSD", bid, ask)
	d.web.stop(syscall.SIGTERM)

	order := marketOrders(&http.Client{Timeout: 30 * time.Second}, tok, fmt.Sprintf("boot-%s-%d", set, time.Now().UnixNano())) // a kept database keeps the nonces
	firstFill := func(p *proc) {
		for start := time.Now(); ; {
			d.simQuote("EURUSD", bid, ask)
			if err := order(p, acct); err == nil {
				return
			} else if !strings.Contains(err.Error(), " = 503 ") && !strings.Contains(err.Error(), "connection refused") {
				t.Fatal(err)
			}
			if time.Since(start) > 10*time.Minute {
				t.Fatal("no fill within 10 minutes")
			}
			time.Sleep(20 * time.Millisecond) // a client's retry pace: the figures' resolution
		}
	}
	var fills, watches, loads []time.Duration
	for i := range runs {
		began := time.Now()
		p := e.start(fmt.Sprintf("boot-%d", i), "fxdesk-web", prod...)
		firstFill(p)
		fills = append(fills, time.Since(began))
		watches = append(watches, logAt(t, p, msgIs(msgRiskWatching)).Sub(began))
		l := p.waitLog(time.Second, msgIs("risk view loaded"))
		loads = append(loads, took(l))
		f.positions, f.orders, f.accounts = int(l["positions"].(float64)), int(l["orders"].(float64)), int(l["accounts"].(float64))
		f.loadFailures += p.countLog(msgHas("risk view load failed"))
		p.stop(syscall.SIGTERM)
	}
	f.bootFill, f.bootWatch, f.bootLoad = median(fills), median(watches), median(loads)

	// Takeover across hosts: the standby waits out the killed holder's row (one TTL at most),
	// then starts the price stream and loads the risk view.
	takeover := func(hostA, hostB string) (fill, over, watch, load time.Duration) {
		a := e.start("holder-"+hostA, "fxdesk-web", append(d.webTierEnv(hostA, "FXDESK_TAKEOVER=standby"), prod...)...)
		a.waitLog(5*time.Minute, msgIs(msgRiskWatching))
		b := e.start("standby-"+hostB, "fxdesk-web", append(d.webTierEnv(hostB, "FXDESK_TAKEOVER=standby"), prod...)...)
		b.waitLog(time.Minute, msgHas("role: follower"))
		firstFill(a)
		killed := time.Now()
		a.stop(syscall.SIGKILL)
		firstFill(b)
		fill = time.Since(killed)
		over = logAt(t, b, msgHas("role: holder — took over")).Sub(killed)
		watch = logAt(t, b, msgIs(msgRiskWatching)).Sub(killed)
		load = took(b.waitLog(time.Second, msgIs("risk view loaded")))
		b.stop(syscall.SIGTERM)
		return
	}
	f.takeFill, f.takeover, f.takeWatch, f.takeLoad = takeover("box-a", "box-b")
	f.sameHostFill, _, _, _ = takeover("box", "box")
	return f, true
}

// simPrice is the simulator's current bid and ask for symbol (GET /control/state).
func simPrice(t *testing.T, sim *feedSim, symbol string) (bid, ask string) {
	t.Helper()
	resp, err := http.Get(sim.base + "/control/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Symbols []struct {
			Symbol   string
			Bid, Ask float64
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Symbols {
		if s.Symbol == symbol {
			return fmt.Sprintf("%.5f", s.Bid), fmt.Sprintf("%.5f", s.Ask)
		}
	}
	t.Fatalf("the simulator has no %s", symbol)
	return "", ""
}

// useDatabase points the install at an existing database instead of its fresh one (which stays
// empty and is dropped as usual).
func (e *deskEnv) useDatabase(name string) {
	e.t.Helper()
	dsn := strings.Replace(e.db.DSN, "/"+e.db.Name+"?", "/"+name+"?", 1)
	if dsn == e.db.DSN {
		e.t.Fatalf("cannot rewrite %q for database %s", e.db.DSN, name)
	}
	db, err := store.Connect(dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	e.mysqlDSN, e.sql = dsn, db
}

// ensureAnalyzed refreshes the statistics of the tables the risk view reads, as a loader would
// find them on a server that has run for a while.
func ensureAnalyzed(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, tbl := range []string{"fx_position", "fx_order", "fx_account"} {
		rows, err := db.Query("ANALYZE TABLE `" + tbl + "`")
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
}

// readOpenPositions runs the risk view's read of the open positions (trading.RiskViewPositionsSQL) and returns the rows per second, the time and the key EXPLAIN names.
func readOpenPositions(t *testing.T, db *sql.DB) (float64, time.Duration, string) {
	t.Helper()
	q := trading.RiskViewPositionsSQL
	var key sql.NullString
	rows, err := db.Query("EXPLAIN " + q)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	if rows.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if c == "key" {
				if b := *vals[i].(*sql.RawBytes); b != nil {
					key = sql.NullString{String: string(b), Valid: true}
				}
			}
		}
	}
	rows.Close()
	best := time.Duration(1 << 62)
	n := 0
	for range 3 { // the best of three: the first may read from disk
		start := time.Now()
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(sql.RawBytes)
		}
		n = 0
		for rows.Next() {
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			n++
		}
		rows.Close()
		best = min(best, time.Since(start))
	}
	plan := cmpOr(key.String, "none (full scan)")
	if n == 0 {
		return 0, best, plan
	}
	return float64(n) / best.Seconds(), best, plan
}

// logAt is the time p logged the first line matching pred (waiting for it).
func logAt(t *testing.T, p *proc, pred func(logLine) bool) time.Time {
	t.Helper()
	l := p.waitLog(time.Minute, pred)
	at, err := time.Parse(time.RFC3339Nano, l["time"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// took is a line's "took" attribute (slog writes a duration in nanoseconds).
func took(l logLine) time.Duration {
	ns, _ := l["took"].(float64)
	return time.Duration(ns)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// bootTable prints the figures and the issue's target against the empty database.
func bootTable(rows []bootFigures, empty *bootFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %9s %7s %8s %9s %18s %-28s | %13s %11s %10s | %16s %13s %12s %10s | %15s\n",
		"db", "positions", "orders", "accounts", "closed", "open read (rows/s)", "plan",
		"boot→1st fill", "→watching", "view load", "SIGKILL→1st fill", "→took over", "→watching", "view load", "same host→fill")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-6s %9d %7d %8d %9d %9s (%6.0f) %-28s | %13s %11s %10s | %16s %13s %12s %10s | %15s\n",
			r.set, r.positions, r.orders, r.accounts, r.closed, ms(r.readOpen), r.rowRate, r.plan,
			ms(r.bootFill), ms(r.bootWatch), ms(r.bootLoad), ms(r.takeFill), ms(r.takeover), ms(r.takeWatch), ms(r.takeLoad), ms(r.sameHostFill))
		if r.loadFailures > 0 {
			fmt.Fprintf(&b, "%s: %d risk view loads failed and were retried during the boots\n", r.set, r.loadFailures)
		}
	}
	if empty != nil {
		for _, r := range rows {
			if r.set == "empty" || r.rowRate == 0 {
				continue
			}
			read := time.Duration(float64(r.positions) / r.rowRate * float64(time.Second))
			target := 2*empty.bootFill + read
			verdict := "within"
			if r.bootFill > target {
				verdict = "OVER"
			}
			tTarget := 2*empty.takeFill + read
			tVerdict := "within"
			if r.takeFill > tTarget {
				tVerdict = "OVER"
			}
			fmt.Fprintf(&b, "%s: boot→fill %s vs target 2×%s + %d positions at %.0f rows/s (%s) = %s: %s; takeover→fill %s vs %s: %s\n",
				r.set, ms(r.bootFill), ms(empty.bootFill), r.positions, r.rowRate, ms(read), ms(target), verdict, ms(r.takeFill), ms(tTarget), tVerdict)
		}
	}
	fmt.Fprintf(&b, "lease TTL 20s, fence 5s (production defaults); across hosts the standby waits out the killed holder's row; on one host it claims at its next re-contend (TTL/3) since the holder's pid is dead; boot figures are medians, retry pace 20 ms\n")
	return b.String()
}
