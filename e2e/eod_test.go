package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"fxdesk/internal/eod"
	"fxdesk/internal/fx"
	"fxdesk/internal/swaps"
)

// The end of day with the real processes: a holder publishing the quote mirror (CRON_MODE=off)
// and the real fxdesk-cron freezing the book after its swap charges. Every rollover here is in
// the future, so the wall clock is always before it and every freeze reads the book as it stands
// (mode ON_TIME); a day rebuilt from the ledger after its rollover is internal/eod's own test.
//
// The snapshots are checked against the test's own reading of the book: the ledger for the
// balances, and for the marks the open positions priced at the prices the test set, with the
// desk's rules written out again here — a long closes at the bid, a short at the ask (each
// widened by the symbol group's markup), each symbol-and-side rounded once into the account's
// currency through the USD hub; margin per symbol = (|long − short| + 2 × hedged × hedged
// margin rate) × contract × mid ÷ the least of the account's, its group's and the instrument's
// leverage, converted and rounded once. Accounts are USD or EUR and symbols USD-quoted, so the
// only conversion is USD → EUR at the EURUSD mid.

// eodQuote is one symbol's bid and ask.
type eodQuote struct{ bid, ask decimal.Decimal }

func (q eodQuote) mid() decimal.Decimal { return q.bid.Add(q.ask).Div(decimal.NewFromInt(2)) }

// mirrorQuotes reads the quote mirror's snapshot from Redis: every symbol as the holder
// published it, which is what a one-off fxdesk-cron run reads and captures.
func (e *deskEnv) mirrorQuotes() map[string]eodQuote {
	e.t.Helper()
	raw, err := e.rdb.Get(context.Background(), e.names.QuoteMirrorSnapshot()).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var doc struct {
		Quotes map[string]struct{ Bid, Ask string } `json:"quotes"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		e.t.Fatalf("quote mirror snapshot: %v", err)
	}
	out := make(map[string]eodQuote, len(doc.Quotes))
	for s, q := range doc.Quotes {
		out[s] = eodQuote{decimal.RequireFromString(q.Bid), decimal.RequireFromString(q.Ask)}
	}
	return out
}

// setCloses sets each symbol's price at the simulator (setQuote returns once the desk shows it)
// and waits until the mirror's snapshot carries every one of them. It returns the snapshot: the
// prices a run started now captures as the day's close.
func (d *tradingDesk) setCloses(token string, prices map[string][2]string) map[string]eodQuote {
	t := d.e.t
	t.Helper()
	symbols := make([]string, 0, len(prices))
	for s := range prices {
		symbols = append(symbols, s)
	}
	slices.Sort(symbols)
	for _, s := range symbols {
		d.setQuote(token, s, prices[s][0], prices[s][1])
	}
	var snap map[string]eodQuote
	eventually(t, 10*time.Second, 50*time.Millisecond, fmt.Sprintf("the quote mirror publishes %v", prices), func() bool {
		snap = d.e.mirrorQuotes()
		for s, p := range prices {
			q, ok := snap[s]
			if !ok || !q.bid.Equal(decimal.RequireFromString(p[0])) || !q.ask.Equal(decimal.RequireFromString(p[1])) {
				return false
			}
		}
		return true
	})
	return snap
}

// eodTerms are what the marks need of an instrument.
type eodTerms struct {
	quote                               string
	contract, point, markup, hedgedRate decimal.Decimal
	leverageMax                         int64
}

type eodPosition struct {
	id, account       int64
	symbol, side      string
	volume, openPrice decimal.Decimal
	external          bool
}

type eodDeal struct {
	id                   int64
	amount, balanceAfter decimal.Decimal
}

type eodAccount struct {
	id              int64
	currency, group string
	leverage        int64
	balance         decimal.Decimal
	deals           []eodDeal // in id order
	positions       []eodPosition
	orders          int
}

// lastDeal is the account's last deal id, 0 without one.
func (a *eodAccount) lastDeal() int64 {
	if len(a.deals) == 0 {
		return 0
	}
	return a.deals[len(a.deals)-1].id
}

// eodBook is the install's book as the test reads it: accounts, their deals, open positions and
// resting orders, and the terms that price them.
type eodBook struct {
	accounts map[int64]*eodAccount
	ids      []int64 // ascending: the order the freeze walks them in
	terms    map[string]eodTerms
	groupLev map[string]int64
}

// readBook reads the whole book.
func (e *deskEnv) readBook() *eodBook {
	t := e.t
	t.Helper()
	b := &eodBook{accounts: map[int64]*eodAccount{}, terms: map[string]eodTerms{}, groupLev: map[string]int64{}}
	query := func(q string, scan func(*sql.Rows) error, args ...any) {
		t.Helper()
		rows, err := e.sql.Query(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var overrides int
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_symbol_override`").Scan(&overrides); err != nil {
		t.Fatal(err)
	}
	if overrides != 0 {
		t.Fatalf("%d symbol override(s): the marks here read only the symbol groups' terms", overrides)
	}
	query("SELECT i.`symbol`, i.`quote`, i.`contractSize`, i.`point`, i.`leverageMax`, g.`markupPoints`, g.`hedgedMarginRate` "+
		"FROM `fx_instrument` i JOIN `fx_symbol_group` g ON g.`name` = i.`symbolGroup`", func(r *sql.Rows) error {
		var s string
		var in eodTerms
		err := r.Scan(&s, &in.quote, &in.contract, &in.point, &in.leverageMax, &in.markup, &in.hedgedRate)
		b.terms[s] = in
		return err
	})
	query("SELECT `name`, `leverageMax` FROM `fx_account_group`", func(r *sql.Rows) error {
		var g string
		var l int64
		err := r.Scan(&g, &l)
		b.groupLev[g] = l
		return err
	})
	query("SELECT `id`, `currency`, `accountGroup`, `leverage`, `balance` FROM `fx_account` ORDER BY `id`", func(r *sql.Rows) error {
		a := &eodAccount{}
		err := r.Scan(&a.id, &a.currency, &a.group, &a.leverage, &a.balance)
		b.accounts[a.id] = a
		b.ids = append(b.ids, a.id)
		return err
	})
	query("SELECT `id`, `accountId`, `amount`, `balanceAfter` FROM `fx_deal` ORDER BY `id`", func(r *sql.Rows) error {
		var d eodDeal
		var acc int64
		if err := r.Scan(&d.id, &acc, &d.amount, &d.balanceAfter); err != nil {
			return err
		}
		a := b.accounts[acc]
		if a == nil {
			return fmt.Errorf("deal %d of unknown account %d", d.id, acc)
		}
		a.deals = append(a.deals, d)
		return nil
	})
	query("SELECT `id`, `accountId`, `symbol`, `side`, `volume`, `openPrice`, `venueTradeId` IS NOT NULL FROM `fx_position` WHERE `status` = 'OPEN'", func(r *sql.Rows) error {
		var p eodPosition
		if err := r.Scan(&p.id, &p.account, &p.symbol, &p.side, &p.volume, &p.openPrice, &p.external); err != nil {
			return err
		}
		a := b.accounts[p.account]
		if a == nil {
			return fmt.Errorf("position %d of unknown account %d", p.id, p.account)
		}
		a.positions = append(a.positions, p)
		return nil
	})
	query("SELECT `accountId`, COUNT(*) FROM `fx_order` WHERE `status` = 'PENDING' GROUP BY `accountId`", func(r *sql.Rows) error {
		var acc int64
		var n int
		err := r.Scan(&acc, &n)
		if a := b.accounts[acc]; a != nil {
			a.orders = n
		}
		return err
	})
	return b
}

// toAccount converts amount in from (always USD here) into an account's currency at closing,
// rounded once to the currency's minor units, through the USD hub as a fill converts.
func toAccount(t *testing.T, amount decimal.Decimal, from, to string, closing map[string]eodQuote) decimal.Decimal {
	t.Helper()
	if from != "USD" {
		t.Fatalf("the test converts only from USD, not %s", from)
	}
	switch to {
	case "USD":
		return fx.RoundMoney(to, amount)
	case "EUR":
		q, ok := closing["EURUSD"]
		if !ok {
			t.Fatal("no EURUSD at the close to convert USD into EUR")
		}
		return fx.RoundMoney(to, amount.DivRound(q.mid(), 16))
	}
	t.Fatalf("the test converts only into USD or EUR, not %s", to)
	return decimal.Decimal{}
}

// floatingAndMargin is account a's floating P&L and used margin at closing, as the desk marks
// them (the rules at the top of this file).
func (b *eodBook) floatingAndMargin(t *testing.T, a *eodAccount, closing map[string]eodQuote) (floating, margin decimal.Decimal) {
	t.Helper()
	type leg struct{ volume, volumePrice decimal.Decimal }
	legs := map[[2]string]*leg{}
	var keys [][2]string
	for _, p := range a.positions {
		k := [2]string{p.symbol, p.side}
		l := legs[k]
		if l == nil {
			l = &leg{}
			legs[k] = l
			keys = append(keys, k)
		}
		l.volume = l.volume.Add(p.volume)
		l.volumePrice = l.volumePrice.Add(p.volume.Mul(p.openPrice))
	}
	type netted struct{ long, short decimal.Decimal }
	bySymbol := map[string]*netted{}
	var symbols []string
	for _, k := range keys {
		symbol, side := k[0], k[1]
		in, ok := b.terms[symbol]
		q, priced := closing[symbol]
		if !ok || !priced {
			t.Fatalf("account %d holds %s, which has no terms or no closing price", a.id, symbol)
		}
		l := legs[k]
		markup := in.markup.Mul(in.point)
		var diff decimal.Decimal
		if side == "BUY" {
			diff = q.bid.Sub(markup).Mul(l.volume).Sub(l.volumePrice)
		} else {
			diff = l.volumePrice.Sub(q.ask.Add(markup).Mul(l.volume))
		}
		floating = floating.Add(toAccount(t, diff.Mul(in.contract), in.quote, a.currency, closing))
		n := bySymbol[symbol]
		if n == nil {
			n = &netted{}
			bySymbol[symbol] = n
			symbols = append(symbols, symbol)
		}
		if side == "BUY" {
			n.long = n.long.Add(l.volume)
		} else {
			n.short = n.short.Add(l.volume)
		}
	}
	for _, symbol := range symbols {
		in, n := b.terms[symbol], bySymbol[symbol]
		lev := min(a.leverage, b.groupLev[a.group], in.leverageMax)
		hedged := decimal.Min(n.long, n.short)
		lots := n.long.Sub(n.short).Abs().Add(hedged.Mul(decimal.NewFromInt(2)).Mul(in.hedgedRate))
		inQuote := lots.Mul(in.contract).Mul(closing[symbol].mid()).DivRound(decimal.NewFromInt(lev), 16)
		margin = margin.Add(toAccount(t, inQuote, in.quote, a.currency, closing))
	}
	return floating, margin
}

// eodRowTexts returns day's fx_eod_account rows by account, every column as the server spells
// it: a row rewritten in any way, even to the same figures, reads differently (takenAt).
func (e *deskEnv) eodRowTexts(day string) map[int64]string {
	e.t.Helper()
	rows, err := e.sql.Query("SELECT `accountId`, CONCAT_WS('|', `currency`, `balance`, COALESCE(`equity`, '-'), COALESCE(`margin`, '-'), "+
		"COALESCE(`freeMargin`, '-'), COALESCE(`floatingPnl`, '-'), `openPositions`, `pendingOrders`, `throughDealId`, "+
		"DATE_FORMAT(`takenAt`, '%Y-%m-%d %H:%i:%s.%f')) FROM `fx_eod_account` WHERE `tradingDay` = ?", day)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			e.t.Fatal(err)
		}
		out[id] = s
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// count runs a SELECT COUNT(*) (or any one-integer query).
func (e *deskEnv) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.sql.QueryRow(q, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// eodRow is one account's frozen figures, read by eodRows.
type eodRow struct {
	currency                       string
	balance                        decimal.Decimal
	equity, margin, free, floating decimal.NullDecimal
	positions, orders              int
	through                        int64
}

func (e *deskEnv) eodRows(day string) map[int64]eodRow {
	e.t.Helper()
	rows, err := e.sql.Query("SELECT `accountId`, `currency`, `balance`, `equity`, `margin`, `freeMargin`, `floatingPnl`, `openPositions`, "+
		"`pendingOrders`, `throughDealId` FROM `fx_eod_account` WHERE `tradingDay` = ?", day)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]eodRow{}
	for rows.Next() {
		var id int64
		var r eodRow
		if err := rows.Scan(&id, &r.currency, &r.balance, &r.equity, &r.margin, &r.free, &r.floating, &r.positions, &r.orders, &r.through); err != nil {
			e.t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// wantClosingPrices checks that day's captured prices are exactly closing: every symbol the
// mirror carried, at the bid and ask it published.
func (e *deskEnv) wantClosingPrices(day string, closing map[string]eodQuote) {
	t := e.t
	t.Helper()
	rows, err := e.sql.Query("SELECT `symbol`, `bid`, `ask` FROM `fx_eod_price` WHERE `tradingDay` = ?", day)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]eodQuote{}
	for rows.Next() {
		var s string
		var q eodQuote
		if err := rows.Scan(&s, &q.bid, &q.ask); err != nil {
			t.Fatal(err)
		}
		got[s] = q
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(closing) {
		t.Errorf("%s: %d closing prices captured, the mirror carried %d", day, len(got), len(closing))
	}
	for s, want := range closing {
		q, ok := got[s]
		if !ok || !q.bid.Equal(want.bid) || !q.ask.Equal(want.ask) {
			t.Errorf("%s: closing price of %s is %v (captured %v), the mirror published %s/%s", day, s, q, ok, want.bid, want.ask)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// wantFrozen checks day's snapshot against the book as it stands now and closing, the prices
// the test set for the day: the day's row in fx_eod_day (ON_TIME, every account), exactly one
// row per account, each balance the ledger's at the row's last deal and the previous frozen
// day's balance (prev, "" for none) plus the account's deals after that day's last deal up to
// this one's, the day's swap charge of every open position among them, and the marks from the
// open positions at closing. live says the day was frozen by the last run, with nothing booked
// since: then each row holds the account's balance and last deal of now. It returns the rows.
func (e *deskEnv) wantFrozen(day fx.Rollover, closing map[string]eodQuote, prev string, live bool) map[int64]eodRow {
	t := e.t
	t.Helper()
	b := e.readBook()
	rows := e.eodRows(day.Date)
	var prevRows map[int64]eodRow
	if prev != "" {
		prevRows = e.eodRows(prev)
	}

	var rolloverAt, mode string
	var accounts int
	if err := e.sql.QueryRow("SELECT DATE_FORMAT(`rolloverAt`, '%Y-%m-%dT%H:%i:%sZ'), `mode`, `accounts` FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date).
		Scan(&rolloverAt, &mode, &accounts); err != nil {
		t.Fatalf("day %s: its fx_eod_day row: %v", day.Date, err)
	}
	if want := day.At.UTC().Format(time.RFC3339); rolloverAt != want || mode != "ON_TIME" || accounts != len(b.ids) {
		t.Fatalf("day %s: rollover %s, mode %s, %d accounts; want %s, ON_TIME, %d", day.Date, rolloverAt, mode, accounts, want, len(b.ids))
	}
	if len(rows) != len(b.ids) {
		t.Fatalf("day %s: %d rows for %d accounts", day.Date, len(rows), len(b.ids))
	}

	// The day's swap deal of each open position: the snapshot is the book after the day's charges.
	swapOf := map[int64]int64{}
	q, err := e.sql.Query("SELECT `positionId`, MAX(`id`) FROM `fx_deal` WHERE `type` = 'SWAP' AND `idempotencyKey` LIKE ? GROUP BY `positionId`", "swap:%:"+day.Date)
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var pos, id int64
		if err := q.Scan(&pos, &id); err != nil {
			t.Fatal(err)
		}
		swapOf[pos] = id
	}
	q.Close()

	bad := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 10 {
			t.Errorf("day %s: "+format, append([]any{day.Date}, args...)...)
		}
	}
	bnet := map[[2]string]decimal.Decimal{}
	for _, id := range b.ids {
		a := b.accounts[id]
		r, ok := rows[id]
		if !ok {
			fail("account %d has no row", id)
			continue
		}
		// The ledger at the row's last deal, and the chain from the previous frozen day.
		var atThrough, sinceFloor decimal.Decimal
		floor := int64(0)
		if p, ok := prevRows[id]; ok {
			floor = p.through
			sinceFloor = p.balance
		}
		found := r.through == 0
		for _, d := range a.deals {
			if d.id > r.through {
				break
			}
			atThrough = atThrough.Add(d.amount)
			if d.id > floor {
				sinceFloor = sinceFloor.Add(d.amount)
			}
			if d.id == r.through {
				found = true
				if !d.balanceAfter.Equal(r.balance) {
					fail("account %d: balance %s, its last deal %d left %s", id, r.balance, d.id, d.balanceAfter)
				}
			}
		}
		switch {
		case !found:
			fail("account %d: last deal %d is not one of its deals", id, r.through)
		case r.currency != a.currency:
			fail("account %d frozen in %s, it is in %s", id, r.currency, a.currency)
		case !atThrough.Equal(r.balance):
			fail("account %d: balance %s, Σ its deals through %d is %s", id, r.balance, r.through, atThrough)
		case !sinceFloor.Equal(r.balance):
			fail("account %d: balance %s ≠ previous close + the day's deals (after %d) = %s", id, r.balance, floor, sinceFloor)
		case live && (r.through != a.lastDeal() || !r.balance.Equal(a.balance)):
			fail("account %d: frozen at deal %d balance %s, the book holds deal %d balance %s", id, r.through, r.balance, a.lastDeal(), a.balance)
		case r.positions != len(a.positions) || r.orders != a.orders:
			fail("account %d: %d positions %d orders frozen, the book holds %d and %d", id, r.positions, r.orders, len(a.positions), a.orders)
		}
		for _, p := range a.positions {
			if s, ok := swapOf[p.id]; !ok || s > r.through {
				fail("account %d: position %d's swap deal of the day (%d, found %v) is not in the snapshot through deal %d", id, p.id, s, ok, r.through)
			}
			if !p.external {
				k := [2]string{p.symbol, a.currency}
				v := p.volume
				if p.side == "SELL" {
					v = v.Neg()
				}
				bnet[k] = bnet[k].Add(v)
			}
		}
		floating, margin := b.floatingAndMargin(t, a, closing)
		equity := r.balance.Add(floating)
		if !r.equity.Valid || !r.margin.Valid || !r.free.Valid || !r.floating.Valid {
			fail("account %d: marks NULL with every price captured", id)
			continue
		}
		if !r.floating.Decimal.Equal(floating) || !r.equity.Decimal.Equal(equity) || !r.margin.Decimal.Equal(margin) || !r.free.Decimal.Equal(equity.Sub(margin)) {
			fail("account %d (%s): floating %s equity %s margin %s free %s; at the close floating %s equity %s margin %s free %s", id, a.currency,
				r.floating.Decimal, r.equity.Decimal, r.margin.Decimal, r.free.Decimal, floating, equity, margin, equity.Sub(margin))
		}
	}
	if bad > 0 {
		t.Fatalf("day %s: %d of %d account rows do not match the book", day.Date, bad, len(b.ids))
	}
	// The desk's rows: the clients' B-book net per symbol and account currency.
	for k, want := range bnet {
		var got decimal.Decimal
		if err := e.sql.QueryRow("SELECT `bbookNet` FROM `fx_eod_symbol` WHERE `tradingDay` = ? AND `symbol` = ? AND `currency` = ?", day.Date, k[0], k[1]).Scan(&got); err != nil {
			t.Fatalf("day %s: desk row %s/%s: %v", day.Date, k[0], k[1], err)
		}
		if !got.Equal(want) {
			t.Fatalf("day %s: desk B-book net on %s in %s accounts %s, the open positions net %s", day.Date, k[0], k[1], got, want)
		}
	}
	return rows
}

// eodTraders opens the traders whose books the end-of-day tests follow, users user to user+2: a
// USD account long EURUSD and short GBPUSD with a resting limit order, a EUR account short
// EURUSD and long GBPUSD (its P&L converted at the EURUSD mid), and a USD account with a hedged
// EURUSD pair. It returns each account's owner's token, the accounts and the positions by name.
func (d *tradingDesk) eodTraders(user int64) ([3]string, [3]int64, map[string]int64) {
	t := d.e.t
	t.Helper()
	var toks [3]string
	var acc [3]int64
	toks[0], acc[0] = d.newTrader(user, "USD", "100", "10000")
	toks[1], acc[1] = d.newTrader(user+1, "EUR", "50", "10000")
	toks[2], acc[2] = d.newTrader(user+2, "USD", "200", "10000")
	d.setQuote(toks[0], "EURUSD", "1.08000", "1.08020")
	d.setQuote(toks[0], "GBPUSD", "1.27000", "1.27030")
	pos := map[string]int64{
		"usdLongEURUSD":  d.open(toks[0], acc[0], "EURUSD", "BUY", "1.00"),
		"usdShortGBPUSD": d.open(toks[0], acc[0], "GBPUSD", "SELL", "0.50"),
		"eurShortEURUSD": d.open(toks[1], acc[1], "EURUSD", "SELL", "0.40"),
		"eurLongGBPUSD":  d.open(toks[1], acc[1], "GBPUSD", "BUY", "0.20"),
		"hedgedLongEUR":  d.open(toks[2], acc[2], "EURUSD", "BUY", "0.30"),
		"hedgedShortEUR": d.open(toks[2], acc[2], "EURUSD", "SELL", "0.10"),
	}
	must(t, d.web, toks[0], "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","price":"1.05000","volume":"0.10"}`, acc[0]),
		http.StatusCreated, nil)
	return toks, acc, pos
}

// weekdayRollovers returns n consecutive weekday rollovers, the first more than an hour away: no
// real rollover passes while a test runs, so the holder's own recorder captures none of them.
func weekdayRollovers(n int) []fx.Rollover {
	out := []fx.Rollover{firstWeekdayRolloverAfter(time.Now().Add(time.Hour))}
	for len(out) < n {
		out = append(out, firstWeekdayRolloverAfter(out[len(out)-1].At))
	}
	return out
}

// Two rollovers run by the real fxdesk-cron at their instants, each with its own prices in the
// mirror: each day is frozen once, ON_TIME, at the prices the mirror published then; every
// account's row holds its balance after the day's swap charge, the previous day's close plus the
// day's deals, and equity, floating P&L and margin of its open positions at that day's close.
func TestEODTwoRolloversFreezeEachDayAtItsClose(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t)
	toks, acc, pos := d.eodTraders(601)
	tok := toks[0]
	// Volume: seeded accounts in both currencies, each with a hedged EURUSD pair.
	d.e.seedPositions(1200, 2)
	d.e.seedPositionsIn("EUR", 300, 2)
	days := weekdayRollovers(2)
	t.Logf("accounts %v, positions %v; days %s and %s", acc, pos, days[0].Date, days[1].Date)

	p1 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.08437", "1.08455"}, "GBPUSD": {"1.26811", "1.26840"}})
	got := d.e.cronRun(swaps.JobName, days[0].At)
	t.Logf("run at %s: %v", days[0].At.UTC().Format(time.RFC3339), got)
	if got["daysFrozen"] != 1 || got["accountsFrozen"] != 1503 || got["pricesCaptured"] != len(p1) || got["unreconciled"] != 0 || got["daysUnpriced"] != 0 {
		t.Fatalf("run at the first rollover: %v, want one day of 1503 accounts frozen after capturing the mirror's %d prices", got, len(p1))
	}
	d.e.wantClosingPrices(days[0].Date, p1)
	d.e.wantFrozen(days[0], p1, "", true)
	t.Logf("%s frozen at EURUSD %s/%s GBPUSD %s/%s", days[0].Date, p1["EURUSD"].bid, p1["EURUSD"].ask, p1["GBPUSD"].bid, p1["GBPUSD"].ask)

	// The next day trades: a close (a PROFIT deal), a deposit, a new position.
	p2 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.07912", "1.07931"}, "GBPUSD": {"1.27555", "1.27581"}})
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", pos["usdShortGBPUSD"]), "", http.StatusOK, nil)
	d.fund(acc[1], "250")
	d.open(toks[2], acc[2], "GBPUSD", "BUY", "0.10")
	day1 := d.e.eodRowTexts(days[0].Date)
	got = d.e.cronRun(swaps.JobName, days[1].At)
	t.Logf("run at %s: %v", days[1].At.UTC().Format(time.RFC3339), got)
	if got["daysFrozen"] != 1 || got["accountsFrozen"] != 1503 || got["unreconciled"] != 0 {
		t.Fatalf("run at the second rollover: %v, want one day of 1503 accounts frozen", got)
	}
	d.e.wantClosingPrices(days[1].Date, p2)
	d.e.wantFrozen(days[1], p2, days[0].Date, true)
	if fmt.Sprint(d.e.eodRowTexts(days[0].Date)) != fmt.Sprint(day1) {
		t.Fatalf("the run at %s rewrote rows of %s", days[1].Date, days[0].Date)
	}
	d.e.checkAllLedgers()
	t.Logf("%s frozen at EURUSD %s/%s GBPUSD %s/%s", days[1].Date, p2["EURUSD"].bid, p2["EURUSD"].ask, p2["GBPUSD"].bid, p2["GBPUSD"].ask)
}

// killFreezeMidway runs `fxdesk-cron run processFxSwaps --at day.At` and SIGKILLs it in the
// middle of the day's freeze, deterministically: the test first inserts, in a transaction it
// holds open, the row of the account at index lockAt (in id order) for the day, so the freeze's
// batch holding that account waits on the row lock while the batches before it have committed.
// (A locking read of the missing key would gap-lock everything after the previous day's last row
// and stop the first batch.) Once the run waits there, it is killed and the transaction rolled
// back. It returns the rows the run wrote: every batch before the held one. lockAt must be past
// the first batch.
func (d *tradingDesk) killFreezeMidway(day fx.Rollover, lockAt int) map[int64]string {
	t := d.e.t
	t.Helper()
	e := d.e
	ids := e.readBook().ids
	held := ids[lockAt]
	ctx := context.Background()
	tx, err := e.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_eod_account` (`tradingDay`, `accountId`, `currency`, `balance`, `openPositions`, `pendingOrders`, `throughDealId`) "+
		"VALUES (?, ?, 'USD', 0, 0, 0, 0)", day.Date, held); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(filepath.Join(binDir, "fxdesk-cron"), "run", swaps.JobName, "--at", day.At.UTC().Format(time.RFC3339))
	cmd.Env = e.env(mirrorEnv()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("--- killed fxdesk-cron run (pid %d) output ---\n%s", cmd.Process.Pid, out.String())
			t.Logf("the install's database sessions: %s", e.sessions())
		}
	})

	// The batches before the held one committed and the freeze's insert is running: it is the
	// held batch's, which cannot finish before the test lets go of the row.
	want := lockAt / eod.DefaultBatch * eod.DefaultBatch
	eventually(t, 45*time.Second, 20*time.Millisecond, fmt.Sprintf("the freeze of %s waits on account %d's row", day.Date, held), func() bool {
		select {
		case <-done:
			t.Fatalf("the run ended before its freeze reached account %d: %v", held, waitErr)
		default:
		}
		return e.count("SELECT COUNT(*) FROM `fx_eod_account` WHERE `tradingDay` = ?", day.Date) == want &&
			e.count("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE `DB` = DATABASE() AND `COMMAND` = 'Query' "+
				"AND `INFO` LIKE 'INSERT INTO `fx_eod_account`%'") > 0
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	written := e.eodRowTexts(day.Date)
	t.Logf("run at %s SIGKILLed waiting on account %d (index %d): %d of %d accounts frozen", day.At.UTC().Format(time.RFC3339), held, lockAt, len(written), len(ids))
	if len(written) != want {
		t.Fatalf("%d rows of %s written before the kill, want the %d of the batches before account %d's", len(written), day.Date, want, held)
	}
	for i, id := range ids[:want] {
		if _, ok := written[id]; !ok {
			t.Fatalf("account %d (index %d) not among the rows written before the kill", id, i)
		}
	}
	if n := e.count("SELECT COUNT(*) FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date); n != 0 {
		t.Fatalf("%s has its fx_eod_day row after the run was killed mid-freeze", day.Date)
	}
	return written
}

// sessions lists the install's database connections as the server shows them: what each runs.
func (e *deskEnv) sessions() string {
	rows, err := e.sql.Query("SELECT `ID`, `COMMAND`, `TIME`, COALESCE(`STATE`, ''), COALESCE(`INFO`, '') FROM information_schema.PROCESSLIST WHERE `DB` = DATABASE()")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		var id, command, secs, state, info string
		if err := rows.Scan(&id, &command, &secs, &state, &info); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&sb, "\n  %s %s %ss %s: %.200s", id, command, secs, state, info)
	}
	return sb.String()
}

// A run SIGKILLed in the middle of a day's freeze, then run again as of the same instant: the rows
// written before the kill are not rewritten (every column, takenAt included), the rest are
// written once, and the day's row is written once, by the rerun; a third run changes nothing.
func TestEODKilledFreezeRerunWritesEachRowOnce(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t)
	toks, acc, _ := d.eodTraders(611)
	tok := toks[0]
	d.e.seedPositions(3000, 2)
	days := weekdayRollovers(2)
	const n = 3003

	p1 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.08437", "1.08455"}, "GBPUSD": {"1.26811", "1.26840"}})
	got := d.e.cronRun(swaps.JobName, days[0].At)
	t.Logf("run at %s: %v", days[0].At.UTC().Format(time.RFC3339), got)
	if got["daysFrozen"] != 1 || got["accountsFrozen"] != n {
		t.Fatalf("run at the first rollover: %v", got)
	}
	d.e.wantClosingPrices(days[0].Date, p1)
	day1 := d.e.eodRowTexts(days[0].Date)
	p2 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.07912", "1.07931"}, "GBPUSD": {"1.27555", "1.27581"}})
	written := d.killFreezeMidway(days[1], 2500)
	// The killed run had captured the day's close and charged its swaps before the freeze.
	d.e.wantClosingPrices(days[1].Date, p2)

	got = d.e.cronRun(swaps.JobName, days[1].At)
	t.Logf("rerun at %s: %v", days[1].At.UTC().Format(time.RFC3339), got)
	if got["charged"] != 0 || got["daysFrozen"] != 1 || got["accountsFrozen"] != n-len(written) || got["unreconciled"] != 0 {
		t.Fatalf("rerun: %v, want nothing charged and the %d accounts still missing frozen", got, n-len(written))
	}
	after := d.e.eodRowTexts(days[1].Date)
	for id, was := range written {
		if after[id] != was {
			t.Fatalf("account %d's row of %s rewritten by the rerun: %s, was %s", id, days[1].Date, after[id], was)
		}
	}
	d.e.wantFrozen(days[1], p2, days[0].Date, true)

	var frozenBy, frozenAt string
	dayRow := func() string {
		t.Helper()
		if err := d.e.sql.QueryRow("SELECT `frozenBy`, DATE_FORMAT(`frozenAt`, '%Y-%m-%d %H:%i:%s.%f') FROM `fx_eod_day` WHERE `tradingDay` = ?", days[1].Date).
			Scan(&frozenBy, &frozenAt); err != nil {
			t.Fatal(err)
		}
		return frozenBy + " " + frozenAt
	}
	first := dayRow()
	again := d.e.cronRun(swaps.JobName, days[1].At)
	if again["charged"] != 0 || again["daysFrozen"] != 0 || again["accountsFrozen"] != 0 {
		t.Fatalf("a third run: %v, want nothing done", again)
	}
	if dayRow() != first || d.e.count("SELECT COUNT(*) FROM `fx_eod_day` WHERE `tradingDay` = ?", days[1].Date) != 1 {
		t.Fatalf("%s's day row changed by a third run: %s, was %s", days[1].Date, dayRow(), first)
	}
	if fmt.Sprint(d.e.eodRowTexts(days[1].Date)) != fmt.Sprint(after) {
		t.Fatalf("a third run rewrote rows of %s", days[1].Date)
	}
	if fmt.Sprint(d.e.eodRowTexts(days[0].Date)) != fmt.Sprint(day1) {
		t.Fatalf("the runs at %s rewrote rows of %s", days[1].Date, days[0].Date)
	}
	d.e.checkAllLedgers()
	t.Logf("%s: %d rows before the kill unchanged, %d written by the rerun, day row %s; accounts %v", days[1].Date, len(written), n-len(written), first, acc)
}

// A day whose run died mid-freeze after capturing its close is completed by the next rollover's
// run at its own captured prices, not the ones live then; a day no run captured at all is not
// frozen and eod-prices-missing names it, while the day after it is frozen normally.
func TestEODMissedDaysCaughtUpAtTheirOwnPrices(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t)
	toks, acc, _ := d.eodTraders(621)
	tok := toks[0]
	d.e.seedPositions(1200, 2)
	d.e.seedPositionsIn("EUR", 300, 2)
	days := weekdayRollovers(5)
	const n = 1503
	t.Logf("accounts %v; days %s … %s", acc, days[0].Date, days[4].Date)

	p1 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.08437", "1.08455"}, "GBPUSD": {"1.26811", "1.26840"}})
	if got := d.e.cronRun(swaps.JobName, days[0].At); got["daysFrozen"] != 1 || got["accountsFrozen"] != n {
		t.Fatalf("run at %s: %v", days[0].Date, got)
	}
	d.e.wantFrozen(days[0], p1, "", true)

	// Day 2: its run captures the close, charges, and dies in the freeze's second batch.
	p2 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.07912", "1.07931"}, "GBPUSD": {"1.27555", "1.27581"}})
	written := d.killFreezeMidway(days[1], 1200)
	d.e.wantClosingPrices(days[1].Date, p2)

	// Day 3: the first run after it, with day 3's prices live, completes day 2 at day 2's close.
	p3 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.08890", "1.08906"}, "GBPUSD": {"1.26402", "1.26433"}})
	got := d.e.cronRun(swaps.JobName, days[2].At)
	t.Logf("run at %s: %v", days[2].At.UTC().Format(time.RFC3339), got)
	if got["daysFrozen"] != 2 || got["accountsFrozen"] != n-len(written)+n || got["daysUnpriced"] != 0 || got["unreconciled"] != 0 {
		t.Fatalf("run at %s: %v, want day %s's %d missing accounts and day %s frozen", days[2].Date, got, days[1].Date, n-len(written), days[2].Date)
	}
	d.e.wantClosingPrices(days[1].Date, p2)
	d.e.wantClosingPrices(days[2].Date, p3)
	day2 := d.e.wantFrozen(days[1], p2, days[0].Date, false)
	d.e.wantFrozen(days[2], p3, days[1].Date, true)
	after := d.e.eodRowTexts(days[1].Date)
	for id, was := range written {
		if after[id] != was {
			t.Fatalf("account %d's row of %s rewritten: %s, was %s", id, days[1].Date, after[id], was)
		}
	}
	// The run ahead of the wall clock froze day 2's remaining accounts as the book stood then,
	// after day 3's charges: their rows reach past day 3's swap deals. Each still chains (checked
	// above); in production that run, past day 2's rollover, would rebuild them from the ledger.
	late := 0
	for id, r := range day2 {
		if _, early := written[id]; !early && r.through > 0 {
			day3Swaps := d.e.count("SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` = ? AND `type` = 'SWAP' AND `idempotencyKey` LIKE ? AND `id` <= ?",
				id, "swap:%:"+days[2].Date, r.through)
			if day3Swaps > 0 {
				late++
			}
		}
	}
	t.Logf("%s: %d rows from before the kill unchanged, %d completed by the run at %s at %s's close (%d of them after %s's charges)",
		days[1].Date, len(written), n-len(written), days[2].Date, days[1].Date, late, days[2].Date)

	// Day 4: no run at all, so no capture. Day 5's run leaves day 4 unfrozen and says so.
	p5 := d.setCloses(tok, map[string][2]string{"EURUSD": {"1.09274", "1.09290"}, "GBPUSD": {"1.28010", "1.28044"}})
	got = d.e.cronRun(swaps.JobName, days[4].At)
	t.Logf("run at %s (none at %s): %v", days[4].At.UTC().Format(time.RFC3339), days[3].Date, got)
	if got["daysFrozen"] != 1 || got["accountsFrozen"] != n || got["daysUnpriced"] != 1 || got["unreconciled"] != 0 {
		t.Fatalf("run at %s: %v, want %s frozen and %s unpriced", days[4].Date, got, days[4].Date, days[3].Date)
	}
	for _, table := range []string{"fx_eod_price", "fx_eod_account", "fx_eod_symbol", "fx_eod_day"} {
		if c := d.e.count("SELECT COUNT(*) FROM `"+table+"` WHERE `tradingDay` = ?", days[3].Date); c != 0 {
			t.Fatalf("%d %s row(s) for %s, a day nobody captured", c, table, days[3].Date)
		}
	}
	msg, open := d.web.openAlert(eod.AlertPricesMissing)
	if !open || !strings.Contains(msg, days[3].Date) {
		t.Fatalf("%s open=%v %q, want it naming %s", eod.AlertPricesMissing, open, msg, days[3].Date)
	}
	for _, other := range []fx.Rollover{days[0], days[1], days[2], days[4]} {
		if strings.Contains(msg, other.Date) {
			t.Fatalf("%s names %s, which has its close: %q", eod.AlertPricesMissing, other.Date, msg)
		}
	}
	d.e.wantClosingPrices(days[4].Date, p5)
	// Day 5 follows day 3: its deals are day 4's and its own.
	d.e.wantFrozen(days[4], p5, days[2].Date, true)
	d.e.checkAllLedgers()
	t.Logf("%s not frozen, alert: %q; %s frozen at EURUSD %s/%s", days[3].Date, msg, days[4].Date, p5["EURUSD"].bid, p5["EURUSD"].ask)
}
