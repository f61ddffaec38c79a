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

// MaxRange bounds a report: its hourly series and its reads grow with the range.
const MaxRange = 31 * 24 * time.Hour

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

// Hour is one hour of the range: what the desk earned in it, floating P&L aside, in the
// reporting currency.
type Hour struct {
	Start      time.Time
	Amount     decimal.Decimal
	Cumulative decimal.Decimal
}

// Report is the dealer's P&L over [From, To).
type Report struct {
	From, To time.Time
	// Floating is true when the range ends now: the open B-book positions are marked at the
	// current prices and their floating P&L is part of it.
	Floating   bool
	Currencies []Currency
	// Total is every currency's total converted to ReportingCurrency at the current mids; nil
	// when some currency cannot be converted here (Unconverted names them).
	Total       *decimal.Decimal
	Unconverted []string
	// Hours is the range's hourly series in ReportingCurrency, nil when Total is.
	Hours []Hour
	// Unpriced lists the symbols whose open B-book positions could not be marked here.
	Unpriced []string
	// UnrecordedMarkup counts the fills of the range whose markup was not recorded (written
	// before the desk recorded it): their markup is not in the figures.
	UnrecordedMarkup int64
}

// Read builds the report over [from, to) at now; floating is marked when to is now. prices may
// have no quotes (a process without a price stream): floating P&L is then unpriced and the
// conversion to the reporting currency unavailable.
func Read(ctx context.Context, db *sql.DB, cat *catalog.Catalog, prices tick.Prices, from, to time.Time, floating bool) (Report, error) {
	rep := Report{From: columnTime(from), To: columnTime(to), Floating: floating}
	acc := accumulator{figs: map[key]*Figures{}, hours: map[string]map[int]decimal.Decimal{}}
	if err := acc.deals(ctx, db, rep.From, rep.To, &rep.UnrecordedMarkup); err != nil {
		return Report{}, err
	}
	if err := acc.openings(ctx, db, rep.From, rep.To, &rep.UnrecordedMarkup); err != nil {
		return Report{}, err
	}
	if err := acc.hedges(ctx, db, rep.From, rep.To); err != nil {
		return Report{}, err
	}
	m := book.NewMarket(prices, cat)
	if floating {
		unpriced, err := acc.floating(ctx, db, m)
		if err != nil {
			return Report{}, err
		}
		rep.Unpriced = unpriced
	}
	rep.Currencies = acc.currencies()
	rep.convert(m, acc.hours)
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

// convert sums the currencies' totals and hours in the reporting currency.
func (rep *Report) convert(m *book.Market, hours map[string]map[int]decimal.Decimal) {
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
		return
	}
	rep.Total = &total
	n := int((rep.To.Sub(rep.From) + time.Hour - 1) / time.Hour)
	run := decimal.Zero
	for h := range n {
		amount := decimal.Zero
		for ccy, byHour := range hours {
			if v, ok := byHour[h]; ok {
				c, _ := m.Convert(v, ccy, ReportingCurrency) // every currency converted above
				amount = amount.Add(c)
			}
		}
		run = run.Add(amount)
		rep.Hours = append(rep.Hours, Hour{Start: rep.From.Add(time.Duration(h) * time.Hour), Amount: amount, Cumulative: run})
	}
}

type key struct{ currency, symbol string }

type accumulator struct {
	figs  map[key]*Figures
	hours map[string]map[int]decimal.Decimal // currency → hour of the range → the desk's P&L
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
	byHour := a.hours[currency]
	if byHour == nil {
		byHour = map[int]decimal.Decimal{}
		a.hours[currency] = byHour
	}
	byHour[h] = byHour[h].Add(amount)
}

// dealsSQL sums the range's deals that are the desk's P&L by currency, symbol, type, book and
// hour. idx_fx_deal_created serves the range; each deal with a position finds its book by the
// position's primary key. An ADJUSTMENT counts only when negative balance protection posted it
// (its key starts "nbp:").
const dealsSQL = "SELECT d.`currency`, COALESCE(d.`symbol`, '') AS sym, d.`type`, " +
	"CASE WHEN p.`venueTradeId` IS NULL THEN 0 ELSE 1 END AS abook, TIMESTAMPDIFF(HOUR, ?, d.`createdAt`) AS hr, " +
	"SUM(d.`amount`), SUM(COALESCE(d.`markup`, 0)), SUM(CASE WHEN d.`type` = 'PROFIT' AND d.`markup` IS NULL THEN 1 ELSE 0 END) " +
	"FROM `fx_deal` d LEFT JOIN `fx_position` p ON p.`id` = d.`positionId` " +
	"WHERE d.`createdAt` >= ? AND d.`createdAt` < ? AND (d.`type` IN ('PROFIT', 'COMMISSION', 'SWAP') " +
	"OR (d.`type` = 'ADJUSTMENT' AND d.`idempotencyKey` LIKE 'nbp:%')) " +
	"GROUP BY d.`currency`, sym, d.`type`, abook, hr"

func (a *accumulator) deals(ctx context.Context, db *sql.DB, from, to time.Time, unrecorded *int64) error {
	rows, err := db.QueryContext(ctx, dealsSQL, from, from, to)
	if err != nil {
		return fmt.Errorf("dealer's P&L: deals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ccy, sym, typ string
		var abook, hr int
		var amount, markup decimal.Decimal
		var missing int64
		if err := rows.Scan(&ccy, &sym, &typ, &abook, &hr, &amount, &markup, &missing); err != nil {
			return fmt.Errorf("dealer's P&L: deals: %w", err)
		}
		f := a.at(ccy, sym)
		desk := amount.Neg() // what the trader's deal took is the desk's, and the other way round
		switch fx.DealType(typ) {
		case fx.DealProfit:
			*unrecorded += missing
			if abook == 1 {
				f.MarkupABook = f.MarkupABook.Add(markup)
				a.hour(ccy, hr, markup)
				continue
			}
			f.BBookRealised = f.BBookRealised.Add(desk)
			f.MarkupBBook = f.MarkupBBook.Add(markup)
		case fx.DealCommission:
			f.Commission = f.Commission.Add(desk)
		case fx.DealSwap:
			f.Swaps = f.Swaps.Add(desk)
		case fx.DealAdjustment:
			f.NBPCost = f.NBPCost.Add(amount)
		}
		a.hour(ccy, hr, desk)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dealer's P&L: deals: %w", err)
	}
	return nil
}

// openingsSQL sums the markup of the range's opening fills by currency, symbol, book and hour;
// idx_fx_position_opened serves the range.
const openingsSQL = "SELECT a.`currency`, p.`symbol`, CASE WHEN p.`venueTradeId` IS NULL THEN 0 ELSE 1 END AS abook, " +
	"TIMESTAMPDIFF(HOUR, ?, p.`openedAt`) AS hr, SUM(COALESCE(p.`markup`, 0)), SUM(CASE WHEN p.`markup` IS NULL THEN 1 ELSE 0 END) " +
	"FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` " +
	"WHERE p.`openedAt` >= ? AND p.`openedAt` < ? GROUP BY a.`currency`, p.`symbol`, abook, hr"

func (a *accumulator) openings(ctx context.Context, db *sql.DB, from, to time.Time, unrecorded *int64) error {
	rows, err := db.QueryContext(ctx, openingsSQL, from, from, to)
	if err != nil {
		return fmt.Errorf("dealer's P&L: openings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ccy, sym string
		var abook, hr int
		var markup decimal.Decimal
		var missing int64
		if err := rows.Scan(&ccy, &sym, &abook, &hr, &markup, &missing); err != nil {
			return fmt.Errorf("dealer's P&L: openings: %w", err)
		}
		*unrecorded += missing
		f := a.at(ccy, sym)
		if abook == 1 {
			f.MarkupABook = f.MarkupABook.Add(markup)
			a.hour(ccy, hr, markup)
		} else {
			f.MarkupBBook = f.MarkupBBook.Add(markup)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dealer's P&L: openings: %w", err)
	}
	return nil
}

// hedgesSQL sums the realised P&L of the hedge positions closed in the range by quote currency,
// symbol and hour; idx_fx_hedge_position_closed serves the range.
const hedgesSQL = "SELECT `plCurrency`, `symbol`, TIMESTAMPDIFF(HOUR, ?, `closedAt`) AS hr, SUM(`realizedPl`) FROM `fx_hedge_position` " +
	"WHERE `closedAt` >= ? AND `closedAt` < ? AND `status` = 'CLOSED' GROUP BY `plCurrency`, `symbol`, hr"

// hedges adds the hedge book's realised P&L, each currency's symbol and hour rounded once to
// the currency's minor units.
func (a *accumulator) hedges(ctx context.Context, db *sql.DB, from, to time.Time) error {
	rows, err := db.QueryContext(ctx, hedgesSQL, from, from, to)
	if err != nil {
		return fmt.Errorf("dealer's P&L: hedge book: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ccy, sym string
		var hr int
		var amount decimal.Decimal
		if err := rows.Scan(&ccy, &sym, &hr, &amount); err != nil {
			return fmt.Errorf("dealer's P&L: hedge book: %w", err)
		}
		amount = fx.RoundMoney(ccy, amount)
		f := a.at(ccy, sym)
		f.HedgeBook = f.HedgeBook.Add(amount)
		a.hour(ccy, hr, amount)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dealer's P&L: hedge book: %w", err)
	}
	return nil
}

// floatingSQL is the open B-book positions per account, symbol and side, as an account's
// equity sums them; idx_fx_position_open (status first) serves it: it costs the open
// positions, which the risk engine holds in memory anyway.
const floatingSQL = "SELECT a.`id`, a.`accountGroup`, a.`currency`, p.`symbol`, p.`side`, SUM(p.`volume`), SUM(p.`volume` * p.`openPrice`) " +
	"FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` " +
	"WHERE p.`status` = 'OPEN' AND p.`venueTradeId` IS NULL AND p.`volume` > 0 " +
	"GROUP BY a.`id`, a.`accountGroup`, a.`currency`, p.`symbol`, p.`side`"

// floating marks the open B-book positions at the close price each would get now (the
// account group's markup included), each account's symbol and side converted and rounded once,
// as book.Market.Metrics marks equity. A symbol that cannot be priced is left out and named.
func (a *accumulator) floating(ctx context.Context, db *sql.DB, m *book.Market) ([]string, error) {
	rows, err := db.QueryContext(ctx, floatingSQL)
	if err != nil {
		return nil, fmt.Errorf("dealer's P&L: open positions: %w", err)
	}
	defer rows.Close()
	unpriced := map[string]bool{}
	for rows.Next() {
		var account int64
		var group, ccy, sym string
		var side fx.Side
		var volume, volumePrice decimal.Decimal
		if err := rows.Scan(&account, &group, &ccy, &sym, &side, &volume, &volumePrice); err != nil {
			return nil, fmt.Errorf("dealer's P&L: open positions: %w", err)
		}
		t, ok := m.Catalog.Effective(group, sym)
		if !ok {
			unpriced[sym] = true
			continue
		}
		in := t.Instrument
		q, ok := m.Quote(sym)
		if !ok {
			unpriced[sym] = true
			continue
		}
		p, ok := m.Convert(book.ProfitQuote(in, side, volume, volumePrice, book.ClosePrice(in, q, side)), in.Quote, ccy)
		if !ok {
			unpriced[sym] = true
			continue
		}
		f := a.at(ccy, sym)
		v := p.Neg()
		if f.BBookFloating != nil {
			v = v.Add(*f.BBookFloating)
		}
		f.BBookFloating = &v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dealer's P&L: open positions: %w", err)
	}
	out := make([]string, 0, len(unpriced))
	for s := range unpriced {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
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

// Summarise brings the desk's incremental P&L summaries up to through (what a range report reads
// instead of re-aggregating deals) and returns how many periods it wrote. The generator calls it
// after filling a database; the desk calls it as the day goes.
func Summarise(ctx context.Context, db *sql.DB, through time.Time) (int, error) {
	return 0, nil
}
