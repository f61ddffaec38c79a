package swaps

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/store"
)

type pendingRow struct {
	charge
	accountCcy string
}

// retryPending converts what it can of the pending charges and charges it; the rest wait, with
// their legs pinned.
func (r *run) retryPending(ctx context.Context) error {
	rows, err := r.cfg.DB.QueryContext(ctx, "SELECT `positionId`, `rolloverDate`, `accountId`, `symbol`, `side`, `volume`, `days`, "+
		"`amountQuote`, `quoteCurrency`, `accountCurrency` FROM `fx_swap_charge` WHERE `status` = 'PENDING' ORDER BY `positionId`, `rolloverDate`")
	if err != nil {
		return fmt.Errorf("swaps: read pending charges: %w", err)
	}
	var ready, waiting []pendingRow
	for rows.Next() {
		var p pendingRow
		var date time.Time
		if err := rows.Scan(&p.position.id, &date, &p.position.account, &p.position.symbol, &p.position.side, &p.position.volume,
			&p.days, &p.amountQuote, &p.quoteCcy, &p.accountCcy); err != nil {
			rows.Close()
			return fmt.Errorf("swaps: read pending charges: %w", err)
		}
		p.date = date.Format("2006-01-02")
		amount, missing, ok := r.conv.Convert(p.amountQuote, p.quoteCcy, p.accountCcy)
		if !ok {
			for _, s := range missing {
				r.legs[s] = true
			}
			waiting = append(waiting, p)
			continue
		}
		p.amount = amount
		ready = append(ready, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("swaps: read pending charges: %w", err)
	}
	for len(ready) > 0 {
		n := min(len(ready), r.cfg.Batch)
		var got int
		err := store.RetryRolledBack(ctx, func() error {
			var err error
			got, err = r.settlePending(ctx, ready[:n])
			return err
		})
		if err != nil {
			return fmt.Errorf("swaps: charge pending: %w", err)
		}
		r.res["retried"] += got
		ready = ready[n:]
	}
	for len(waiting) > 0 {
		n := min(len(waiting), r.cfg.Batch)
		var cond strings.Builder
		args := []any{}
		for i, p := range waiting[:n] {
			if i > 0 {
				cond.WriteString(", ")
			}
			cond.WriteString("(?, ?)")
			args = append(args, p.position.id, p.date)
		}
		if _, err := r.cfg.DB.ExecContext(ctx, "UPDATE `fx_swap_charge` SET `attempts` = `attempts` + 1, `lastTriedAt` = NOW(3) "+
			"WHERE `status` = 'PENDING' AND (`positionId`, `rolloverDate`) IN ("+cond.String()+")", args...); err != nil {
			return fmt.Errorf("swaps: note pending retries: %w", err)
		}
		r.res["stillPending"] += n
		waiting = waiting[n:]
	}
	return nil
}

// settlePending charges converted pending rows in one transaction: accounts, then positions,
// then the pending rows themselves are locked, and only rows still PENDING are charged. A
// position closed since its rollover is still charged: the amount was fixed while it was open.
func (r *run) settlePending(ctx context.Context, batch []pendingRow) (int, error) {
	tx, err := r.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var accountIDs, positionIDs []int64
	for _, p := range batch {
		accountIDs = append(accountIDs, p.position.account)
		positionIDs = append(positionIDs, p.position.id)
	}
	var accounts map[int64]*lockedAccount
	var positions []lockedPosition
	lock := &book.Batch{}
	lockAccounts(lock, accountIDs, &accounts)
	lockPositions(lock, positionIDs, &positions)
	if err := lock.Run(ctx, tx); err != nil {
		return 0, err
	}
	byID := make(map[int64]lockedPosition, len(positions))
	for _, p := range positions {
		byID[p.id] = p
	}
	var cond strings.Builder
	args := []any{}
	for i, p := range batch {
		if i > 0 {
			cond.WriteString(", ")
		}
		cond.WriteString("(?, ?)")
		args = append(args, p.position.id, p.date)
	}
	rows, err := tx.QueryContext(ctx, "SELECT `positionId`, `rolloverDate` FROM `fx_swap_charge` WHERE `status` = 'PENDING' "+
		"AND (`positionId`, `rolloverDate`) IN ("+cond.String()+") FOR UPDATE", args...)
	if err != nil {
		return 0, fmt.Errorf("lock pending charges: %w", err)
	}
	still := map[string]bool{}
	for rows.Next() {
		var id int64
		var d time.Time
		if err := rows.Scan(&id, &d); err != nil {
			rows.Close()
			return 0, fmt.Errorf("lock pending charges: %w", err)
		}
		still[DealKey(id, d.Format("2006-01-02"))] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("lock pending charges: %w", err)
	}

	var charges []charge
	var done strings.Builder
	doneArgs := []any{}
	var caseAmount strings.Builder
	caseArgs := []any{}
	for _, p := range batch {
		if !still[DealKey(p.position.id, p.date)] {
			continue
		}
		lp, ok := byID[p.position.id]
		if !ok {
			return 0, fmt.Errorf("pending charge of position %d: position not found", p.position.id)
		}
		c := p.charge
		c.position.order, c.position.status = lp.order, lp.status
		charges = append(charges, c)
		if len(doneArgs) > 0 {
			done.WriteString(", ")
		}
		done.WriteString("(?, ?)")
		doneArgs = append(doneArgs, p.position.id, p.date)
		caseAmount.WriteString(" WHEN `positionId` = ? AND `rolloverDate` = ? THEN ?")
		caseArgs = append(caseArgs, p.position.id, p.date, p.amount)
	}
	if len(charges) == 0 {
		return 0, nil
	}
	write := &book.Batch{}
	if err := postCharges(write, accounts, charges); err != nil {
		return 0, err
	}
	accrue(write, "", nil, charges)
	write.Exec("UPDATE `fx_swap_charge` SET `status` = 'CHARGED', `settledAt` = NOW(3), `lastTriedAt` = NOW(3), `attempts` = `attempts` + 1, "+
		"`amount` = CASE"+caseAmount.String()+" END WHERE (`positionId`, `rolloverDate`) IN ("+done.String()+")", append(caseArgs, doneArgs...)...)
	if err := write.Run(ctx, tx); err != nil {
		return 0, fmt.Errorf("charge %d pending charges: %w", len(charges), err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return len(charges), nil
}

// expire gives up on pending charges whose rollover is ExpireAfter old, and says so.
func (r *run) expire(ctx context.Context) error {
	through, err := expiredThrough(r.at, r.cfg.ExpireAfter)
	if err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	tx, err := r.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT `positionId`, `rolloverDate`, `accountId`, `symbol`, `amountQuote`, `quoteCurrency`, "+
		"`accountCurrency`, `missingLegs`, `attempts` FROM `fx_swap_charge` WHERE `status` = 'PENDING' AND `rolloverDate` <= ? "+
		"ORDER BY `rolloverDate`, `positionId` FOR UPDATE", through)
	if err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	type expired struct {
		PositionID    int64  `json:"positionId"`
		Date          string `json:"date"`
		AccountID     int64  `json:"accountId"`
		Symbol        string `json:"symbol"`
		AmountQuote   string `json:"amountQuote"`
		QuoteCurrency string `json:"quoteCurrency"`
		Currency      string `json:"accountCurrency"`
		MissingLegs   string `json:"missingLegs"`
		Attempts      int    `json:"attempts"`
	}
	var all []expired
	for rows.Next() {
		var e expired
		var d time.Time
		var amt decimal.Decimal
		if err := rows.Scan(&e.PositionID, &d, &e.AccountID, &e.Symbol, &amt, &e.QuoteCurrency, &e.Currency, &e.MissingLegs, &e.Attempts); err != nil {
			rows.Close()
			return fmt.Errorf("swaps: expire: %w", err)
		}
		e.Date, e.AmountQuote = d.Format("2006-01-02"), amt.String()
		all = append(all, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	if len(all) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_swap_charge` SET `status` = 'EXPIRED', `settledAt` = NOW(3) "+
		"WHERE `status` = 'PENDING' AND `rolloverDate` <= ?", through); err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("swaps: expire: commit: %w", err)
	}
	r.res["expired"] = len(all)

	const named = 50
	parts := make([]string, 0, min(len(all), named))
	for _, e := range all[:min(len(all), named)] {
		legs := e.MissingLegs
		if legs == "" {
			legs = "no hub pair"
		}
		parts = append(parts, fmt.Sprintf("position %d on %s (%s, account %d, %s %s, missing %s)",
			e.PositionID, e.Date, e.Symbol, e.AccountID, e.AmountQuote, e.QuoteCurrency, legs))
	}
	list := strings.Join(parts, "; ")
	if len(all) > named {
		list += fmt.Sprintf("; and %d more", len(all)-named)
	}
	msg := fmt.Sprintf("%d rollover charge(s) expired uncharged after %s because no conversion to the account currency was available: %s. "+
		"The quote mirror (or the tick engine) never supplied the legs; the charges are kept as EXPIRED in fx_swap_charge.",
		len(all), r.cfg.ExpireAfter, list)
	r.log.ErrorContext(ctx, "swap charges expired uncharged", slog.Int("count", len(all)), slog.String("charges", list))
	if r.cfg.Alerts != nil {
		if err := r.cfg.Alerts.Raise(ctx, AlertExpired, alert.Critical, msg, map[string]any{"charges": all}); err != nil {
			r.log.WarnContext(ctx, "swaps: cannot raise alert", slog.String("code", AlertExpired), slog.Any("err", err))
		}
	}
	return nil
}
