package fx

import (
	"strings"

	"github.com/shopspring/decimal"
)

// Side is the direction of an order or position.
type Side string

const (
	Buy  Side = "BUY"
	Sell Side = "SELL"
)

// OrderType is how an order fills.
type OrderType string

const (
	Market OrderType = "MARKET" // fills now at the desk's quote
	Limit  OrderType = "LIMIT"  // rests until the market reaches a better price
	Stop   OrderType = "STOP"   // rests until the market reaches a worse price
	// StopLimit rests until the market reaches its stop (the order's price, as a STOP), then
	// rests as a LIMIT at its limitPrice (docs/orders.md).
	StopLimit OrderType = "STOP_LIMIT"
)

// TimeInForce is how long a resting order lives.
type TimeInForce string

const (
	GTC TimeInForce = "GTC" // until cancelled
	GTD TimeInForce = "GTD" // until expiresAt
	DAY TimeInForce = "DAY" // until the next 17:00 New York rollover
	// IOC and FOK are MARKET orders' fill policies (docs/orders.md). The desk fills whole at its
	// quote, so on the B-book both fill whole or not at all; at a venue that may fill part, IOC
	// books the part filled and cancels the rest, and FOK never books a part.
	IOC TimeInForce = "IOC" // immediate or cancel
	FOK TimeInForce = "FOK" // fill or kill
)

// PositionMode is how an account group's accounts hold positions (fx_account_group.positionMode,
// docs/orders.md «Position modes»).
type PositionMode string

const (
	// Hedging: several positions per symbol, on either side; every order opens its own.
	Hedging PositionMode = "HEDGING"
	// Netting: at most one position per symbol; a same-side order adds to it at the volume-weighted
	// price, an opposite order reduces, closes or reverses it.
	Netting PositionMode = "NETTING"
	// FIFO: no hedging; positions of one symbol are all on one side and an opposite order (or a
	// close) takes the oldest first (NFA Compliance Rule 2-43b).
	FIFO PositionMode = "FIFO"
)

// Valid reports whether m is one of the modes above.
func (m PositionMode) Valid() bool {
	switch m {
	case Hedging, Netting, FIFO:
		return true
	}
	return false
}

// Order statuses.
const (
	OrderPending   = "PENDING"
	OrderFilled    = "FILLED"
	OrderCancelled = "CANCELLED"
	OrderExpired   = "EXPIRED"
	OrderRejected  = "REJECTED" // refused when it came to fill (margin), or cancelled by the venue
	// An EXTERNAL order is SENDING from before its request leaves until the venue's answer is
	// booked; NOT_SENT when the venue has no trace of it past the threshold (never re-sent).
	OrderSending = "SENDING"
	OrderNotSent = "NOT_SENT"
)

// AccountState is what an admin allows an account to do (fx_account.state).
type AccountState string

const (
	AccountActive AccountState = "ACTIVE"
	// AccountCloseOnly refuses new exposure (every new order: the desk is hedging, so an order
	// always opens); closes, cancels, stop changes and withdrawals go on.
	AccountCloseOnly AccountState = "CLOSE_ONLY"
	// AccountDisabled is read-only for the trader: no orders, closes, cancels, stop changes or
	// withdrawals. The risk engine (SL, TP, stop-out) and a dealer still act on it.
	AccountDisabled AccountState = "DISABLED"
)

// Valid reports whether s is one of the states above.
func (s AccountState) Valid() bool {
	switch s {
	case AccountActive, AccountCloseOnly, AccountDisabled:
		return true
	}
	return false
}

// Money request states (fx_money_request.state): a staff deposit or withdrawal above the
// four-eyes threshold is PENDING until a second finance user approves it (APPROVED, its deal
// made) or someone rejects it (REJECTED), or until it passes its expiry undecided (EXPIRED).
// A request's kind is the deal type it would make: DealDeposit or DealWithdrawal.
const (
	MoneyRequestPending  = "PENDING"
	MoneyRequestApproved = "APPROVED"
	MoneyRequestRejected = "REJECTED"
	MoneyRequestExpired  = "EXPIRED"
)

// Position statuses.
const (
	PositionOpen   = "OPEN"
	PositionClosed = "CLOSED"
)

// DealType names why a balance changed.
type DealType string

const (
	DealDeposit    DealType = "DEPOSIT"
	DealWithdrawal DealType = "WITHDRAWAL"
	DealCommission DealType = "COMMISSION"
	DealProfit     DealType = "PROFIT" // realised profit or loss of a (partial) close
	DealSwap       DealType = "SWAP"
	// DealAdjustment is a correction the desk posts itself: negative balance protection's
	// reset of a balance a close left below zero back to exactly zero.
	DealAdjustment DealType = "ADJUSTMENT"
)

// ParseDecimal reads a decimal string as it travels in requests: optional minus sign, digits, an
// optional fraction of at most maxPlaces digits. No exponents, no spaces, no leading '+', no
// thousands separators: a client that sends something else has a bug we want it to hear about.
func ParseDecimal(field, s string, maxPlaces int) (decimal.Decimal, error) {
	if len(s) == 0 || len(s) > 32 {
		return decimal.Decimal{}, Errorf(EINVALID, "%s must be a decimal string such as \"1.25\".", field)
	}
	digits, dot := 0, -1
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '-' && i == 0:
		case c == '.' && dot < 0 && i > 0:
			dot = i
		default:
			return decimal.Decimal{}, Errorf(EINVALID, "%s must be a decimal string such as \"1.25\" (got %q).", field, s)
		}
	}
	if digits == 0 || strings.HasSuffix(s, ".") || strings.HasPrefix(s, "-.") {
		return decimal.Decimal{}, Errorf(EINVALID, "%s must be a decimal string such as \"1.25\" (got %q).", field, s)
	}
	if dot >= 0 && len(s)-dot-1 > maxPlaces {
		return decimal.Decimal{}, Errorf(EINVALID, "%s has more than %d decimals (got %q).", field, maxPlaces, s)
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, Errorf(EINVALID, "%s must be a decimal string such as \"1.25\" (got %q).", field, s)
	}
	return d, nil
}

// ValidSymbol reports whether s is a desk symbol: six upper-case ASCII letters, like EURUSD.
func ValidSymbol(s string) bool {
	if len(s) != 6 {
		return false
	}
	for i := range len(s) {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}
