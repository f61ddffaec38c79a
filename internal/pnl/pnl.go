package pnl

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// ReportingCurrency is the currency the desk's total and its chart are converted to.
const ReportingCurrency = "USD"

// MaxRange bounds a report: a year and a day. Its whole trading days are read from the daily
// summaries, so a long range costs its days, not its deals.
const MaxRange = 366 * 24 * time.Hour

// HourlyRange is the longest range whose series is hourly; a longer one's is by trading day.
const HourlyRange = 31 * 24 * time.Hour

// HedgeBookNote says what the hedge book's figure is.
const HedgeBookNote = "realised: the desk's hedge positions closed in the range, (close − open) × units in the symbol's quote currency; open ones are not marked"

// Figures are one symbol's (or one currency's) P&L over a range, in one account currency, from
// the desk's side: positive is what the desk earned.
type Figures struct {
	BBookRealised decimal.Decimal  // −Σ PROFIT deals of B-book positions
	BBookFloating *decimal.Decimal // −floating P&L of open B-book positions now; nil: not part of the range, or unpriced
	MarkupBBook   decimal.Decimal  // Σ markup of B-book fills (already inside the B-book's result)
	MarkupABook   decimal.Decimal  // Σ markup of A-book fills
	Commission    decimal.Decimal  // −Σ COMMISSION deals
	Swaps         decimal.Decimal  // −Σ SWAP deals
	NBPCost       decimal.Decimal  // Σ negative balance protection ADJUSTMENT deals (what the desk bore)
	// HedgeBook is the realised P&L of the desk's own hedge positions at the venue closed in the
	// range (fx_hedge_position), in the symbol's quote currency: it sits under that currency.
	HedgeBook decimal.Decimal
}

// BBookClient is the B-book's result against its traders: realised and floating.
func (f Figures) BBookClient() decimal.Decimal {
	if f.BBookFloating == nil {
		return f.BBookRealised
	}
	return f.BBookRealised.Add(*f.BBookFloating)
}

// Total is the desk's P&L: the B-book's result (whose traders' prices carry the B-book's
// markup), the A-book's markup, commissions, swaps and the hedge book, less what negative
// balance protection cost.
func (f Figures) Total() decimal.Decimal {
	return f.BBookClient().Add(f.MarkupABook).Add(f.Commission).Add(f.Swaps).Add(f.HedgeBook).Sub(f.NBPCost)
}

func (f *Figures) add(o Figures) {
	f.BBookRealised = f.BBookRealised.Add(o.BBookRealised)
	if o.BBookFloating != nil {
		v := o.BBookFloating.Copy()
		if f.BBookFloating != nil {
			v = v.Add(*f.BBookFloating)
		}
		f.BBookFloating = &v
	}
	f.MarkupBBook = f.MarkupBBook.Add(o.MarkupBBook)
	f.MarkupABook = f.MarkupABook.Add(o.MarkupABook)
	f.Commission = f.Commission.Add(o.Commission)
	f.Swaps = f.Swaps.Add(o.Swaps)
	f.NBPCost = f.NBPCost.Add(o.NBPCost)
	f.HedgeBook = f.HedgeBook.Add(o.HedgeBook)
}

// Symbol is one symbol's figures.
type Symbol struct {
	Symbol string
	Figures
}

// Currency is the figures of the accounts in one currency, and of the hedge positions whose
// symbol is quoted in it.
type Currency struct {
	Currency string
	Symbols  []Symbol // by symbol; "" collects deals without one
	Total    Figures
}

// Point is one hour (or trading day) of the range's series: what the desk earned in it,
// floating P&L aside, in the reporting currency. Hours are clock hours (UTC) and trading days
// run from 17:00 New York: the first and the last may be partly outside the range.
type Point struct {
	Start      time.Time
	Amount     decimal.Decimal
	Cumulative decimal.Decimal
}

// Report is the dealer's P&L over [From, To).
type Report struct {
	From, To time.Time
	// Floating is true when the range ends now: the open B-book positions are marked at the
	// current prices and their floating P&L is part of it.
	Floating bool
	// FloatingAt is when the open book was marked (a shared marking may be a few seconds old,
	// see Marks); zero when Floating is false.
	FloatingAt time.Time
	// LedgerAt, when set, is how far the ledger was read for the part of the range the summaries
	// have not reached (a shared reading a few seconds old, see Marks): deals after it are in
	// the next reading. Zero when the ledger was read through To.
	LedgerAt   time.Time
	Currencies []Currency
	// Total is every currency's total converted to ReportingCurrency at the current mids; nil
	// when some currency cannot be converted here (Unconverted names them).
	Total       *decimal.Decimal
	Unconverted []string
	// Hours is the range's hourly series in ReportingCurrency for a range of up to
	// HourlyRange, Days its series by trading day for a longer one; nil when Total is.
	Hours []Point
	Days  []Point
	// Unpriced lists the symbols whose open B-book positions could not be marked here.
	Unpriced []string
	// UnrecordedMarkup counts the fills of the range whose markup was not recorded (written
	// before the desk recorded it): their markup is not in the figures.
	UnrecordedMarkup int64
}

// Read builds the report over [from, to) at now; floating is marked when to is now. prices may
// have no quotes (a process without a price stream): floating P&L is then unpriced and the
// conversion to the reporting currency unavailable.
//
// The summarised whole hours and trading days of the range come from the summaries
// (Summarise, summary.go); the ledger and the openings are read for the rest alone: the range's
// partial first and last hours and whatever the summaries have not reached yet.
func Read(ctx context.Context, db *sql.DB, cat *catalog.Catalog, prices tick.Prices, from, to time.Time, floating bool) (Report, error) {
	return read(ctx, db, cat, prices, from, to, floating, nil)
}

// read is Read with the open book marked by marks (nil: marked for this report alone).
func read(ctx context.Context, db *sql.DB, cat *catalog.Catalog, prices tick.Prices, from, to time.Time, floating bool, marks *Marks) (Report, error) {
	rep := Report{From: columnTime(from), To: columnTime(to), Floating: floating}
	through, err := summarisedThrough(ctx, db)
	if err != nil {
		return Report{}, err
	}
	p, err := planOf(rep.From, rep.To, through)
	if err != nil {
		return Report{}, err
	}
	acc := accumulator{figs: map[key]*Figures{}, series: map[string]map[int]decimal.Decimal{}, base: p.base}
	live := p.live
	if floating && marks != nil && !live[1].empty() {
		// The summaries' end to now: the same for every report ending now, read once for the
		// reads of a few seconds (Marks). Through the reading's end: the report's To says so.
		r, err := marks.recentFrom(ctx, live[1].from)
		if err != nil {
			return Report{}, err
		}
		acc.addLedger(r.rows, int(r.from.Sub(p.base)/time.Hour), &rep.UnrecordedMarkup)
		live[1] = span{}
		rep.LedgerAt = r.until
	}
	for _, read := range []func() error{
		func() error {
			rows, err := readLedger(ctx, db, p.base, live)
			acc.addLedger(rows, 0, &rep.UnrecordedMarkup)
			return err
		},
		func() error { return acc.summaryDays(ctx, db, p.days, &rep.UnrecordedMarkup) },
		func() error { return acc.summaryHours(ctx, db, p.hours[0], p.hours[1], &rep.UnrecordedMarkup) },
		func() error { return acc.summarySeries(ctx, db, p.summarised) },
		func() error { return acc.hedges(ctx, db, rep.From, rep.To) },
	} {
		if err := read(); err != nil {
			return Report{}, err
		}
	}
	m := book.NewMarket(prices, cat)
	if floating {
		var mk *marked
		if marks != nil {
			mk, err = marks.get(ctx, m)
		} else {
			mk, err = markOpen(ctx, db, m)
		}
		if err != nil {
			return Report{}, err
		}
		acc.addFloating(mk)
		rep.Unpriced, rep.FloatingAt = mk.unpriced, mk.at.UTC()
	}
	rep.Currencies = acc.currencies()
	if err := rep.convert(m, p.base, acc.series); err != nil {
		return Report{}, err
	}
	return rep, nil
}

// columnTime is t as the time columns can hold it: UTC, rounded up to the millisecond, which
// selects the same rows of [from, to) as t itself. The driver would send a time.Time's
// nanoseconds, and MariaDB reads a literal with more than six decimals as no datetime its index
// can range over: the read would then scan the whole index.
func columnTime(t time.Time) time.Time {
	t = t.UTC()
	if ms := t.Truncate(time.Millisecond); !ms.Equal(t) {
		return ms.Add(time.Millisecond)
	}
	return t
}

// convert sums the currencies' totals and the series in the reporting currency: hourly from
// the clock hour of From for ranges up to HourlyRange, by trading day beyond.
func (rep *Report) convert(m *book.Market, base time.Time, series map[string]map[int]decimal.Decimal) error {
	total := decimal.Zero
	for _, c := range rep.Currencies {
		v, ok := m.Convert(c.Total.Total(), c.Currency, ReportingCurrency)
		if !ok {
			rep.Unconverted = append(rep.Unconverted, c.Currency)
			continue
		}
		total = total.Add(v)
	}
	if len(rep.Unconverted) > 0 {
		return nil
	}
	rep.Total = &total
	n := int((rep.To.Sub(base) + time.Hour - 1) / time.Hour)
	// bucket[h] is the series entry hour h of the range falls in, starts[i] entry i's start.
	bucket := make([]int, n)
	var starts []time.Time
	if rep.To.Sub(rep.From) <= HourlyRange {
		for h := range n {
			bucket[h] = h
			starts = append(starts, base.Add(time.Duration(h)*time.Hour))
		}
	} else {
		day, err := fx.LastRollover(base)
		if err != nil {
			return err
		}
		starts = append(starts, day.At.UTC())
		next := day.Next().At
		for h := range n {
			if at := base.Add(time.Duration(h) * time.Hour); !at.Before(next) {
				starts = append(starts, next.UTC())
				next = fx.Rollover{At: next}.Next().At
			}
			bucket[h] = len(starts) - 1
		}
	}
	// Each currency's entry is converted once, as each currency's total is.
	raw := make([]map[string]decimal.Decimal, len(starts))
	for ccy, byHour := range series {
		for h, v := range byHour {
			if h < 0 || h >= n {
				continue
			}
			i := bucket[h]
			if raw[i] == nil {
				raw[i] = map[string]decimal.Decimal{}
			}
			raw[i][ccy] = raw[i][ccy].Add(v)
		}
	}
	points := make([]Point, 0, len(starts))
	run := decimal.Zero
	for i, start := range starts {
		amount := decimal.Zero
		for ccy, v := range raw[i] {
			c, _ := m.Convert(v, ccy, ReportingCurrency) // every currency converted above
			amount = amount.Add(c)
		}
		run = run.Add(amount)
		points = append(points, Point{Start: start, Amount: amount, Cumulative: run})
	}
	if rep.To.Sub(rep.From) <= HourlyRange {
		rep.Hours = points
	} else {
		rep.Days = points
	}
	return nil
}

type key struct{ currency, symbol string }

type accumulator struct {
	figs   map[key]*Figures
	series map[string]map[int]decimal.Decimal // currency → hour since base → the desk's P&L
	base   time.Time                          // the clock hour the range starts in
}

func (a *accumulator) at(currency, symbol string) *Figures {
	k := key{currency, symbol}
	f := a.figs[k]
	if f == nil {
		f = &Figures{}
		a.figs[k] = f
	}
	return f
}

func (a *accumulator) hour(currency string, h int, amount decimal.Decimal) {
	byHour := a.series[currency]
	if byHour == nil {
		byHour = map[int]decimal.Decimal{}
		a.series[currency] = byHour
	}
	byHour[h] = byHour[h].Add(amount)
}

// Kinds of what the report counts, as the summaries name them: the deal types, NBP for
// negative balance protection's adjustments, OPEN for the markup of opening fills.
const (
	kindProfit     = "PROFIT"
	kindCommission = "COMMISSION"
	kindSwap       = "SWAP"
	kindNBP        = "NBP"
	kindOpen       = "OPEN"
)

// apply adds one group of the ledger or of the summaries to the figures and returns its share
// of the series: what the desk earned by it, floating P&L aside. The summaries' series
// (seriesInsert) says the same in SQL.
func (a *accumulator) apply(ccy, sym, kind string, abook bool, amount, markup decimal.Decimal, unrecorded int64, missing *int64) decimal.Decimal {
	f := a.at(ccy, sym)
	desk := amount.Neg() // what the trader's deal took is the desk's, and the other way round
	switch kind {
	case kindProfit:
		*missing += unrecorded
		if abook {
			f.MarkupABook = f.MarkupABook.Add(markup)
			return markup
		}
		f.BBookRealised = f.BBookRealised.Add(desk)
		f.MarkupBBook = f.MarkupBBook.Add(markup)
	case kindCommission:
		f.Commission = f.Commission.Add(desk)
	case kindSwap:
		f.Swaps = f.Swaps.Add(desk)
	case kindNBP:
		f.NBPCost = f.NBPCost.Add(amount)
	case kindOpen:
		*missing += unrecorded
		if abook {
			f.MarkupABook = f.MarkupABook.Add(markup)
			return markup
		}
		f.MarkupBBook = f.MarkupBBook.Add(markup)
		return decimal.Zero
	}
	return desk
}

// dealGroup is what the desk's P&L takes from the ledger, grouped by currency, symbol, kind and
// book: the summaries' rows (summariseHours) and the live read (dealsSQL) select the same. Each
// deal with a position finds its book by the position's primary key. An ADJUSTMENT counts only
// when negative balance protection posted it (its key starts "nbp:").
const (
	dealGroupCols = "d.`currency`, COALESCE(d.`symbol`, '') AS sym, CASE WHEN d.`type` = 'ADJUSTMENT' THEN 'NBP' ELSE d.`type` END AS kind, " +
		"CASE WHEN p.`venueTradeId` IS NULL THEN 0 ELSE 1 END AS abook, "
	dealGroupSums = "SUM(d.`amount`), SUM(COALESCE(d.`markup`, 0)), SUM(CASE WHEN d.`type` = 'PROFIT' AND d.`markup` IS NULL THEN 1 ELSE 0 END) " +
		"FROM `fx_deal` d LEFT JOIN `fx_position` p ON p.`id` = d.`positionId` WHERE "
	dealGroupFilter = " AND (d.`type` IN ('PROFIT', 'COMMISSION', 'SWAP') OR (d.`type` = 'ADJUSTMENT' AND d.`idempotencyKey` LIKE 'nbp:%')) " +
		"GROUP BY d.`currency`, sym, kind, abook, hr"

	// openingGroup is the same for the markup of opening fills.
	openingGroupCols = "a.`currency`, p.`symbol`, 'OPEN' AS kind, CASE WHEN p.`venueTradeId` IS NULL THEN 0 ELSE 1 END AS abook, "
	openingGroupSums = "0, SUM(COALESCE(p.`markup`, 0)), SUM(CASE WHEN p.`markup` IS NULL THEN 1 ELSE 0 END) " +
		"FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` WHERE "
	openingGroupBy = " GROUP BY a.`currency`, p.`symbol`, abook, hr"
)

// dealsSQL sums the deals of two spans of time (the parts of a range the summaries do not
// hold) by currency, symbol, kind, book and hour since the range's clock hour;
// idx_fx_deal_created serves both spans.
const dealsSQL = "SELECT " + dealGroupCols + "TIMESTAMPDIFF(HOUR, ?, d.`createdAt`) AS hr, " + dealGroupSums +
	"((d.`createdAt` >= ? AND d.`createdAt` < ?) OR (d.`createdAt` >= ? AND d.`createdAt` < ?))" + dealGroupFilter

// openingsSQL sums the markup of the openings of two spans of time by currency, symbol, book
// and hour; idx_fx_position_opened serves both spans.
const openingsSQL = "SELECT " + openingGroupCols + "TIMESTAMPDIFF(HOUR, ?, p.`openedAt`) AS hr, " + openingGroupSums +
	"((p.`openedAt` >= ? AND p.`openedAt` < ?) OR (p.`openedAt` >= ? AND p.`openedAt` < ?))" + openingGroupBy

// ledgerRow is one group of dealsSQL or openingsSQL: hr is hours since the read's base.
type ledgerRow struct {
	ccy, sym, kind string
	abook          bool
	hr             int
	amount, markup decimal.Decimal
	missing        int64
}

// readLedger reads what dealsSQL and openingsSQL group over the live spans, hours counted from
// base.
func readLedger(ctx context.Context, db *sql.DB, base time.Time, live [2]span) ([]ledgerRow, error) {
	if live[0].empty() && live[1].empty() {
		return nil, nil
	}
	var out []ledgerRow
	for _, q := range []struct{ query, what string }{{dealsSQL, "deals"}, {openingsSQL, "openings"}} {
		rows, err := db.QueryContext(ctx, q.query, base, live[0].from, live[0].to, live[1].from, live[1].to)
		if err != nil {
			return nil, fmt.Errorf("dealer's P&L: %s: %w", q.what, err)
		}
		for rows.Next() {
			var r ledgerRow
			var abook int
			if err := rows.Scan(&r.ccy, &r.sym, &r.kind, &abook, &r.hr, &r.amount, &r.markup, &r.missing); err != nil {
				rows.Close()
				return nil, fmt.Errorf("dealer's P&L: %s: %w", q.what, err)
			}
			r.abook = abook == 1
			out = append(out, r)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("dealer's P&L: %s: %w", q.what, err)
		}
	}
	return out, nil
}

// addLedger adds ledger rows whose hours count from offset hours after the range's base.
func (a *accumulator) addLedger(rows []ledgerRow, offset int, unrecorded *int64) {
	for _, r := range rows {
		a.hour(r.ccy, r.hr+offset, a.apply(r.ccy, r.sym, r.kind, r.abook, r.amount, r.markup, r.missing, unrecorded))
	}
}

// hedgesSQL sums the realised P&L of the hedge positions closed in the range by quote currency,
// symbol, hour since the range's start and clock hour; idx_fx_hedge_position_closed serves the
// range. The hedge book is a few rows (the desk's own venue positions): it is always read here.
const hedgesSQL = "SELECT `plCurrency`, `symbol`, TIMESTAMPDIFF(HOUR, ?, `closedAt`) AS hr, TIMESTAMPDIFF(HOUR, ?, `closedAt`) AS clock, " +
	"SUM(`realizedPl`) FROM `fx_hedge_position` " +
	"WHERE `closedAt` >= ? AND `closedAt` < ? AND `status` = 'CLOSED' GROUP BY `plCurrency`, `symbol`, hr, clock"

// hedges adds the hedge book's realised P&L, each currency's symbol and hour of the range
// rounded once to the currency's minor units; the series rounds each clock hour (the same hours
// when the range starts on the hour).
func (a *accumulator) hedges(ctx context.Context, db *sql.DB, from, to time.Time) error {
	rows, err := db.QueryContext(ctx, hedgesSQL, from, a.base, from, to)
	if err != nil {
		return fmt.Errorf("dealer's P&L: hedge book: %w", err)
	}
	defer rows.Close()
	type group struct {
		ccy, sym string
		hour     int
	}
	byRangeHour, byClockHour := map[group]decimal.Decimal{}, map[group]decimal.Decimal{}
	for rows.Next() {
		var ccy, sym string
		var hr, clock int
		var amount decimal.Decimal
		if err := rows.Scan(&ccy, &sym, &hr, &clock, &amount); err != nil {
			return fmt.Errorf("dealer's P&L: hedge book: %w", err)
		}
		byRangeHour[group{ccy, sym, hr}] = byRangeHour[group{ccy, sym, hr}].Add(amount)
		byClockHour[group{ccy, sym, clock}] = byClockHour[group{ccy, sym, clock}].Add(amount)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dealer's P&L: hedge book: %w", err)
	}
	for g, amount := range byRangeHour {
		f := a.at(g.ccy, g.sym)
		f.HedgeBook = f.HedgeBook.Add(fx.RoundMoney(g.ccy, amount))
	}
	for g, amount := range byClockHour {
		a.at(g.ccy, g.sym) // a symbol with hedges alone still has its row
		a.hour(g.ccy, g.hour, fx.RoundMoney(g.ccy, amount))
	}
	return nil
}

// floatingSQL is the open B-book positions per symbol, side and account, as an account's equity
// sums them. idx_fx_position_symbol (status, symbol, venueTradeId, side, accountId, volume,
// openPrice; migration 000034) holds every column it reads, in the order it groups by: it costs
// the open positions' index entries, never a closed position (the optimiser had intersected the
// status index with venueTradeId's, whose NULLs are every closed B-book position), and no
// temporary table. The accounts' group and currency are read apart (accountsSQL): joined here,
// they cost a lookup per position and the grouping its index order.
const floatingSQL = "SELECT p.`accountId`, p.`symbol`, p.`side`, SUM(p.`volume`), SUM(p.`volume` * p.`openPrice`) " +
	"FROM `fx_position` p FORCE INDEX (`idx_fx_position_symbol`) WHERE p.`status` = 'OPEN' AND p.`venueTradeId` IS NULL AND p.`volume` > 0 " +
	"GROUP BY p.`symbol`, p.`side`, p.`accountId`"

// accountsSQL is every account's group and currency: the accounts, not their history;
// accountSQL one account's.
const (
	accountsSQL = "SELECT `id`, `accountGroup`, `currency` FROM `fx_account`"
	accountSQL  = "SELECT `accountGroup`, `currency` FROM `fx_account` WHERE `id` = ?"
)

// markOpen marks the open B-book positions at the close price each would get now (the
// account group's markup included), each account's symbol and side converted and rounded once,
// as book.Market.Metrics marks equity. A symbol that cannot be priced is left out and named.
// The close price and the conversion are looked up once per account group, currency, symbol
// and side: the accounts are many, those few.
func markOpen(ctx context.Context, db *sql.DB, m *book.Market) (*marked, error) {
	at := time.Now()
	// The accounts first: an account opened after this read and trading before the positions'
	// read is looked up alone (accountOf).
	type account struct{ group, ccy string }
	accounts := map[int64]account{}
	rows, err := db.QueryContext(ctx, accountsSQL)
	if err != nil {
		return nil, fmt.Errorf("dealer's P&L: accounts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var ac account
		if err := rows.Scan(&id, &ac.group, &ac.ccy); err != nil {
			return nil, fmt.Errorf("dealer's P&L: accounts: %w", err)
		}
		accounts[id] = ac
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dealer's P&L: accounts: %w", err)
	}
	rows.Close()
	accountOf := func(id int64) (account, error) {
		if ac, ok := accounts[id]; ok {
			return ac, nil
		}
		var ac account
		if err := db.QueryRowContext(ctx, accountSQL, id).Scan(&ac.group, &ac.ccy); err != nil {
			return ac, fmt.Errorf("dealer's P&L: account %d: %w", id, err)
		}
		accounts[id] = ac
		return ac, nil
	}
	type mark struct {
		group, ccy, sym string
		side            fx.Side
	}
	type marking struct {
		ok      bool
		in      catalog.Instrument
		close   decimal.Decimal
		convert func(decimal.Decimal) decimal.Decimal
	}
	marks := map[mark]marking{}
	sums := map[key]decimal.Decimal{}
	unpriced := map[string]bool{}
	// mark1 adds one account's symbol and side, marked and converted as its equity is.
	mark1 := func(k mark, volume, volumePrice decimal.Decimal) {
		mk, seen := marks[k]
		if !seen {
			if t, ok := m.Catalog.Effective(k.group, k.sym); ok {
				if q, ok := m.Quote(k.sym); ok {
					mk.in, mk.close = t.Instrument, book.ClosePrice(t.Instrument, q, k.side)
					mk.convert, mk.ok = m.Converter(t.Instrument.Quote, k.ccy)
				}
			}
			marks[k] = mk
		}
		if !mk.ok {
			unpriced[k.sym] = true
			return
		}
		s := key{k.ccy, k.sym}
		sums[s] = sums[s].Sub(mk.convert(book.ProfitQuote(mk.in, k.side, volume, volumePrice, mk.close)))
	}
	rows, err = db.QueryContext(ctx, floatingSQL)
	if err != nil {
		return nil, fmt.Errorf("dealer's P&L: open positions: %w", err)
	}
	defer rows.Close()
	// Streamed, not collected: the open book is tens of thousands of groups.
	type open struct {
		account             int64
		k                   mark
		volume, volumePrice decimal.Decimal
	}
	var pending []open
	for rows.Next() {
		var o open
		if err := rows.Scan(&o.account, &o.k.sym, &o.k.side, &o.volume, &o.volumePrice); err != nil {
			return nil, fmt.Errorf("dealer's P&L: open positions: %w", err)
		}
		ac, ok := accounts[o.account]
		if !ok {
			pending = append(pending, o)
			continue
		}
		o.k.group, o.k.ccy = ac.group, ac.ccy
		mark1(o.k, o.volume, o.volumePrice)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dealer's P&L: open positions: %w", err)
	}
	rows.Close()
	for _, o := range pending {
		ac, err := accountOf(o.account)
		if err != nil {
			return nil, err
		}
		o.k.group, o.k.ccy = ac.group, ac.ccy
		mark1(o.k, o.volume, o.volumePrice)
	}
	out := make([]string, 0, len(unpriced))
	for s := range unpriced {
		out = append(out, s)
	}
	slices.Sort(out)
	return &marked{sums: sums, unpriced: out, at: at}, nil
}

// addFloating puts a marking's floating P&L into the figures.
func (a *accumulator) addFloating(mk *marked) {
	for s, v := range mk.sums {
		f := a.at(s.currency, s.symbol)
		v := v
		f.BBookFloating = &v
	}
}

func (a *accumulator) currencies() []Currency {
	by := map[string]*Currency{}
	for k, f := range a.figs {
		c := by[k.currency]
		if c == nil {
			c = &Currency{Currency: k.currency}
			by[k.currency] = c
		}
		c.Symbols = append(c.Symbols, Symbol{Symbol: k.symbol, Figures: *f})
		c.Total.add(*f)
	}
	out := make([]Currency, 0, len(by))
	for _, c := range by {
		slices.SortFunc(c.Symbols, func(x, y Symbol) int { return strings.Compare(x.Symbol, y.Symbol) })
		out = append(out, *c)
	}
	slices.SortFunc(out, func(x, y Currency) int { return strings.Compare(x.Currency, y.Currency) })
	return out
}
