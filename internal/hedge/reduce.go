package hedge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/store"
	"fxdesk/internal/venue"
)

// Reducing a RULE hedge to its share of what is left of its client position: a partial close of
// the hedge position's venue trade, sent as a hedge order of its own (fx_hedge_order with
// reducesPositionId, migrations/000023) so that identity comes before action as for an open. The
// venue's close carries no client id of its own; an unknown outcome is resolved by the
// reconciler from the trade (internal/execution, plan_hedge.go) and never re-sent.

// ErrReduceNotDue: the reduction was not written because the hedge position is not open with
// the units it was decided on, or a hedge order of its client position is SENDING: someone
// decided or sent meanwhile. Nothing was sent.
var ErrReduceNotDue = errors.New("the hedge position changed or has a hedge order in flight")

// Reduce closes part of open RULE hedge position positionID at the venue so that it holds leave
// (signed venue units, whole, the same sign as from and smaller) where it held from. The
// identity row (SENDING, reducesPositionId, leaveUnits) is written under the lease's fence only
// while the position still holds from and no hedge order of its client position is SENDING; the
// send passes the gate; the venue's fill is booked on the order (FILLED, its price) and the
// position (its units, its realised P&L). Errors are Open's: ErrReduceNotDue instead of
// ErrAlreadyHedged; ErrRejected leaves the order REJECTED and the position as it was (the next
// pass decides again); venue.ErrOutcomeUnknown leaves it SENDING for the reconciler.
func (b *Book) Reduce(ctx context.Context, positionID int64, from, leave decimal.Decimal) error {
	if b.cfg.Venue == nil {
		return fx.Errorf(fx.EUNAVAILABLE, "No execution venue is configured on this desk (FXDESK_VENUE): the hedge book cannot trade.")
	}
	if !leave.Equal(leave.Truncate(0)) || from.IsZero() || leave.Abs().GreaterThanOrEqual(from.Abs()) || (!leave.IsZero() && leave.Sign() != from.Sign()) {
		return fx.Errorf(fx.EINVALID, "A hedge position of %s units is reduced to fewer whole units on its side, not to %s.", from, leave)
	}
	var tradeID, symbol string
	var client sql.NullInt64
	err := b.cfg.DB.QueryRowContext(ctx, "SELECT `venueTradeId`, `symbol`, `clientPositionId` FROM `fx_hedge_position` WHERE `id` = ? AND `status` = 'OPEN'", positionID).
		Scan(&tradeID, &symbol, &client)
	if errors.Is(err, sql.ErrNoRows) {
		return fx.Errorf(fx.ENOTFOUND, "Hedge position %d is not open.", positionID)
	}
	if err != nil {
		return fmt.Errorf("hedge reduce %d: %w", positionID, err)
	}
	if !client.Valid {
		return fx.Errorf(fx.EINVALID, "Hedge position %d is the hedger's; only a RULE hedge follows a client position.", positionID)
	}
	closing := leave.Sub(from) // signed: opposite to the position
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Bound)
	defer cancel()
	attrs := []slog.Attr{slog.Int64("hedge_position_id", positionID), slog.String("trade_id", tradeID), slog.String("symbol", symbol),
		slog.String("units", from.String()), slog.String("leave_units", leave.String())}
	if r, ok := b.cfg.Venue.(interface{ Reachable() bool }); ok && !r.Reachable() {
		return fmt.Errorf("hedge reduce %d: the venue is unreachable: %w", positionID, venue.ErrNotSent)
	}
	if err := b.cfg.Gate.Admit(ctx, gate.VenueSend, append(attrs, slog.String("op", "reduce hedge position"))...); err != nil {
		return err
	}
	var id int64
	err = store.RetryRolledBack(ctx, func() error {
		return b.fenced(ctx, "write hedge reduction", func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, "INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `clientPositionId`, `reducesPositionId`, `leaveUnits`, `status`, `sentAt`) "+
				"SELECT ?, ?, 'RULE', ?, ?, ?, 'SENDING', NOW(3) FROM DUAL WHERE "+
				"EXISTS (SELECT 1 FROM `fx_hedge_position` WHERE `id` = ? AND `status` = 'OPEN' AND `units` = ?) AND "+
				"NOT EXISTS (SELECT 1 FROM `fx_hedge_order` WHERE `clientPositionId` = ? AND `status` = 'SENDING')",
				symbol, closing, client.Int64, positionID, leave, positionID, from, client.Int64)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				return fmt.Errorf("hedge position %d: %w", positionID, ErrReduceNotDue)
			}
			id, err = res.LastInsertId()
			return err
		})
	})
	if err != nil {
		return err
	}
	defer b.hold("o" + strconv.FormatInt(id, 10))()
	defer b.hold("p" + strconv.FormatInt(positionID, 10))()
	attrs = append(attrs, slog.Int64("hedge_order_id", id))
	units := closing.Abs()
	out, err := b.cfg.Venue.CloseTrade(ctx, tradeID, &units, time.Time{})
	var verr *venue.Error
	switch {
	case err == nil && out.Fill != nil:
		f := out.Fill
		if err := b.bookReduce(ctx, id, f.Price, max(out.LastTransactionID, f.TransactionID)); err != nil {
			b.cfg.Log.LogAttrs(ctx, slog.LevelError, "the venue reduced a hedge trade the desk could not book; the order stays SENDING and the reconciler books the trade",
				append(attrs, slog.Any("err", err))...)
			b.raiseUnknown(ctx, id, symbol)
			return fmt.Errorf("hedge reduction %d: filled, not booked (%w): %w", id, err, venue.ErrOutcomeUnknown)
		}
		b.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "hedge position reduced", append(attrs, slog.String("price", f.Price.String()))...)
		return nil
	case err == nil && out.Cancelled != nil:
		b.end(ctx, id, StatusRejected, out.Cancelled.Reason)
		return fmt.Errorf("hedge reduction %d: the venue cancelled it (%s): %w", id, out.Cancelled.Reason, ErrRejected)
	case err == nil:
		b.cfg.Log.LogAttrs(ctx, slog.LevelError, "venue answered a hedge reduction with neither a fill nor a cancel; it stays SENDING for the reconciler", attrs...)
		b.raiseUnknown(ctx, id, symbol)
		return fmt.Errorf("hedge reduction %d: %w", id, venue.ErrOutcomeUnknown)
	case errors.As(err, &verr):
		b.end(ctx, id, StatusRejected, verr.Code)
		return fmt.Errorf("hedge reduction %d: %w: %w", id, err, ErrRejected)
	case errors.Is(err, gate.ErrNotHolder), errors.Is(err, venue.ErrNotSent):
		b.end(ctx, id, StatusNotSent, "never left the desk")
		b.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "hedge reduction not sent", append(attrs, slog.Any("err", err))...)
		return fmt.Errorf("hedge reduction %d: %w", id, err)
	default:
		b.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "hedge reduction's outcome unknown; it stays SENDING and the reconciler resolves it from the trade, never re-sent",
			append(attrs, slog.Any("err", err))...)
		b.raiseUnknown(ctx, id, symbol)
		return fmt.Errorf("hedge reduction %d: %w", id, err)
	}
}

// bookReduce books the venue's fill of SENDING reduction id at price: the order FILLED, its
// position down to the order's leaveUnits with the share's P&L added to what it realised
// before, and the venue cursor. It ends a send this process made, so it is not fenced, as
// BookClose is not.
func (b *Book) bookReduce(ctx context.Context, id int64, price decimal.Decimal, txID int64) error {
	what := fmt.Sprintf("book hedge reduction %d", id)
	return b.booking(ctx, what, txID, func(tx *sql.Tx) error {
		var positionID int64
		var leave decimal.Decimal
		err := tx.QueryRowContext(ctx, "SELECT `reducesPositionId`, `leaveUnits` FROM `fx_hedge_order` WHERE `id` = ? AND `status` = 'SENDING' AND `reducesPositionId` IS NOT NULL FOR UPDATE", id).
			Scan(&positionID, &leave)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("hedge reduction %d: %w", id, ErrAlreadyBooked)
		} else if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		// Single-table statements: a multi-table UPDATE does not promise its assignments' order.
		res, err := tx.ExecContext(ctx, "UPDATE `fx_hedge_position` SET `realizedPl` = COALESCE(`realizedPl`, 0) + ROUND((? - `openPrice`) * (`units` - ?), 4), `units` = ? "+
			"WHERE `id` = ? AND `status` = 'OPEN' AND ABS(?) < ABS(`units`)", price, leave, leave, positionID, leave)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		} else if n == 0 {
			return fmt.Errorf("hedge position %d is not open above %s units: %w", positionID, leave, ErrAlreadyBooked)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_hedge_order` SET `status` = 'FILLED', `fillPrice` = ? WHERE `id` = ?", price, id); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// ResolveReduce ends SENDING reduction id from what the venue shows of its trade, for the
// reconciler: the trade holds left (signed) units, at most the order's leaveUnits, after closes
// at the average price price up to transaction txID. In one transaction, the position is booked
// down to left as BookPartial books it (when it holds more) and the order is FILLED, so the
// next pass never sees the position large with no reduction in flight. A position that is not
// open any more (the venue closed the trade, booked by CloseHedgeSide) only ends the order.
// It changes nothing when the order has moved on.
func (b *Book) ResolveReduce(ctx context.Context, id int64, left, price decimal.Decimal, txID int64) error {
	what := fmt.Sprintf("resolve hedge reduction %d", id)
	return b.booking(ctx, what, txID, func(tx *sql.Tx) error {
		var position int64
		err := tx.QueryRowContext(ctx, "SELECT `reducesPositionId` FROM `fx_hedge_order` WHERE `id` = ? AND `status` = 'SENDING' AND `reducesPositionId` IS NOT NULL FOR UPDATE", id).Scan(&position)
		if errors.Is(err, sql.ErrNoRows) {
			return errUnchanged
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_hedge_order` SET `status` = 'FILLED', `reason` = 'resolved from the venue trade' WHERE `id` = ?", id); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if _, err := bookDown(ctx, tx, position, left, price); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}
