package eod

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/pnl"
)

// deskKey is one row of the desk's day: a symbol in one account currency.
type deskKey struct{ symbol, currency string }

// deskRow is the desk's day on one symbol and account currency.
type deskRow struct {
	bbookNet, abookNet, hedgeUnits decimal.Decimal
	figures                        pnl.Figures
}

const insertDesk = "INSERT INTO `fx_eod_symbol` (`tradingDay`, `symbol`, `currency`, `bbookNet`, `abookNet`, `hedgeUnits`, `realised`, " +
	"`markup`, `commission`, `swaps`, `nbp`, `hedgeBook`) VALUES "
const insertDeskTail = " ON DUPLICATE KEY UPDATE `symbol` = `symbol`"

// freezeDesk writes the desk's rows of the day: the clients' open lots at the close on the
// B-book and at the venue, the desk's hedge units, and the day's figures from the desk's side,
// read as the dealer's P&L reads them over the day (the previous weekday rollover to this one).
func (j *Job) freezeDesk(ctx context.Context, c cut, closing *Closing) error {
	cat, err := catalog.Load(ctx, j.cfg.DB)
	if err != nil {
		return fmt.Errorf("end of day %s: desk: %w", c.day.Date, err)
	}
	rows := map[deskKey]*deskRow{}
	at := func(symbol, currency string) *deskRow {
		k := deskKey{symbol, currency}
		r := rows[k]
		if r == nil {
			r = &deskRow{}
			rows[k] = r
		}
		return r
	}
	from, args := c.positions("")
	q, err := j.cfg.DB.QueryContext(ctx, "SELECT p.`symbol`, a.`currency`, "+
		"SUM(CASE WHEN p.`external` THEN 0 WHEN p.`side` = 'BUY' THEN p.`v` ELSE -p.`v` END), "+
		"SUM(CASE WHEN NOT p.`external` THEN 0 WHEN p.`side` = 'BUY' THEN p.`v` ELSE -p.`v` END) FROM "+from+
		" JOIN `fx_account` a ON a.`id` = p.`accountId` WHERE p.`v` > 0 GROUP BY p.`symbol`, a.`currency`", args...)
	if err != nil {
		return fmt.Errorf("end of day %s: desk exposure: %w", c.day.Date, err)
	}
	for q.Next() {
		var symbol, currency string
		var b, a decimal.Decimal
		if err := q.Scan(&symbol, &currency, &b, &a); err != nil {
			q.Close()
			return fmt.Errorf("end of day %s: desk exposure: %w", c.day.Date, err)
		}
		r := at(symbol, currency)
		r.bbookNet, r.abookNet = b, a
	}
	q.Close()
	if err := q.Err(); err != nil {
		return fmt.Errorf("end of day %s: desk exposure: %w", c.day.Date, err)
	}

	hq := "SELECT `symbol`, SUM(`units`) FROM `fx_hedge_position` WHERE `status` = 'OPEN' GROUP BY `symbol`"
	var hargs []any
	if !c.onTime {
		hq = "SELECT `symbol`, SUM(`units`) FROM `fx_hedge_position` WHERE `openedAt` < ? AND (`status` = 'OPEN' OR `closedAt` >= ?) GROUP BY `symbol`"
		hargs = []any{c.at(), c.at()}
	}
	q, err = j.cfg.DB.QueryContext(ctx, hq, hargs...)
	if err != nil {
		return fmt.Errorf("end of day %s: hedge book: %w", c.day.Date, err)
	}
	for q.Next() {
		var symbol string
		var units decimal.Decimal
		if err := q.Scan(&symbol, &units); err != nil {
			q.Close()
			return fmt.Errorf("end of day %s: hedge book: %w", c.day.Date, err)
		}
		// The hedge book sits under its symbol's quote currency, as in the dealer's P&L.
		ccy := ""
		if in, ok := cat.Instruments[symbol]; ok {
			ccy = in.Quote
		}
		at(symbol, ccy).hedgeUnits = units
	}
	q.Close()
	if err := q.Err(); err != nil {
		return fmt.Errorf("end of day %s: hedge book: %w", c.day.Date, err)
	}

	rep, err := pnl.Read(ctx, j.cfg.DB, cat, closing, previousDay(c.day).At, c.day.At, false)
	if err != nil {
		return fmt.Errorf("end of day %s: the day's figures: %w", c.day.Date, err)
	}
	for _, cur := range rep.Currencies {
		for _, s := range cur.Symbols {
			at(s.Symbol, cur.Currency).figures = s.Figures
		}
	}
	if len(rows) == 0 {
		return nil
	}
	keys := make([]deskKey, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].symbol != keys[b].symbol {
			return keys[a].symbol < keys[b].symbol
		}
		return keys[a].currency < keys[b].currency
	})
	var sb strings.Builder
	vals := make([]any, 0, len(keys)*12)
	for i, k := range keys {
		r := rows[k]
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		f := r.figures
		vals = append(vals, c.day.Date, k.symbol, k.currency, r.bbookNet, r.abookNet, r.hedgeUnits,
			f.BBookRealised, f.MarkupBBook.Add(f.MarkupABook), f.Commission, f.Swaps, f.NBPCost, f.HedgeBook)
	}
	if _, err := j.cfg.DB.ExecContext(ctx, insertDesk+sb.String()+insertDeskTail, vals...); err != nil {
		return fmt.Errorf("end of day %s: write desk: %w", c.day.Date, err)
	}
	return nil
}

// previousDay is the weekday rollover before day: the start of day's trading (a Monday's day
// runs from Friday's rollover).
func previousDay(day fx.Rollover) fx.Rollover {
	p := day.Previous()
	for p.Weekday() == 0 || p.Weekday() == 6 {
		p = p.Previous()
	}
	return p
}
