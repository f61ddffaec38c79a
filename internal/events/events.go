package events

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
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

// The statements that write the outbox. seqSQL takes n ids (its argument) and, with them, the
// sequence row's lock until COMMIT, leaving the last of them in LAST_INSERT_ID(); insertSQL and
// rowSQL write the events, each with its own id counted back from it (the first of n gets
// LAST_INSERT_ID() - (n-1)). payloadSQL stands for the payload.
const (
	seqSQL     = "UPDATE `fx_event_seq` SET `last` = LAST_INSERT_ID(`last` + ?) WHERE `one` = 1"
	insertSQL  = "INSERT INTO `fx_event` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) VALUES "
	rowSQL     = "(LAST_INSERT_ID() - ?, ?, ?, ?, " + payloadSQL + ", ?, NOW(3))"
	payloadSQL = "?"
)

// outboxOff makes Add and Record write nothing (SetOutbox).
var outboxOff atomic.Bool

// SetOutbox turns the outbox on or off for the whole process (FXDESK_OUTBOX, on unless set off):
// off only to measure what the outbox costs the order path (e2e TestBenchOrdersOutbox). A process
// running with it off tells no trader and no host anything of the changes it commits.
func SetOutbox(on bool) { outboxOff.Store(!on) }

// Add adds e to b, the change's own batch. Every event of the batch is written together in its
// last round trip, after the lease fence, just before COMMIT: one statement takes their ids from
// the sequence, whose lock is then held for the COMMIT alone, and one INSERT writes them all
// (docs/architecture.md, «Events»). Add refuses only a malformed event, a defect of the code that
// builds it: the change is refused with it rather than committed untold.
func Add(b *book.Batch, e Event) error {
	r, err := rowOf(e)
	if err != nil || outboxOff.Load() {
		return err
	}
	g := b.Gathered("events", func() book.Gather { return &gather{} }).(*gather)
	g.rows = append(g.rows, r)
	return nil
}

// Record writes e through q, inside the change's own transaction, which must commit next: the
// sequence's lock is held from here to COMMIT, and every event writer of the desk queues on it.
func Record(ctx context.Context, q book.Querier, e Event) error {
	r, err := rowOf(e)
	if err != nil || outboxOff.Load() {
		return err
	}
	b := &book.Batch{}
	(&gather{rows: []row{r}}).Flush(b)
	if err := b.Run(ctx, q); err != nil {
		return fmt.Errorf("events: write %s: %w", e.Type, err)
	}
	return nil
}

// row is one event's VALUES tuple, without its id.
type row struct {
	sql  string // rowSQL, its payload a placeholder or a JSON_SET of one
	args []any  // every argument but the id's
}

// gather is a batch's events (book.Gather).
type gather struct{ rows []row }

func (g *gather) Merge(o book.Gather) { g.rows = append(g.rows, o.(*gather).rows...) }

func (g *gather) Flush(b *book.Batch) {
	n := len(g.rows)
	if n == 0 {
		return
	}
	b.Exec(seqSQL, n)
	var text strings.Builder
	text.WriteString(insertSQL)
	args := make([]any, 0, n*6)
	for i, r := range g.rows {
		if i > 0 {
			text.WriteString(", ")
		}
		text.WriteString(r.sql)
		args = append(append(args, n-1-i), r.args...)
	}
	b.Exec(text.String(), args...)
}

// rowOf is e's row.
func rowOf(e Event) (row, error) {
	if e.AccountID == 0 || e.UserID == 0 || e.Type == "" {
		return row{}, fmt.Errorf("events: account, user and type are required (%s on account %d of user %d)", e.Type, e.AccountID, e.UserID)
	}
	p, err := json.Marshal(e.Payload)
	if err != nil {
		return row{}, fmt.Errorf("events: encode %s: %w", e.Type, err)
	}
	r := row{sql: rowSQL, args: []any{e.AccountID, e.UserID, string(e.Type), string(p), e.Term}}
	if len(e.FromSession) > 0 {
		var sets strings.Builder
		for _, f := range e.FromSession {
			if !fieldName.MatchString(f.Field) || !sessionVar.MatchString(f.Var) {
				return row{}, fmt.Errorf("events: %s: bad session field %q from %q", e.Type, f.Field, f.Var)
			}
			sets.WriteString(", '$." + f.Field + "', " + f.Var)
		}
		r.sql = strings.Replace(rowSQL, ", "+payloadSQL+", ?, NOW(3))", ", JSON_SET(?"+sets.String()+"), ?, NOW(3))", 1)
	}
	return r, nil
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
