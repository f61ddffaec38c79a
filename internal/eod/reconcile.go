package eod

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Mismatch is one account whose frozen balance does not follow from its previous one and the
// day's deals.
type Mismatch struct {
	TradingDay string `json:"tradingDay"`
	AccountID  int64  `json:"accountId"`
	Currency   string `json:"currency"`
	Previous   string `json:"previousClose"` // the previous frozen balance (0 before the first)
	Deals      string `json:"dealsSum"`      // Σ the day's deals
	Balance    string `json:"balance"`       // this day's frozen balance
	Difference string `json:"difference"`    // balance − (previous + deals)
}

// Reconcile checks every frozen day from first to last (dates, inclusive): for each account,
// the previous frozen day's balance plus the account's deals after that snapshot's last deal up
// to this one's must equal this day's balance. An account with no earlier snapshot starts from
// zero and its first deal. It returns the accounts that do not add up.
func Reconcile(ctx context.Context, db *sql.DB, first, last string) ([]Mismatch, error) {
	days, err := store.QueryAll(ctx, db, "end of day: frozen days", func(sc store.Scanner) (string, error) {
		var d string
		err := sc.Scan(&d)
		return d, err
	}, "SELECT DATE_FORMAT(`tradingDay`, '%Y-%m-%d') FROM `fx_eod_day` WHERE `tradingDay` >= ? AND `tradingDay` <= ? ORDER BY `tradingDay`", first, last)
	if err != nil {
		return nil, err
	}
	var out []Mismatch
	for _, day := range days {
		var prev sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT DATE_FORMAT(MAX(`tradingDay`), '%Y-%m-%d') FROM `fx_eod_day` WHERE `tradingDay` < ?", day).Scan(&prev); err != nil {
			return nil, fmt.Errorf("end of day %s: previous day: %w", day, err)
		}
		// Each account's deals are summed by their own subquery: the two snapshots' ids are then
		// a condition on the account's (accountId, id) index entries, and only the day's deals
		// are read. Joined and grouped, the deals are reached by accountId alone and every deal
		// the account ever had is read, a cost that would grow with the ledger's age.
		bad, err := store.QueryAll(ctx, db, "end of day "+day+": reconcile", func(sc store.Scanner) (Mismatch, error) {
			m := Mismatch{TradingDay: day}
			var bal, before, deals decimal.Decimal
			if err := sc.Scan(&m.AccountID, &m.Currency, &bal, &before, &deals); err != nil {
				return m, err
			}
			m.Balance, m.Previous, m.Deals = fx.FormatMoney(m.Currency, bal), fx.FormatMoney(m.Currency, before), fx.FormatMoney(m.Currency, deals)
			m.Difference = fx.FormatMoney(m.Currency, bal.Sub(before).Sub(deals))
			return m, nil
		}, "SELECT x.`accountId`, x.`currency`, x.`balance`, x.`before`, x.`deals` FROM (SELECT s.`accountId`, s.`currency`, s.`balance`, "+
			"COALESCE(p.`balance`, 0) AS `before`, COALESCE((SELECT SUM(d.`amount`) FROM `fx_deal` d WHERE d.`accountId` = s.`accountId` "+
			"AND d.`id` > COALESCE(p.`throughDealId`, 0) AND d.`id` <= s.`throughDealId` LIMIT 1), 0) AS `deals` FROM `fx_eod_account` s "+
			"LEFT JOIN `fx_eod_account` p ON p.`tradingDay` = ? AND p.`accountId` = s.`accountId` WHERE s.`tradingDay` = ?) x "+
			"WHERE x.`balance` <> x.`before` + x.`deals` ORDER BY x.`accountId`", prev, day)
		if err != nil {
			return nil, err
		}
		out = append(out, bad...)
	}
	return out, nil
}

// reportReconciliation raises eod-reconciliation-failed naming the accounts, or resolves it
// when every checked day adds up.
func (j *Job) reportReconciliation(ctx context.Context, bad []Mismatch) {
	if len(bad) == 0 {
		j.resolve(ctx, AlertReconciliation)
		return
	}
	const named = 50
	parts := make([]string, 0, min(len(bad), named))
	for _, m := range bad[:min(len(bad), named)] {
		parts = append(parts, "account "+strconv.FormatInt(m.AccountID, 10)+" on "+m.TradingDay+": previous close "+m.Previous+
			" + the day's deals "+m.Deals+" ≠ frozen balance "+m.Balance+" "+m.Currency+" (difference "+m.Difference+")")
	}
	list := strings.Join(parts, "; ")
	if len(bad) > named {
		list += fmt.Sprintf("; and %d more", len(bad)-named)
	}
	msg := fmt.Sprintf("End of day does not reconcile: %d account-day(s) — %s. The frozen balance is the ledger's at the close; "+
		"a difference means a deal of that day was changed or removed after it, outside the desk. The snapshot is not rewritten.", len(bad), list)
	j.log.ErrorContext(ctx, "end of day does not reconcile", slog.Int("accountDays", len(bad)), slog.String("accounts", list))
	j.raise(ctx, AlertReconciliation, alert.Critical, msg, map[string]any{"accounts": bad})
}

// reportMissing raises eod-prices-missing naming the days nobody captured, or resolves it.
func (j *Job) reportMissing(ctx context.Context, days []string) {
	if len(days) == 0 {
		j.resolve(ctx, AlertPricesMissing)
		return
	}
	msg := fmt.Sprintf("No closing prices were captured at the rollover of %s: neither the lease holder nor the cron process was "+
		"running then. The day is not frozen (its deals fall into the next frozen day); nothing is marked at later prices.",
		strings.Join(days, ", "))
	j.log.WarnContext(ctx, "end of day: days without closing prices", slog.Any("days", days))
	j.raise(ctx, AlertPricesMissing, alert.Warning, msg, map[string]any{"days": days})
}

func (j *Job) raise(ctx context.Context, code string, sev alert.Severity, msg string, details any) {
	if j.cfg.Alerts == nil {
		return
	}
	if err := j.cfg.Alerts.Raise(ctx, code, sev, msg, details); err != nil {
		j.log.WarnContext(ctx, "end of day: cannot raise alert", slog.String("code", code), slog.Any("err", err))
	}
}

func (j *Job) resolve(ctx context.Context, code string) {
	if j.cfg.Alerts == nil {
		return
	}
	if err := j.cfg.Alerts.Resolve(ctx, code); err != nil {
		j.log.WarnContext(ctx, "end of day: cannot resolve alert", slog.String("code", code), slog.Any("err", err))
	}
}
