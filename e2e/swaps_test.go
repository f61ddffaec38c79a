package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/marks"
	"fxdesk/internal/swaps"
)

// splitDesk is a holder web process with CRON_MODE=off, publishing the quote mirror, fed by a
// test-driven simulator: the prices fxdesk-cron converts with are exactly the ones a test set.
func newSplitDesk(t *testing.T, env ...string) *tradingDesk {
	t.Helper()
	return newSplitDeskIn(newDeskEnv(t), env...)
}

// newSplitDeskIn is newSplitDesk on an install the test has prepared; env entries override the
// web process's environment.
func newSplitDeskIn(e *deskEnv, env ...string) *tradingDesk {
	t := e.t
	t.Helper()
	sim := startFeedSim(t)
	web := e.start("web", "fxdesk-web", mirrorEnv(append([]string{"CRON_MODE=off", "FXDESK_FEED=" + sim.url, "FXDESK_FEED_KEY=test",
		"FXDESK_LEASE_TTL=6s", "FXDESK_LEASE_FENCE=2s"}, env...)...)...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	return &tradingDesk{e: e, sim: sim, web: web, admin: e.adminToken()}
}

// waitPublished returns once the leader has published a snapshot that began after this call:
// every quote the desk had accepted before it is in the mirror.
func (d *tradingDesk) waitPublished() {
	t := d.e.t
	t.Helper()
	first := ""
	if v := d.web.mirror().Mirror; v != nil {
		first = v.LastPublishedAt
	}
	seen := 0
	eventually(t, 10*time.Second, 50*time.Millisecond, "the quote mirror published twice", func() bool {
		if v := d.web.mirror().Mirror; v != nil && v.LastPublishedAt != first {
			first = v.LastPublishedAt
			seen++
		}
		return seen == 2
	})
}

// cronRun runs `fxdesk-cron run JOB --at at` to completion and returns its counts.
func (e *deskEnv) cronRun(job string, at time.Time) map[string]int {
	e.t.Helper()
	out, err := runOnce(e.env(mirrorEnv()...), "fxdesk-cron", "run", job, "--at", at.UTC().Format(time.RFC3339))
	if err != nil {
		e.t.Fatalf("fxdesk-cron run %s --at %s: %v\n%s", job, at.Format(time.RFC3339), err, out)
	}
	return parseCounts(e.t, job, out)
}

var countRE = regexp.MustCompile(`(\w+):(\d+)`)

func parseCounts(t *testing.T, job, out string) map[string]int {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, job+" as of ") {
			continue
		}
		counts := map[string]int{}
		if i := strings.Index(line, "map["); i >= 0 {
			for _, m := range countRE.FindAllStringSubmatch(line[i:], -1) {
				counts[m[1]], _ = strconv.Atoi(m[2])
			}
		}
		return counts
	}
	t.Fatalf("no result line for %s in:\n%s", job, out)
	return nil
}

// nextRollover is the first 17:00 New York after t. The zone is embedded: an error is a broken
// build, and the test stops there.
func nextRollover(t time.Time) fx.Rollover {
	ro, err := fx.NextRollover(t)
	if err != nil {
		panic(err)
	}
	return ro
}

// firstWeekdayRolloverAfter is the first Monday-to-Friday 17:00 New York after t.
func firstWeekdayRolloverAfter(t time.Time) fx.Rollover {
	ro := nextRollover(t)
	for ro.Weekday() == time.Saturday || ro.Weekday() == time.Sunday {
		ro = ro.Next()
	}
	return ro
}

// nextMonday is the first Monday rollover after t.
func nextMonday(t time.Time) fx.Rollover {
	ro := nextRollover(t)
	for ro.Weekday() != time.Monday {
		ro = ro.Next()
	}
	return ro
}

func (e *deskEnv) swapDeals(position int64) map[string]decimal.Decimal {
	e.t.Helper()
	rows, err := e.sql.Query("SELECT `idempotencyKey`, `amount` FROM `fx_deal` WHERE `type` = 'SWAP' AND `positionId` = ?", position)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]decimal.Decimal{}
	for rows.Next() {
		var k string
		var a decimal.Decimal
		if err := rows.Scan(&k, &a); err != nil {
			e.t.Fatal(err)
		}
		out[strings.TrimPrefix(k, fmt.Sprintf("swap:%d:", position))] = a
	}
	return out
}

// checkAllLedgers asserts Σ deals = balance for every account, and that each position's accrued
// swap is the sum of its SWAP deals.
func (e *deskEnv) checkAllLedgers() {
	e.t.Helper()
	var bad int
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_account` a LEFT JOIN (SELECT `accountId`, SUM(`amount`) s FROM `fx_deal` GROUP BY `accountId`) d " +
		"ON d.`accountId` = a.`id` WHERE a.`balance` <> COALESCE(d.s, 0)").Scan(&bad); err != nil {
		e.t.Fatal(err)
	}
	if bad != 0 {
		e.t.Fatalf("%d account(s) whose balance is not Σ deals", bad)
	}
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` p LEFT JOIN (SELECT `positionId`, SUM(`amount`) s FROM `fx_deal` " +
		"WHERE `type` = 'SWAP' GROUP BY `positionId`) d ON d.`positionId` = p.`id` WHERE p.`swap` <> COALESCE(d.s, 0)").Scan(&bad); err != nil {
		e.t.Fatal(err)
	}
	if bad != 0 {
		e.t.Fatalf("%d position(s) whose accrued swap is not Σ of their SWAP deals", bad)
	}
}

func (d *tradingDesk) open(token string, account int64, symbol, side, volume string) int64 {
	d.e.t.Helper()
	var o orderResp
	must(d.e.t, d.web, token, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":%q,"side":%q,"type":"MARKET","volume":%q}`,
		account, symbol, side, volume), http.StatusCreated, &o)
	return o.Position.ID
}

// A week of rollovers run by the real fxdesk-cron with --at, through the quote mirror: exact
// amounts for a USD account long and short EURUSD, a EUR account long GBPJPY (JPY → USD → EUR
// through the hub), a swap-free account charged nothing; Wednesday triple, Friday single,
// weekend instants nothing; a second run and two processes at once charge nothing more.
func TestSwapsWeekOfRollovers(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t)
	tok, usd := d.newTrader(101, "USD", "100", "100000")
	d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
	d.setQuote(tok, "USDJPY", "151.230", "151.250")
	d.setQuote(tok, "GBPJPY", "190.500", "190.530")
	long := d.open(tok, usd, "EURUSD", "BUY", "1.00")
	short := d.open(tok, usd, "EURUSD", "SELL", "2.00")
	tokE, eur := d.newTrader(102, "EUR", "100", "50000")
	cross := d.open(tokE, eur, "GBPJPY", "BUY", "0.70")
	tokF, free := d.newTrader(103, "USD", "100", "10000")
	if _, err := d.e.sql.Exec("UPDATE `fx_account` SET `swapFree` = TRUE WHERE `id` = ?", free); err != nil {
		t.Fatal(err)
	}
	freePos := d.open(tokF, free, "EURUSD", "BUY", "1.00")
	d.waitPublished()

	// Run every day of the week after next Monday, an hour after each 17:00 New York. Dates
	// between now and that Monday are caught up by the first run.
	mon := nextMonday(time.Now())
	week := []fx.Rollover{mon}
	for len(week) < 7 {
		week = append(week, week[len(week)-1].Next())
	}
	for i, ro := range week {
		got := d.e.cronRun(swaps.JobName, ro.At.Add(time.Hour))
		wd := ro.Weekday()
		if (wd == time.Saturday || wd == time.Sunday) && (got["charged"] != 0 || got["pending"] != 0) {
			t.Fatalf("%s %s charged %v", wd, ro.Date, got)
		}
		if i == 0 && (got["charged"] < 3 || got["charged"]%3 != 0) { // Monday also catches up the days before it
			t.Fatalf("%s %s: %v, want 3 charged per weekday since the positions opened", wd, ro.Date, got)
		}
		if i > 0 && wd >= time.Monday && wd <= time.Friday && got["charged"] != 3 {
			t.Fatalf("%s %s: %v, want 3 charged (the swap-free account is skipped)", wd, ro.Date, got)
		}
		t.Logf("%s %s: %v", wd, ro.Date, got)
	}
	want := func(pos int64, date, amount string) {
		t.Helper()
		got, ok := d.e.swapDeals(pos)[date]
		if !ok || !got.Equal(decimal.RequireFromString(amount)) {
			t.Fatalf("position %d on %s: swap deal %v (found %v), want %s", pos, date, got, ok, amount)
		}
	}
	for _, ro := range week {
		switch ro.Weekday() {
		case time.Wednesday: // triple: carries the weekend
			want(long, ro.Date, "-22.50")
			want(short, ro.Date, "13.20")
			want(cross, ro.Date, "20.83") // 3402 JPY / (151.240 × 1.08010), rounded once
		case time.Saturday, time.Sunday:
			for _, p := range []int64{long, short, cross} {
				if _, ok := d.e.swapDeals(p)[ro.Date]; ok {
					t.Fatalf("position %d charged on %s, a %s", p, ro.Date, ro.Weekday())
				}
			}
		default: // Monday, Tuesday, Thursday, Friday: one day
			want(long, ro.Date, "-7.50")
			want(short, ro.Date, "4.40")
			want(cross, ro.Date, "6.94") // 1134 JPY / (151.240 × 1.08010)
		}
	}
	if n := len(d.e.swapDeals(freePos)); n != 0 {
		t.Fatalf("swap-free position charged %d times", n)
	}
	var through sql.NullString
	d.e.sql.QueryRow("SELECT `swapThrough` FROM `fx_position` WHERE `id` = ?", freePos).Scan(&through)
	if !through.Valid || through.String < week[4].Date {
		t.Fatalf("swap-free position's watermark %v, want it moved to %s", through, week[4].Date)
	}

	// Again, and twice at once: nothing more.
	before := d.e.countDeals()
	if got := d.e.cronRun(swaps.JobName, week[2].At.Add(2*time.Hour)); got["charged"] != 0 {
		t.Fatalf("second run charged %v", got)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { d.e.cronRun(swaps.JobName, week[6].At.Add(time.Hour)) })
	}
	wg.Wait()
	if after := d.e.countDeals(); after != before {
		t.Fatalf("deals %d → %d after reruns", before, after)
	}
	d.e.checkAllLedgers()
}

func (e *deskEnv) countDeals() int {
	e.t.Helper()
	var n int
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal`").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// seedPositions writes accounts (USD, funded by a deposit deal) and open EURUSD positions
// straight into the database: USD accounts on a USD-quoted symbol need no price to be charged,
// so the cron process alone can settle them.
func (e *deskEnv) seedPositions(accounts, perAccount int) {
	e.seedPositionsIn("USD", accounts, perAccount)
}

// seedPositionsIn is seedPositions with accounts in currency.
func (e *deskEnv) seedPositionsIn(currency string, accounts, perAccount int) {
	e.t.Helper()
	ctx := context.Background()
	var first int64
	if err := e.sql.QueryRow("SELECT COALESCE(MAX(`id`), 0) + 1 FROM `fx_account`").Scan(&first); err != nil {
		e.t.Fatal(err)
	}
	const chunk = 1000
	exec := func(q string, rows []string) {
		if len(rows) == 0 {
			return
		}
		if _, err := e.sql.ExecContext(ctx, q+strings.Join(rows, ", ")); err != nil {
			e.t.Fatal(err)
		}
	}
	var acc, dep, pos []string
	order := first * 1000
	for i := range accounts {
		id := first + int64(i)
		acc = append(acc, fmt.Sprintf("(%d, %d, '%s', 100, 1000000.00)", id, 5000+id, currency))
		dep = append(dep, fmt.Sprintf("(%d, 'DEPOSIT', 1000000.00, 1000000.00, '%s', 'seed:%d')", id, currency, id))
		for j := range perAccount {
			side := "BUY"
			if j%2 == 1 {
				side = "SELL"
			}
			order++
			pos = append(pos, fmt.Sprintf("(%d, %d, 'EURUSD', '%s', 0.10, 0.10, 1.08000)", id, order, side))
			if len(pos) == chunk {
				exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES ", acc)
				exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES ", dep)
				acc, dep = nil, nil
				exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`) VALUES ", pos)
				pos = nil
			}
		}
	}
	exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES ", acc)
	exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES ", dep)
	exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`) VALUES ", pos)
}

// migrate applies the migrations to the install's fresh database.
func (e *deskEnv) migrate() {
	e.t.Helper()
	if out, err := runOnce(e.env(), "fxdesk-web", "migrate"); err != nil {
		e.t.Fatalf("migrate: %v\n%s", err, out)
	}
}

// wantEachChargedOnce asserts every open position has exactly one SWAP deal for rollover ro, of
// the instrument's amount for that day (tripled on Wednesday, EURUSD's triple-swap day), and that
// every ledger balances.
func (e *deskEnv) wantEachChargedOnce(ro fx.Rollover, positions int) {
	e.t.Helper()
	date := ro.Date
	days := decimal.NewFromInt(int64(swaps.DayMultiplier(ro.Weekday(), time.Wednesday)))
	buy, sell := decimal.RequireFromString("-0.75").Mul(days), decimal.RequireFromString("0.22").Mul(days)
	var n, distinct int
	var wrong int
	if err := e.sql.QueryRow("SELECT COUNT(*), COUNT(DISTINCT `positionId`), "+
		"SUM(CASE WHEN (`side` = 'BUY' AND `amount` <> ?) OR (`side` = 'SELL' AND `amount` <> ?) THEN 1 ELSE 0 END) "+
		"FROM `fx_deal` WHERE `type` = 'SWAP' AND `idempotencyKey` LIKE ?", buy, sell, "swap:%:"+date).Scan(&n, &distinct, &wrong); err != nil {
		e.t.Fatal(err)
	}
	if n != positions || distinct != positions || wrong != 0 {
		e.t.Fatalf("%s: %d swap deals over %d positions (%d with a wrong amount), want exactly one for each of %d", date, n, distinct, wrong, positions)
	}
	e.checkAllLedgers()
}

// Two fxdesk-cron processes charging the same rollover at the same moment charge each position
// once: the second finds every watermark moved under the row locks.
func TestSwapsTwoProcessesAtOnce(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	e.migrate()
	const accounts, per = 200, 10
	e.seedPositions(accounts, per)
	ro := firstWeekdayRolloverAfter(time.Now())
	at := ro.At.Add(time.Hour)
	results := make([]map[string]int, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = e.cronRun(swaps.JobName, at) })
	}
	wg.Wait()
	t.Logf("two processes at once: %v and %v", results[0], results[1])
	if results[0]["charged"]+results[1]["charged"] != accounts*per {
		t.Fatalf("charged %d + %d, want %d in all", results[0]["charged"], results[1]["charged"], accounts*per)
	}
	e.wantEachChargedOnce(ro, accounts*per)
}

// SIGKILL during a run over many positions, after its first committed batch, then a rerun: every
// position is charged exactly once — the committed batches are not charged again, the rest are.
func TestSwapsKilledMidRunChargesOnce(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	e.migrate()
	const accounts, per = 3000, 10
	e.seedPositions(accounts, per)
	ro := firstWeekdayRolloverAfter(time.Now())
	at := ro.At.Add(time.Hour)

	cmd := exec.Command(filepath.Join(binDir, "fxdesk-cron"), "run", swaps.JobName, "--at", at.UTC().Format(time.RFC3339))
	cmd.Env = e.env(mirrorEnv()...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	killed := false
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.msg() == "swap batch committed" {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	cmd.Wait()
	if !killed {
		t.Fatal("the run logged no committed batch before it ended")
	}
	var charged int
	e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `type` = 'SWAP'").Scan(&charged)
	t.Logf("killed after the first batch: %d of %d positions charged", charged, accounts*per)
	if charged == 0 || charged >= accounts*per {
		t.Fatalf("after SIGKILL %d of %d positions were charged: the kill did not land mid-run", charged, accounts*per)
	}
	e.checkAllLedgers()

	got := e.cronRun(swaps.JobName, at)
	if got["charged"] != accounts*per-charged {
		t.Fatalf("rerun charged %d, want the %d left", got["charged"], accounts*per-charged)
	}
	e.wantEachChargedOnce(ro, accounts*per)
}

// With the mirror down the charge of a EUR account's GBPJPY position stays pending and both hub
// legs are pinned for the leader; once the leader is back it subscribes them, and the next run
// charges the pending rollover, once.
func TestSwapsPendingPinnedThenCharged(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	// The bundled simulator (random walk) quotes every subscribed symbol on its own.
	web := e.start("web", "fxdesk-web", mirrorEnv("CRON_MODE=off")...)
	web.waitLog(10*time.Second, msgHas("fx quote mirror publishing"))
	d := &tradingDesk{e: e, web: web, admin: e.adminToken()}
	tok, eur := d.newTrader(202, "EUR", "100", "50000")
	pos := d.openWhenQuoted(tok, eur, "GBPJPY", "BUY", "0.70")

	// The mirror goes down for longer than its key lives; meanwhile an operator disables the two
	// legs, so the leader will quote them again only because they are pinned.
	web.stop(syscall.SIGTERM)
	ctx := context.Background()
	e.rdb.Del(ctx, e.names.QuoteMirrorSnapshot())
	if _, err := e.sql.Exec("UPDATE `fx_instrument` SET `enabled` = FALSE WHERE `symbol` IN ('EURUSD', 'USDJPY')"); err != nil {
		t.Fatal(err)
	}
	ro := firstWeekdayRolloverAfter(time.Now())
	got := e.cronRun(swaps.JobName, ro.At.Add(time.Hour))
	if got["pending"] != 1 || got["charged"] != 0 {
		t.Fatalf("with the mirror down: %v, want 1 pending", got)
	}
	var status, legs string
	if err := e.sql.QueryRow("SELECT `status`, `missingLegs` FROM `fx_swap_charge` WHERE `positionId` = ?", pos).Scan(&status, &legs); err != nil {
		t.Fatal(err)
	}
	if status != "PENDING" || legs != "EURUSD,USDJPY" {
		t.Fatalf("pending row %s missing %q, want PENDING missing EURUSD,USDJPY", status, legs)
	}
	pins, err := e.rdb.HGetAll(ctx, e.names.QuoteMirrorPins()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pins["EURUSD"]; !ok {
		t.Fatalf("pins hash %v lacks EURUSD", pins)
	}
	if _, ok := pins["USDJPY"]; !ok {
		t.Fatalf("pins hash %v lacks USDJPY", pins)
	}
	if len(e.swapDealsAll()) != 0 {
		t.Fatal("a swap was charged with the mirror down")
	}
	// Still down an hour later: retried, still pending, nothing charged.
	if got := e.cronRun(swaps.JobName, ro.At.Add(2*time.Hour)); got["stillPending"] != 1 {
		t.Fatalf("retry with the mirror down: %v, want 1 still pending", got)
	}

	// The leader returns, reads the pins and subscribes the disabled legs.
	web2 := e.start("web-2", "fxdesk-web", mirrorEnv("CRON_MODE=off")...)
	web2.waitLog(10*time.Second, func(l logLine) bool {
		if l.msg() != "quote mirror pinned legs changed; the tick engine subscribes them" {
			return false
		}
		s := fmt.Sprint(l["pinned"])
		return strings.Contains(s, "EURUSD") && strings.Contains(s, "USDJPY")
	})
	// The next hourly run after the legs reach the snapshot charges it. The snapshot is written
	// every interval by another process, so this retries the run until then, with a deadline.
	eventually(t, 20*time.Second, 0, "pending charge charged after the leader returned", func() bool {
		return e.cronRun(swaps.JobName, ro.At.Add(3*time.Hour))["retried"] == 1
	})
	deals := e.swapDeals(pos)
	amount, ok := deals[ro.Date]
	if len(deals) != 1 || !ok || !amount.IsPositive() {
		t.Fatalf("swap deals of position %d: %v, want one positive charge on %s", pos, deals, ro.Date)
	}
	var rowAmount decimal.Decimal
	if err := e.sql.QueryRow("SELECT `status`, `amount` FROM `fx_swap_charge` WHERE `positionId` = ?", pos).Scan(&status, &rowAmount); err != nil {
		t.Fatal(err)
	}
	if status != "CHARGED" || !rowAmount.Equal(amount) {
		t.Fatalf("pending row %s %s, want CHARGED %s", status, rowAmount, amount)
	}
	if got := e.cronRun(swaps.JobName, ro.At.Add(4*time.Hour)); got["retried"] != 0 || got["charged"] != 0 {
		t.Fatalf("a later run charged again: %v", got)
	}
	e.checkAllLedgers()
}

// A charge that stays unconvertible expires uncharged 7 days after its rollover, with a
// swap-charge-expired alert naming the position and the date.
func TestSwapsPendingExpiresWithAnAlert(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", mirrorEnv("CRON_MODE=off")...)
	web.waitLog(10*time.Second, msgHas("fx quote mirror publishing"))
	d := &tradingDesk{e: e, web: web, admin: e.adminToken()}
	tok, eur := d.newTrader(203, "EUR", "100", "50000")
	pos := d.openWhenQuoted(tok, eur, "GBPJPY", "SELL", "0.70")
	web.stop(syscall.SIGTERM)
	e.rdb.Del(context.Background(), e.names.QuoteMirrorSnapshot())

	ro := firstWeekdayRolloverAfter(time.Now())
	if got := e.cronRun(swaps.JobName, ro.At.Add(time.Hour)); got["pending"] != 1 {
		t.Fatalf("with the mirror down: %v, want 1 pending", got)
	}
	// Six days on it is still pending.
	if got := e.cronRun(swaps.JobName, ro.At.Add(6*24*time.Hour)); got["expired"] != 0 {
		t.Fatalf("expired after six days: %v", got)
	}
	got := e.cronRun(swaps.JobName, ro.At.Add(8*24*time.Hour))
	if got["expired"] < 1 {
		t.Fatalf("8 days later: %v, want the first charge expired", got)
	}
	var status string
	e.sql.QueryRow("SELECT `status` FROM `fx_swap_charge` WHERE `positionId` = ? AND `rolloverDate` = ?", pos, ro.Date).Scan(&status)
	if status != "EXPIRED" {
		t.Fatalf("charge of %s is %s, want EXPIRED", ro.Date, status)
	}
	if _, ok := e.swapDeals(pos)[ro.Date]; ok {
		t.Fatal("an expired charge was charged")
	}
	msg := e.openAlertMessage(swaps.AlertExpired)
	if !strings.Contains(msg, fmt.Sprintf("position %d on %s", pos, ro.Date)) {
		t.Fatalf("swap-charge-expired alert %q does not name position %d on %s", msg, pos, ro.Date)
	}
	e.checkAllLedgers()
}

func (e *deskEnv) openAlertMessage(code string) string {
	e.t.Helper()
	var msg string
	err := e.sql.QueryRow("SELECT `message` FROM `fx_execution_alert` WHERE `code` = ? AND `status` <> 'RESOLVED'", code).Scan(&msg)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return msg
}

func (e *deskEnv) swapDealsAll() []string {
	e.t.Helper()
	rows, err := e.sql.Query("SELECT `idempotencyKey` FROM `fx_deal` WHERE `type` = 'SWAP'")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		rows.Scan(&k)
		out = append(out, k)
	}
	return out
}

// openWhenQuoted opens a market position once the random-walk simulator has quoted the symbol
// and its conversion legs (503 until then).
func (d *tradingDesk) openWhenQuoted(token string, account int64, symbol, side, volume string) int64 {
	t := d.e.t
	t.Helper()
	var o orderResp
	eventually(t, 15*time.Second, 100*time.Millisecond, "open "+symbol+" once quoted", func() bool {
		code, b := call(t, d.web, token, "POST", "/api/fx/orders",
			fmt.Sprintf(`{"accountId":%d,"symbol":%q,"side":%q,"type":"MARKET","volume":%q}`, account, symbol, side, volume))
		switch code {
		case http.StatusCreated:
			if err := json.Unmarshal(b, &o); err != nil {
				t.Fatal(err)
			}
			return true
		case http.StatusServiceUnavailable:
			return false
		}
		t.Fatalf("open %s: %d %s", symbol, code, b)
		return false
	})
	return o.Position.ID
}

// reconcileFxAccounts: a balance altered behind the desk's back raises ledger-drift naming the
// account and the difference, resolved when it matches again; stored marks follow the mirror;
// GTD and DAY orders expire once their time has passed.
func TestReconcileDriftMarksAndExpiry(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t)
	tok, usd := d.newTrader(301, "USD", "100", "10000")
	d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
	d.open(tok, usd, "EURUSD", "BUY", "1.00")
	var limit, day orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","price":"1.07000","volume":"0.10","timeInForce":"GTD","expiresAt":%q}`,
		usd, time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339)), http.StatusCreated, &limit)
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","price":"1.07000","volume":"0.10","timeInForce":"DAY"}`,
		usd), http.StatusCreated, &day)
	d.setQuote(tok, "EURUSD", "1.09000", "1.09020")
	d.waitPublished()

	got := d.e.cronRun(marks.JobName, time.Now())
	if got["drifted"] != 0 || got["expiredOrders"] != 0 || got["marked"] < 1 {
		t.Fatalf("first reconcile: %v", got)
	}
	// Stored marks are the live figures the holder shows.
	live := d.account(tok, usd).Account
	var equity, used decimal.Decimal
	d.e.sql.QueryRow("SELECT `equity`, `usedMargin` FROM `fx_account` WHERE `id` = ?", usd).Scan(&equity, &used)
	if equity.StringFixed(2) != live.Equity || used.StringFixed(2) != live.UsedMargin {
		t.Fatalf("stored marks %s / %s, live %s / %s", equity, used, live.Equity, live.UsedMargin)
	}

	// Behind the desk's back.
	if _, err := d.e.sql.Exec("UPDATE `fx_account` SET `balance` = `balance` + 12.34 WHERE `id` = ?", usd); err != nil {
		t.Fatal(err)
	}
	if got := d.e.cronRun(marks.JobName, time.Now()); got["drifted"] != 1 {
		t.Fatalf("after the balance was altered: %v, want 1 drifted", got)
	}
	msg := d.e.openAlertMessage(marks.AlertDrift)
	if !strings.Contains(msg, fmt.Sprintf("account %d", usd)) || !strings.Contains(msg, "difference 12.34") {
		t.Fatalf("ledger-drift alert %q does not name account %d and the difference 12.34", msg, usd)
	}
	if _, err := d.e.sql.Exec("UPDATE `fx_account` SET `balance` = `balance` - 12.34 WHERE `id` = ?", usd); err != nil {
		t.Fatal(err)
	}
	if got := d.e.cronRun(marks.JobName, time.Now()); got["drifted"] != 0 {
		t.Fatalf("after the balance was restored: %v", got)
	}
	if msg := d.e.openAlertMessage(marks.AlertDrift); msg != "" {
		t.Fatalf("ledger-drift still open after the balance matched again: %q", msg)
	}

	// Past the DAY order's 17:00 New York and the GTD order's expiry, both expire.
	got = d.e.cronRun(marks.JobName, nextRollover(time.Now()).At.Add(3*time.Hour))
	if got["expiredOrders"] != 2 {
		t.Fatalf("reconcile past both expiries: %v, want 2 expired orders", got)
	}
	for _, id := range []int64{limit.Order.ID, day.Order.ID} {
		var st string
		d.e.sql.QueryRow("SELECT `status` FROM `fx_order` WHERE `id` = ?", id).Scan(&st)
		if st != "EXPIRED" {
			t.Fatalf("order %d is %s, want EXPIRED", id, st)
		}
	}
}
