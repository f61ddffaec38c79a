package trading

import (
	"context"
	"database/sql"
	"fmt"

	"fxdesk/internal/book"
	"fxdesk/internal/events"
)

// changeOne runs update, which changes at most one row of account's (an order's status, a
// position's stops), in a transaction of its own with the event told of it: told(tx) reads the
// changed row under the lock the update took and returns the event, written before COMMIT. It
// returns the rows the update matched; with none it writes nothing.
func (s *Service) changeOne(ctx context.Context, what string, told func(tx *sql.Tx) (events.Event, error), update string, args ...any) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, update, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, err
	}
	e, err := told(tx)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := events.Record(ctx, tx, e); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%s: commit: %w", what, err)
	}
	return n, nil
}

// ownerOf is account id's user, for its events.
func ownerOf(ctx context.Context, q book.Querier, id int64) (int64, error) {
	var user int64
	if err := q.QueryRowContext(ctx, "SELECT `userId` FROM `fx_account` WHERE `id` = ?", id).Scan(&user); err != nil {
		return 0, fmt.Errorf("owner of account %d: %w", id, err)
	}
	return user, nil
}

// orderEvent is t (order.cancelled) of order id as the transaction q left it.
func (s *Service) orderEvent(ctx context.Context, q book.Querier, t events.Type, id int64) (events.Event, error) {
	o, err := book.ScanOrder(q.QueryRowContext(ctx, "SELECT "+book.OrderCols+" FROM `fx_order` o WHERE o.`id` = ?", id))
	if err != nil {
		return events.Event{}, err
	}
	user, err := ownerOf(ctx, q, o.AccountID)
	if err != nil {
		return events.Event{}, err
	}
	return events.Event{AccountID: o.AccountID, UserID: user, Type: t, Payload: events.OrderOf(o), Term: s.term()}, nil
}
