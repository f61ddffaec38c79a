package events

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
)

// Type names what happened. The payload of each is in the API's own field names: an order's
// (Order), a position's (Position, Closed), a balance change's (Balance).
type Type string

const (
	OrderFilled          Type = "order.filled"           // a MARKET order filled: Order
	OrderTriggered       Type = "order.triggered"        // a resting LIMIT or STOP order filled at its trigger: Order
	OrderCancelled       Type = "order.cancelled"        // a PENDING order cancelled by its trader or the dealer: Order
	PositionOpened       Type = "position.opened"        // Position
	PositionModified     Type = "position.modified"      // its SL or TP moved: Position
	PositionClosed       Type = "position.closed"        // Closed, with the reason
	PositionPartlyClosed Type = "position.partly_closed" // Closed, with the reason
	Deposit              Type = "balance.deposit"        // Balance
	Withdrawal           Type = "balance.withdrawal"     // Balance
)

// Event is one change of one account, as a writer records it.
type Event struct {
	AccountID int64
	UserID    int64 // the account's owner
	Type      Type
	Payload   any   // encoded with encoding/json
	Term      int64 // the engine lease term of the process writing it; 0 where it holds none
	// FromSession sets payload fields to ids the transaction learns only as it runs: each
	// field (a top-level JSON name, such as "orderId") gets the value of the session variable
	// that holds the id ("@fx_o1"), set by an earlier statement of the same transaction.
	FromSession []SessionField
}

// SessionField is a payload field taken from a session variable.
type SessionField struct{ Field, Var string }

var (
	fieldName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
	sessionVar = regexp.MustCompile(`^@fx_[A-Za-z0-9_]+$`)
)

// The statements that write the outbox: seqSQL takes the next id (and, with it, the sequence
// row's lock until COMMIT); insertSQL writes the event with it. payloadSQL stands for the payload.
const (
	seqSQL     = "UPDATE `fx_event_seq` SET `last` = `last` + 1 WHERE `one` = 1"
	insertSQL  = "INSERT INTO `fx_event` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) SELECT `last`, ?, ?, ?, " + payloadSQL + ", ?, NOW(3) FROM `fx_event_seq` WHERE `one` = 1"
	payloadSQL = "?"
)

// Add adds e to b, the change's own batch, as two of its Last statements: the id is taken in the
// transaction's last round trip, after the lease fence, so the sequence's lock is held for the
// COMMIT alone (docs/architecture.md, «Events»). Add refuses only a malformed event, a defect of
// the code that builds it: the change is refused with it rather than committed untold.
func Add(b *book.Batch, e Event) error {
	stmt, args, err := row(e)
	if err != nil {
		return err
	}
	b.Last(seqSQL)
	b.Last(stmt, args...)
	return nil
}

// Record writes e through q, inside the change's own transaction, which must commit next: the
// sequence's lock is held from here to COMMIT, and every event writer of the desk queues on it.
func Record(ctx context.Context, q book.Querier, e Event) error {
	stmt, args, err := row(e)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, seqSQL); err != nil {
		return fmt.Errorf("events: next id for %s: %w", e.Type, err)
	}
	if _, err := q.ExecContext(ctx, stmt, args...); err != nil {
		return fmt.Errorf("events: write %s: %w", e.Type, err)
	}
	return nil
}

// row returns the INSERT that records e under the id seqSQL took.
func row(e Event) (string, []any, error) {
	if e.AccountID == 0 || e.UserID == 0 || e.Type == "" {
		return "", nil, fmt.Errorf("events: account, user and type are required (%s on account %d of user %d)", e.Type, e.AccountID, e.UserID)
	}
	b, err := json.Marshal(e.Payload)
	if err != nil {
		return "", nil, fmt.Errorf("events: encode %s: %w", e.Type, err)
	}
	stmt := insertSQL
	if len(e.FromSession) > 0 {
		var sets strings.Builder
		for _, f := range e.FromSession {
			if !fieldName.MatchString(f.Field) || !sessionVar.MatchString(f.Var) {
				return "", nil, fmt.Errorf("events: %s: bad session field %q from %q", e.Type, f.Field, f.Var)
			}
			sets.WriteString(", '$." + f.Field + "', " + f.Var)
		}
		stmt = strings.Replace(insertSQL, ", "+payloadSQL+", ?, NOW(3) FROM", ", JSON_SET(?"+sets.String()+"), ?, NOW(3) FROM", 1)
	}
	return stmt, []any{e.AccountID, e.UserID, string(e.Type), string(b), e.Term}, nil
}

// Order is an order's payload: the API's order view.
type Order struct {
	ID           int64      `json:"id"`
	AccountID    int64      `json:"accountId"`
	Symbol       string     `json:"symbol"`
	Side         fx.Side    `json:"side"`
	Type         string     `json:"type"`
	Volume       string     `json:"volume"`
	Price        *string    `json:"price"`
	SL           *string    `json:"sl"`
	TP           *string    `json:"tp"`
	TimeInForce  string     `json:"timeInForce"`
	ExpiresAt    *time.Time `json:"expiresAt"`
	Status       string     `json:"status"`
	RequestNonce *string    `json:"requestNonce"`
	FillPrice    *string    `json:"fillPrice"`
	PositionID   *int64     `json:"positionId"`
	CreatedAt    time.Time  `json:"createdAt"`
}

// OrderOf is o's payload.
func OrderOf(o book.Order) Order {
	return Order{ID: o.ID, AccountID: o.AccountID, Symbol: o.Symbol, Side: o.Side, Type: string(o.Type), Volume: o.Volume.String(),
		Price: optString(o.Price), SL: optString(o.SL), TP: optString(o.TP), TimeInForce: string(o.TimeInForce), ExpiresAt: o.ExpiresAt,
		Status: o.Status, RequestNonce: o.RequestNonce, FillPrice: optString(o.FillPrice), PositionID: o.PositionID, CreatedAt: o.CreatedAt.UTC()}
}

// Position is a position's payload: the API's position view.
type Position struct {
	ID             int64      `json:"id"`
	AccountID      int64      `json:"accountId"`
	OrderID        int64      `json:"orderId"`
	Symbol         string     `json:"symbol"`
	Side           fx.Side    `json:"side"`
	Volume         string     `json:"volume"`
	InitialVolume  string     `json:"initialVolume"`
	OpenPrice      string     `json:"openPrice"`
	SL             *string    `json:"sl"`
	TP             *string    `json:"tp"`
	Commission     string     `json:"commission"`
	RealizedProfit string     `json:"realizedProfit"`
	Status         string     `json:"status"`
	ClosePrice     *string    `json:"closePrice,omitempty"`
	CloseReason    *string    `json:"closeReason"`
	OpenedAt       time.Time  `json:"openedAt"`
	ClosedAt       *time.Time `json:"closedAt"`
	Execution      string     `json:"execution"`
}

// PositionOf is p's payload.
func PositionOf(p book.Position) Position {
	v := Position{ID: p.ID, AccountID: p.AccountID, OrderID: p.OrderID, Symbol: p.Symbol, Side: p.Side, Volume: p.Volume.String(),
		InitialVolume: p.OpenVolume.String(), OpenPrice: p.OpenPrice.String(), SL: optString(p.SL), TP: optString(p.TP),
		Commission: fx.FormatMoney(p.Currency, p.Commission), RealizedProfit: fx.FormatMoney(p.Currency, p.RealizedProfit), Status: p.Status,
		CloseReason: p.CloseReason, OpenedAt: p.OpenedAt.UTC(), ClosedAt: p.ClosedAt, Execution: string(fx.Internal)}
	if p.VenueTradeID != nil {
		v.Execution = string(fx.External)
	}
	if p.Status == fx.PositionClosed {
		v.ClosePrice = optString(p.ClosePrice)
	}
	return v
}

// Closed is a close's payload: the position after it, and what was closed at what price, why.
type Closed struct {
	Position
	ClosedVolume string `json:"closedVolume"`
	Price        string `json:"price"`
	Profit       string `json:"profit"` // the close's realized profit, in the account's currency
	Reason       string `json:"reason"` // CLIENT, SL, TP, STOP_OUT, VENUE, DEALER, …
}

// Balance is a deposit's or a withdrawal's payload: the API's deal view, without the deal's id
// (its INSERT is the transaction's last statement); the idempotency key names the deal.
type Balance struct {
	AccountID      int64  `json:"accountId"`
	Type           string `json:"type"`
	Amount         string `json:"amount"`
	BalanceAfter   string `json:"balanceAfter"`
	Currency       string `json:"currency"`
	IdempotencyKey string `json:"idempotencyKey"`
	Comment        string `json:"comment"`
}

func optString(d *decimal.Decimal) *string {
	if d == nil {
		return nil
	}
	s := d.String()
	return &s
}
