package e2e

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/fx"
	"fxdesk/internal/pnl"
	"fxdesk/internal/sim/feedsim"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/yeargen"
)

// TestBenchYear measures, in one run, every read docs/operations.md («A year of data») lists, on a year of a mid-size broker
// — the trader lists for the trader with the most closed trades and for one with about a hundred,
// each first page and, where the answer names a nextBefore, the page after it; the dealer's
// /desk, status page, P&L (today, the last trading day, 7, 30 and 365 days), the audit log,
// the events page and /metrics — through the real fxdesk-web on the generated database, then
// market orders and their closes for both traders there beside the same on a second desk over
// an empty database, alternating (each round starting with the next lane), and prints the issue's tables with the run's figures.
//
//	FXDESK_BENCH=1 go test -count=1 -timeout 2h -run TestBenchYear -v ./e2e/
//
// FXDESK_YEAR_DB names an existing generated database to reuse (cmd/fxgen, `make year`; it is
// left in place, with the benchmark's few orders in it); without it the benchmark generates one
// with yeargen at FXDESK_YEAR_SIZE (year, the default; month or small) and FXDESK_YEAR_SEED,
// and drops it afterwards. FXDESK_BENCH_CALLS (default 500) is N, the calls per read,
// FXDESK_BENCH_READ_SECONDS (default 30) the most one read may take in all (a read too slow for
// N calls in that time reports the calls it made), FXDESK_BENCH_ORDERS (default 200) the market
// orders, each closed again, per trader and desk; FXDESK_BENCH_GOMAXPROCS as the other
// benchmarks. The figures are reported, not asserted: only a refused order fails the run. Each
// answer's status is checked: a read that answers anything but 200 (a range refused, a write
// deadline that closed the connection) is reported as what it answered.
func TestBenchYear(t *testing.T) {
	dbtest.SkipUnlessBench(t, "year of data")
	calls := int(envDuration("FXDESK_BENCH_CALLS", 500))
	budget := envDuration("FXDESK_BENCH_READ_SECONDS", 30) * time.Second
	orders := int(envDuration("FXDESK_BENCH_ORDERS", 200))
	env := slices.Concat([]string{"FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s", "LOG_LEVEL=info",
		fmt.Sprintf("GOMAXPROCS=%d", dbtest.BenchProcs(t))}, unlimitedRates)

	year := yearDatabase(t)
	t.Logf("year database %s (%s): %s", year.db.Name, year.origin, year.sizes)
	yd := startDeskOn(t, year.db, env...)
	empty := newTradingDesk(t, env...)

	// The traders' own tokens, issued the way an operator does; the dealer reads with the
	// install's superadmin token.
	big, small := year.big, year.small
	big.token, small.token = yd.e.issueToken(big.user, false), yd.e.issueToken(small.user, false)
	bid := year.lastPrice(t, "EURUSD")
	yd.setQuote(big.token, "EURUSD", fmt.Sprintf("%.5f", bid), fmt.Sprintf("%.5f", bid+0.0002))
	// Every symbol is quoted on both desks from here to the end, not only the benchmark's
	// EURUSD: a generated trader holds open positions in other symbols (the big one in CADJPY,
	// USDCAD, USDCNH, USDNOK, USDSEK), and a fill values the whole account — with any of its
	// symbols unpriced the desk refuses it, rightly, with the pricing 503.
	defer quoteBookEverySecond(t, yd, map[string]float64{"EURUSD": bid})()
	bid0 := 1.10000
	defer quoteBookEverySecond(t, empty, map[string]float64{"EURUSD": bid0})()

	client := &http.Client{Timeout: 70 * time.Second} // past the desk's 60 s write deadline
	b := &readBench{t: t, client: client, p: yd.web, calls: calls, budget: budget}

	// The trader's reads of docs/operations.md («A year of data»), each for both traders.
	traderReads := []struct {
		label, path string
		paged       bool // a list: also measured at its second page
	}{
		{"`GET /api/fx/deals` (first page, default limit)", "/api/fx/deals", true},
		{"`GET /api/fx/deals?limit=50`", "/api/fx/deals?limit=50", true},
		{"the same deals with `accountId=`", "/api/fx/deals?accountId=%d", true},
		{"`GET /api/fx/positions?status=closed`", "/api/fx/positions?status=closed", true},
		{"`GET /api/fx/orders`", "/api/fx/orders", true},
		{"`GET /api/fx/orders?status=pending`", "/api/fx/orders?status=pending", true},
		{"`GET /api/fx/events?after=0`", "/api/fx/events?after=0", false},
	}
	var traderRows [][3]string
	traders := []*yearTrader{&big, &small}
	for _, r := range traderReads {
		var row, page2 [3]string
		row[0], page2[0] = r.label, r.label+", page 2 (`before=nextBefore`)"
		first := make([]readReq, len(traders))
		for i, tr := range traders {
			first[i] = readReq{token: tr.token, path: r.path}
			if strings.Contains(r.path, "%d") {
				first[i].path = fmt.Sprintf(r.path, tr.account)
			}
		}
		for i, l := range b.measure(first...) {
			row[i+1] = l.cell()
		}
		traderRows = append(traderRows, row)
		if !r.paged {
			continue
		}
		var second []readReq
		var at []int
		for i, q := range first {
			if next := b.nextPage(q.token, q.path); next != "" {
				second, at = append(second, readReq{token: q.token, path: next}), append(at, i)
			} else {
				page2[i+1] = "no nextBefore"
			}
		}
		for k, l := range b.measure(second...) {
			page2[at[k]+1] = l.cell()
		}
		traderRows = append(traderRows, page2)
	}

	now := time.Now().UTC()
	last, err := fx.LastRollover(now)
	if err != nil {
		t.Fatal(err)
	}
	prev, _ := fx.LastRollover(last.At.Add(-time.Second))
	since := func(d time.Duration) string { return url.QueryEscape(now.Add(-d).Format(time.RFC3339)) }
	day := 24 * time.Hour
	dealerReads := []struct{ label, path string }{
		{"`GET /api/admin/fx/desk`", "/api/admin/fx/desk"},
		{"the status page (`/admin/status`)", "/admin/status"},
		{"dealer's P&L, today", "/api/admin/fx/pnl"},
		{"dealer's P&L, the last trading day", "/api/admin/fx/pnl?from=" + url.QueryEscape(prev.At.UTC().Format(time.RFC3339)) + "&to=" + url.QueryEscape(last.At.UTC().Format(time.RFC3339))},
		{"dealer's P&L, 7 days", "/api/admin/fx/pnl?from=" + since(7*day)},
		{"dealer's P&L, 30 days", "/api/admin/fx/pnl?from=" + since(30*day)},
		{"dealer's P&L, 365 days", "/api/admin/fx/pnl?from=" + since(365*day)},
		{"audit log, 30 days", "/api/admin/fx/audit?from=" + since(30*day)},
		{"events page, from the start (staff)", "/api/fx/events?after=0"},
		{"`GET /metrics`", "/metrics"},
	}
	var dealerRows [][2]string
	for _, r := range dealerReads {
		dealerRows = append(dealerRows, [2]string{r.label, b.measure(readReq{token: yd.admin, path: r.path})[0].cell()})
	}

	// Market orders and their closes: the two year traders and a trader of the empty desk taking
	// turns order by order, so that the machine's other work falls on each alike.
	empty.setQuote(empty.admin, "EURUSD", fmt.Sprintf("%.5f", bid0), fmt.Sprintf("%.5f", bid0+0.0002))
	etok, eacct := empty.newTrader(9000, "USD", "100", "10000.00")
	// Margin for the benchmark's orders, whatever the generator left in the accounts.
	yd.fund(big.account, "10000.00")
	yd.fund(small.account, "10000.00")
	lanes := []*orderLane{
		{name: "year, trader with " + strconv.FormatInt(big.closed, 10) + " closed trades", d: yd, tok: big.token, acct: big.account, bid: bid},
		{name: "year, trader with " + strconv.FormatInt(small.closed, 10) + " closed trades", d: yd, tok: small.token, acct: small.account, bid: bid},
		{name: "empty database", d: empty, tok: etok, acct: eacct, bid: bid0},
	}
	// Each round starts with the next lane, so that no lane always follows the same other.
	for r := range orders {
		for i := range lanes {
			lanes[(i+r)%len(lanes)].run(t, client, 1, r)
		}
	}

	t.Logf("a year's reads on %s (%s); p50 / p99 over the calls in brackets, N=%d, at most %v a read:", year.db.Name, year.sizes, calls, budget)
	t.Logf("")
	t.Logf("| read (p50 / p99) | trader with %d closed trades | trader with %d |", small.closed, big.closed)
	t.Logf("|---|---|---|")
	for _, r := range traderRows {
		t.Logf("| %s | %s | %s |", r[0], r[2], r[1])
	}
	t.Logf("")
	t.Logf("| dealer's read | p50 / p99 |")
	t.Logf("|---|---|")
	for _, r := range dealerRows {
		t.Logf("| %s | %s |", r[0], r[1])
	}
	t.Logf("")
	t.Logf("| market orders and closes (p50 / p99) | open | close | refused for a stale quote, sent again |")
	t.Logf("|---|---|---|---|")
	for _, l := range lanes {
		t.Logf("| %s | %s | %s | %d |", l.name, latencies{d: l.open}.cell(), latencies{d: l.close}.cell(), l.stale)
	}
}

// yearTrader is one of the two traders the benchmark compares.
type yearTrader struct {
	user, account, closed int64
	token                 string
}

// yearData is the database the benchmark reads: reused or generated for the run.
type yearData struct {
	db         *dbtest.Database
	origin     string // how it came to be
	sizes      string // its row counts
	big, small yearTrader
	sql        *sql.DB
}

// yearDatabase opens FXDESK_YEAR_DB, or generates a database with yeargen at FXDESK_YEAR_SIZE
// (dropped when the test ends), and names its two traders.
func yearDatabase(t *testing.T) *yearData {
	t.Helper()
	ctx := context.Background()
	y := &yearData{}
	if name := os.Getenv("FXDESK_YEAR_DB"); name != "" {
		var err error
		if y.db, err = dbtest.Existing(name); err != nil {
			t.Fatal(err)
		}
		y.origin = "reused: FXDESK_YEAR_DB"
		if y.sql, err = store.Connect(y.db.DSN); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { y.sql.Close() })
		// A kept database holds the deals written since it was generated (the benchmarks'
		// orders, a rollover benchmark's nights of charges), which the desk's summariser job
		// (every 5 minutes, docs/pnl.md) sums once their hour has closed, and which no desk may
		// have summed since. The closed hours are summed first, as the job would have: what is
		// left for a process's first reading of the recent ledger is the hour still open.
		start := time.Now()
		chunks, err := pnl.Summarise(ctx, y.sql, time.Now().UTC())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("P&L summaries brought up to date, as the summariser job would have: %d hours summed in %v", chunks, time.Since(start).Round(time.Millisecond))
		y.big, y.small = y.findTraders(t)
	} else {
		name := cmp.Or(os.Getenv("FXDESK_YEAR_SIZE"), "year")
		size, err := yeargen.SizeNamed(name)
		if err != nil {
			t.Fatalf("FXDESK_YEAR_SIZE: %v", err)
		}
		seed, _ := strconv.ParseInt(cmp.Or(os.Getenv("FXDESK_YEAR_SEED"), "42"), 10, 64)
		d, err := dbtest.NewDatabase("year")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Drop() })
		log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		if y.sql, err = store.OpenMigrated(ctx, d.DSN, log); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { y.sql.Close() })
		loader, err := yeargen.OpenLoader(d.DSN)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := yeargen.Fill(ctx, loader, size, seed, time.Now().UTC(), log)
		loader.Close()
		if err != nil {
			t.Fatalf("yeargen.Fill %s: %v", name, err)
		}
		y.db = d
		y.origin = fmt.Sprintf("generated: yeargen %s, seed %d, in %v", name, seed, time.Since(start).Round(time.Second))
		y.big = yearTrader{user: res.BigUser, account: res.BigAccount, closed: y.closedOf(t, res.BigAccount)}
		y.small = yearTrader{user: res.SmallUser, account: res.SmallAccount, closed: y.closedOf(t, res.SmallAccount)}
	}
	y.sizes = y.countRows(t)
	return y
}

// findTraders names, in a reused database, the account with the most closed trades and the one
// whose count is nearest the generator's SmallClosed (the issue's trader with 100).
func (y *yearData) findTraders(t *testing.T) (big, small yearTrader) {
	t.Helper()
	rows, err := y.sql.Query("SELECT p.`accountId`, a.`userId`, COUNT(*) FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` " +
		"WHERE p.`status` = 'CLOSED' GROUP BY p.`accountId`, a.`userId`")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := int64(yeargen.Year().SmallClosed)
	for rows.Next() {
		var tr yearTrader
		if err := rows.Scan(&tr.account, &tr.user, &tr.closed); err != nil {
			t.Fatal(err)
		}
		if tr.closed > big.closed || tr.closed == big.closed && tr.account < big.account {
			big = tr
		}
		dist := func(c int64) int64 { return max(c-want, want-c) }
		if small.account == 0 || dist(tr.closed) < dist(small.closed) || dist(tr.closed) == dist(small.closed) && tr.account < small.account {
			small = tr
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if big.account == 0 {
		t.Fatalf("database %s has no closed positions: not a generated year", y.db.Name)
	}
	return big, small
}

func (y *yearData) closedOf(t *testing.T, account int64) int64 {
	t.Helper()
	var n int64
	if err := y.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ? AND `status` = 'CLOSED'", account).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// countRows is the database's size as the issue states a broker's: exact counts.
func (y *yearData) countRows(t *testing.T) string {
	t.Helper()
	var out []string
	for _, c := range []struct{ label, q string }{
		{"accounts", "SELECT COUNT(*) FROM `fx_account`"},
		{"open positions", "SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'OPEN'"},
		{"closed positions", "SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'CLOSED'"},
		{"deals", "SELECT COUNT(*) FROM `fx_deal`"},
		{"events", "SELECT COUNT(*) FROM `fx_event`"},
		{"audit rows", "SELECT COUNT(*) FROM `fx_audit`"},
	} {
		var n int64
		if err := y.sql.QueryRow(c.q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s", n, c.label))
	}
	return strings.Join(out, ", ")
}

// lastPrice is the open price of the latest position in symbol, or 1.1 when there is none: the
// quote the benchmark sets, so the generated book is marked near where it was opened.
func (y *yearData) lastPrice(t *testing.T, symbol string) float64 {
	t.Helper()
	var p float64
	err := y.sql.QueryRow("SELECT `openPrice` FROM `fx_position` WHERE `symbol` = ? ORDER BY `id` DESC LIMIT 1", symbol).Scan(&p)
	switch {
	case err == sql.ErrNoRows:
		return 1.1
	case err != nil:
		t.Fatal(err)
	}
	return p
}

// startDeskOn starts a feed simulator and one fxdesk-web holding the lease on the existing
// database d, with a private Redis server, and returns once the holder's risk engine watches
// the desk (/readyz ready): a holder refuses fills until then. d is left in place.
func startDeskOn(t *testing.T, d *dbtest.Database, env ...string) *tradingDesk {
	t.Helper()
	r, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	db, err := store.Connect(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	e := &deskEnv{t: t, db: d, redis: r, sql: db, rdb: rdb}
	sim := startFeedSim(t)
	began := time.Now()
	web := e.start("web", "fxdesk-web", append([]string{"FXDESK_FEED=" + sim.url, "FXDESK_FEED_KEY=test"}, env...)...)
	web.waitLog(2*time.Minute, msgHas("role: holder"))
	holder := time.Since(began)
	web.waitLog(10*time.Minute, msgIs(msgRiskWatching))
	watching := time.Since(began)
	loaded := web.waitLog(time.Second, msgIs("risk view loaded"))
	code, body := call(t, web, "", http.MethodGet, "/readyz", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"riskView":"loaded"`) {
		t.Fatalf("holder watching the desk, but /readyz = %d %s", code, body)
	}
	t.Logf("fxdesk-web on %s: holder %v after start, risk view loaded in %v (%v positions, %v orders, %v accounts), watching the desk %v after start",
		d.Name, holder.Round(time.Millisecond), took(loaded).Round(time.Millisecond), loaded["positions"], loaded["orders"], loaded["accounts"], watching.Round(time.Millisecond))
	return &tradingDesk{e: e, sim: sim, web: web, admin: e.adminToken()}
}

// readBench measures GETs on one process, one call at a time.
type readBench struct {
	t      *testing.T
	client *http.Client
	p      *proc
	calls  int
	budget time.Duration
}

// latencies are one read's measured calls, sorted, or what stopped it.
type latencies struct {
	d      []time.Duration
	failed string // the answer that ended the read: a status and the start of its body, or an error
}

func (l latencies) cell() string {
	if l.failed != "" {
		return l.failed
	}
	if len(l.d) == 0 {
		return "—"
	}
	slices.Sort(l.d)
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
	return fmt.Sprintf("%s / %s ms (%d)", ms(percentile(l.d, 0.5)), ms(percentile(l.d, 0.99)), len(l.d))
}

// get sends one GET with token and reads the whole answer.
func (b *readBench) get(token, path string) (int, []byte, time.Duration, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+b.p.addr+path, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, time.Since(start), err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, body, time.Since(start), err
}

// readReq is one GET the benchmark times: a path and the bearer token it is read with.
type readReq struct{ token, path string }

// measure calls each of reqs once unmeasured (a cold cache is not the poll's case), then up to
// b.calls times each within b.budget per request, taking turns call by call (each round starting
// with the next request) so that whatever else the machine does falls on each alike: two traders'
// reads are compared from one stretch of time, not from two. A request that answers anything but
// 200 is reported as that answer and called no more.
func (b *readBench) measure(reqs ...readReq) []latencies {
	ls := make([]latencies, len(reqs))
	deadline := time.Now().Add(time.Duration(len(reqs)) * b.budget)
	for i := 0; i <= b.calls && (i < 2 || time.Now().Before(deadline)); i++ {
		for k := range reqs {
			j := (i + k) % len(reqs)
			l, q := &ls[j], reqs[j]
			if l.failed != "" {
				continue
			}
			code, body, took, err := b.get(q.token, q.path)
			switch {
			case err != nil:
				l.failed = fmt.Sprintf("no answer after %v: %v", took.Round(time.Millisecond), err)
			case code != http.StatusOK:
				var e errorResp
				msg := string(body)
				if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
					msg = e.Error.Message
				}
				l.failed = fmt.Sprintf("%d after %v: %s", code, took.Round(time.Millisecond), clip(msg, 80))
			}
			if l.failed == "" && i > 0 {
				l.d = append(l.d, took)
			}
		}
	}
	for j, q := range reqs {
		b.t.Logf("GET %s: %s", q.path, ls[j].cell())
	}
	return ls
}

// nextPage is path's second page — path with before set to the first page's nextBefore — or ""
// when the first page names none (the last page, or a list without keyset paging).
func (b *readBench) nextPage(token, path string) string {
	code, body, _, err := b.get(token, path)
	if err != nil || code != http.StatusOK {
		return ""
	}
	var page struct {
		NextBefore *int64 `json:"nextBefore"`
	}
	if json.Unmarshal(body, &page) != nil || page.NextBefore == nil {
		return ""
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "before=" + strconv.FormatInt(*page.NextBefore, 10)
}

// clip is s cut to n bytes, marked.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// orderLane is one trader placing market orders and closing each position again, timed apart.
type orderLane struct {
	name        string
	d           *tradingDesk
	tok         string
	acct        int64
	bid         float64 // the quote setQuote restores after a refusal for pricing
	open, close []time.Duration
	stale       int // sends refused with the pricing 503 and sent again
}

// run opens and closes n 0.01-lot EURUSD positions one after the other; round names the nonces.
func (l *orderLane) run(t *testing.T, client *http.Client, n, round int) {
	t.Helper()
	send := func(path, body string, want int, v any) time.Duration {
		var b []byte
		var took time.Duration
		var resp *http.Response
		// The simulator's walk is off: a quote the desk last heard too long ago (a busy
		// machine, a reconnect to the quiet simulator) halts the symbol. Such a refusal is
		// counted and the quote set again; its time is not the order's.
		for attempt := 0; ; attempt++ {
			req, _ := http.NewRequest(http.MethodPost, "http://"+l.d.web.addr+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+l.tok)
			start := time.Now()
			var err error
			if resp, err = client.Do(req); err != nil {
				t.Fatalf("%s: POST %s: %v", l.name, path, err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			took = time.Since(start)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), fx.MsgPricingUnavailable) || attempt == 3 {
				break
			}
			l.stale++
			l.d.setQuote(l.tok, "EURUSD", fmt.Sprintf("%.5f", l.bid), fmt.Sprintf("%.5f", l.bid+0.0002))
		}
		if resp.StatusCode != want {
			t.Fatalf("%s: POST %s %s = %d %s", l.name, path, body, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: POST %s: decode %s: %v", l.name, path, b, err)
		}
		return took
	}
	for i := range n {
		var o orderResp
		l.open = append(l.open, send("/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.01","requestNonce":"year-bench-%d-%d-%d"}`,
			l.acct, time.Now().UnixNano(), round, i), http.StatusCreated, &o))
		if o.Position == nil {
			t.Fatalf("%s: market order opened no position: %+v", l.name, o)
		}
		var c closeResp
		l.close = append(l.close, send(fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusOK, &c))
	}
}

// quoteBookEverySecond quotes every symbol of the simulator's catalogue on d every second until
// the returned stop: at the simulator's own starting prices (where a generated history ends, see
// docs/operations.md, «A year of data») or, for a symbol in bids, bid and bid + 2 pips; a point
// (a tenth of a pip) up every other second. With the simulator's walk off, a symbol never quoted
// leaves every account holding it unpriced (a fill values the whole account: refused with the
// pricing 503), and a stream that never changes is silent (the desk reconnects after 30 s). It
// reports a failure with t.Error (off the test's goroutine).
func quoteBookEverySecond(t *testing.T, d *tradingDesk, bids map[string]float64) (stop func()) {
	type quote struct {
		symbol      string
		bid, spread float64
		digits      int
		point       float64
	}
	var book []quote
	for _, in := range feedsim.DefaultInstruments() {
		scale := math.Pow10(in.Digits)
		q := quote{symbol: in.Symbol, digits: in.Digits, point: 1 / scale,
			bid: math.Round((in.Mid-in.Spread/2)*scale) / scale, spread: math.Max(in.Spread, 1/scale)}
		if b, ok := bids[in.Symbol]; ok {
			q.bid, q.spread = b, 0.0002
		}
		book = append(book, q)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, q := range book {
				b := q.bid + float64(i%2)*q.point
				body := fmt.Sprintf(`{"symbol":%q,"bid":%.*f,"ask":%.*f}`, q.symbol, q.digits, b, q.digits, b+q.spread)
				if err := d.sim.control("quote", body); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// testWriter sends the generator's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
