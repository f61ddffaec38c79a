package invariant

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// EOD is the end of day's four tables as one read saw them (internal/eod): the days frozen, the
// account and desk rows, the closing prices. The snapshot holds one; the soak also reads them
// after every rollover run, so that eodUnchanged can hold each row to what it was when first seen.
type EOD struct {
	Days     []dbEODDay     // by tradingDay
	Accounts []dbEODAccount // by tradingDay, accountId
	Symbols  []dbEODSymbol  // by tradingDay, symbol, currency
	Prices   []dbEODPrice   // by tradingDay, symbol
}

// dbEODDay is one row of fx_eod_day: the day complete.
type dbEODDay struct {
	Day        string // YYYY-MM-DD, New York
	RolloverAt time.Time
	Mode       string // ON_TIME or CAUGHT_UP
	Accounts   int
	FrozenAt   time.Time
	FrozenBy   string // host:pid
}

// dbEODAccount is one account at the close of its day; the marks are NULL when a price was
// missing.
type dbEODAccount struct {
	Day                                  string
	Account                              int64
	Currency                             string
	Balance                              decimal.Decimal
	Equity, Margin, FreeMargin, Floating decimal.NullDecimal
	OpenPositions, PendingOrders         int
	Through                              int64 // the last deal the balance includes (0: none)
	TakenAt                              time.Time
}

// dbEODSymbol is the desk on one symbol and account currency at the close; Figures are its
// figures as text, in column order, for eodUnchanged.
type dbEODSymbol struct {
	Day, Symbol, Currency string
	Figures               string
	TakenAt               time.Time
}

// dbEODPrice is one closing price.
type dbEODPrice struct {
	Day, Symbol          string
	Bid, Ask             decimal.Decimal
	QuotedAt, CapturedAt time.Time
	CapturedBy           string
}

// EODRow is one end-of-day row as text: its table, its key, and every value it holds. Two reads
// of a row that was never rewritten give the same Values.
type EODRow struct {
	Table, Key, Values string
	Seen               time.Time // when the read that gave it was taken (a snapshot) or had ended
}

// ID names the row across reads.
func (r EODRow) ID() string { return r.Table + " " + r.Key }

// Rows is every row of e as text, read at seen.
func (e *EOD) Rows(seen time.Time) []EODRow {
	var out []EODRow
	add := func(table, key string, values ...any) {
		parts := make([]string, len(values))
		for i, v := range values {
			parts[i] = valueText(v)
		}
		out = append(out, EODRow{Table: table, Key: key, Values: strings.Join(parts, " | "), Seen: seen})
	}
	for _, d := range e.Days {
		add("fx_eod_day", d.Day, d.RolloverAt, d.Mode, d.Accounts, d.FrozenAt, d.FrozenBy)
	}
	for _, a := range e.Accounts {
		add("fx_eod_account", a.Day+" account "+strconv.FormatInt(a.Account, 10), a.Currency, a.Balance, a.Equity, a.Margin, a.FreeMargin,
			a.Floating, a.OpenPositions, a.PendingOrders, a.Through, a.TakenAt)
	}
	for _, s := range e.Symbols {
		add("fx_eod_symbol", s.Day+" "+s.Symbol+" "+s.Currency, s.Figures, s.TakenAt)
	}
	for _, p := range e.Prices {
		add("fx_eod_price", p.Day+" "+p.Symbol, p.Bid, p.Ask, p.QuotedAt, p.CapturedAt, p.CapturedBy)
	}
	return out
}

// valueText is one value as EODRow holds it: a decimal by its value (the column's scale is not
// a change), a time in UTC to the microsecond.
func valueText(v any) string {
	switch v := v.(type) {
	case decimal.Decimal:
		return v.String()
	case decimal.NullDecimal:
		if !v.Valid {
			return "NULL"
		}
		return v.Decimal.String()
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

// ReadEOD reads the end of day's tables in one REPEATABLE READ read-only transaction.
func ReadEOD(ctx context.Context, db *sql.DB, scope Scope) (*EOD, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("begin end of day read: %w", err)
	}
	defer tx.Rollback()
	return readEOD(ctx, tx, scope)
}

func readEOD(ctx context.Context, tx *sql.Tx, scope Scope) (*EOD, error) {
	e := &EOD{}
	const day = "DATE_FORMAT(`tradingDay`, '%Y-%m-%d')"
	after := scope.afterDay()
	steps := []struct {
		q    string
		args []any
		each func(*sql.Rows) error
	}{
		{"SELECT " + day + ", `rolloverAt`, `mode`, `accounts`, `frozenAt`, `frozenBy` FROM `fx_eod_day` WHERE `tradingDay` > ? ORDER BY `tradingDay`", []any{after}, func(r *sql.Rows) error {
			var d dbEODDay
			err := r.Scan(&d.Day, &d.RolloverAt, &d.Mode, &d.Accounts, &d.FrozenAt, &d.FrozenBy)
			e.Days = append(e.Days, d)
			return err
		}},
		{"SELECT " + day + ", `accountId`, `currency`, `balance`, `equity`, `margin`, `freeMargin`, `floatingPnl`, `openPositions`, `pendingOrders`, " +
			"`throughDealId`, `takenAt` FROM `fx_eod_account` WHERE `tradingDay` > ? AND `accountId` >= ? ORDER BY `tradingDay`, `accountId`", []any{after, scope.FirstAccount}, func(r *sql.Rows) error {
			var a dbEODAccount
			err := r.Scan(&a.Day, &a.Account, &a.Currency, &a.Balance, &a.Equity, &a.Margin, &a.FreeMargin, &a.Floating, &a.OpenPositions,
				&a.PendingOrders, &a.Through, &a.TakenAt)
			e.Accounts = append(e.Accounts, a)
			return err
		}},
		{"SELECT " + day + ", `symbol`, `currency`, `bbookNet`, `abookNet`, `hedgeUnits`, `realised`, `markup`, `commission`, `swaps`, `nbp`, " +
			"`hedgeBook`, `takenAt` FROM `fx_eod_symbol` WHERE `tradingDay` > ? ORDER BY `tradingDay`, `symbol`, `currency`", []any{after}, func(r *sql.Rows) error {
			var s dbEODSymbol
			f := make([]decimal.Decimal, 9)
			err := r.Scan(&s.Day, &s.Symbol, &s.Currency, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &s.TakenAt)
			parts := make([]string, len(f))
			for i, v := range f {
				parts[i] = v.String()
			}
			s.Figures = strings.Join(parts, " | ")
			e.Symbols = append(e.Symbols, s)
			return err
		}},
		{"SELECT " + day + ", `symbol`, `bid`, `ask`, `quotedAt`, `capturedAt`, `capturedBy` FROM `fx_eod_price` WHERE `tradingDay` > ? ORDER BY `tradingDay`, `symbol`", []any{after}, func(r *sql.Rows) error {
			var p dbEODPrice
			err := r.Scan(&p.Day, &p.Symbol, &p.Bid, &p.Ask, &p.QuotedAt, &p.CapturedAt, &p.CapturedBy)
			e.Prices = append(e.Prices, p)
			return err
		}},
	}
	for _, st := range steps {
		if err := scanRows(ctx, tx, st.q, st.each, st.args...); err != nil {
			return nil, err
		}
	}
	return e, nil
}
