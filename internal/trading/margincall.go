package trading

import (
	"context"
	"database/sql"
	"fmt"

	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
)

// MarginCall records that account id entered margin call (in) or left it (!in), as the risk
// engine decided at this process's prices: fx_account.marginCallAt is set (or cleared) and
// account.margin_call (or account.margin_call_cleared) written, in one transaction fenced by the
// lease term, like every write the engine decides. The engine passed the work through the gate
// (gate.MarginCall) before it called. changed is false when the account was already so
// recorded — a second holder's engine, or a retry after an answer that was lost — and then
// nothing is written.
func (r *RiskDesk) MarginCall(ctx context.Context, id int64, in bool) (changed bool, err error) {
	s := r.svc
	err = s.retry(ctx, func() (err error) {
		changed, err = s.recordMarginCall(ctx, id, in)
		return err
	})
	return changed, err
}

func (s *Service) recordMarginCall(ctx context.Context, id int64, in bool) (bool, error) {
	what := "record margin call"
	if !in {
		what = "record margin call end"
	}
	tx, locks, err := s.beginFenced(ctx, gate.MarginCall, what)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var a book.Account
	var found, called bool
	var exps []book.Exposure
	locks.Query(book.RowInto(&a, &found, book.ScanAccount), book.LockAccountSQL, id)
	locks.Query(book.ScanFirst(new(bool), func(rows *sql.Rows) error { return rows.Scan(&called) }),
		"SELECT `marginCallAt` IS NOT NULL FROM `fx_account` WHERE `id` = ? FOR UPDATE", id)
	locks.Query(book.ExposuresInto(&exps), book.ExposuresSQL, id)
	if err := tx.Lock(ctx, locks, what); err != nil {
		return false, err
	}
	if !found {
		return false, book.AccountNotFound(id)
	}
	if called == in {
		return false, nil
	}
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return false, err
	}
	g := cat.AccountGroup(a.Group)
	m, ok := book.NewMarket(s.prices, cat).Metrics(a, g, a.Balance, exps)
	if !ok {
		// The engine decided at prices this read no longer has. An account it margin-called
		// has open positions, so their fills marked it: the stored marks are figures.
		m, _ = a.StoredMetrics()
	}
	payload := events.MarginCall{AccountID: a.ID, Currency: a.Currency, Balance: fx.FormatMoney(a.Currency, m.Balance),
		Equity: fx.FormatMoney(a.Currency, m.Equity), UsedMargin: fx.FormatMoney(a.Currency, m.UsedMargin), MarginCallLevel: g.MarginCallLevel.String()}
	if m.MarginLevel != nil {
		l := m.MarginLevel.StringFixed(2)
		payload.MarginLevel = &l
	}
	var b book.Batch
	t := events.AccountMarginCall
	if in {
		b.Exec("UPDATE `fx_account` SET `marginCallAt` = NOW(3) WHERE `id` = ?", id)
	} else {
		t = events.AccountMarginCallCleared
		b.Exec("UPDATE `fx_account` SET `marginCallAt` = NULL WHERE `id` = ?", id)
	}
	if err := events.Add(&b, events.Event{AccountID: a.ID, UserID: a.UserID, Type: t, Payload: payload, Term: s.term()}); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx, &b); err != nil {
		return false, fmt.Errorf("%s of account %d: %w", what, id, err)
	}
	return true, nil
}
