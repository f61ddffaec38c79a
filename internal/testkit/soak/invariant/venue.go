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

// VenueState is GET /control/state, read at At.
type VenueState struct {
	At            time.Time      `json:"-"`
	Held          int            `json:"held"`
	OutageUntil   *time.Time     `json:"outageUntil"` // set until the trading listener listens again
	OrderRequests map[string]int `json:"orderRequests"`
	Requests      map[string]int `json:"requests"`
	Pending       map[string]any `json:"pendingFaults"`
	Trades        []VenueTrade   `json:"trades"`
	// CloseFills are the prices of every fill that closed or reduced a trade, by trade id, from
	// the venue's transactions (read only at the end: the trading API draws injected 5xx).
	CloseFills map[string][]decimal.Decimal `json:"-"`
}
