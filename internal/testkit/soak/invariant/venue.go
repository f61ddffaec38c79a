package invariant

import (
	"time"

	"github.com/shopspring/decimal"
)

// VenueTrade is one trade as GET /control/state shows it.
type VenueTrade struct {
	ID                    string           `json:"id"`
	Symbol                string           `json:"symbol"`
	State                 string           `json:"state"`
	ClientID              string           `json:"clientId"`
	Tag                   string           `json:"tag"`
	InitialUnits          decimal.Decimal  `json:"initialUnits"`
	CurrentUnits          decimal.Decimal  `json:"currentUnits"`
	Price                 decimal.Decimal  `json:"price"`
	AverageClosePrice     *decimal.Decimal `json:"averageClosePrice"`
	ClosingTransactionIDs []int64          `json:"closingTransactionIds"`
}

// Venue lanes: the REST venue simulator (cmd/venuesim) or the FIX venue (cmd/fixvenue).
const (
	LaneREST = "rest"
	LaneFIX  = "fix"
)

// VenueState is the venue's GET /control/state, read at At. The REST simulator's decodes into
// it as it is; the FIX venue's is converted (Lane LaneFIX): it has orders and a net position per
// symbol, no trades, and OrderRequests counts the messages that carried each ClOrdID.
type VenueState struct {
	Lane          string         `json:"-"` // LaneREST or LaneFIX
	At            time.Time      `json:"-"`
	Held          int            `json:"held"`
	OutageUntil   *time.Time     `json:"outageUntil"` // set until the trading listener listens again
	OrderRequests map[string]int `json:"orderRequests"`
	// RefusedAsDuplicate counts, per ClOrdID, the FIX venue's refusals of a repeated ClOrdID
	// (OrdRejReason 6): requests that executed nothing.
	RefusedAsDuplicate map[string]int `json:"-"`
	Requests           map[string]int `json:"requests"`
	Pending            map[string]any `json:"pendingFaults"`
	Trades             []VenueTrade   `json:"trades"`
	// CloseFills are the prices of every fill that closed or reduced a trade, by trade id, from
	// the venue's transactions (read only at the end: the trading API draws injected 5xx).
	CloseFills map[string][]decimal.Decimal `json:"-"`
	// Orders and Net are the FIX venue's: every order it received or made itself, and its signed
	// net units per symbol (absent: flat).
	Orders []VenueOrder               `json:"-"`
	Net    map[string]decimal.Decimal `json:"-"`
}

// VenueOrder is one order at the FIX venue.
type VenueOrder struct {
	ClOrdID string // "" for the venue's own order when it names none
	OrderID string // the venue's
	// Own is the venue's word that it made the order itself (a venue-side close), whatever its
	// ClOrdID: a number equal to a desk order id, or none.
	Own    bool
	Symbol string // EURUSD, as the desk spells it
	Side   string // BUY or SELL
	Status string // NEW, PARTIAL (some executions made), FILLED, CANCELED or REJECTED
	Qty    decimal.Decimal
	CumQty decimal.Decimal
	AvgPx  decimal.Decimal
	// Executions are the order's fills as the venue reported them, each with its ExecID; they
	// add up to CumQty.
	Executions []VenueExecution
}

// VenueExecution is one execution (one ExecutionReport of ExecType Trade) the FIX venue made.
type VenueExecution struct {
	ExecID string
	Qty    decimal.Decimal
	Px     decimal.Decimal
}
