package eod

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/schedule"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

// freshDB is a migrated database of the test's own, dropped when it ends: a freeze writes a row
// for every account, so two histories must not share one.
func freshDB(t *testing.T) *sql.DB {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated("eod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	return db
}

// closingPrices quotes a few symbols as a day's close.
type closingPrices map[string][2]float64

func (p closingPrices) LastTick(s string) (tick.Quote, bool) {
	q, ok := p[s]
	if !ok {
		return tick.Quote{}, false
	}
	return tick.Quote{Bid: q[0], Ask: q[1], ReceivedAt: time.Now()}, true
}

func (p closingPrices) SymbolState(s string) tick.State {
	if _, ok := p[s]; ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

var testCloses = closingPrices{"EURUSD": {1.08, 1.0802}, "USDJPY": {150.1, 150.12}, "GBPUSD": {1.27, 1.2702}}

// sim writes a history at simulated times: every write goes through one connection whose
// session clock (SET timestamp) is the simulated now, so deals, accounts and positions carry
// the times the end of day compares with the rollovers. Money moves only through the ledger.
type sim struct {
	t     *testing.T
	ctx   context.Context
	db    *sql.DB
	conn  *sql.Conn
	now   time.Time
	job   *Job
	keys  int
	model model
}

// model is what the test knows of the history, independently of the end of day's reads.
type model struct {
	balance   map[int64]decimal.Decimal
	through   map[int64]int64
	currency  map[int64]string
	created   map[int64]time.Time
	deals     map[int64][]book.Deal // by account, in id order
	positions map[int64]*simPosition
	days      []modelDay // every weekday rollover, in order
}

type simPosition struct {
	id, account int64
	symbol      string
	side        fx.Side
	openVolume  decimal.Decimal
	openPrice   decimal.Decimal
	openedAt    time.Time
	closes      []simClose
	remaining   decimal.Decimal
	closedAt    *time.Time
	orderID     int64
}

type simClose struct {
	at     time.Time
	volume decimal.Decimal
}

// modelDay is a weekday rollover: each existing account's balance and last deal then, and
// whether the day got frozen.
type modelDay struct {
	day      fx.Rollover
	frozen   bool
	accounts map[int64]modelAccount
}

type modelAccount struct {
	balance decimal.Decimal
	through int64
}

func newSim(t *testing.T, db *sql.DB) *sim {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &sim{t: t, ctx: ctx, db: db, conn: conn, model: model{balance: map[int64]decimal.Decimal{}, through: map[int64]int64{},
		currency: map[int64]string{}, created: map[int64]time.Time{}, deals: map[int64][]book.Deal{}, positions: map[int64]*simPosition{}}}
	s.job = New(Config{DB: db, By: "test", Now: func() time.Time { return s.now }}, slog.New(slog.DiscardHandler))
	return s
}

// at moves the simulated clock, the session's with it.
func (s *sim) at(now time.Time) {
	s.t.Helper()
	// Whole milliseconds: the columns' precision, which MySQL rounds to and MariaDB truncates to.
	now = now.Truncate(time.Millisecond)
	s.now = now
	if _, err := s.conn.ExecContext(s.ctx, fmt.Sprintf("SET timestamp = %d.%03d", now.Unix(), now.Nanosecond()/1e6)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sim) newAccount(user int64, currency string) int64 {
	s.t.Helper()
	res, err := s.conn.ExecContext(s.ctx, "INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (?, ?, 100)", user, currency)
	if err != nil {
		s.t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	s.model.currency[id], s.model.created[id], s.model.balance[id] = currency, s.now, decimal.Zero
	return id
}

// post writes one deal through the ledger on the locked account, as the desk's writers do, and
// returns it as written.
func (s *sim) post(d ledger.Deal) book.Deal {
	s.t.Helper()
	s.keys++
	d.IdempotencyKey = fmt.Sprintf("test:%d", s.keys)
	tx, err := s.conn.BeginTx(s.ctx, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer tx.Rollback()
	a := &ledger.Account{ID: d.AccountID}
	if err := tx.QueryRowContext(s.ctx, "SELECT `currency`, `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", d.AccountID).Scan(&a.Currency, &a.Balance); err != nil {
		s.t.Fatal(err)
	}
	p, err := ledger.Post([]*ledger.Account{a}, []ledger.Deal{d})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := p.Exec(s.ctx, tx); err != nil {
		s.t.Fatal(err)
	}
	posted := p.Deals[0]
	if err := tx.QueryRowContext(s.ctx, "SELECT LAST_INSERT_ID()").Scan(&posted.ID); err != nil {
		s.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		s.t.Fatal(err)
	}
	posted.CreatedAt = s.now
	s.model.balance[d.AccountID] = posted.BalanceAfter
	s.model.through[d.AccountID] = posted.ID
	s.model.deals[d.AccountID] = append(s.model.deals[d.AccountID], posted)
	return posted
}

func (s *sim) exec(q string, args ...any) sql.Result {
	s.t.Helper()
	res, err := s.conn.ExecContext(s.ctx, q, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return res
}

// open inserts an open position and charges its commission, as a fill does.
func (s *sim) open(account int64, symbol string, side fx.Side, volume, price, commission decimal.Decimal) *simPosition {
	s.t.Helper()
	order := int64(len(s.model.positions) + 1000)
	res := s.exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `commission`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		account, order, symbol, side, volume, volume, price, commission)
	id, _ := res.LastInsertId()
	p := &simPosition{id: id, account: account, symbol: symbol, side: side, openVolume: volume, openPrice: price, openedAt: s.now, remaining: volume, orderID: order}
	s.model.positions[id] = p
	if commission.IsPositive() {
		sym, vol := symbol, volume
		s.post(ledger.Deal{AccountID: account, Type: fx.DealCommission, Amount: commission.Neg(), OrderID: &order, PositionID: &id, Symbol: &sym,
			Side: &side, Volume: &vol, Price: &price, Comment: "commission at open"})
	}
	return p
}

// close closes volume of p at price with profit, as a close does.
func (s *sim) close(p *simPosition, volume, price, profit decimal.Decimal) {
	s.t.Helper()
	sym, side, vol := p.symbol, p.side, volume
	d := s.post(ledger.Deal{AccountID: p.account, Type: fx.DealProfit, Amount: profit, OrderID: &p.orderID, PositionID: &p.id, Symbol: &sym,
		Side: &side, Volume: &vol, Price: &price, Comment: "close client"})
	p.remaining = p.remaining.Sub(volume)
	p.closes = append(p.closes, simClose{at: s.now, volume: volume})
	if p.remaining.IsZero() {
		now := s.now
		p.closedAt = &now
		s.exec("UPDATE `fx_position` SET `volume` = 0, `realizedProfit` = `realizedProfit` + ?, `status` = 'CLOSED', `closedAt` = NOW(3), `closePrice` = ?, "+
			"`closeReason` = 'CLIENT' WHERE `id` = ?", d.Amount, price, p.id)
		return
	}
	s.exec("UPDATE `fx_position` SET `volume` = `volume` - ?, `realizedProfit` = `realizedProfit` + ? WHERE `id` = ?", volume, d.Amount, p.id)
}

// swap charges p one rollover's swap, as the swap job does.
func (s *sim) swap(p *simPosition, amount decimal.Decimal) {
	s.t.Helper()
	sym, side, vol := p.symbol, p.side, p.remaining
	d := s.post(ledger.Deal{AccountID: p.account, Type: fx.DealSwap, Amount: amount, OrderID: &p.orderID, PositionID: &p.id, Symbol: &sym,
		Side: &side, Volume: &vol, Comment: "swap"})
	s.exec("UPDATE `fx_position` SET `swap` = `swap` + ? WHERE `id` = ?", d.Amount, p.id)
}

// snapshotModel records the accounts as they stand at day's rollover.
func (s *sim) snapshotModel(day fx.Rollover) *modelDay {
	md := modelDay{day: day, accounts: map[int64]modelAccount{}}
	for id, created := range s.model.created {
		if created.Before(day.At) {
			md.accounts[id] = modelAccount{balance: s.model.balance[id], through: s.model.through[id]}
		}
	}
	s.model.days = append(s.model.days, md)
	return &s.model.days[len(s.model.days)-1]
}

// freeze runs the end of day at the simulated now over due, every day of it captured before.
func (s *sim) freeze(due ...fx.Rollover) schedule.Result {
	s.t.Helper()
	res := schedule.Result{}
	if err := s.job.Run(s.ctx, s.now, due, res); err != nil {
		s.t.Fatal(err)
	}
	if res["unreconciled"] != 0 {
		s.t.Fatalf("the end of day does not reconcile its own days: %v", res)
	}
	return res
}

func (s *sim) capture(day fx.Rollover) {
	s.t.Helper()
	if _, err := Capture(s.ctx, s.db, day, testCloses, "test"); err != nil {
		s.t.Fatal(err)
	}
}

func money(ccy string, r *rand.Rand, lo, hi int64) decimal.Decimal {
	places := fx.MoneyPlaces(ccy)
	unit := decimal.New(1, -places)
	return decimal.NewFromInt(lo + r.Int64N(hi-lo+1)).Add(unit.Mul(decimal.NewFromInt(r.Int64N(int64(decimal.New(1, places).IntPart())))))
}

// Over random histories — deposits, withdrawals, fills with their commission, partial and full
// closes, swaps and adjustments on accounts in two currencies, some opened midway, at simulated
// times across weekdays and weekends; days frozen at their rollover, frozen late from the ledger,
// or never — every statement of a random range agrees with what the test wrote: the opening and
// closing snapshots are the right days', opening + Σ deals = closing, each running balance is the
// deal's balanceAfter, and the deals, totals, closed and open positions and the equity curve are
// exactly the range's.
func TestStatementPropertyOverRandomHistories(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 41))
	db := freshDB(t)
	s := newSim(t, db)

	// Monday 2025-03-03's rollover opens the history; four weeks of calendar days follow.
	first, err := fx.LastRollover(time.Date(2025, 3, 3, 23, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	start := first.Previous()
	s.at(start.At.Add(-time.Hour))
	accounts := []int64{s.newAccount(1, "USD"), s.newAccount(2, "JPY"), s.newAccount(3, "USD")}
	late := map[int64]bool{} // accounts opened midway
	var pending []fx.Rollover
	day := start
	for range 28 {
		next := day.Next()
		// The period up to next's rollover: a few moves per account at increasing times.
		moves := 2 + r.IntN(8)
		for i := range moves {
			s.at(day.At.Add(time.Duration(i+1) * (next.At.Sub(day.At) - time.Minute) / time.Duration(moves+1)))
			if r.IntN(12) == 0 && len(accounts) < 6 {
				id := s.newAccount(int64(10+len(accounts)), []string{"USD", "JPY"}[r.IntN(2)])
				accounts, late[id] = append(accounts, id), true
				continue
			}
			a := accounts[r.IntN(len(accounts))]
			ccy := s.model.currency[a]
			scale := int64(1)
			if ccy == "JPY" {
				scale = 150
			}
			var open []*simPosition
			for _, p := range s.model.positions {
				if p.account == a && p.remaining.IsPositive() {
					open = append(open, p)
				}
			}
			slices.SortFunc(open, func(x, y *simPosition) int { return cmp.Compare(x.id, y.id) })
			switch k := r.IntN(10); {
			case k < 2 || s.model.balance[a].LessThan(decimal.NewFromInt(100*scale)):
				s.post(ledger.Deal{AccountID: a, Type: fx.DealDeposit, Amount: money(ccy, r, 500*scale, 5000*scale), Comment: "deposit"})
			case k == 2:
				w := money(ccy, r, 1, 50*scale)
				s.post(ledger.Deal{AccountID: a, Type: fx.DealWithdrawal, Amount: w.Neg(), Comment: "withdrawal"})
			case k < 5 || len(open) == 0:
				sym := []string{"EURUSD", "GBPUSD", "USDJPY"}[r.IntN(3)]
				side := []fx.Side{fx.Buy, fx.Sell}[r.IntN(2)]
				vol := decimal.New(1+r.Int64N(200), -2)
				price := decimal.New(10000+r.Int64N(5000), -4)
				if sym == "USDJPY" {
					price = decimal.New(14000+r.Int64N(2000), -2)
				}
				s.open(a, sym, side, vol, price, money(ccy, r, 0, 7*scale))
			case k < 8:
				p := open[r.IntN(len(open))]
				vol := p.remaining
				if r.IntN(2) == 0 && p.remaining.GreaterThan(decimal.New(1, -2)) {
					vol = decimal.New(1+r.Int64N(p.remaining.Shift(2).IntPart()-1), -2)
				}
				profit := money(ccy, r, -200*scale, 200*scale)
				s.close(p, vol, p.openPrice.Add(decimal.New(r.Int64N(200)-100, -4)), profit)
			case k == 8:
				s.swap(open[r.IntN(len(open))], money(ccy, r, -10*scale, 3*scale))
			default:
				s.post(ledger.Deal{AccountID: a, Type: fx.DealAdjustment, Amount: money(ccy, r, 0, 20*scale), Comment: "adjustment"})
			}
		}
		day = next
		if wd := day.Weekday(); wd == time.Saturday || wd == time.Sunday {
			continue // a weekend rollover closes no day
		}
		md := s.snapshotModel(day)
		s.at(day.At.Add(time.Minute))
		switch k := r.IntN(10); {
		case k == 0:
			// Nobody captured the close: never frozen, its deals fall into the next frozen day.
		case k < 3:
			// Captured at the rollover but frozen later, rebuilt from the ledger as it stood.
			s.capture(day)
			pending = append(pending, day)
			md.frozen = true
		default:
			s.capture(day)
			s.freeze(append(pending, day)...)
			pending = nil
			md.frozen = true
		}
	}
	if len(pending) > 0 {
		s.at(day.At.Add(2 * time.Hour))
		s.freeze(pending...)
	}
	var modes []string
	rows, err := db.Query("SELECT `mode` FROM `fx_eod_day` ORDER BY `tradingDay`")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var m string
		rows.Scan(&m)
		modes = append(modes, m)
	}
	rows.Close()
	t.Logf("%d weekdays, %d accounts (%d opened midway), frozen: %v", len(s.model.days), len(accounts), len(late), modes)

	// The ranges: random ones over the history and a few days either side, every single day, and
	// the whole history.
	lo, hi := start.At.AddDate(0, 0, -3), day.At.AddDate(0, 0, 3)
	date := func(t time.Time) string { return t.In(start.At.Location()).Format(dateLayout) }
	span := int(hi.Sub(lo).Hours() / 24)
	var ranges []StatementRange
	for range 60 {
		a, b := r.IntN(span+1), r.IntN(span+1)
		if a > b {
			a, b = b, a
		}
		ranges = append(ranges, StatementRange{date(lo.AddDate(0, 0, a)), date(lo.AddDate(0, 0, b))})
	}
	for _, md := range s.model.days {
		ranges = append(ranges, StatementRange{md.day.Date, md.day.Date})
	}
	ranges = append(ranges, StatementRange{date(lo), date(hi)})
	checked, refused := 0, 0
	for _, rng := range ranges {
		for _, a := range accounts {
			if s.checkStatement(a, rng) {
				checked++
			} else {
				refused++
			}
		}
	}
	if checked < 100 || refused == 0 {
		t.Fatalf("%d statements checked and %d refused: the ranges do not exercise the history", checked, refused)
	}
}

// checkStatement reads account's statement over rng and compares it with the model; it
// reports false when the statement was (rightly) refused.
func (s *sim) checkStatement(account int64, rng StatementRange) bool {
	t := s.t
	t.Helper()
	where := fmt.Sprintf("account %d from %s to %s", account, rng.From, rng.To)
	var closing, opening *modelDay
	var days []*modelDay
	for i := range s.model.days {
		md := &s.model.days[i]
		if _, had := md.accounts[account]; !had || !md.frozen {
			continue
		}
		switch {
		case md.day.Date < rng.From:
			opening = md
		case md.day.Date <= rng.To:
			closing = md
			days = append(days, md)
		}
	}
	a, err := book.LoadAccount(s.ctx, s.db, 0, account)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatement(s.ctx, s.db, a, rng)
	if closing == nil {
		if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(err.Error(), "frozen") {
			t.Fatalf("%s: no frozen day of the account in range, yet %v", where, err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	want := struct {
		openDay  string
		openBal  decimal.Decimal
		openThru int64
	}{}
	if opening != nil {
		want.openDay, want.openBal, want.openThru = opening.day.Date, opening.accounts[account].balance, opening.accounts[account].through
	}
	c := closing.accounts[account]
	if st.Opening.TradingDay != want.openDay || !st.Opening.Balance.Equal(want.openBal) || st.Opening.ThroughDealID != want.openThru {
		t.Fatalf("%s: opening %s %s through %d, want %s %s through %d", where, st.Opening.TradingDay, st.Opening.Balance, st.Opening.ThroughDealID,
			want.openDay, want.openBal, want.openThru)
	}
	if st.Closing.TradingDay != closing.day.Date || !st.Closing.Balance.Equal(c.balance) || st.Closing.ThroughDealID != c.through ||
		!st.Closing.RolloverAt.Equal(closing.day.At) {
		t.Fatalf("%s: closing %s %s through %d at %s, want %s %s through %d at %s", where, st.Closing.TradingDay, st.Closing.Balance,
			st.Closing.ThroughDealID, st.Closing.RolloverAt, closing.day.Date, c.balance, c.through, closing.day.At)
	}
	// The invariant: opening + Σ deals = closing, and each running balance is its balanceAfter.
	sum := st.Opening.Balance
	for _, d := range st.Deals {
		sum = sum.Add(d.Amount)
		if !d.Running.Equal(sum) || !d.Running.Equal(d.BalanceAfter) || d.Disagrees() {
			t.Fatalf("%s: deal %d runs to %s, balanceAfter %s, Σ %s", where, d.ID, d.Running, d.BalanceAfter, sum)
		}
	}
	if !sum.Equal(st.Closing.Balance) || !st.Reconciled() || len(st.Disagreements()) != 0 {
		t.Fatalf("%s: opening %s + Σ deals = %s, closing %s", where, st.Opening.Balance, sum, st.Closing.Balance)
	}
	// The deals are exactly the model's between the two snapshots, and the totals theirs.
	var wantDeals []book.Deal
	var totals Totals
	for _, d := range s.model.deals[account] {
		if d.ID > want.openThru && d.ID <= c.through {
			wantDeals = append(wantDeals, d)
			totals.add(d)
		}
	}
	if len(st.Deals) != len(wantDeals) {
		t.Fatalf("%s: %d deals, want %d", where, len(st.Deals), len(wantDeals))
	}
	for i, d := range st.Deals {
		w := wantDeals[i]
		if d.ID != w.ID || d.Type != w.Type || !d.Amount.Equal(w.Amount) || !d.CreatedAt.Equal(w.CreatedAt) {
			t.Fatalf("%s: deal %d is %d %s %s at %s, want %d %s %s at %s", where, i, d.ID, d.Type, d.Amount, d.CreatedAt, w.ID, w.Type, w.Amount, w.CreatedAt)
		}
	}
	if fmt.Sprint(st.Totals) != fmt.Sprint(totals) || !st.Totals.Net.Equal(st.Closing.Balance.Sub(st.Opening.Balance)) {
		t.Fatalf("%s: totals %+v, want %+v", where, st.Totals, totals)
	}
	// Closed positions: those with a PROFIT deal among the range's, with what those took and made.
	type closed struct{ volume, profit, swap, commission decimal.Decimal }
	wantClosed := map[int64]*closed{}
	for _, d := range wantDeals {
		if d.Type == fx.DealProfit {
			w := wantClosed[*d.PositionID]
			if w == nil {
				w = &closed{}
				wantClosed[*d.PositionID] = w
			}
			w.volume, w.profit = w.volume.Add(*d.Volume), w.profit.Add(d.Amount)
		}
	}
	for _, d := range s.model.deals[account] {
		if w := wantClosed[deref(d.PositionID)]; w != nil && d.ID <= c.through {
			switch d.Type {
			case fx.DealSwap:
				w.swap = w.swap.Add(d.Amount)
			case fx.DealCommission:
				w.commission = w.commission.Add(d.Amount)
			}
		}
	}
	if len(st.Closed) != len(wantClosed) {
		t.Fatalf("%s: %d closed positions, want %d", where, len(st.Closed), len(wantClosed))
	}
	for _, cp := range st.Closed {
		w, p := wantClosed[cp.PositionID], s.model.positions[cp.PositionID]
		if w == nil || !cp.Volume.Equal(w.volume) || !cp.Profit.Equal(w.profit) || !cp.Swap.Equal(w.swap) || !cp.Commission.Equal(w.commission) ||
			cp.Symbol != p.symbol || cp.Side != p.side || !cp.OpenPrice.Equal(p.openPrice) {
			t.Fatalf("%s: closed position %+v, want %+v of %+v", where, cp, w, p)
		}
	}
	// Open positions at the closing rollover, at their volume then.
	wantOpen := map[int64]decimal.Decimal{}
	for _, p := range s.model.positions {
		if p.account != account || !p.openedAt.Before(closing.day.At) {
			continue
		}
		v := p.openVolume
		for _, cl := range p.closes {
			if cl.at.Before(closing.day.At) {
				v = v.Sub(cl.volume)
			}
		}
		if v.IsPositive() {
			wantOpen[p.id] = v
		}
	}
	if len(st.Open) != len(wantOpen) || st.Closing.OpenPositions != len(wantOpen) {
		t.Fatalf("%s: %d open positions (snapshot %d), want %d", where, len(st.Open), st.Closing.OpenPositions, len(wantOpen))
	}
	for _, p := range st.Open {
		if v, ok := wantOpen[p.PositionID]; !ok || !p.Volume.Equal(v) {
			t.Fatalf("%s: open position %d at %s, want %s (%v)", where, p.PositionID, p.Volume, v, ok)
		}
	}
	// The equity curve: each frozen day of the range the account had.
	if len(st.Days) != len(days) {
		t.Fatalf("%s: %d days on the curve, want %d", where, len(st.Days), len(days))
	}
	for i, d := range st.Days {
		if d.TradingDay != days[i].day.Date || !d.Balance.Equal(days[i].accounts[account].balance) {
			t.Fatalf("%s: curve day %d is %s %s, want %s %s", where, i, d.TradingDay, d.Balance, days[i].day.Date, days[i].accounts[account].balance)
		}
	}
	return true
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// A range is refused at the edge by what is wrong with it, naming the parameter.
func TestParseStatementRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to string
		refused  string
	}{
		{from: "2026-01-05", to: "2026-01-05"},
		{from: "2025-01-01", to: "2025-12-31"},
		{from: "2024-01-01", to: "2024-12-31"}, // a leap year: 366 days
		{from: "", to: "2026-01-05", refused: "from is required"},
		{from: "2026-01-05", to: "", refused: "to is required"},
		{from: "2026-13-01", to: "2026-12-05", refused: `from must be a date such as 2026-01-02 (got "2026-13-01")`},
		{from: "2026-02-30", to: "2026-03-05", refused: "from must be a date"},
		{from: "2026-01-05", to: "5/1/2026", refused: `to must be a date such as 2026-01-02 (got "5/1/2026")`},
		{from: "2026-01-05T00:00:00Z", to: "2026-01-06", refused: "from must be a date"},
		{from: "2026-01-06", to: "2026-01-05", refused: "to (2026-01-05) is before from (2026-01-06)"},
		{from: "2024-01-01", to: "2025-01-01", refused: "at most 366 days; from 2024-01-01 to 2025-01-01 is 367"},
	} {
		r, err := ParseStatementRange(c.from, c.to)
		if c.refused == "" {
			if err != nil || r.From != c.from || r.To != c.to {
				t.Errorf("%s..%s: %+v %v", c.from, c.to, r, err)
			}
			continue
		}
		if err == nil || fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("%s..%s: %v, want EINVALID %q", c.from, c.to, err, c.refused)
		}
	}
}

// A deal whose stored balanceAfter was changed behind the ledger's back is named by the
// statement, and the refusals say why: no frozen day in range, an account opened after the
// range's days, more deals than one statement lists.
func TestStatementDisagreementsAndRefusals(t *testing.T) {
	t.Parallel()
	db := freshDB(t)
	s := newSim(t, db)
	mon, err := fx.LastRollover(time.Date(2025, 6, 2, 22, 0, 0, 0, time.UTC)) // Monday 2025-06-02 17:00 New York
	if err != nil {
		t.Fatal(err)
	}
	if mon.Date != "2025-06-02" {
		t.Fatalf("rollover %+v", mon)
	}
	tue := mon.Next()
	a := book.Account{}
	s.at(mon.At.Add(-5 * time.Hour))
	a.ID, a.Currency = s.newAccount(1, "USD"), "USD"
	s.post(ledger.Deal{AccountID: a.ID, Type: fx.DealDeposit, Amount: decimal.RequireFromString("1000.00")})
	// Exactly the cap on Monday: listed whole.
	for left := MaxStatementDeals - 1; left > 0; {
		n := min(left, 5000)
		tx, err := s.conn.BeginTx(s.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		acct := &ledger.Account{ID: a.ID}
		if err := tx.QueryRowContext(s.ctx, "SELECT `currency`, `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", a.ID).Scan(&acct.Currency, &acct.Balance); err != nil {
			t.Fatal(err)
		}
		deals := make([]ledger.Deal, n)
		for i := range deals {
			s.keys++
			deals[i] = ledger.Deal{AccountID: a.ID, Type: fx.DealDeposit, Amount: decimal.RequireFromString("0.01"), IdempotencyKey: fmt.Sprintf("bulk:%d", s.keys)}
		}
		p, err := ledger.Post([]*ledger.Account{acct}, deals)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Exec(s.ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		left -= n
	}
	s.at(mon.At.Add(time.Minute))
	s.capture(mon)
	s.freeze(mon)

	// Tuesday: one more deal, and an account opened after Monday's close.
	s.at(tue.At.Add(-time.Hour))
	last := s.post(ledger.Deal{AccountID: a.ID, Type: fx.DealWithdrawal, Amount: decimal.RequireFromString("-10.00")})
	late := book.Account{ID: s.newAccount(2, "USD"), Currency: "USD"}
	s.at(tue.At.Add(time.Minute))
	s.capture(tue)
	s.freeze(tue)

	st, err := ReadStatement(s.ctx, db, a, StatementRange{"2025-06-02", "2025-06-02"})
	if err != nil || len(st.Deals) != MaxStatementDeals || !st.Closing.Balance.Equal(decimal.RequireFromString("1199.99")) || !st.Reconciled() {
		t.Fatalf("Monday at the cap: %v", err)
	}
	if _, err := ReadStatement(s.ctx, db, a, StatementRange{"2025-06-02", "2025-06-03"}); fx.ErrorCode(err) != fx.EINVALID ||
		!strings.Contains(err.Error(), fmt.Sprintf("more than %d deals from 2025-06-02 to 2025-06-03", MaxStatementDeals)) ||
		!strings.Contains(err.Error(), "shorter range (from, to)") {
		t.Fatalf("Monday and Tuesday, one deal over the cap: %v", err)
	}
	st, err = ReadStatement(s.ctx, db, a, StatementRange{"2025-06-03", "2025-06-09"})
	if err != nil || len(st.Deals) != 1 || st.FrozenThrough() != "2025-06-03" || st.Opening.TradingDay != "2025-06-02" || len(st.Disagreements()) != 0 {
		t.Fatalf("Tuesday: %+v %v", st, err)
	}

	// A balanceAfter changed outside the desk: named, and the balances still follow the amounts.
	if _, err := db.Exec("UPDATE `fx_deal` SET `balanceAfter` = `balanceAfter` + 1 WHERE `id` = ?", last.ID); err != nil {
		t.Fatal(err)
	}
	st, err = ReadStatement(s.ctx, db, a, StatementRange{"2025-06-03", "2025-06-03"})
	if err != nil || !slices.Equal(st.Disagreements(), []int64{last.ID}) || !st.Deals[0].Disagrees() || !st.Reconciled() {
		t.Fatalf("a tampered balanceAfter: %v %v", st.Disagreements(), err)
	}

	for _, c := range []struct {
		account book.Account
		rng     StatementRange
		want    string
	}{
		{a, StatementRange{"2025-05-01", "2025-05-30"}, "No trading day from 2025-05-01 to 2025-05-30 is frozen (the end of day has frozen through 2025-06-03)"},
		{a, StatementRange{"2025-06-04", "2025-06-30"}, "No trading day from 2025-06-04 to 2025-06-30 is frozen"},
		{late, StatementRange{"2025-06-02", "2025-06-02"}, fmt.Sprintf("Account %d has no frozen day from 2025-06-02 to 2025-06-02: it was opened after the last of them", late.ID)},
	} {
		if _, err := ReadStatement(s.ctx, db, c.account, c.rng); fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d %+v: %v, want ECONFLICT %q", c.account.ID, c.rng, err, c.want)
		}
	}
	// The late account's first statement opens at its start.
	st, err = ReadStatement(s.ctx, db, late, StatementRange{"2025-06-02", "2025-06-03"})
	if err != nil || st.Opening.TradingDay != "" || !st.Opening.Balance.IsZero() || st.Opening.Equity == nil || !st.Opening.Equity.IsZero() ||
		st.Closing.TradingDay != "2025-06-03" || len(st.Days) != 1 {
		t.Fatalf("an account's first statement: %+v %v", st, err)
	}
}
