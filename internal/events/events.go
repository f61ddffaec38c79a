package events

import (
	"bytes"
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
// (Order, Rejected), a position's (Position, Closed), an account's (MarginCall, StopOut), a
// deal's (Balance, Swap).
type Type string

const (
	OrderAccepted            Type = "order.accepted"              // a LIMIT or STOP order placed, resting as PENDING: Order
	OrderRejected            Type = "order.rejected"              // an order refused at its fill (margin, trade mode) or by the venue, REJECTED: Rejected
	OrderFilled              Type = "order.filled"                // a MARKET order filled: Order
	OrderTriggered           Type = "order.triggered"             // a resting LIMIT or STOP order filled at its trigger: Order
	OrderCancelled           Type = "order.cancelled"             // a PENDING order cancelled by its trader or the dealer: Order
	OrderExpired             Type = "order.expired"               // a PENDING GTD or DAY order past its expiry: Order
	OrderModified            Type = "order.modified"              // a PENDING order changed in place (price, volume, SL/TP, expiry): Order
	OrderStopTriggered       Type = "order.stop_triggered"        // a STOP_LIMIT's stop reached: it now rests as a LIMIT at its limitPrice: Order
	PositionOpened           Type = "position.opened"             // Position
	PositionModified         Type = "position.modified"           // its SL or TP moved: Position
	PositionClosed           Type = "position.closed"             // Closed, with the reason
	PositionPartlyClosed     Type = "position.partly_closed"      // Closed, with the reason
	AccountMarginCall        Type = "account.margin_call"         // the margin level fell below the margin-call level: MarginCall
	AccountMarginCallCleared Type = "account.margin_call_cleared" // the margin level is back at or above it, or no margin is used: MarginCall
	AccountStopOut           Type = "account.stop_out"            // one stop-out close, beside its position.closed (reason STOP_OUT): StopOut
	SwapCharged              Type = "swap.charged"                // one position's overnight swap for one rollover date: Swap
	Deposit                  Type = "balance.deposit"             // Balance
	Withdrawal               Type = "balance.withdrawal"          // Balance
	Adjustment               Type = "balance.adjustment"          // an ADJUSTMENT deal (negative balance protection's reset to zero): Balance
)

// Types is every type, in the order the documentation lists them.
var Types = []Type{OrderAccepted, OrderRejected, OrderFilled, OrderTriggered, OrderCancelled, OrderExpired,
	OrderModified, OrderStopTriggered,
	PositionOpened, PositionModified, PositionClosed, PositionPartlyClosed,
	AccountMarginCall, AccountMarginCallCleared, AccountStopOut, SwapCharged, Deposit, Withdrawal, Adjustment}

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
	g := b.GatheredLast("events", func() book.Gather { return &gather{} }).(*gather)
	g.rows = append(g.rows, r)
	return nil
}

// Record writes es through q, inside the change's own transaction, which must commit next: one
// statement takes their ids, and with them the sequence's lock, held from here to COMMIT — every
// event writer of the desk queues on it — and one INSERT writes them all. A transaction that
// tells several changes (the expiry of a batch of orders, a batch of swap charges) records them
// in one call.
func Record(ctx context.Context, q book.Querier, es ...Event) error {
	if len(es) == 0 {
		return nil
	}
	g := &gather{rows: make([]row, 0, len(es))}
	for _, e := range es {
		r, err := rowOf(e)
		if err != nil {
			return err
		}
		g.rows = append(g.rows, r)
	}
	if outboxOff.Load() {
		return nil
	}
	b := &book.Batch{}
	g.Flush(b)
	if err := b.Run(ctx, q); err != nil {
		return fmt.Errorf("events: write %d events (%s first): %w", len(es), es[0].Type, err)
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

// rowOf is e's row. The payload's bytes are encoding/json's, whatever the server: an id the
// transaction learns as it runs (FromSession) is spliced into them as text by CONCAT, never
// rendered by the server's JSON functions — MariaDB's JSON_SET spaces its output and MySQL 8's
// reorders the keys, so a payload built by them would differ in bytes from the others, by type
// and by server, wherever it is served (the page, the streams, webhooks).
func rowOf(e Event) (row, error) {
	if e.AccountID == 0 || e.UserID == 0 || e.Type == "" {
		return row{}, fmt.Errorf("events: account, user and type are required (%s on account %d of user %d)", e.Type, e.AccountID, e.UserID)
	}
	p, err := json.Marshal(e.Payload)
	if err != nil {
		return row{}, fmt.Errorf("events: encode %s: %w", e.Type, err)
	}
	if len(e.FromSession) == 0 {
		return row{sql: rowSQL, args: []any{e.AccountID, e.UserID, string(e.Type), string(p), e.Term}}, nil
	}
	expr, parts, err := splice(p, e.FromSession)
	if err != nil {
		return row{}, fmt.Errorf("events: %s: %w", e.Type, err)
	}
	args := append([]any{e.AccountID, e.UserID, string(e.Type)}, parts...)
	return row{sql: strings.Replace(rowSQL, ", "+payloadSQL+", ?, NOW(3))", ", "+expr+", ?, NOW(3))", 1), args: append(args, e.Term)}, nil
}

// splice cuts the encoded object p around the values of its top-level fields that come from
// session variables, and returns the SQL that puts it back together with each variable's value
// in its field's place — CONCAT(?, @fx_o1, ?, …) — and the pieces, its arguments. The variables
// hold ids (integers), whose text is their JSON. A field the payload does not have is refused:
// it is a defect of the code that builds the event.
func splice(p []byte, fields []SessionField) (string, []any, error) {
	byName := make(map[string]string, len(fields))
	for _, f := range fields {
		if !fieldName.MatchString(f.Field) || !sessionVar.MatchString(f.Var) {
			return "", nil, fmt.Errorf("bad session field %q from %q", f.Field, f.Var)
		}
		if _, dup := byName[f.Field]; dup {
			return "", nil, fmt.Errorf("session field %q named twice", f.Field)
		}
		byName[f.Field] = f.Var
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", nil, fmt.Errorf("session fields need an object payload, not %.20s", p)
	}
	var expr strings.Builder
	var parts []any
	expr.WriteString("CONCAT(")
	from, found := 0, 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", nil, err
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return "", nil, err
		}
		v, ok := byName[tok.(string)]
		if !ok {
			continue
		}
		end := int(dec.InputOffset()) // p is compact (json.Marshal): the value is the bytes just before
		start := end - len(value)
		expr.WriteString("?, " + v + ", ")
		parts = append(parts, string(p[from:start]))
		from, found = end, found+1
	}
	if found != len(byName) {
		return "", nil, fmt.Errorf("the payload lacks a session field of %v", fields)
	}
	expr.WriteString("?)")
	parts = append(parts, string(p[from:]))
	return expr.String(), parts, nil
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
	// ModifiedAt is the order's last modify in place (docs/orders.md); absent when never modified.
	ModifiedAt *time.Time `json:"modifiedAt,omitempty"`
	// A STOP_LIMIT's limit and the moment its stop triggered, and an OCO leg's other leg
	// (docs/orders.md); left out on orders that have none.
	LimitPrice  *string    `json:"limitPrice,omitempty"`
	TriggeredAt *time.Time `json:"triggeredAt,omitempty"`
	OCOOrderID  *int64     `json:"ocoOrderId,omitempty"`
	// PriceBound is a MARKET order's bound; FilledVolume the part an IOC filled at the venue
	// (docs/orders.md). Both omitted when unset.
	PriceBound   *string `json:"priceBound,omitempty"`
	FilledVolume *string `json:"filledVolume,omitempty"`
}

// OrderOf is o's payload.
func OrderOf(o book.Order) Order {
	return Order{ID: o.ID, AccountID: o.AccountID, Symbol: o.Symbol, Side: o.Side, Type: string(o.Type), Volume: o.Volume.String(),
		Price: optString(o.Price), SL: optString(o.SL), TP: optString(o.TP), TimeInForce: string(o.TimeInForce), ExpiresAt: o.ExpiresAt,
		Status: o.Status, RequestNonce: o.RequestNonce, FillPrice: optString(o.FillPrice), PositionID: o.PositionID, CreatedAt: o.CreatedAt.UTC(),
		ModifiedAt: o.ModifiedAt, LimitPrice: optString(o.LimitPrice), TriggeredAt: o.TriggeredAt, OCOOrderID: o.OCOOrderID,
		PriceBound: optString(o.PriceBound), FilledVolume: optString(o.FilledVolume)}
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
	// TrailingStop is its trailing stop, absent when it has none (docs/orders.md).
	TrailingStop *TrailingStop `json:"trailingStop,omitempty"`
}

// TrailingStop is a position's trailing stop: the distance it trails the market by and the
// level the holder last stored (it may have moved since, by at most one flush interval).
type TrailingStop struct {
	Distance string `json:"distance"`
	Level    string `json:"level"`
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
	if p.TrailDistance != nil && p.TrailLevel != nil {
		v.TrailingStop = &TrailingStop{Distance: p.TrailDistance.String(), Level: p.TrailLevel.String()}
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

// Balance is a deal's payload (a deposit's, a withdrawal's, an adjustment's): the API's deal
// view, without the deal's id and time (its INSERT is among the transaction's last statements);
// the idempotency key names the deal.
type Balance struct {
	AccountID      int64    `json:"accountId"`
	Type           string   `json:"type"`
	Amount         string   `json:"amount"`
	BalanceAfter   string   `json:"balanceAfter"`
	Currency       string   `json:"currency"`
	OrderID        *int64   `json:"orderId"`
	PositionID     *int64   `json:"positionId"`
	Symbol         *string  `json:"symbol"`
	Side           *fx.Side `json:"side"`
	Volume         *string  `json:"volume"`
	Price          *string  `json:"price"`
	IdempotencyKey string   `json:"idempotencyKey"`
	Comment        string   `json:"comment"`
}

// BalanceOf is deal d's payload: d as the ledger posts it, its balanceAfter worked out.
func BalanceOf(d book.Deal) Balance {
	return Balance{AccountID: d.AccountID, Type: string(d.Type), Amount: fx.FormatMoney(d.Currency, d.Amount),
		BalanceAfter: fx.FormatMoney(d.Currency, d.BalanceAfter), Currency: d.Currency, OrderID: d.OrderID, PositionID: d.PositionID,
		Symbol: d.Symbol, Side: d.Side, Volume: optString(d.Volume), Price: optString(d.Price), IdempotencyKey: d.IdempotencyKey, Comment: d.Comment}
}

// Rejected is a rejected order's payload: the order, and why it was refused (the desk's
// refusal, or the venue's reason).
type Rejected struct {
	Order
	Reason string `json:"reason"`
}

// Swap is a swap charge's payload: its SWAP deal, and the rollover date it pays for with its
// day multiplier (3 on the instrument's triple-swap day).
type Swap struct {
	Balance
	RolloverDate string `json:"rolloverDate"`
	Days         int    `json:"days"`
}

// MarginCall is the payload of an account entering or leaving margin call: the account's
// figures as the risk engine marked them at its prices (the API's account view's names), and its
// group's margin-call level (percent).
type MarginCall struct {
	AccountID       int64   `json:"accountId"`
	Currency        string  `json:"currency"`
	Balance         string  `json:"balance"`
	Equity          string  `json:"equity"`
	UsedMargin      string  `json:"usedMargin"`
	MarginLevel     *string `json:"marginLevel"` // percent; null when no margin is used
	MarginCallLevel string  `json:"marginCallLevel"`
}

// StopOut is a stop-out's payload: the account, the position the stop-out closed (its
// position.closed carries the close), the account's balance after the close and its group's
// stop-out level (percent) as the close read it, and what the risk engine decided the stop-out
// on (null for a stop-out the risk engine did not decide).
type StopOut struct {
	AccountID    int64            `json:"accountId"`
	PositionID   int64            `json:"positionId"`
	Symbol       string           `json:"symbol"`
	ClosedVolume string           `json:"closedVolume"`
	Price        string           `json:"price"`
	Profit       string           `json:"profit"`
	Currency     string           `json:"currency"`
	BalanceAfter string           `json:"balanceAfter"`
	StopOutLevel string           `json:"stopOutLevel"`
	Decision     *StopOutDecision `json:"decision"`
}

// StopOutDecision is a stop-out as the risk engine decided it, at the round that picked the
// position: the account's margin level (percent, at or below StopOutLevel), equity and used
// margin in the account's currency, and the terms it marked the account with — its group, that
// group's stop-out level, and on each symbol the account held the effective leverage and the
// markup in price units. Levels and markups are the engine's floats, written exactly
// (shortest form); equity and used margin are money in the account's currency.
type StopOutDecision struct {
	DecidedAt    time.Time       `json:"decidedAt"`
	Group        string          `json:"group"`
	StopOutLevel string          `json:"stopOutLevel"`
	MarginLevel  string          `json:"marginLevel"`
	Equity       string          `json:"equity"`
	UsedMargin   string          `json:"usedMargin"`
	Symbols      []StopOutSymbol `json:"symbols"`
}

// StopOutSymbol is the terms the risk engine marked one symbol of a stopped-out account with.
type StopOutSymbol struct {
	Symbol   string `json:"symbol"`
	Leverage int    `json:"leverage"`
	Markup   string `json:"markup"`
}

func optString(d *decimal.Decimal) *string {
	if d == nil {
		return nil
	}
	s := d.String()
	return &s
}
