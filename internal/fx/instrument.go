package fx

import (
	"time"

	"github.com/shopspring/decimal"
)

// InstrumentStatus gates trading on an instrument.
type InstrumentStatus string

const (
	InstrumentActive    InstrumentStatus = "ACTIVE"
	InstrumentCloseOnly InstrumentStatus = "CLOSE_ONLY" // opens refused, closes allowed
	InstrumentHalted    InstrumentStatus = "HALTED"     // everything refused
)

// Valid reports whether s is one of the statuses above.
func (s InstrumentStatus) Valid() bool {
	switch s {
	case InstrumentActive, InstrumentCloseOnly, InstrumentHalted:
		return true
	}
	return false
}

// CloseReason is why a position was closed, recorded on it (fx_position.closeReason) and on
// its profit deal's comment.
type CloseReason string

const (
	CloseClient  CloseReason = "CLIENT"   // the trader closed it
	CloseSL      CloseReason = "SL"       // its stop loss triggered
	CloseTP      CloseReason = "TP"       // its take profit triggered
	CloseStopOut CloseReason = "STOP_OUT" // the account fell to its stop-out level
	CloseVenue   CloseReason = "VENUE"    // the venue closed its trade (a venue stop-out, a close nobody booked)
	CloseDealer  CloseReason = "DEALER"   // an admin closed it on the trader's behalf
	// CloseTrailingStop: its trailing stop triggered (docs/orders.md «Trailing stops»).
	CloseTrailingStop CloseReason = "TRAILING_STOP"
	// CloseBy: closed against an opposite position of the same account, no spread paid.
	CloseBy CloseReason = "CLOSE_BY"
	// CloseNetted: reduced or closed by an opposite order on a NETTING or FIFO account.
	CloseNetted CloseReason = "NETTED"
)

// Instrument is one row of fx_instrument: a symbol and its terms. Money-related fields are exact
// decimals; packages that rank and compare in a hot loop (risk) build float copies from it.
type Instrument struct {
	Symbol          string
	Base, Quote     string
	Digits          int
	ContractSize    decimal.Decimal
	Point           decimal.Decimal
	VolumeMin       decimal.Decimal
	VolumeStep      decimal.Decimal
	VolumeMax       decimal.Decimal
	SwapLong        decimal.Decimal // points per lot per night
	SwapShort       decimal.Decimal
	TripleSwapDay   time.Weekday
	SessionCalendar string
	Status          InstrumentStatus
	Enabled         bool
	SymbolGroup     string
}

// ExecutionMode routes an account group's orders (fx_account_group.executionMode).
type ExecutionMode string

const (
	// Internal (B-book): the desk is the counterparty and fills at its own quote.
	Internal ExecutionMode = "INTERNAL"
	// External (A-book): straight through to the venue, which fills first; the desk books the
	// venue's price plus the group's markup.
	External ExecutionMode = "EXTERNAL"
)
