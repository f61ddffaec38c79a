package execution

import (
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/venue"
)

// Desk order states of an EXTERNAL order (fx_order.status).
const (
	OrderSending  = "SENDING"  // written before the request left; the venue's answer not yet booked
	OrderNotSent  = "NOT_SENT" // the reconciler found no trace of it at the venue past the threshold
	OrderFilled   = "FILLED"
	OrderRejected = "REJECTED"
)

// DeskPosition is one open EXTERNAL position linked to a venue trade.
type DeskPosition struct {
	PositionID, OrderID, AccountID int64
	Symbol                         string
	Side                           fx.Side
	Volume                         decimal.Decimal // lots open on the desk
	TradeID                        string          // the linked venue trade
}

// DeskOrder is one desk order the plan may need: every SENDING order, and every order a tagged
// venue trade names by its client id.
type DeskOrder struct {
	OrderID, AccountID int64
	ClientID           string
	Symbol             string
	Side               fx.Side
	Volume             decimal.Decimal
	Status             string    // SENDING, NOT_SENT, FILLED, REJECTED, …
	SentAt             time.Time // when the SENDING row was written (database clock)
	PositionID         int64     // the position it opened; 0 when none
	PositionOpen       bool      // that position is still OPEN on the desk
	TradeID            string    // the venue trade its position is linked to, when any
}

// DeskState is what the desk's database says about its venue business.
type DeskState struct {
	Positions []DeskPosition
	Orders    map[string]DeskOrder // by client id
	// ContractSize converts lots and venue units per symbol (units = lots × contract size).
	ContractSize map[string]decimal.Decimal
	// AppliedTransactionID is the last venue transaction whose effect the desk stored; a venue
	// snapshot older than it is ignored.
	AppliedTransactionID int64
}

// ClientLookup is what the targeted lookups by client id found (nil: the venue answered 404).
type ClientLookup struct {
	Order *venue.OrderInfo
	Trade *venue.Trade
}

// VenueState is what the venue says, gathered before Plan runs.
type VenueState struct {
	// AsOf is the account's last transaction id when the snapshot was taken.
	AsOf       int64
	OpenTrades []venue.Trade
	// Trades holds GET …/trades/{id} for every desk-linked trade missing from OpenTrades or whose
	// units differ from the desk's; a trade absent here was not found (404).
	Trades map[string]venue.Trade
	// ByClientID holds the lookups by client id of every SENDING order.
	ByClientID map[string]ClientLookup
}

// Config tunes the plan.
type Config struct {
	// NotSentAfter is how old a SENDING row must be before a targeted miss marks it NOT_SENT;
	// a miss right after a send means "not visible yet".
	NotSentAfter time.Duration
}

// ActionKind names what an action does.
type ActionKind string

const (
	// Adopt books a tagged venue trade for the desk order that sent it (FILLED, a position
	// linked to the trade, at the trade's price): the trade is adopted, never reopened.
	Adopt ActionKind = "adopt"
	// MarkNotSent ends a SENDING order the venue has no trace of. It is never re-sent.
	MarkNotSent ActionKind = "mark_not_sent"
	// MarkRejected ends a SENDING order the venue cancelled (with the venue's reason).
	MarkRejected ActionKind = "mark_rejected"
	// CloseOrphan closes (Units nil: all, else that many units of) a tagged venue trade that no
	// open desk position explains.
	CloseOrphan ActionKind = "close_orphan"
	// CloseDeskSide closes a desk position whose venue trade is gone, at the venue's close price.
	CloseDeskSide ActionKind = "close_desk_side"
	// BookPartial reduces a desk position by the share the venue closed and nobody booked.
	BookPartial ActionKind = "book_partial"
	// AlertUntagged reports an untagged venue trade; it is never touched.
	AlertUntagged ActionKind = "alert_untagged"
)

// Action is one step of a plan. The fields an action kind does not use are zero.
type Action struct {
	Kind       ActionKind
	OrderID    int64
	PositionID int64
	TradeID    string
	Symbol     string
	// Volume is the lots an Adopt opens or a BookPartial/CloseDeskSide books.
	Volume decimal.Decimal
	// Units is the signed venue units an Adopt opens, or the units a partial CloseOrphan closes
	// (nil Units on a CloseOrphan: all of it).
	Units *decimal.Decimal
	// Price is the venue price to book: the trade's open price (Adopt) or its average close
	// price (CloseDeskSide, BookPartial).
	Price decimal.Decimal
	// TransactionID is the venue transaction the booking stems from (the closing transaction,
	// or the trade's id for an Adopt); the booking's idempotency key names it.
	TransactionID int64
	Reason        string // why, for the log and the alert
}
