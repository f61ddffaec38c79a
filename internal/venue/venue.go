package venue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// Tag marks every order and trade the desk opens at the venue (clientExtensions.tag).
const Tag = "fxdesk"

// Order and trade states, as the venue spells them.
const (
	OrderFilled    = "FILLED"
	OrderCancelled = "CANCELLED"
	OrderPending   = "PENDING"

	TradeOpen   = "OPEN"
	TradeClosed = "CLOSED"
)

// Cancel reasons the desk tells a trader about in its own words (orderCancelTransaction.reason).
const (
	ReasonInsufficientMargin = "INSUFFICIENT_MARGIN"
	ReasonMarketHalted       = "MARKET_HALTED"
	// ReasonBoundsViolation: the order's price bound (MarketOrder.PriceBound) refused the fill.
	ReasonBoundsViolation = "BOUNDS_VIOLATION"
	// ReasonInsufficientLiquidity: a fill-or-kill order the venue could fill only part of.
	ReasonInsufficientLiquidity = "INSUFFICIENT_LIQUIDITY"
)

// Time in force of a MarketOrder (docs/orders.md, «IOC and FOK»).
const (
	// FOK fills all of the order now or nothing: the desk's default, never a part.
	FOK = "FOK"
	// IOC fills what the venue can now and cancels the rest: a part is booked as the part.
	IOC = "IOC"
)

// MarketOrder is one MARKET order the desk sends (POST /v3/accounts/{id}/orders).
type MarketOrder struct {
	ClientID string          // the desk's order id: clientExtensions.id and tradeClientExtensions.id
	Symbol   string          // the desk's six-letter form (EURUSD); the client maps it to EUR_USD
	Units    decimal.Decimal // signed: positive buys, negative sells; lots × contract size
	// TimeInForce is FOK or IOC; "" is FOK.
	TimeInForce string
	// PriceBound, when set, is the worst price the venue may fill at (a buy at or below it, a
	// sell at or above it): OANDA's MarketOrder.priceBound, a LIMIT price (OrdType=2) over FIX.
	PriceBound *decimal.Decimal
}

// IOC is true when o may fill in part.
func (o MarketOrder) IOC() bool { return o.TimeInForce == IOC }

// Fill is an orderFillTransaction: the venue executed the order (or the close).
type Fill struct {
	TransactionID int64 // the fill's transaction: its last one when it has several
	OrderID       string
	Symbol        string
	Units         decimal.Decimal // signed, as filled
	Price         decimal.Decimal // the fill's price
	Time          time.Time
	TradeOpened   string // the trade an open created ("" for a close)
	// TradesClosed and TradeReduced name what a close fill ended or reduced.
	TradesClosed []string
	TradeReduced string
	RealizedPL   decimal.Decimal // in the venue account's currency

	// TransactionIDs are every transaction of a fill that has several, oldest first (the last
	// is TransactionID): a FIX venue may execute one order in several executions, each its own
	// transaction. nil when the fill is TransactionID alone, as OANDA's always is.
	TransactionIDs []int64
}

// Transactions is every venue transaction the fill comprises, oldest first: what a booking of
// it records as booked, so that the reconciler never books one of them again.
func (f Fill) Transactions() []int64 {
	if len(f.TransactionIDs) > 0 {
		return f.TransactionIDs
	}
	return []int64{f.TransactionID}
}

// Cancelled is an orderCancelTransaction: the venue accepted the request (201) and did not
// execute it. A 201 is not a fill.
type Cancelled struct {
	TransactionID int64
	OrderID       string
	Reason        string // INSUFFICIENT_MARGIN, MARKET_HALTED, …
	Time          time.Time
}

// Outcome is a send's answer: exactly one of Fill and Cancelled is set.
type Outcome struct {
	Fill      *Fill
	Cancelled *Cancelled
	// LastTransactionID is the account's last transaction id as of the answer.
	LastTransactionID int64
}

// Trade is one venue trade (GET …/openTrades, …/trades/{id}, …/trades/@{clientId}).
type Trade struct {
	ID           string
	Symbol       string // the desk's form
	Price        decimal.Decimal
	OpenTime     time.Time
	State        string          // OPEN, CLOSED
	InitialUnits decimal.Decimal // signed
	CurrentUnits decimal.Decimal // signed; 0 once closed
	// AverageClosePrice is set once the trade was closed or reduced at least once.
	AverageClosePrice *decimal.Decimal
	CloseTime         *time.Time
	// ClosingTransactionIDs are the fills that reduced or closed it, oldest first.
	ClosingTransactionIDs []int64
	// ClosedPast is, by fill of one of the desk's own closes of this trade, the units (positive)
	// that close executed past the trade: on a netting venue (FIX) the venue's own order can take
	// the trade to zero, or near it, before the desk's close executes, and what the close executed
	// beyond the units the trade still held is a trade of its own (docs/fix.md, «A close that
	// crosses the venue's own»). The desk books its close whole on the position, so a position
	// that booked such a fill holds that much less than the trade's fills leave. Set on a closed
	// trade read by its id (TradeByID, the reconciler's read); nil where trades are the venue's
	// own (REST): a close there never goes past its trade.
	ClosedPast    map[int64]decimal.Decimal
	RealizedPL    decimal.Decimal
	ClientID, Tag string // tradeClientExtensions; both "" for an untagged trade
}

// OrderInfo is one venue order (GET …/orders/@{clientId}).
type OrderInfo struct {
	ID                   string
	ClientID, Tag        string
	State                string // FILLED, CANCELLED, PENDING
	Symbol               string
	Units                decimal.Decimal
	FillingTransactionID int64  // 0 unless FILLED
	TradeOpenedID        string // the trade the fill opened
	CancelReason         string // set when CANCELLED
	CreateTime           time.Time
}

// Summary is GET …/summary: the venue account's money.
type Summary struct {
	Currency              string
	Balance               decimal.Decimal
	NAV                   decimal.Decimal
	MarginUsed            decimal.Decimal
	MarginAvailable       decimal.Decimal
	MarginCloseoutPercent decimal.Decimal // 0..1 as OANDA reports it: 1 means closeout
	OpenTradeCount        int
	LastTransactionID     int64
}

// Transaction is one entry of GET …/transactions/sinceid.
type Transaction struct {
	ID          int64
	Type        string // ORDER_FILL, ORDER_CANCEL, MARKET_ORDER, …
	Time        time.Time
	OrderID     string
	ClientID    string
	Symbol      string
	Units       decimal.Decimal
	Price       decimal.Decimal
	Reason      string
	TradeOpened string
	// Changes is what the fill did to each trade it closed (tradesClosed) or reduced
	// (tradeReduced), in that order: the trade and the units and price of its share (one fill
	// can close several trades).
	Changes []TradeChange
}

// TradeChange is one trade's share of a fill (tradesClosed, tradeReduced).
type TradeChange struct {
	TradeID string
	Units   decimal.Decimal // signed as the fill: closing a long is negative
	Price   decimal.Decimal
}

// CloseReserver is a venue whose trade closes can be named before their trigger: the FIX venue
// commits the whole close's identity (its ClOrdID) ahead, so that the close the risk engine
// triggers is written at once, with no commit in its way (docs/fix.md, «Reserved closes»). REST
// cannot: OANDA's trade close carries no client id (docs/abook.md). ReserveClose returns at once.
type CloseReserver interface {
	ReserveClose(tradeID string)
}

// API is the venue as the desk uses it. *Client implements it over HTTP. Every method returns
// *Error when the venue answered with a 4xx, ErrOutcomeUnknown (wrapped) when a request was
// written and no answer could be read (a timeout, a reset, a 5xx), and ErrNotSent (wrapped) when
// the request provably never left this process (the venue refused the connection).
type API interface {
	// PlaceMarket sends one MARKET order. It is never retried.
	PlaceMarket(ctx context.Context, o MarketOrder) (Outcome, error)
	// CloseTrade closes units of trade id (nil: all) with PUT …/trades/{id}/close.
	CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal) (Outcome, error)
	// OpenTrades lists every open trade of the account, tagged or not.
	OpenTrades(ctx context.Context) ([]Trade, error)
	// TradeByID and TradeByClientID answer ok=false when the venue does not know the trade
	// (404): right after a send that means "not visible yet", not "never sent".
	TradeByID(ctx context.Context, id string) (Trade, bool, error)
	TradeByClientID(ctx context.Context, clientID string) (Trade, bool, error)
	OrderByClientID(ctx context.Context, clientID string) (OrderInfo, bool, error)
	Summary(ctx context.Context) (Summary, error)
	// TransactionsSince lists the next transactions after id (at most the venue's page, counted
	// in transactions, oldest first) and the account's last transaction id. A page is never an
	// id range: ids have gaps (a rolled-back batch, an id stride), so an empty page means that
	// nothing follows id, and a caller walks on from the last id of a page.
	TransactionsSince(ctx context.Context, id int64) ([]Transaction, int64, error)
}

// Error is a 4xx answer: the venue read the request and refused it; nothing was executed.
type Error struct {
	Status  int
	Code    string // errorCode
	Message string // errorMessage
}

// CodeCloseInFlight is the FIX venue's refusal of a close of a trade another close of which has
// no final report yet (409; internal/venue/fix): nothing was sent. Two closes decided at once —
// a trader's and the risk engine's — meet it by design; the other close closes the trade.
const CodeCloseInFlight = "CLOSE_IN_FLIGHT"

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("venue refused the request (%d): %s", e.Status, e.Message)
	}
	return fmt.Sprintf("venue refused the request (%d %s): %s", e.Status, e.Code, e.Message)
}

var (
	// ErrOutcomeUnknown: the request was written and no answer could be read. The order may
	// have executed; it must not be sent again.
	ErrOutcomeUnknown = errors.New("the venue's answer is unknown")
	// ErrNotSent: the request never left this process (connection refused, the executor stopped).
	ErrNotSent = errors.New("the request was not sent to the venue")
)
