package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchStatement measures a year's statement of a busy account against reading as many of
// its deals through the deals list, on one desk in one run. The book is seeded in SQL: the
// account has FXDESK_BENCH_STATEMENT_DEALS (default 10,000) deals over the year's frozen weekdays
// (one position held over each rollover and charged a swap, the rest opened and closed within the
// day), beside FXDESK_BENCH_ACCOUNTS (default 2,000) accounts with a trade and a snapshot every
// day, so the statement's reads find one account's rows among a year of everybody's.
//
// The deals list has no cursor: GET /api/fx/deals answers an account's newest deals, at most
// 500 (a larger limit is cut to 500). So the statement is compared with reading as many deals
// through the list in full pages, one after another — 20 pages of 500 for 10,000 — which are
// the same 500 each time: they stay in the server's buffer pool, where a year's deals mostly do
// not, so the pages each side read from disk are reported beside the times. Requests alternate
// (a statement, then a set of pages) over one kept-alive connection, FXDESK_BENCH_REQUESTS
// (default 100) of each after a warm-up, and the answers are read to their end.
//
//	FXDESK_BENCH=1 go test -count=1 -timeout 30m -run TestBenchStatement -v ./e2e/
//
// fxdesk-web runs at FXDESK_BENCH_GOMAXPROCS (default 1). Reported, not asserted: the figures
// depend on the machine.
func TestBenchStatement(t *testing.T) {
	dbtest.SkipUnlessBench(t, "statement")
	dealCount := int(envDuration("FXDESK_BENCH_STATEMENT_DEALS", 10000))
	others := int(envDuration("FXDESK_BENCH_ACCOUNTS", 2000))
	requests := int(envDuration("FXDESK_BENCH_REQUESTS", 100))
	procs := dbtest.BenchProcs(t)
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", append([]string{"CRON_MODE=off", "LOG_LEVEL=info", fmt.Sprintf("GOMAXPROCS=%d", procs)}, unlimitedRates...)...)
	const trader = 7001
	tok := e.issueToken(trader, false)

	started := time.Now()
	s := newStatementSeed(e, time.Now())
	acct := s.seed(trader, dealCount, others)
	t.Logf("seeded %d deals, %d positions and %d snapshots over %d accounts and %d frozen days in %v", s.dealID, s.positionID,
		s.snapshots, others+1, len(s.days)+1, time.Since(started).Round(time.Millisecond))
	s.check()

	from, to := s.days[0].Date, s.days[len(s.days)-1].Date
	statementPath := fmt.Sprintf("/api/fx/accounts/%d/statement?from=%s&to=%s", acct.id, from, to)
	const pageMax = 500 // the deals list's largest answer (internal/trading, maxList)
	pagePath := fmt.Sprintf("/api/fx/deals?accountId=%d&limit=%d", acct.id, pageMax)
	pages := (dealCount + pageMax - 1) / pageMax

	var st statementJSON
	must(t, web, tok, "GET", statementPath, "", http.StatusOK, &st)
	if got := st.Statement; len(got.Deals) != dealCount || !got.Reconciled || got.FrozenThrough != to || got.OpenPositions.Count != 1 ||
		len(got.ClosedPositions) != acct.closedInRange || got.Closing.Balance != decimal.New(acct.balance, -2).StringFixed(2) {
		t.Fatalf("the statement from %s to %s: %d deals (want %d), reconciled %v, frozen through %s, %d open, %d closed (want %d), closing %s (want %s)",
			from, to, len(got.Deals), dealCount, got.Reconciled, got.FrozenThrough, got.OpenPositions.Count, len(got.ClosedPositions),
			acct.closedInRange, got.Closing.Balance, decimal.New(acct.balance, -2).StringFixed(2))
	}
	var page struct {
		Deals []struct {
			AccountID int64 `json:"accountId"`
		} `json:"deals"`
	}
	must(t, web, tok, "GET", pagePath, "", http.StatusOK, &page)
	if len(page.Deals) != pageMax || page.Deals[0].AccountID != acct.id {
		t.Fatalf("the deals list answered %d deals, want %d of account %d", len(page.Deals), pageMax, acct.id)
	}

	client := &http.Client{}
	get := func(path string) (time.Duration, int64) {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://"+web.addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d (%v)", path, resp.StatusCode, err)
		}
		return took, n
	}
	// The server's reads of pages not in its buffer pool, as a cause of the difference: the
	// counter is the server's, so another client's reads at the same time count too.
	diskReads := func() int64 {
		var name string
		var n int64
		if err := e.sql.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_reads'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var statements, pageSets, singlePages []time.Duration
	var statementBytes, pageBytes, statementReads, setReads int64
	const warmUp = 5
	for round := range warmUp + requests {
		r0 := diskReads()
		took, n := get(statementPath)
		statementBytes = n
		r1 := diskReads()
		var set time.Duration
		for range pages {
			p, n := get(pagePath)
			set += p
			pageBytes = n
			if round >= warmUp {
				singlePages = append(singlePages, p)
			}
		}
		if round >= warmUp {
			statements, pageSets = append(statements, took), append(pageSets, set)
			statementReads, setReads = statementReads+r1-r0, setReads+diskReads()-r1
		}
	}
	for _, l := range [][]time.Duration{statements, pageSets, singlePages} {
		slices.Sort(l)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
	line := func(l []time.Duration) string {
		return fmt.Sprintf("p50 %s, p95 %s, p99 %s, max %s", ms(percentile(l, 0.50)), ms(percentile(l, 0.95)), ms(percentile(l, 0.99)), ms(l[len(l)-1]))
	}
	t.Logf("fxdesk-web GOMAXPROCS=%d, %d requests of each after %d of warm-up, one connection", procs, requests, warmUp)
	t.Logf("statement %s to %s, %d deals, %d closed positions, %d days (%d bytes): %s", from, to, dealCount, acct.closedInRange,
		len(s.days), statementBytes, line(statements))
	t.Logf("deals list, %d pages of %d read one after another (%d bytes each), the set: %s", pages, pageMax, pageBytes, line(pageSets))
	t.Logf("deals list, one page of %d: %s", pageMax, line(singlePages))
	t.Logf("InnoDB pages read from disk: %d per statement, %d per set of pages (means)", statementReads/int64(requests), setReads/int64(requests))
	t.Logf("statement / deals list set: p50 %.2f, p99 %.2f", float64(percentile(statements, 0.50))/float64(percentile(pageSets, 0.50)),
		float64(percentile(statements, 0.99))/float64(percentile(pageSets, 0.99)))
}

// statementSeed writes a year of one busy account and many quieter ones straight into the
// tables, as the ledger and the end of day would have left them: every deal's balanceAfter
// follows from the one before, each frozen day's snapshot holds the balance through its last
// deal, and each closed position carries the sums of its deals.
type statementSeed struct {
	e      *deskEnv
	rng    *rand.Rand
	before fx.Rollover   // the frozen day before the year: the opening snapshot
	days   []fx.Rollover // the year's weekday rollovers, the last one the latest before now

	dealID, positionID int64
	snapshots          int
	deals, positions   []string // rows not yet written
	snapRows, dayRows  []string
}

// seedAccount is one account as the seed has written it so far.
type seedAccount struct {
	id, user      int64
	balance       int64 // cents
	through       int64
	overnight     *seedPosition // the position held over the last rollover
	closedInRange int           // positions closed within the year
}

type seedPosition struct {
	id                     int64
	side                   string
	openPrice              decimal.Decimal
	openedAt, closedAt     time.Time
	commission, swap, paid int64 // cents; paid is the close's profit
	swapThrough            string
}

// seedDeal is one deal before its id: the day's deals of every account get their ids in the
// order of their times, as the ledger would have given them.
type seedDeal struct {
	at    time.Time
	acct  *seedAccount
	typ   fx.DealType
	cents int64
	pos   *seedPosition
	key   string
}

func newStatementSeed(e *deskEnv, now time.Time) *statementSeed {
	weekday := func(r fx.Rollover) bool { return r.Weekday() != time.Saturday && r.Weekday() != time.Sunday }
	last, err := fx.LastRollover(now)
	if err != nil {
		e.t.Fatal(err)
	}
	for !weekday(last) {
		last = last.Previous()
	}
	first := last.At.AddDate(-1, 0, 1).Format(time.DateOnly) // a year, both ends included
	s := &statementSeed{e: e, rng: rand.New(rand.NewPCG(1, 2))}
	for r := last; ; r = r.Previous() {
		if !weekday(r) {
			continue
		}
		if r.Date < first {
			s.before = r
			break
		}
		s.days = append(s.days, r)
	}
	slices.Reverse(s.days)
	return s
}

const seedLot = "0.10"

// seed writes the busy account of user (deals in the year) and others quieter accounts, and
// returns the busy one. Rows go in as they are made, a few thousand to a statement.
func (s *statementSeed) seed(user int64, deals, others int) *seedAccount {
	if deals < 3*len(s.days) {
		s.e.t.Fatalf("the busy account needs at least 3 deals a day, %d over %d days", 3*len(s.days), len(s.days))
	}
	busy := &seedAccount{id: 1, user: user}
	accounts := []*seedAccount{busy}
	for i := range others {
		accounts = append(accounts, &seedAccount{id: int64(i + 2), user: user + 1 + int64(i)})
	}
	var rows []string
	for _, a := range accounts {
		rows = append(rows, fmt.Sprintf("(%d, %d, 'USD', 100, 0)", a.id, a.user))
	}
	s.insert("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES ", rows)

	// The opening day: every account funded.
	var day []seedDeal
	for _, a := range accounts {
		day = append(day, seedDeal{at: s.before.At.Add(-time.Hour), acct: a, typ: fx.DealDeposit, cents: 10_000_000, key: fmt.Sprintf("seed:deposit:%d", a.id)})
	}
	s.close(s.before, day, accounts)

	for i, d := range s.days {
		prev := s.before
		if i > 0 {
			prev = s.days[i-1]
		}
		start := prev.At
		budget := (i+1)*deals/len(s.days) - i*deals/len(s.days)
		day = s.busyDay(busy, prev, d, budget)
		for _, a := range accounts[1:] {
			opened := start.Add(time.Hour + time.Duration(s.rng.Int64N(int64(10*time.Hour))))
			day = append(day, s.trade(a, opened, opened.Add(time.Duration(1+s.rng.Int64N(int64(5*time.Hour)))))...)
		}
		s.close(d, day, accounts)
	}
	rows = rows[:0]
	for _, a := range accounts {
		if a.overnight != nil {
			s.positions = append(s.positions, a.overnight.row(a))
		}
		rows = append(rows, fmt.Sprintf("UPDATE `fx_account` SET `balance` = %s WHERE `id` = %d", cents(a.balance), a.id))
	}
	s.flush(0)
	tx, err := s.e.sql.Begin()
	if err != nil {
		s.e.t.Fatal(err)
	}
	for _, q := range rows {
		if _, err := tx.Exec(q); err != nil {
			s.e.t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		s.e.t.Fatal(err)
	}
	return busy
}

// check fails the test unless the seed is a ledger the desk could have written: every deal's
// balanceAfter follows from the account's deal before it, every snapshot's balance is its
// throughDealId's balanceAfter, and the accounts' balances and positions' swaps are their deals'
// sums. Together these are what eod.Reconcile checks day by day; Reconcile itself reads every
// deal of every account since its start for each day, far too slow for a year of this seed.
func (s *statementSeed) check() {
	e := s.e
	e.t.Helper()
	for what, q := range map[string]string{
		"deals whose balanceAfter does not follow from the deal before": "SELECT COUNT(*) FROM (SELECT `amount`, `balanceAfter`, " +
			"COALESCE(LAG(`balanceAfter`) OVER (PARTITION BY `accountId` ORDER BY `id`), 0) AS `before` FROM `fx_deal`) d WHERE d.`balanceAfter` <> d.`before` + d.`amount`",
		"snapshots whose balance is not their last deal's": "SELECT COUNT(*) FROM `fx_eod_account` s LEFT JOIN `fx_deal` d ON d.`id` = s.`throughDealId` " +
			"WHERE d.`accountId` IS NULL OR d.`accountId` <> s.`accountId` OR d.`balanceAfter` <> s.`balance`",
	} {
		var n int
		if err := e.sql.QueryRow(q).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		if n != 0 {
			e.t.Fatalf("the seed has %d %s", n, what)
		}
	}
	e.checkAllLedgers()
}

// busyDay is the busy account's budget of deals on day d, which runs from prev's rollover: the
// swap and the close of the position it held over that rollover, trades opened and closed within
// the day, a deposit when the budget is odd, and a position opened late to be held over d's
// rollover.
func (s *statementSeed) busyDay(a *seedAccount, prev, d fx.Rollover, budget int) []seedDeal {
	start := prev.At
	var out []seedDeal
	held := a.overnight
	if held != nil {
		out = append(out, seedDeal{at: start.Add(time.Second), acct: a, typ: fx.DealSwap, cents: -75, pos: held,
			key: fmt.Sprintf("swap:%d:%s", held.id, prev.Date)})
		held.swap -= 75
		held.swapThrough = prev.Date
		budget -= 2 // its swap and its close
	}
	budget-- // the position held over d's rollover
	trades := budget / 2
	slot := d.At.Sub(start) / time.Duration(2*trades+4)
	at := start.Add(slot)
	if held != nil {
		out = append(out, s.closeDeal(a, held, at))
		a.closedInRange++
	}
	for range trades {
		out = append(out, s.trade(a, at.Add(slot), at.Add(2*slot))...)
		a.closedInRange++
		at = at.Add(2 * slot)
	}
	if budget%2 == 1 {
		out = append(out, seedDeal{at: at.Add(slot / 2), acct: a, typ: fx.DealDeposit, cents: 50_000, key: fmt.Sprintf("seed:deposit:%d:%s", a.id, d.Date)})
	}
	p := s.open(a, d.At.Add(-slot/2))
	a.overnight = p
	return append(out, seedDeal{at: p.openedAt, acct: a, typ: fx.DealCommission, cents: p.commission, pos: p, key: fmt.Sprintf("commission:order:%d", p.id)})
}

// trade is a position opened at opened and closed at closed: its commission and its close.
func (s *statementSeed) trade(a *seedAccount, opened, closed time.Time) []seedDeal {
	p := s.open(a, opened)
	return []seedDeal{{at: opened, acct: a, typ: fx.DealCommission, cents: p.commission, pos: p, key: fmt.Sprintf("commission:order:%d", p.id)},
		s.closeDeal(a, p, closed)}
}

func (s *statementSeed) open(a *seedAccount, at time.Time) *seedPosition {
	s.positionID++
	side := "BUY"
	if s.rng.IntN(2) == 1 {
		side = "SELL"
	}
	return &seedPosition{id: s.positionID, side: side, openPrice: decimal.New(108000+s.rng.Int64N(2000), -5), openedAt: at, commission: -350}
}

// closeDeal closes p at: a profit of −50.00 to +60.00, at the price that makes it on 0.10 lot.
func (s *statementSeed) closeDeal(a *seedAccount, p *seedPosition, at time.Time) seedDeal {
	p.paid, p.closedAt = s.rng.Int64N(11_001)-5_000, at
	s.positions = append(s.positions, p.row(a))
	return seedDeal{at: at, acct: a, typ: fx.DealProfit, cents: p.paid, pos: p, key: fmt.Sprintf("close:%d:%s", p.id, seedLot)}
}

// closePrice is the price at which 0.10 lot (10,000 units) of p makes its profit.
func (p *seedPosition) closePrice() decimal.Decimal {
	move := decimal.New(p.paid, -6)
	if p.side == "SELL" {
		move = move.Neg()
	}
	return p.openPrice.Add(move)
}

// row is p's fx_position row, closed or still open. Its order id names no fx_order row: nothing
// a statement or the deals list reads looks at orders.
func (p *seedPosition) row(a *seedAccount) string {
	status, volume, closePrice, reason, closedAt := "OPEN", seedLot, "NULL", "NULL", "NULL"
	if !p.closedAt.IsZero() {
		status, volume, closePrice, reason, closedAt = "CLOSED", "0", p.closePrice().String(), "'CLIENT'", "'"+sqlTime(p.closedAt)+"'"
	}
	through := "NULL"
	if p.swapThrough != "" {
		through = "'" + p.swapThrough + "'"
	}
	return fmt.Sprintf("(%d, %d, %d, 'EURUSD', '%s', %s, %s, %s, %s, %s, %s, %s, '%s', %s, %s, '%s', %s)", p.id, a.id, p.id, p.side, volume, seedLot,
		p.openPrice, cents(-p.commission), cents(p.paid), cents(p.swap), through, status, closePrice, reason, sqlTime(p.openedAt), closedAt)
}

// close gives the day's deals their ids in time order, runs every account's balance through
// them and freezes day d: a snapshot of every account and the day's row.
func (s *statementSeed) close(d fx.Rollover, day []seedDeal, accounts []*seedAccount) {
	slices.SortStableFunc(day, func(x, y seedDeal) int { return x.at.Compare(y.at) })
	for _, sd := range day {
		s.dealID++
		a := sd.acct
		a.balance += sd.cents
		a.through = s.dealID
		order, position, symbol, side, volume, price := "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"
		if p := sd.pos; p != nil {
			position, symbol, side, volume = fmt.Sprint(p.id), "'EURUSD'", "'"+p.side+"'", seedLot
			switch sd.typ {
			case fx.DealCommission:
				order, price = fmt.Sprint(p.id), p.openPrice.String()
			case fx.DealProfit:
				order, price = fmt.Sprint(p.id), p.closePrice().String()
			}
		}
		s.deals = append(s.deals, fmt.Sprintf("(%d, %d, '%s', %s, %s, 'USD', %s, %s, %s, %s, %s, %s, '%s', '%s')", s.dealID, a.id, sd.typ,
			cents(sd.cents), cents(a.balance), order, position, symbol, side, volume, price, sd.key, sqlTime(sd.at)))
	}
	for _, a := range accounts {
		bal := cents(a.balance)
		if a.overnight != nil {
			// 0.10 lot of EURUSD near 1.08 at 1:100: about 108.00 of margin, 1.00 down.
			eq := a.balance - 100
			s.snapRows = append(s.snapRows, fmt.Sprintf("('%s', %d, 'USD', %s, %s, 108.000, %s, -1.000, 1, 0, %d)", d.Date, a.id, bal, cents(eq), cents(eq-10_800), a.through))
		} else {
			s.snapRows = append(s.snapRows, fmt.Sprintf("('%s', %d, 'USD', %s, %s, 0, %s, 0, 0, 0, %d)", d.Date, a.id, bal, bal, bal, a.through))
		}
		s.snapshots++
	}
	s.dayRows = append(s.dayRows, fmt.Sprintf("('%s', '%s', 'CAUGHT_UP', %d, 'bench')", d.Date, sqlTime(d.At), len(accounts)))
	s.flush(5000)
}

// flush writes the rows held once there are at least n of a kind.
func (s *statementSeed) flush(n int) {
	for _, w := range []struct {
		q    string
		rows *[]string
	}{
		{"INSERT INTO `fx_deal` (`id`, `accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, `symbol`, `side`, " +
			"`volume`, `price`, `idempotencyKey`, `createdAt`) VALUES ", &s.deals},
		{"INSERT INTO `fx_position` (`id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `commission`, " +
			"`realizedProfit`, `swap`, `swapThrough`, `status`, `closePrice`, `closeReason`, `openedAt`, `closedAt`) VALUES ", &s.positions},
		{"INSERT INTO `fx_eod_account` (`tradingDay`, `accountId`, `currency`, `balance`, `equity`, `margin`, `freeMargin`, `floatingPnl`, " +
			"`openPositions`, `pendingOrders`, `throughDealId`) VALUES ", &s.snapRows},
		{"INSERT INTO `fx_eod_day` (`tradingDay`, `rolloverAt`, `mode`, `accounts`, `frozenBy`) VALUES ", &s.dayRows},
	} {
		if len(*w.rows) >= max(n, 1) {
			s.insert(w.q, *w.rows)
			*w.rows = (*w.rows)[:0]
		}
	}
}

func (s *statementSeed) insert(q string, rows []string) {
	const chunk = 5000
	for len(rows) > 0 {
		n := min(chunk, len(rows))
		if _, err := s.e.sql.Exec(q + strings.Join(rows[:n], ", ")); err != nil {
			s.e.t.Fatalf("%s…: %v", q[:min(len(q), 40)], err)
		}
		rows = rows[n:]
	}
}

func cents(c int64) string { return decimal.New(c, -2).StringFixed(2) }

func sqlTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") }
