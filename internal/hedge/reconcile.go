package hedge

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/store"
)

// The hedge book as the execution reconciler reads and repairs it (internal/execution).

// LinkedPosition is one open hedge position and its venue trade.
type LinkedPosition struct {
	PositionID, OrderID int64
	Symbol              string
	Units               decimal.Decimal // signed
	TradeID             string
}

// LinkedOrder is one hedge order as the reconciler sees it.
type LinkedOrder struct {
	OrderID      int64
	Symbol       string
	Units        decimal.Decimal // signed, as ordered
	Status       string
	SentAt       time.Time
	PositionID   int64  // the hedge position it opened; 0 when none
	PositionOpen bool   // that position is still OPEN
	TradeID      string // that position's venue trade
	// LastVenueTx is the venue transaction that closed its position; 0 when none.
	LastVenueTx int64
	// Reduces is the hedge position a reduction closes part of (Book.Reduce); 0 for an open.
	// Leave is the signed units that position holds once the reduction filled.
	Reduces int64
	Leave   decimal.Decimal
}

// State reads the hedge book for the reconciler in one snapshot: open hedge positions, hedge
// orders SENDING, and the hedge orders named by extraOrderIDs (client ids "H<id>" the venue's
// open tagged trades carry).
func (b *Book) State(ctx context.Context, extraOrderIDs []int64) ([]LinkedPosition, []LinkedOrder, error) {
	tx, err := b.cfg.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("hedge book: begin: %w", err)
	}
	defer tx.Rollback()
	pos, err := store.QueryAll(ctx, tx, "hedge book: positions", func(sc store.Scanner) (LinkedPosition, error) {
		var p LinkedPosition
		err := sc.Scan(&p.PositionID, &p.OrderID, &p.Symbol, &p.Units, &p.TradeID)
		return p, err
	}, "SELECT `id`, `orderId`, `symbol`, `units`, `venueTradeId` FROM `fx_hedge_position` WHERE `status` = 'OPEN' ORDER BY `id`")
	if err != nil {
		return nil, nil, err
	}
	where := "o.`status` = 'SENDING'"
	args := []any{}
	if len(extraOrderIDs) > 0 {
		where += " OR o.`id` IN (" + store.Placeholders(len(extraOrderIDs)) + ")"
		args = store.Int64Args(extraOrderIDs)
	}
	orders, err := store.QueryAll(ctx, tx, "hedge book: orders", func(sc store.Scanner) (LinkedOrder, error) {
		var o LinkedOrder
		var posID, last, reduces sql.NullInt64
		var posStatus, trade sql.NullString
		var leave decimal.NullDecimal
		err := sc.Scan(&o.OrderID, &o.Symbol, &o.Units, &o.Status, &o.SentAt, &posID, &posStatus, &trade, &last, &reduces, &leave)
		o.PositionID, o.PositionOpen, o.TradeID, o.LastVenueTx = posID.Int64, posStatus.String == PositionOpen, trade.String, last.Int64
		o.Reduces, o.Leave = reduces.Int64, leave.Decimal
		return o, err
	}, "SELECT o.`id`, o.`symbol`, o.`units`, o.`status`, o.`sentAt`, p.`id`, p.`status`, p.`venueTradeId`, p.`closeTransactionId`, o.`reducesPositionId`, o.`leaveUnits` "+
		"FROM `fx_hedge_order` o LEFT JOIN `fx_hedge_position` p ON p.`orderId` = o.`id` WHERE "+where+" ORDER BY o.`id`", args...)
	if err != nil {
		return nil, nil, err
	}
	return pos, orders, nil
}

// Adoption is a venue trade the reconciler adopts into the hedge book for the hedge order that
// sent it.
type Adoption struct {
	OrderID      int64
	TradeID      string
	Units        decimal.Decimal // signed, as the venue opened them
	Price        decimal.Decimal // the trade's open price
	OpenedAt     time.Time       // when the venue opened the trade
	VenueOrderID string          // "" when unknown
	// TransactionID is the venue transaction the adoption stems from (the cursor).
	TransactionID int64
}

// Adopt books venue trade a.TradeID for hedge order a.OrderID (any state but FILLED): the order
// FILLED at the trade's price and an open hedge position linked to the trade; nothing is sent.
// It returns the hedge position, or an error wrapping ErrAlreadyBooked when the order was
// booked meanwhile.
func (b *Book) Adopt(ctx context.Context, a Adoption) (Position, error) {
	return b.book(ctx, a.OrderID, a.TradeID, a.Units, a.Price, a.OpenedAt, a.VenueOrderID, a.TransactionID, "adopted by the reconciler")
}

// CheckUnknown raises hedge-unknown-outcome while a hedge order is SENDING with no send of this
// process in flight (its outcome is unknown until the reconciler resolves it), and resolves it
// once there is none. The reconciler calls it after each run.
func (b *Book) CheckUnknown(ctx context.Context) error {
	type sending struct {
		id     int64
		symbol string
		sentAt time.Time
	}
	list, err := store.QueryAll(ctx, b.cfg.DB, "hedge orders sending", func(sc store.Scanner) (sending, error) {
		var s sending
		err := sc.Scan(&s.id, &s.symbol, &s.sentAt)
		return s, err
	}, "SELECT `id`, `symbol`, `sentAt` FROM `fx_hedge_order` WHERE `status` = 'SENDING' ORDER BY `id` LIMIT 100")
	if err != nil {
		return err
	}
	var unknown []string
	ids := []int64{}
	for _, s := range list {
		if !b.Busy(s.id, 0) {
			unknown = append(unknown, fmt.Sprintf("%d (%s, client id %s, sent %s)", s.id, s.symbol, ClientID(s.id), s.sentAt.UTC().Format(time.RFC3339)))
			ids = append(ids, s.id)
		}
	}
	if len(unknown) == 0 {
		return b.cfg.Alerts.Resolve(ctx, AlertUnknownOutcome)
	}
	msg := fmt.Sprintf("%d hedge order(s) were sent and the venue's answer is unknown: %s. They are never sent again; the execution reconciler resolves each by its client id (adopted into the hedge book, REJECTED, or NOT_SENT past FXDESK_VENUE_NOT_SENT_AFTER), a reduction from its hedge trade.",
		len(unknown), strings.Join(unknown, "; "))
	return b.cfg.Alerts.Raise(ctx, AlertUnknownOutcome, alert.Warning, msg, map[string]any{"hedgeOrderIds": ids})
}
