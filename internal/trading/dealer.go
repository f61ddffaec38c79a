package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
)

// Dealer is the dealer's side of the desk: closing a trader's position or cancelling a trader's
// resting order on their behalf. Each action is the trader's own path — the same gate, group
// commit, fence and ledger for a close, the venue first for an EXTERNAL position — with the
// reason DEALER and one audit row naming the admin, written in the action's own transaction.
type Dealer struct{ s *Service }

// Dealer returns the service's dealer side.
func (s *Service) Dealer() *Dealer { return &Dealer{s} }

// ClosePosition closes volume lots (nil: all) of any trader's position id at the desk's price
// (an EXTERNAL one at the venue first), recording the reason DEALER on the position and its
// deal, and the action in the audit log by ctx's actor in the close's own batch. Errors are those
// of Service.ClosePosition, plus audit.ErrNoActor when ctx names nobody (nothing is sent or
// written then).
func (d *Dealer) ClosePosition(ctx context.Context, id int64, volume *decimal.Decimal) (CloseResult, error) {
	// Checked before anything leaves: an EXTERNAL close is executed at the venue before its
	// booking's batch, which could no longer refuse it.
	if _, ok := audit.ActorFrom(ctx); !ok {
		return CloseResult{}, audit.ErrNoActor
	}
	s := d.s
	if err := s.admit(ctx, gate.Close, "dealer close position", slog.Int64("position_id", id)); err != nil {
		return CloseResult{}, err
	}
	res, err := s.closePosition(ctx, 0, 0, id, volume, fx.CloseDealer, nil, time.Now())
	if err == nil {
		s.log.InfoContext(ctx, "dealer closed a position", slog.Int64("position_id", id), slog.String("volume", res.Deal.Volume.String()))
	}
	return res, err
}

// dealerAudit adds the audit row of a dealer's close to the batch: the position before and after
// it (status, open volume, realized profit), what was closed and at what price. It is the last
// thing the close's Apply does, so a refused close adds no row.
func (w *closeWrite) dealerAudit(r *book.Rows, before book.Position, vol, price decimal.Decimal) error {
	stmt, args, err := audit.Row(w.Ctx, audit.Change{Action: "position.close", EntityType: "position", EntityID: itoa(w.id),
		Before: positionAudit(before, nil, nil), After: positionAudit(*r.Positions[w.id], &vol, &price)})
	if err != nil {
		return fmt.Errorf("dealer close of position %d: %w", w.id, err)
	}
	r.Writes.Exec(stmt, args...)
	return nil
}

// positionAudit is what the audit log keeps of a position a dealer closed.
func positionAudit(p book.Position, closed, price *decimal.Decimal) map[string]any {
	m := map[string]any{"accountId": p.AccountID, "symbol": p.Symbol, "side": p.Side, "status": p.Status, "volume": p.Volume.String(),
		"realizedProfit": p.RealizedProfit.String()}
	if closed != nil {
		m["closedVolume"], m["price"], m["reason"] = closed.String(), price.String(), string(fx.CloseDealer)
	}
	return m
}

// CancelOrder cancels any trader's PENDING order id, recording the action in the audit log by
// ctx's actor in the cancel's own transaction. Like a trader's cancel it moves no money and needs
// no price. Errors: ENOTFOUND, ECONFLICT once the order is no longer PENDING, audit.ErrNoActor.
func (d *Dealer) CancelOrder(ctx context.Context, id int64) (book.Order, error) {
	if _, ok := audit.ActorFrom(ctx); !ok {
		return book.Order{}, audit.ErrNoActor
	}
	s := d.s
	var o book.Order
	var partner *int64 // an OCO leg's other leg, cancelled with it (oco.go)
	err := s.retry(ctx, func() (err error) {
		o, partner, err = s.dealerCancel(ctx, id)
		return err
	})
	if err != nil {
		return book.Order{}, err
	}
	s.notify(ctx, risk.Change{Kind: risk.OrderCancelled, Order: risk.Order{ID: id}})
	if partner != nil {
		s.notifyCancelled(ctx, *partner)
	}
	s.log.InfoContext(ctx, "dealer cancelled an order", slog.Int64("order_id", id), slog.Int64("account_id", o.AccountID))
	return o, nil
}

// dealerCancel is CancelOrder's transaction: the order locked, cancelled, audited.
func (s *Service) dealerCancel(ctx context.Context, id int64) (book.Order, *int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return book.Order{}, nil, fmt.Errorf("dealer cancel order %d: begin: %w", id, err)
	}
	defer tx.Rollback()
	o, err := book.ScanOrder(tx.QueryRowContext(ctx, "SELECT "+book.OrderCols+" FROM `fx_order` o WHERE o.`id` = ? FOR UPDATE", id))
	if errors.Is(err, sql.ErrNoRows) {
		return book.Order{}, nil, fx.Errorf(fx.ENOTFOUND, "Order %d not found.", id)
	}
	if err != nil {
		return book.Order{}, nil, fmt.Errorf("dealer cancel order %d: %w", id, err)
	}
	if o.Status != fx.OrderPending {
		return book.Order{}, nil, fx.Errorf(fx.ECONFLICT, "Order %d is %s and can no longer be cancelled.", id, o.Status)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_order` SET `status` = 'CANCELLED' WHERE `id` = ? AND `status` = 'PENDING'", id); err != nil {
		return book.Order{}, nil, fmt.Errorf("dealer cancel order %d: %w", id, err)
	}
	partner, err := s.cancelPartnerTx(ctx, tx, o)
	if err != nil {
		return book.Order{}, nil, fmt.Errorf("dealer cancel order %d: %w", id, err)
	}
	after := o
	after.Status = fx.OrderCancelled
	if err := audit.Record(ctx, tx, audit.Change{Action: "order.cancel", EntityType: "order", EntityID: itoa(id),
		Before: orderAudit(o), After: orderAudit(after)}); err != nil {
		return book.Order{}, nil, err
	}
	e, err := s.orderEvent(ctx, tx, events.OrderCancelled, id)
	if err != nil {
		return book.Order{}, nil, fmt.Errorf("dealer cancel order %d: %w", id, err)
	}
	if err := events.Record(ctx, tx, e); err != nil {
		return book.Order{}, nil, fmt.Errorf("dealer cancel order %d: %w", id, err)
	}
	if err := store.Commit(tx); err != nil {
		return book.Order{}, nil, fmt.Errorf("dealer cancel order %d: commit: %w", id, err)
	}
	return after, partner, nil
}

// orderAudit is what the audit log keeps of an order a dealer cancelled.
func orderAudit(o book.Order) map[string]any {
	m := map[string]any{"accountId": o.AccountID, "symbol": o.Symbol, "side": o.Side, "type": o.Type, "volume": o.Volume.String(), "status": o.Status}
	if o.Price != nil {
		m["price"] = o.Price.String()
	}
	if o.Status == fx.OrderCancelled {
		m["reason"] = string(fx.CloseDealer)
	}
	return m
}
