package venuesim

import (
	"net/http"
	"strconv"
	"time"

	"fxdesk/internal/sim/control"
)

// The JSON the simulator reads and writes, in the OANDA v20 shape. These types are the
// simulator's own, not the client's: the two sides meet only on the wire, so a test of the
// client against the simulator checks the shape instead of sharing it.

type clientExtensions struct {
	ID  string `json:"id"`
	Tag string `json:"tag,omitempty"`
}

type orderRequest struct {
	Order struct {
		Type                  string            `json:"type"`
		Instrument            string            `json:"instrument"`
		Units                 string            `json:"units"`
		TimeInForce           string            `json:"timeInForce"`
		PriceBound            string            `json:"priceBound"`
		PositionFill          string            `json:"positionFill"`
		ClientExtensions      *clientExtensions `json:"clientExtensions"`
		TradeClientExtensions *clientExtensions `json:"tradeClientExtensions"`
	} `json:"order"`
}

type closeRequest struct {
	Units string `json:"units"`
}

type tradeOpenJSON struct {
	TradeID string `json:"tradeID"`
	Units   string `json:"units"`
	Price   string `json:"price"`
}

type tradeReduceJSON struct {
	TradeID    string `json:"tradeID"`
	Units      string `json:"units"`
	Price      string `json:"price"`
	RealizedPL string `json:"realizedPL"`
}

type tradeCloseJSON struct {
	TradeID string `json:"tradeID"`
	Units   string `json:"units"`
}

// transaction is every transaction the simulator records; each type fills its fields.
type transaction struct {
	ID                    string            `json:"id"`
	Time                  string            `json:"time"`
	Type                  string            `json:"type"`
	AccountID             string            `json:"accountID"`
	BatchID               string            `json:"batchID"`
	OrderID               string            `json:"orderID,omitempty"`
	ClientOrderID         string            `json:"clientOrderID,omitempty"`
	Instrument            string            `json:"instrument,omitempty"`
	Units                 string            `json:"units,omitempty"`
	Price                 string            `json:"price,omitempty"`
	TimeInForce           string            `json:"timeInForce,omitempty"`
	PriceBound            string            `json:"priceBound,omitempty"`
	PositionFill          string            `json:"positionFill,omitempty"`
	Reason                string            `json:"reason,omitempty"`
	FundingReason         string            `json:"fundingReason,omitempty"` // a TRANSFER_FUNDS's reason
	Amount                string            `json:"amount,omitempty"`
	PL                    string            `json:"pl,omitempty"`
	AccountBalance        string            `json:"accountBalance,omitempty"`
	ClientExtensions      *clientExtensions `json:"clientExtensions,omitempty"`
	TradeClientExtensions *clientExtensions `json:"tradeClientExtensions,omitempty"`
	TradeClose            *tradeCloseJSON   `json:"tradeClose,omitempty"`
	TradeOpened           *tradeOpenJSON    `json:"tradeOpened,omitempty"`
	TradesClosed          []tradeReduceJSON `json:"tradesClosed,omitempty"`
	TradeReduced          *tradeReduceJSON  `json:"tradeReduced,omitempty"`
}

type tradeJSON struct {
	ID                    string            `json:"id"`
	Instrument            string            `json:"instrument"`
	Price                 string            `json:"price"`
	OpenTime              string            `json:"openTime"`
	State                 string            `json:"state"`
	InitialUnits          string            `json:"initialUnits"`
	CurrentUnits          string            `json:"currentUnits"`
	RealizedPL            string            `json:"realizedPL"`
	UnrealizedPL          string            `json:"unrealizedPL,omitempty"`
	AverageClosePrice     string            `json:"averageClosePrice,omitempty"`
	CloseTime             string            `json:"closeTime,omitempty"`
	ClosingTransactionIDs []string          `json:"closingTransactionIDs"`
	ClientExtensions      *clientExtensions `json:"clientExtensions,omitempty"`
}

type orderJSON struct {
	ID                      string            `json:"id"`
	CreateTime              string            `json:"createTime"`
	State                   string            `json:"state"`
	Type                    string            `json:"type"`
	Instrument              string            `json:"instrument"`
	Units                   string            `json:"units"`
	TimeInForce             string            `json:"timeInForce"`
	PositionFill            string            `json:"positionFill"`
	ClientExtensions        *clientExtensions `json:"clientExtensions,omitempty"`
	TradeClientExtensions   *clientExtensions `json:"tradeClientExtensions,omitempty"`
	FillingTransactionID    string            `json:"fillingTransactionID,omitempty"`
	FilledTime              string            `json:"filledTime,omitempty"`
	TradeOpenedID           string            `json:"tradeOpenedID,omitempty"`
	CancellingTransactionID string            `json:"cancellingTransactionID,omitempty"`
	CancelledTime           string            `json:"cancelledTime,omitempty"`
}

type accountJSON struct {
	ID                    string `json:"id"`
	Currency              string `json:"currency"`
	Balance               string `json:"balance"`
	NAV                   string `json:"NAV"`
	UnrealizedPL          string `json:"unrealizedPL"`
	MarginUsed            string `json:"marginUsed"`
	MarginAvailable       string `json:"marginAvailable"`
	MarginCloseoutPercent string `json:"marginCloseoutPercent"`
	MarginRate            string `json:"marginRate"`
	OpenTradeCount        int    `json:"openTradeCount"`
	PendingOrderCount     int    `json:"pendingOrderCount"`
	HedgingEnabled        bool   `json:"hedgingEnabled"`
	LastTransactionID     string `json:"lastTransactionID"`
}

// wireID spells a transaction or trade id as the venue does: a string of digits.
func wireID(id int64) string { return strconv.FormatInt(id, 10) }

// wireTime spells a time as the venue does: RFC 3339 in UTC with nanoseconds.
func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// writeVenueError answers in the venue's error shape: {"errorCode":…,"errorMessage":…}.
func writeVenueError(w http.ResponseWriter, status int, code, msg string) {
	body := map[string]string{"errorMessage": msg}
	if code != "" {
		body["errorCode"] = code
	}
	control.WriteJSON(w, status, body)
}
