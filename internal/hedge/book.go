package hedge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/store"
	"fxdesk/internal/venue"
)

// ClientIDPrefix starts the venue client id of every hedge order: "H<hedge order id>". A client
// order's client id is its bare number (trading.ClientID), so the two never collide, and the
// FIX venue's close suffix ("<key>.c<n>") works on it unchanged.
const ClientIDPrefix = "H"

// ClientID is the venue client id of hedge order id.
func ClientID(orderID int64) string { return ClientIDPrefix + strconv.FormatInt(orderID, 10) }

// OrderOfClientID is the hedge order a venue client id names; ok is false for any other client
// id (a client order's, the venue's own, an untagged trade's "").
func OrderOfClientID(clientID string) (int64, bool) {
	rest, ok := strings.CutPrefix(clientID, ClientIDPrefix)
	if !ok || rest == "" || rest[0] == '0' || rest[0] == '+' || rest[0] == '-' {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}

// Hedge order and position states (fx_hedge_order.status, fx_hedge_position.status).
const (
	StatusSending  = "SENDING"
	StatusFilled   = "FILLED"
	StatusNotSent  = "NOT_SENT"
	StatusRejected = "REJECTED"

	PositionOpen   = "OPEN"
	PositionClosed = "CLOSED"
)

// Close reasons of a hedge position.
const (
	CloseDesk  = "DESK"  // the desk closed it (Close)
	CloseVenue = "VENUE" // the venue closed it and the reconciler booked it
)

// AlertUnknownOutcome is raised while a hedge order's outcome is unknown (SENDING with no send
// of this process in flight), and resolved once the reconciler has resolved every one.
const AlertUnknownOutcome = "hedge-unknown-outcome"

// WhyKind is what a hedge order was sent for (fx_hedge_order.why).
type WhyKind string

const (
	// WhyRule: a HEDGE n% routing rule's share of client position Why.ClientPositionID.
	WhyRule WhyKind = "RULE"
	// WhyHedger: the hedger, keeping the desk's net exposure inside its limits.
	WhyHedger WhyKind = "HEDGER"
)

// Why is what a hedge order was sent for.
type Why struct {
	Kind WhyKind
	// ClientPositionID is the client position a RULE hedge shadows: closing it closes the hedge.
	// 0 for the hedger.
	ClientPositionID int64
}

// ByHedger is the Why of the hedger's orders.
var ByHedger = Why{Kind: WhyHedger}

// ForPosition is the Why of a HEDGE n% rule's share of client position id.
func ForPosition(id int64) Why { return Why{Kind: WhyRule, ClientPositionID: id} }

var (
	// ErrRejected: the venue refused or cancelled the hedge order; nothing opened. The order is
	// REJECTED with the venue's reason.
	ErrRejected = errors.New("the venue did not fill the hedge order")
	// ErrAlreadyHedged: the client position already has a hedge order SENDING or FILLED.
	ErrAlreadyHedged = errors.New("the client position is already hedged")
	// ErrClientPositionClosed: the client position a RULE hedge would shadow is not open (it
	// closed after the sweep read it); nothing was written or sent.
	ErrClientPositionClosed = errors.New("the client position is closed")
	// ErrAlreadyBooked: the booking was made meanwhile (by the send, or by the reconciler).
	ErrAlreadyBooked = errors.New("already booked")
)

// Position is one hedge position (fx_hedge_position).
type Position struct {
	ID      int64           `json:"id"`
	OrderID int64           `json:"orderId"`
	Symbol  string          `json:"symbol"`
	Units   decimal.Decimal `json:"units"` // signed venue units: positive long
	TradeID string          `json:"venueTradeId"`
	Why     WhyKind         `json:"why"`
	// ClientPositionID is the client position a RULE hedge shadows; 0 for the hedger's.
	ClientPositionID int64            `json:"clientPositionId,omitempty"`
	Status           string           `json:"status"`
	OpenPrice        decimal.Decimal  `json:"openPrice"`
	OpenedAt         time.Time        `json:"openedAt"`
	ClosePrice       *decimal.Decimal `json:"closePrice,omitempty"`
	ClosedAt         *time.Time       `json:"closedAt,omitempty"`
	CloseReason      string           `json:"closeReason,omitempty"`
	// RealizedPL is (closePrice − openPrice) × units in PLCurrency, the symbol's quote currency.
	RealizedPL *decimal.Decimal `json:"realizedPl,omitempty"`
	PLCurrency string           `json:"plCurrency"`
}

// Venue is the venue as the hedge book sends to it (*venue.Sender, fix.Sender): on the
// executor's workers, the gate asked again on the worker.
type Venue interface {
	AccountID() string
	PlaceMarket(ctx context.Context, o venue.MarketOrder, trigger time.Time) (venue.Outcome, error)
	CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time) (venue.Outcome, error)
}

// Gate admits lease-guarded work (*gate.Gate).
type Gate interface {
	Admit(ctx context.Context, w gate.Work, attrs ...slog.Attr) error
}

// Fence is the lease's term fence (*lease.Keeper).
type Fence interface {
	FenceStatement() (string, []any, error)
}

// Alerts is the alert inbox (*alert.Inbox).
type Alerts interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	Resolve(ctx context.Context, code string) error
}

// Config builds a Book.
type Config struct {
	DB *sql.DB
	// Venue, Gate and Fence send; a Book without them (a follower, the cron process) reads only.
	Venue  Venue
	Gate   Gate
	Fence  Fence
	Alerts Alerts
	// Bound is a send's whole life: the executor's queue, the call, the booking (default 30 s).
	Bound time.Duration
	Log   *slog.Logger
}

// Book is the desk's hedge book.
type Book struct {
	cfg  Config
	mu   sync.Mutex
	busy map[string]int // "o<id>" / "p<id>": hedge orders and positions this process sends or books now
}

// NewBook checks cfg.
func NewBook(cfg Config) (*Book, error) {
	if cfg.DB == nil {
		return nil, errors.New("hedge book: a database is required")
	}
	if cfg.Venue != nil && (cfg.Gate == nil || cfg.Fence == nil || cfg.Alerts == nil) {
		return nil, errors.New("hedge book: a venue needs the gate, the lease's fence and the alert inbox")
	}
	if cfg.Bound <= 0 {
		cfg.Bound = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Book{cfg: cfg, busy: map[string]int{}}, nil
}

func (b *Book) hold(key string) func() {
	b.mu.Lock()
	b.busy[key]++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		if b.busy[key]--; b.busy[key] <= 0 {
			delete(b.busy, key)
		}
		b.mu.Unlock()
	}
}

// Busy is true while this process is sending or booking hedge order orderID or hedge position
// positionID (0: not asked): the reconciler leaves them to their own send.
func (b *Book) Busy(orderID, positionID int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return (orderID != 0 && b.busy["o"+strconv.FormatInt(orderID, 10)] > 0) ||
		(positionID != 0 && b.busy["p"+strconv.FormatInt(positionID, 10)] > 0)
}

// Open opens units (signed venue units: positive buys; whole units) of symbol at the venue in
// the hedge book, for why. The identity row (SENDING, client id "H<id>") is written under the
// lease's fence before the request leaves; the send passes the gate (gate.VenueSend); the fill
// is booked as an open hedge position at the venue's price. Errors:
//   - an fx EINVALID error for bad arguments (nothing written);
//   - gate.ErrNotHolder (wrapped) when the gate drops it: nothing written, or the row NOT_SENT
//     when the worker's gate check kept it back;
//   - ErrAlreadyHedged for a RULE hedge of a client position that already has one;
//   - ErrClientPositionClosed for a RULE hedge of a client position that is not open;
//   - venue.ErrNotSent (wrapped): the venue could not be reached: nothing written when it was
//     known down before the send, the row NOT_SENT when the send found it down;
//   - ErrRejected (wrapped, with the venue's reason): the row is REJECTED;
//   - venue.ErrOutcomeUnknown (wrapped): the row stays SENDING, alert hedge-unknown-outcome is
//     raised, and the reconciler resolves it by the client id — it is never sent again; a fill
//     the desk could not book is the same case (the reconciler adopts the trade).
func (b *Book) Open(ctx context.Context, symbol string, units decimal.Decimal, why Why) (Position, error) {
	if b.cfg.Venue == nil {
		return Position{}, fx.Errorf(fx.EUNAVAILABLE, "No execution venue is configured on this desk (FXDESK_VENUE): the hedge book cannot trade.")
	}
	switch {
	case units.IsZero() || !units.Equal(units.Truncate(0)):
		return Position{}, fx.Errorf(fx.EINVALID, "A hedge order's units must be a whole number of venue units other than 0 (got %s).", units)
	case why.Kind == WhyRule && why.ClientPositionID <= 0:
		return Position{}, fx.Errorf(fx.EINVALID, "A RULE hedge names the client position it shadows.")
	case why.Kind == WhyHedger && why.ClientPositionID != 0:
		return Position{}, fx.Errorf(fx.EINVALID, "A HEDGER hedge shadows no client position.")
	case why.Kind != WhyRule && why.Kind != WhyHedger:
		return Position{}, fx.Errorf(fx.EINVALID, "A hedge order is sent for RULE or HEDGER, not %q.", why.Kind)
	}
	var quoteCcy string
	if err := b.cfg.DB.QueryRowContext(ctx, "SELECT `quote` FROM `fx_instrument` WHERE `symbol` = ?", symbol).Scan(&quoteCcy); errors.Is(err, sql.ErrNoRows) {
		return Position{}, fx.Errorf(fx.EINVALID, "Unknown symbol %q.", symbol)
	} else if err != nil {
		return Position{}, fmt.Errorf("hedge open %s: %w", symbol, err)
	}
	// Whatever the caller's context does from here, the order's fate is decided and booked.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Bound)
	defer cancel()
	attrs := []slog.Attr{slog.String("symbol", symbol), slog.String("units", units.String()), slog.String("why", string(why.Kind))}
	if r, ok := b.cfg.Venue.(interface{ Reachable() bool }); ok && !r.Reachable() {
		// Known down: nothing is written, as an A-book open is refused before its row.
		return Position{}, fmt.Errorf("hedge open %s: the venue is unreachable: %w", symbol, venue.ErrNotSent)
	}
	if err := b.cfg.Gate.Admit(ctx, gate.VenueSend, append(attrs, slog.String("op", "send hedge order"))...); err != nil {
		return Position{}, err
	}
	id, err := b.insertSending(ctx, symbol, units, why)
	if err != nil {
		return Position{}, err
	}
	defer b.hold("o" + strconv.FormatInt(id, 10))()
	attrs = append(attrs, slog.Int64("hedge_order_id", id))
	// IOC: a hedge books whatever part the venue fills (fillUnits); a FOK would refuse it.
	out, err := b.cfg.Venue.PlaceMarket(ctx, venue.MarketOrder{ClientID: ClientID(id), Symbol: symbol, Units: units, TimeInForce: venue.IOC}, time.Time{})
	var verr *venue.Error
	switch {
	case err == nil && out.Fill != nil:
		p, err := b.book(ctx, id, out.Fill.TradeOpened, out.Fill.Units, out.Fill.Price, out.Fill.Time, out.Fill.OrderID, max(out.LastTransactionID, out.Fill.TransactionID), "")
		if err != nil {
			b.cfg.Log.LogAttrs(ctx, slog.LevelError, "the venue filled a hedge order the desk could not book; it stays SENDING and the reconciler adopts the trade",
				append(attrs, slog.String("trade_id", out.Fill.TradeOpened), slog.Any("err", err))...)
			b.raiseUnknown(ctx, id, symbol)
			return Position{}, fmt.Errorf("hedge order %d: filled, not booked (%w): %w", id, err, venue.ErrOutcomeUnknown)
		}
		b.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "hedge order filled", append(attrs, slog.Int64("hedge_position_id", p.ID), slog.String("trade_id", p.TradeID), slog.String("price", p.OpenPrice.String()))...)
		return p, nil
	case err == nil && out.Cancelled != nil:
		b.end(ctx, id, StatusRejected, out.Cancelled.Reason)
		return Position{}, fmt.Errorf("hedge order %d: the venue cancelled it (%s): %w", id, out.Cancelled.Reason, ErrRejected)
	case err == nil:
		b.cfg.Log.LogAttrs(ctx, slog.LevelError, "venue answered a hedge order with neither a fill nor a cancel; it stays SENDING for the reconciler", attrs...)
		b.raiseUnknown(ctx, id, symbol)
		return Position{}, fmt.Errorf("hedge order %d: %w", id, venue.ErrOutcomeUnknown)
	case errors.As(err, &verr):
		b.end(ctx, id, StatusRejected, verr.Code)
		return Position{}, fmt.Errorf("hedge order %d: %w: %w", id, err, ErrRejected)
	case errors.Is(err, gate.ErrNotHolder), errors.Is(err, venue.ErrNotSent):
		// It provably never left: the row says so, and nothing will ever send it.
		b.end(ctx, id, StatusNotSent, "never left the desk")
		b.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "hedge order not sent", append(attrs, slog.Any("err", err))...)
		return Position{}, fmt.Errorf("hedge order %d: %w", id, err)
	default:
		b.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "hedge order's outcome unknown; it stays SENDING and the reconciler resolves it by its client id, never re-sent",
			append(attrs, slog.Any("err", err))...)
		b.raiseUnknown(ctx, id, symbol)
		return Position{}, fmt.Errorf("hedge order %d: %w", id, err)
	}
}

// insertSending writes hedge order's identity row, SENDING, under the lease's fence. A RULE
// hedge is written only while its client position is open and has no hedge order SENDING or
// FILLED, both read in the statement that writes it: the INSERT … SELECT reads the position's
// committed row under a shared lock, so a close committed after the sweep listed the position
// (or committing now: the read waits for it) is seen, and no spread is lost on a hedge of a
// position nobody holds.
func (b *Book) insertSending(ctx context.Context, symbol string, units decimal.Decimal, why Why) (int64, error) {
	var id int64
	err := store.RetryRolledBack(ctx, func() error {
		return b.fenced(ctx, "write hedge order", func(tx *sql.Tx) error {
			var client any
			if why.ClientPositionID != 0 {
				client = why.ClientPositionID
			}
			res, err := tx.ExecContext(ctx, "INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `clientPositionId`, `status`, `sentAt`) "+
				"SELECT ?, ?, ?, ?, 'SENDING', NOW(3) FROM DUAL WHERE ? IS NULL OR (NOT EXISTS "+
				"(SELECT 1 FROM `fx_hedge_order` WHERE `clientPositionId` = ? AND `status` IN ('SENDING', 'FILLED')) AND EXISTS "+
				"(SELECT 1 FROM `fx_position` WHERE `id` = ? AND `status` = 'OPEN'))",
				symbol, units, string(why.Kind), client, client, client, client)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				var open bool
				if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) > 0 FROM `fx_position` WHERE `id` = ? AND `status` = 'OPEN'", why.ClientPositionID).Scan(&open); err != nil {
					return err
				}
				if !open {
					return fmt.Errorf("client position %d: %w", why.ClientPositionID, ErrClientPositionClosed)
				}
				return fmt.Errorf("client position %d: %w", why.ClientPositionID, ErrAlreadyHedged)
			}
			id, err = res.LastInsertId()
			return err
		})
	})
	return id, err
}

// fenced runs write in one transaction that commits only while this process holds its term.
func (b *Book) fenced(ctx context.Context, what string, write func(tx *sql.Tx) error) error {
	stmt, args, err := b.cfg.Fence.FenceStatement()
	if err != nil {
		return fmt.Errorf("%s: %w: %w", what, err, gate.ErrNotHolder)
	}
	tx, err := b.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	if err := write(tx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	rows, err := tx.QueryContext(ctx, stmt, args...)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	if err != nil {
		if lease.IsFenced(err) {
			return fmt.Errorf("%s: the lease's fence refused it: %w", what, gate.ErrNotHolder)
		}
		return fmt.Errorf("%s: fence: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// book records the venue's fill of hedge order id (SENDING, NOT_SENT or REJECTED): the order
// FILLED, an open hedge position
// linked to tradeID at price, and the venue cursor. adopted ("" or the reconciler's finding)
// goes in the order's reason. It fails with ErrAlreadyBooked when the order was booked meanwhile.
func (b *Book) book(ctx context.Context, id int64, tradeID string, units, price decimal.Decimal, openedAt time.Time, venueOrderID string, txID int64, adopted string) (Position, error) {
	if openedAt.IsZero() {
		openedAt = time.Now()
	}
	var p Position
	err := store.RetryRolledBack(ctx, func() error {
		return b.fenced(ctx, fmt.Sprintf("book hedge order %d", id), func(tx *sql.Tx) error {
			var status, symbol, quoteCcy string
			var client sql.NullInt64
			var why WhyKind
			var ordered decimal.Decimal
			if err := tx.QueryRowContext(ctx, "SELECT `status`, `symbol`, `why`, `clientPositionId`, `units` FROM `fx_hedge_order` WHERE `id` = ? FOR UPDATE", id).
				Scan(&status, &symbol, &why, &client, &ordered); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, "SELECT `quote` FROM `fx_instrument` WHERE `symbol` = ?", symbol).Scan(&quoteCcy); err != nil {
				return fmt.Errorf("instrument %s: %w", symbol, err)
			}
			// A trade at the venue is the truth: an order the desk had ended (NOT_SENT past the
			// threshold, a cancel it read) that the venue did fill is booked all the same.
			if status == StatusFilled {
				return fmt.Errorf("hedge order %d is %s: %w", id, status, ErrAlreadyBooked)
			}
			if units.Sign() != ordered.Sign() {
				return fmt.Errorf("hedge order %d is for %s units; the venue filled %s", id, ordered, units)
			}
			var reason any
			if adopted != "" {
				reason = adopted
			}
			// The units filled, not the ordered ones: a venue may fill part of an order, and the
			// P&L of the venue's closes is worked out from what the trade opened with.
			if _, err := tx.ExecContext(ctx, "UPDATE `fx_hedge_order` SET `status` = 'FILLED', `fillPrice` = ?, `fillUnits` = ?, `venueOrderId` = ?, `reason` = ? WHERE `id` = ?",
				price, units, nullIfEmpty(venueOrderID), reason, id); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, "INSERT INTO `fx_hedge_position` (`orderId`, `symbol`, `units`, `venueTradeId`, `clientPositionId`, `openPrice`, `openedAt`, `plCurrency`) "+
				"VALUES (?, ?, ?, ?, ?, ?, ?, ?)", id, symbol, units, tradeID, client, price, openedAt.UTC(), quoteCcy)
			if err != nil {
				if store.IsDuplicateKey(err) {
					return fmt.Errorf("venue trade %s is in the hedge book already: %w", tradeID, ErrAlreadyBooked)
				}
				return err
			}
			pid, err := res.LastInsertId()
			if err != nil {
				return err
			}
			if err := b.advanceCursor(ctx, tx, txID); err != nil {
				return err
			}
			p = Position{ID: pid, OrderID: id, Symbol: symbol, Units: units, TradeID: tradeID, Why: why, ClientPositionID: client.Int64, Status: PositionOpen,
				OpenPrice: price, OpenedAt: openedAt.UTC().Truncate(time.Millisecond), PLCurrency: quoteCcy}
			return nil
		})
	})
	return p, err
}

// errUnchanged, from a booking's fn, rolls the booking back and answers nil: there was nothing to
// book.
var errUnchanged = errors.New("nothing to book")

// booking runs fn and advances the venue cursor to txID in one transaction, run again whole when
// the server rolled it back (store.RetryRolledBack); what names it in the errors it wraps.
func (b *Book) booking(ctx context.Context, what string, txID int64, fn func(tx *sql.Tx) error) error {
	return store.RetryRolledBack(ctx, func() error {
		tx, err := b.cfg.DB.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer tx.Rollback()
		if err := fn(tx); errors.Is(err, errUnchanged) {
			return nil
		} else if err != nil {
			return err
		}
		if err := b.advanceCursor(ctx, tx, txID); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return tx.Commit()
	})
}

// advanceCursor stores, with the booking, that venue transaction txID is applied.
func (b *Book) advanceCursor(ctx context.Context, tx *sql.Tx, txID int64) error {
	if txID <= 0 || b.cfg.Venue == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO `fx_venue_cursor` (`venueAccount`, `lastTransactionId`) VALUES (?, ?) "+
		"ON DUPLICATE KEY UPDATE `lastTransactionId` = GREATEST(`lastTransactionId`, ?)", b.cfg.Venue.AccountID(), txID, txID)
	return err
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// end marks SENDING (or NOT_SENT, for a late cancel) hedge order id with status and reason,
// logging a failure (the reconciler ends it then).
func (b *Book) end(ctx context.Context, id int64, status, reason string) {
	if err := b.EndOrder(ctx, id, status, reason); err != nil {
		b.cfg.Log.ErrorContext(ctx, "could not end a hedge order; the reconciler will", slog.Int64("hedge_order_id", id), slog.String("status", status), slog.Any("err", err))
	}
}

// EndOrder marks SENDING (or NOT_SENT, for a late cancel) hedge order id REJECTED or NOT_SENT
// with reason. It changes nothing if the order has moved on. A row that ends an order is true
// whoever writes it, so it is not fenced.
func (b *Book) EndOrder(ctx context.Context, id int64, status, reason string) error {
	if status != StatusRejected && status != StatusNotSent {
		return fmt.Errorf("end hedge order %d: %q is not an end state", id, status)
	}
	return store.RetryRolledBack(ctx, func() error {
		_, err := b.cfg.DB.ExecContext(ctx, "UPDATE `fx_hedge_order` SET `status` = ?, `reason` = ? WHERE `id` = ? AND `status` IN ('SENDING', 'NOT_SENT')",
			status, truncate(reason, 64), id)
		if err != nil {
			return fmt.Errorf("end hedge order %d: %w", id, err)
		}
		return nil
	})
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// raiseUnknown raises hedge-unknown-outcome for hedge order id.
func (b *Book) raiseUnknown(ctx context.Context, id int64, symbol string) {
	msg := fmt.Sprintf("Hedge order %d (%s, client id %s) was sent and the venue's answer is unknown: it may have filled. It is never sent again; the execution reconciler finds it at the venue by its client id and books what the venue did.",
		id, symbol, ClientID(id))
	if err := b.cfg.Alerts.Raise(ctx, AlertUnknownOutcome, alert.Warning, msg, map[string]any{"hedgeOrderId": id, "symbol": symbol, "clientId": ClientID(id)}); err != nil {
		b.cfg.Log.ErrorContext(ctx, "could not raise an alert", slog.String("alert", AlertUnknownOutcome), slog.Any("err", err))
	}
}

// Close closes open hedge position id at the venue (the whole trade) and books the venue's price.
// Errors: fx ENOTFOUND when there is no open hedge position id; gate.ErrNotHolder; the venue's
// (a refusal, venue.ErrNotSent, venue.ErrOutcomeUnknown) — the position stays OPEN then, and a
// trade the venue did close is booked by the reconciler at the venue's price.
func (b *Book) Close(ctx context.Context, positionID int64) error {
	if b.cfg.Venue == nil {
		return fx.Errorf(fx.EUNAVAILABLE, "No execution venue is configured on this desk (FXDESK_VENUE): the hedge book cannot trade.")
	}
	var tradeID, symbol string
	err := b.cfg.DB.QueryRowContext(ctx, "SELECT `venueTradeId`, `symbol` FROM `fx_hedge_position` WHERE `id` = ? AND `status` = 'OPEN'", positionID).Scan(&tradeID, &symbol)
	if errors.Is(err, sql.ErrNoRows) {
		return fx.Errorf(fx.ENOTFOUND, "Hedge position %d is not open.", positionID)
	}
	if err != nil {
		return fmt.Errorf("hedge close %d: %w", positionID, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Bound)
	defer cancel()
	attrs := []slog.Attr{slog.Int64("hedge_position_id", positionID), slog.String("trade_id", tradeID), slog.String("symbol", symbol)}
	if err := b.cfg.Gate.Admit(ctx, gate.VenueSend, append(attrs, slog.String("op", "close hedge position"))...); err != nil {
		return err
	}
	defer b.hold("p" + strconv.FormatInt(positionID, 10))()
	out, err := b.cfg.Venue.CloseTrade(ctx, tradeID, nil, time.Time{})
	switch {
	case err != nil:
		b.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "hedge close not done; the position stays open and the reconciler books a close the venue made", append(attrs, slog.Any("err", err))...)
		return fmt.Errorf("hedge close %d: %w", positionID, err)
	case out.Cancelled != nil:
		return fmt.Errorf("hedge close %d: the venue cancelled it (%s): %w", positionID, out.Cancelled.Reason, ErrRejected)
	case out.Fill == nil:
		return fmt.Errorf("hedge close %d: the venue answered with no fill: %w", positionID, venue.ErrOutcomeUnknown)
	}
	f := out.Fill
	if err := b.BookClose(ctx, positionID, f.Price, max(out.LastTransactionID, f.TransactionID), f.Time, CloseDesk); err != nil {
		return err
	}
	b.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "hedge position closed", append(attrs, slog.String("price", f.Price.String()))...)
	return nil
}

// BookClose closes open hedge position id at price (the venue's), as of closedAt (zero: now),
// for reason, from venue transaction txID. It fails with ErrAlreadyBooked when the position is
// not open any more. It ends a link, so it is not fenced.
func (b *Book) BookClose(ctx context.Context, id int64, price decimal.Decimal, txID int64, closedAt time.Time, reason string) error {
	if closedAt.IsZero() {
		closedAt = time.Now()
	}
	what := fmt.Sprintf("book hedge close %d", id)
	return b.booking(ctx, what, txID, func(tx *sql.Tx) error {
		// The desk's own close prices what is left at its fill, beside what the venue closed
		// before (BookPartial); the venue's close comes with its average over every share it
		// closed, so it prices the units the trade opened with: the order's fill, which a
		// partial fill makes smaller than the order.
		pl := "COALESCE(p.`realizedPl`, 0) + ROUND((? - p.`openPrice`) * p.`units`, 4)"
		if reason == CloseVenue {
			pl = "ROUND((? - p.`openPrice`) * o.`fillUnits`, 4)"
		}
		res, err := tx.ExecContext(ctx, "UPDATE `fx_hedge_position` p JOIN `fx_hedge_order` o ON o.`id` = p.`orderId` SET p.`status` = 'CLOSED', p.`closePrice` = ?, "+
			"p.`closedAt` = ?, p.`closeReason` = ?, p.`closeTransactionId` = ?, p.`realizedPl` = "+pl+" WHERE p.`id` = ? AND p.`status` = 'OPEN'",
			price, closedAt.UTC(), reason, nullIfZero(txID), price, id)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		} else if n == 0 {
			return fmt.Errorf("hedge position %d: %w", id, ErrAlreadyBooked)
		}
		return nil
	})
}

// BookPartial books what the venue closed of open hedge position id on its own: left is the
// signed units its trade still holds, price the venue's average close price over every share it
// closed, txID its last closing transaction. The realised P&L is worked out again from the
// units the order filled, so a second booking of the same state changes nothing.
func (b *Book) BookPartial(ctx context.Context, id int64, left, price decimal.Decimal, txID int64) error {
	what := fmt.Sprintf("book hedge partial %d", id)
	return b.booking(ctx, what, txID, func(tx *sql.Tx) error {
		n, err := bookDown(ctx, tx, id, left, price)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n == 0 {
			return fmt.Errorf("hedge position %d: %w", id, ErrAlreadyBooked)
		}
		return nil
	})
}

// bookDown sets open hedge position id to left (signed) units, when it holds more on the same
// side, with its realised P&L worked out again from the units its order filled at price, the
// venue's average over every share closed of the trade; it answers the rows changed (0 or 1).
func bookDown(ctx context.Context, tx *sql.Tx, id int64, left, price decimal.Decimal) (int64, error) {
	res, err := tx.ExecContext(ctx, "UPDATE `fx_hedge_position` p JOIN `fx_hedge_order` o ON o.`id` = p.`orderId` "+
		"SET p.`units` = ?, p.`realizedPl` = ROUND((? - p.`openPrice`) * (o.`fillUnits` - ?), 4) "+
		"WHERE p.`id` = ? AND p.`status` = 'OPEN' AND ABS(?) < ABS(p.`units`) AND SIGN(?) = SIGN(p.`units`)",
		left, price, left, id, left, left)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func nullIfZero(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// Net is the hedge book's signed venue units per symbol (positive long): every open hedge
// position plus every hedge order still SENDING, whose outcome is unknown and which may have
// filled. Counting those as filled is what keeps the hedger from sending the same hedge twice:
// an order that turns out NOT_SENT or REJECTED drops out of Net once the reconciler ends it, and
// the hedger then sees the exposure again. Symbols at 0 are left out.
func (b *Book) Net(ctx context.Context) (map[string]decimal.Decimal, error) {
	type net struct {
		sym   string
		units decimal.Decimal
	}
	rows, err := store.QueryAll(ctx, b.cfg.DB, "hedge book net", func(sc store.Scanner) (net, error) {
		var r net
		err := sc.Scan(&r.sym, &r.units)
		return r, err
	}, "SELECT `symbol`, SUM(`units`) FROM ("+
		"SELECT `symbol`, `units` FROM `fx_hedge_position` WHERE `status` = 'OPEN' "+
		"UNION ALL SELECT `symbol`, `units` FROM `fx_hedge_order` WHERE `status` = 'SENDING') h GROUP BY `symbol`")
	if err != nil {
		return nil, err
	}
	out := make(map[string]decimal.Decimal, len(rows))
	for _, r := range rows {
		if !r.units.IsZero() {
			out[r.sym] = r.units
		}
	}
	return out, nil
}

// OpenUnits is the signed venue units of the open hedge positions per symbol: what the venue
// holds for the hedge book once every answer is booked (the hedge monitor's expectation).
func (b *Book) OpenUnits(ctx context.Context) (map[string]decimal.Decimal, error) {
	ps, err := b.OpenPositions(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]decimal.Decimal{}
	for _, p := range ps {
		out[p.Symbol] = out[p.Symbol].Add(p.Units)
	}
	return out, nil
}

const positionCols = "p.`id`, p.`orderId`, p.`symbol`, p.`units`, p.`venueTradeId`, o.`why`, p.`clientPositionId`, p.`status`, p.`openPrice`, p.`openedAt`, " +
	"p.`closePrice`, p.`closedAt`, p.`closeReason`, p.`realizedPl`, p.`plCurrency`"

func scanPosition(sc store.Scanner) (Position, error) {
	var p Position
	var client sql.NullInt64
	var closeReason sql.NullString
	var closePrice, pl decimal.NullDecimal
	var closedAt sql.NullTime
	if err := sc.Scan(&p.ID, &p.OrderID, &p.Symbol, &p.Units, &p.TradeID, &p.Why, &client, &p.Status, &p.OpenPrice, &p.OpenedAt,
		&closePrice, &closedAt, &closeReason, &pl, &p.PLCurrency); err != nil {
		return p, err
	}
	p.ClientPositionID, p.CloseReason, p.OpenedAt = client.Int64, closeReason.String, p.OpenedAt.UTC()
	if closePrice.Valid {
		p.ClosePrice = &closePrice.Decimal
	}
	if pl.Valid {
		p.RealizedPL = &pl.Decimal
	}
	if closedAt.Valid {
		t := closedAt.Time.UTC()
		p.ClosedAt = &t
	}
	return p, nil
}

// OpenPositions lists the open hedge positions, by id.
func (b *Book) OpenPositions(ctx context.Context) ([]Position, error) {
	return store.QueryAll(ctx, b.cfg.DB, "open hedge positions", scanPosition,
		"SELECT "+positionCols+" FROM `fx_hedge_position` p JOIN `fx_hedge_order` o ON o.`id` = p.`orderId` WHERE p.`status` = 'OPEN' ORDER BY p.`id`")
}

// PositionByID reads hedge position id (fx ENOTFOUND without it).
func (b *Book) PositionByID(ctx context.Context, id int64) (Position, error) {
	p, err := scanPosition(b.cfg.DB.QueryRowContext(ctx, "SELECT "+positionCols+" FROM `fx_hedge_position` p JOIN `fx_hedge_order` o ON o.`id` = p.`orderId` WHERE p.`id` = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, fx.Errorf(fx.ENOTFOUND, "Hedge position %d not found.", id)
	}
	return p, err
}

// Order is one hedge order (fx_hedge_order).
type Order struct {
	ID       int64           `json:"id"`
	ClientID string          `json:"clientId"` // at the venue: "H<id>"
	Symbol   string          `json:"symbol"`
	Units    decimal.Decimal `json:"units"` // signed venue units
	Why      WhyKind         `json:"why"`
	// ClientPositionID is the client position a RULE hedge shadows; 0 for the hedger's.
	ClientPositionID int64 `json:"clientPositionId,omitempty"`
	// ReducesPositionID is the hedge position a RULE share's reduction closes part of (Units
	// closes, opposite to it); 0 for an open.
	ReducesPositionID int64     `json:"reducesPositionId,omitempty"`
	Status            string    `json:"status"`
	Reason            string    `json:"reason,omitempty"`
	SentAt            time.Time `json:"sentAt"`
}

// maxList bounds the lists the dealer reads.
const maxList = 500

// SendingOrders lists the hedge orders still SENDING (their outcome unknown until the
// reconciler resolves them), oldest first, at most 500.
func (b *Book) SendingOrders(ctx context.Context) ([]Order, error) {
	return store.QueryAll(ctx, b.cfg.DB, "hedge orders sending", func(sc store.Scanner) (Order, error) {
		var o Order
		var client, reduces sql.NullInt64
		var reason sql.NullString
		err := sc.Scan(&o.ID, &o.Symbol, &o.Units, &o.Why, &client, &reduces, &o.Status, &reason, &o.SentAt)
		o.ClientID, o.ClientPositionID, o.ReducesPositionID, o.Reason, o.SentAt = ClientID(o.ID), client.Int64, reduces.Int64, reason.String, o.SentAt.UTC()
		return o, err
	}, "SELECT `id`, `symbol`, `units`, `why`, `clientPositionId`, `reducesPositionId`, `status`, `reason`, `sentAt` FROM `fx_hedge_order` WHERE `status` = 'SENDING' ORDER BY `id` LIMIT ?", maxList)
}
