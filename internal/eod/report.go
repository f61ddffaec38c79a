package eod

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// The desk's daily report (docs/eod.md, «The daily desk report»): the frozen rows of one day read
// back, never recomputed. Everything here only reads; a day without its fx_eod_day row is not a
// day yet, however many of its account rows are in.

// MismatchesListed is how many unreconciled accounts a report names; the count is always whole.
const MismatchesListed = 100

// latestNamed is how many of the latest frozen days a "not frozen" answer names.
const latestNamed = 5

// Day is a frozen day: its fx_eod_day row.
type Day struct {
	TradingDay string    `json:"tradingDay"`
	RolloverAt time.Time `json:"rolloverAt"`
	Mode       string    `json:"mode"` // ON_TIME or CAUGHT_UP
	Accounts   int       `json:"accounts"`
	FrozenAt   time.Time `json:"frozenAt"`
	FrozenBy   string    `json:"frozenBy"`
}

const selectDay = "SELECT DATE_FORMAT(`tradingDay`, '%Y-%m-%d'), `rolloverAt`, `mode`, `accounts`, `frozenAt`, `frozenBy` FROM `fx_eod_day` "

func scanDay(sc store.Scanner) (Day, error) {
	var d Day
	err := sc.Scan(&d.TradingDay, &d.RolloverAt, &d.Mode, &d.Accounts, &d.FrozenAt, &d.FrozenBy)
	d.RolloverAt, d.FrozenAt = d.RolloverAt.UTC(), d.FrozenAt.UTC()
	return d, err
}

// LastDay is the latest frozen day; ok is false when no day is frozen yet. It is one row of the
// primary key, cheap enough for a page that refreshes every few seconds.
func LastDay(ctx context.Context, db *sql.DB) (d Day, ok bool, err error) {
	d, err = scanDay(db.QueryRowContext(ctx, selectDay+"ORDER BY `tradingDay` DESC LIMIT 1"))
	if errors.Is(err, sql.ErrNoRows) {
		return Day{}, false, nil
	}
	if err != nil {
		return Day{}, false, fmt.Errorf("end of day: the last frozen day: %w", err)
	}
	return d, true, nil
}

// FrozenDay is day's row (YYYY-MM-DD). A day not frozen is ENOTFOUND, with a message naming the
// latest frozen days, so whoever asked for the wrong one learns which to ask for.
func FrozenDay(ctx context.Context, db *sql.DB, day string) (Day, error) {
	d, err := scanDay(db.QueryRowContext(ctx, selectDay+"WHERE `tradingDay` = ?", day))
	if err == nil {
		return d, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Day{}, fmt.Errorf("end of day %s: %w", day, err)
	}
	latest, err := store.QueryAll(ctx, db, "end of day: the latest frozen days", func(sc store.Scanner) (string, error) {
		var s string
		err := sc.Scan(&s)
		return s, err
	}, "SELECT DATE_FORMAT(`tradingDay`, '%Y-%m-%d') FROM `fx_eod_day` ORDER BY `tradingDay` DESC LIMIT ?", latestNamed)
	if err != nil {
		return Day{}, err
	}
	return Day{}, notFrozen(day, latest)
}

// NoDayFrozen is the answer for the latest day when there is none yet.
func NoDayFrozen() error {
	return fx.Errorf(fx.ENOTFOUND, "No day is frozen yet. Each weekday is frozen by the first swap run after its 17:00 New York rollover, "+
		"once its closing prices were captured.")
}

func notFrozen(day string, latest []string) error {
	why := day + " is not frozen."
	if t, err := time.Parse(time.DateOnly, day); err == nil && (t.Weekday() == time.Saturday || t.Weekday() == time.Sunday) {
		why = day + " is a " + t.Weekday().String() + ": weekend rollovers close no day."
	}
	if len(latest) == 0 {
		return fx.Errorf(fx.ENOTFOUND, "%s No day is frozen yet.", why)
	}
	return fx.Errorf(fx.ENOTFOUND, "%s The latest frozen days are %s. A weekday is frozen by the first swap run after its 17:00 New York "+
		"rollover, once its closing prices were captured (eod-prices-missing names the days that had none).", why, strings.Join(latest, ", "))
}

// Days lists the frozen days from first to last (YYYY-MM-DD, both included), oldest first.
func Days(ctx context.Context, db *sql.DB, first, last string) ([]Day, error) {
	return store.QueryAll(ctx, db, "end of day: frozen days", scanDay,
		selectDay+"WHERE `tradingDay` >= ? AND `tradingDay` <= ? ORDER BY `tradingDay`", first, last)
}

// DeskFigures are a day's money figures on the desk from the desk's side, in one account
// currency (a hedge row's in its symbol's quote currency), as the freeze took them from the
// dealer's P&L: Markup is the B-book's and the A-book's together.
type DeskFigures struct {
	Realised, Markup, Commission, Swaps, NBP, HedgeBook decimal.Decimal
}

func (f DeskFigures) add(g DeskFigures) DeskFigures {
	return DeskFigures{Realised: f.Realised.Add(g.Realised), Markup: f.Markup.Add(g.Markup), Commission: f.Commission.Add(g.Commission),
		Swaps: f.Swaps.Add(g.Swaps), NBP: f.NBP.Add(g.NBP), HedgeBook: f.HedgeBook.Add(g.HedgeBook)}
}

// DeskRow is one symbol of a currency at the close: the clients' net open lots (long − short)
// on the B-book and at the venue, the desk's own hedge units, and the day's figures. Symbol ""
// collects deals without a symbol.
type DeskRow struct {
	Symbol                         string
	BBookNet, ABookNet, HedgeUnits decimal.Decimal
	DeskFigures
}

// DeskCurrency is the desk's rows in one currency, by symbol, with their total. Lots of
// different symbols do not add up, so the total is of the money figures only.
type DeskCurrency struct {
	Currency string
	Symbols  []DeskRow
	Total    DeskFigures
}

// AccountTotals are a currency's frozen accounts summed. Equity, Margin and FloatingPnl are
// the sums over the priced accounts; Unpriced counts the accounts left out of them, whose marks
// had no price at the close.
type AccountTotals struct {
	Currency                          string
	Accounts, Unpriced                int
	Balance, Equity, Margin, Floating decimal.Decimal
	OpenPositions, PendingOrders      int64
}

// Report is one frozen day as the desk reads it back.
type Report struct {
	Day      Day
	Prices   []Price // by symbol
	Desk     []DeskCurrency
	Accounts []AccountTotals // by currency
	// Unreconciled counts the accounts whose frozen balance does not follow from the previous
	// one and the day's deals; Mismatches names the first MismatchesListed of them.
	Unreconciled int
	Mismatches   []Mismatch
}

// ReadReport reads day's report (YYYY-MM-DD); a day not frozen is ENOTFOUND (FrozenDay). Its
// reconciliation is checked now, against the ledger as it stands (Reconcile).
func ReadReport(ctx context.Context, db *sql.DB, day string) (Report, error) {
	d, err := FrozenDay(ctx, db, day)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Day: d, Prices: []Price{}, Desk: []DeskCurrency{}, Mismatches: []Mismatch{}}
	closing, err := LoadClosing(ctx, db, day)
	if err != nil {
		return Report{}, err
	}
	for _, p := range closing.Prices {
		p.QuotedAt, p.CapturedAt = p.QuotedAt.UTC(), p.CapturedAt.UTC()
		rep.Prices = append(rep.Prices, p)
	}
	slices.SortFunc(rep.Prices, func(a, b Price) int { return strings.Compare(a.Symbol, b.Symbol) })
	if rep.Desk, err = readDesk(ctx, db, day); err != nil {
		return Report{}, err
	}
	if rep.Accounts, err = readAccountTotals(ctx, db, day); err != nil {
		return Report{}, err
	}
	bad, err := Reconcile(ctx, db, day, day)
	if err != nil {
		return Report{}, err
	}
	rep.Unreconciled = len(bad)
	rep.Mismatches = append(rep.Mismatches, bad[:min(len(bad), MismatchesListed)]...)
	return rep, nil
}

// readDesk reads day's desk rows, by currency and symbol, and totals each currency.
func readDesk(ctx context.Context, db *sql.DB, day string) ([]DeskCurrency, error) {
	type row struct {
		currency string
		DeskRow
	}
	rows, err := store.QueryAll(ctx, db, "end of day "+day+": desk", func(sc store.Scanner) (row, error) {
		var r row
		err := sc.Scan(&r.Symbol, &r.currency, &r.BBookNet, &r.ABookNet, &r.HedgeUnits, &r.Realised, &r.Markup, &r.Commission,
			&r.Swaps, &r.NBP, &r.HedgeBook)
		return r, err
	}, "SELECT `symbol`, `currency`, `bbookNet`, `abookNet`, `hedgeUnits`, `realised`, `markup`, `commission`, `swaps`, `nbp`, `hedgeBook` "+
		"FROM `fx_eod_symbol` WHERE `tradingDay` = ? ORDER BY `currency`, `symbol`", day)
	if err != nil {
		return nil, err
	}
	out := []DeskCurrency{}
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].Currency != r.currency {
			out = append(out, DeskCurrency{Currency: r.currency})
		}
		c := &out[len(out)-1]
		c.Symbols = append(c.Symbols, r.DeskRow)
		c.Total = c.Total.add(r.DeskFigures)
	}
	return out, nil
}

// readAccountTotals sums day's accounts per currency: one GROUP BY over the day's prefix of the
// primary key, however many accounts the desk has.
func readAccountTotals(ctx context.Context, db *sql.DB, day string) ([]AccountTotals, error) {
	return store.QueryAll(ctx, db, "end of day "+day+": account totals", func(sc store.Scanner) (AccountTotals, error) {
		var t AccountTotals
		err := sc.Scan(&t.Currency, &t.Accounts, &t.Balance, &t.Equity, &t.Margin, &t.Floating, &t.Unpriced, &t.OpenPositions, &t.PendingOrders)
		return t, err
	}, "SELECT `currency`, COUNT(*), SUM(`balance`), COALESCE(SUM(`equity`), 0), COALESCE(SUM(`margin`), 0), COALESCE(SUM(`floatingPnl`), 0), "+
		"SUM(CASE WHEN `equity` IS NULL THEN 1 ELSE 0 END), SUM(`openPositions`), SUM(`pendingOrders`) "+
		"FROM `fx_eod_account` WHERE `tradingDay` = ? GROUP BY `currency` ORDER BY `currency`", day)
}

// Account is one account at a day's close. The marks are nil when a price or a conversion leg
// was missing then.
type Account struct {
	AccountID                               int64
	Currency                                string
	Balance                                 decimal.Decimal
	Equity, Margin, FreeMargin, FloatingPnl *decimal.Decimal
	OpenPositions, PendingOrders            int
	ThroughDealID                           int64
	TakenAt                                 time.Time
}

// MaxAccountsPage is the most accounts one page of Accounts holds.
const MaxAccountsPage = 1000

// Accounts reads a page of day's accounts: up to limit (1 to MaxAccountsPage) with ids above
// after, by id — a range of the primary key, so the last page costs what the first does. more
// says whether accounts are left after the page's last. The day must be frozen (FrozenDay).
func Accounts(ctx context.Context, db *sql.DB, day string, after int64, limit int) (page []Account, more bool, err error) {
	if limit < 1 || limit > MaxAccountsPage {
		return nil, false, fmt.Errorf("end of day %s: a page of %d accounts", day, limit)
	}
	// One more than the page, to tell the last page from a full one without a further request.
	page, err = store.QueryAll(ctx, db, "end of day "+day+": accounts", func(sc store.Scanner) (Account, error) {
		var a Account
		var equity, margin, free, floating decimal.NullDecimal
		err := sc.Scan(&a.AccountID, &a.Currency, &a.Balance, &equity, &margin, &free, &floating, &a.OpenPositions, &a.PendingOrders,
			&a.ThroughDealID, &a.TakenAt)
		a.Equity, a.Margin, a.FreeMargin, a.FloatingPnl = orNil(equity), orNil(margin), orNil(free), orNil(floating)
		a.TakenAt = a.TakenAt.UTC()
		return a, err
	}, "SELECT `accountId`, `currency`, `balance`, `equity`, `margin`, `freeMargin`, `floatingPnl`, `openPositions`, `pendingOrders`, "+
		"`throughDealId`, `takenAt` FROM `fx_eod_account` WHERE `tradingDay` = ? AND `accountId` > ? ORDER BY `accountId` LIMIT ?", day, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}

func orNil(d decimal.NullDecimal) *decimal.Decimal {
	if !d.Valid {
		return nil
	}
	return &d.Decimal
}
