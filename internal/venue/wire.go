package venue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// The OANDA v20 JSON shapes the client sends and reads. Numbers and prices travel as decimal
// strings, ids as strings of integers, times as RFC 3339. Only the fields the desk reads are
// declared; the venue sends many more and they are ignored.

// InstrumentName maps a desk symbol (EURUSD) to the venue's instrument name (EUR_USD). It is
// the one place the two spellings meet; anything not six letters passes through unchanged.
func InstrumentName(symbol string) string {
	if len(symbol) != 6 {
		return symbol
	}
	return symbol[:3] + "_" + symbol[3:]
}

// DeskSymbol maps a venue instrument name (EUR_USD) back to the desk's form (EURUSD).
func DeskSymbol(instrument string) string {
	return strings.ReplaceAll(instrument, "_", "")
}

type wireClientExtensions struct {
	ID  string `json:"id,omitempty"`
	Tag string `json:"tag,omitempty"`
}

type wireMarketOrder struct {
	Type                  string                `json:"type"`
	Instrument            string                `json:"instrument"`
	Units                 string                `json:"units"`
	TimeInForce           string                `json:"timeInForce"`
	PriceBound            string                `json:"priceBound,omitempty"`
	PositionFill          string                `json:"positionFill"`
	ClientExtensions      *wireClientExtensions `json:"clientExtensions,omitempty"`
	TradeClientExtensions *wireClientExtensions `json:"tradeClientExtensions,omitempty"`
}

type wireOrderRequest struct {
	Order wireMarketOrder `json:"order"`
}

type wireCloseRequest struct {
	Units string `json:"units"` // "ALL" or a positive decimal
}

type wireTradeOpen struct {
	TradeID string `json:"tradeID"`
	Units   string `json:"units"`
	Price   string `json:"price"`
}

type wireTradeReduce struct {
	TradeID    string `json:"tradeID"`
	Units      string `json:"units"`
	Price      string `json:"price"`
	RealizedPL string `json:"realizedPL"`
}

// wireTransaction is any transaction: MARKET_ORDER (an order's creation), ORDER_FILL,
// ORDER_CANCEL and the rest, which the desk lists but does not interpret.
type wireTransaction struct {
	ID               string                `json:"id"`
	Type             string                `json:"type"`
	Time             string                `json:"time"`
	OrderID          string                `json:"orderID"`
	ClientOrderID    string                `json:"clientOrderID"`
	ClientExtensions *wireClientExtensions `json:"clientExtensions"`
	Instrument       string                `json:"instrument"`
	Units            string                `json:"units"`
	Price            string                `json:"price"`
	Reason           string                `json:"reason"`
	PL               string                `json:"pl"`
	TradeOpened      *wireTradeOpen        `json:"tradeOpened"`
	TradesClosed     []wireTradeReduce     `json:"tradesClosed"`
	TradeReduced     *wireTradeReduce      `json:"tradeReduced"`
}

// wireAnswer is every answer body the client reads, 2xx or 4xx: each endpoint fills its part.
type wireAnswer struct {
	OrderCreateTransaction *wireTransaction  `json:"orderCreateTransaction"`
	OrderFillTransaction   *wireTransaction  `json:"orderFillTransaction"`
	OrderCancelTransaction *wireTransaction  `json:"orderCancelTransaction"`
	Trades                 []wireTrade       `json:"trades"`
	Trade                  *wireTrade        `json:"trade"`
	Order                  *wireOrder        `json:"order"`
	Account                *wireAccount      `json:"account"`
	Transactions           []wireTransaction `json:"transactions"`
	Transaction            *wireTransaction  `json:"transaction"`
	LastTransactionID      string            `json:"lastTransactionID"`
	ErrorCode              string            `json:"errorCode"`
	ErrorMessage           string            `json:"errorMessage"`
}

type wireTrade struct {
	ID                    string                `json:"id"`
	Instrument            string                `json:"instrument"`
	Price                 string                `json:"price"`
	OpenTime              string                `json:"openTime"`
	State                 string                `json:"state"`
	InitialUnits          string                `json:"initialUnits"`
	CurrentUnits          string                `json:"currentUnits"`
	RealizedPL            string                `json:"realizedPL"`
	AverageClosePrice     string                `json:"averageClosePrice"`
	CloseTime             string                `json:"closeTime"`
	ClosingTransactionIDs []string              `json:"closingTransactionIDs"`
	ClientExtensions      *wireClientExtensions `json:"clientExtensions"`
}

type wireOrder struct {
	ID                      string                `json:"id"`
	CreateTime              string                `json:"createTime"`
	State                   string                `json:"state"`
	Instrument              string                `json:"instrument"`
	Units                   string                `json:"units"`
	ClientExtensions        *wireClientExtensions `json:"clientExtensions"`
	FillingTransactionID    string                `json:"fillingTransactionID"`
	TradeOpenedID           string                `json:"tradeOpenedID"`
	CancellingTransactionID string                `json:"cancellingTransactionID"`
}

type wireAccount struct {
	Currency              string `json:"currency"`
	Balance               string `json:"balance"`
	NAV                   string `json:"NAV"`
	MarginUsed            string `json:"marginUsed"`
	MarginAvailable       string `json:"marginAvailable"`
	MarginCloseoutPercent string `json:"marginCloseoutPercent"`
	OpenTradeCount        int    `json:"openTradeCount"`
	LastTransactionID     string `json:"lastTransactionID"`
}

func encodeMarketOrder(o MarketOrder) ([]byte, error) {
	ext := &wireClientExtensions{ID: o.ClientID, Tag: Tag}
	tif := FOK
	if o.IOC() {
		tif = IOC
	}
	bound := ""
	if o.PriceBound != nil {
		bound = o.PriceBound.String()
	}
	return json.Marshal(wireOrderRequest{Order: wireMarketOrder{
		Type:                  "MARKET",
		Instrument:            InstrumentName(o.Symbol),
		Units:                 o.Units.String(),
		TimeInForce:           tif,
		PriceBound:            bound,
		PositionFill:          "DEFAULT",
		ClientExtensions:      ext,
		TradeClientExtensions: ext,
	}})
}

func encodeClose(units *decimal.Decimal) ([]byte, error) {
	req := wireCloseRequest{Units: "ALL"}
	if units != nil {
		req.Units = units.String()
	}
	return json.Marshal(req)
}

// fieldReader parses the string-typed fields of one answer and keeps the first error, so a
// decoder reads like a list of fields instead of a ladder of ifs.
type fieldReader struct{ err error }

func (f *fieldReader) fail(field, value, want string) {
	if f.err == nil {
		f.err = fmt.Errorf("%s %q is not %s", field, value, want)
	}
}

// decimal reads a required decimal. The venue writes plain decimals; an exponent is refused,
// because "1e999999999" would parse and then take a gigabyte to print.
func (f *fieldReader) decimal(field, s string) decimal.Decimal {
	d, err := decimal.NewFromString(s)
	if err != nil || strings.ContainsAny(s, "eE") {
		f.fail(field, s, "a decimal")
	}
	return d
}

// optDecimal reads a decimal that may be absent ("" is zero).
func (f *fieldReader) optDecimal(field, s string) decimal.Decimal {
	if s == "" {
		return decimal.Zero
	}
	return f.decimal(field, s)
}

// id reads a required transaction id.
func (f *fieldReader) id(field, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		f.fail(field, s, "a transaction id")
	}
	return n
}

// optID reads a transaction id that may be absent ("" is 0).
func (f *fieldReader) optID(field, s string) int64 {
	if s == "" {
		return 0
	}
	return f.id(field, s)
}

func (f *fieldReader) time(field, s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		f.fail(field, s, "an RFC 3339 time")
	}
	return t
}

func (f *fieldReader) optTime(field, s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	return f.time(field, s)
}

func parseAnswer(body []byte) (wireAnswer, error) {
	var a wireAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return wireAnswer{}, fmt.Errorf("decode answer: %w", err)
	}
	return a, nil
}

// errNoOutcome: a 2xx order or close answer with neither a fill nor a cancel. The venue may
// have done anything, so the caller reports it as an unknown outcome.
var errNoOutcome = errors.New("the answer carries neither orderFillTransaction nor orderCancelTransaction")

// decodeOutcome reads a 201 order answer or a 200 close answer.
func decodeOutcome(body []byte) (Outcome, error) {
	a, err := parseAnswer(body)
	if err != nil {
		return Outcome{}, err
	}
	var f fieldReader
	out := Outcome{LastTransactionID: f.optID("lastTransactionID", a.LastTransactionID)}
	switch {
	case a.OrderFillTransaction != nil && a.OrderCancelTransaction != nil:
		return Outcome{}, errors.New("the answer carries both orderFillTransaction and orderCancelTransaction")
	case a.OrderFillTransaction != nil:
		out.Fill = readFill(&f, a.OrderFillTransaction)
	case a.OrderCancelTransaction != nil:
		tx := a.OrderCancelTransaction
		out.Cancelled = &Cancelled{
			TransactionID: f.id("orderCancelTransaction.id", tx.ID),
			OrderID:       tx.OrderID,
			Reason:        tx.Reason,
			Time:          f.optTime("orderCancelTransaction.time", tx.Time),
		}
	default:
		return Outcome{}, errNoOutcome
	}
	if f.err != nil {
		return Outcome{}, fmt.Errorf("decode answer: %w", f.err)
	}
	return out, nil
}

func readFill(f *fieldReader, tx *wireTransaction) *Fill {
	fill := &Fill{
		TransactionID: f.id("orderFillTransaction.id", tx.ID),
		OrderID:       tx.OrderID,
		Symbol:        DeskSymbol(tx.Instrument),
		Units:         f.decimal("orderFillTransaction.units", tx.Units),
		Time:          f.time("orderFillTransaction.time", tx.Time),
		RealizedPL:    f.optDecimal("orderFillTransaction.pl", tx.PL),
	}
	var shares []wireTradeOpen // each trade's share of the fill: units and price
	if tx.TradeOpened != nil {
		fill.TradeOpened = tx.TradeOpened.TradeID
		shares = append(shares, *tx.TradeOpened)
	}
	for _, c := range tx.TradesClosed {
		fill.TradesClosed = append(fill.TradesClosed, c.TradeID)
		shares = append(shares, wireTradeOpen{TradeID: c.TradeID, Units: c.Units, Price: c.Price})
	}
	if tx.TradeReduced != nil {
		fill.TradeReduced = tx.TradeReduced.TradeID
		shares = append(shares, wireTradeOpen{TradeID: tx.TradeReduced.TradeID, Units: tx.TradeReduced.Units, Price: tx.TradeReduced.Price})
	}
	fill.Price = fillPrice(f, shares, tx.Price)
	return fill
}

// fillPrice is the price of a fill made of shares: the units-weighted average of the prices its
// trades were opened, closed or reduced at (one share: its price). OANDA marks the fill's own
// price field deprecated — the shares carry the official price of each unit, and its clients
// read those — so that field (deprecated) serves only when some share carries no price or no
// units. Neither: no price is guessed.
func fillPrice(f *fieldReader, shares []wireTradeOpen, deprecated string) decimal.Decimal {
	units, notional, last := decimal.Zero, decimal.Zero, decimal.Zero
	complete := len(shares) > 0
	for _, sh := range shares {
		if sh.Price == "" || sh.Units == "" {
			complete = false
			break
		}
		u := f.decimal("orderFillTransaction.trade.units", sh.Units).Abs()
		p := f.decimal("orderFillTransaction.trade.price", sh.Price)
		if !u.IsPositive() {
			complete = false
			break
		}
		units, notional, last = units.Add(u), notional.Add(u.Mul(p)), p
	}
	switch {
	case complete && len(shares) == 1:
		return last
	case complete:
		return notional.Div(units).Round(10) // the desk stores prices to 10 places
	case deprecated != "":
		return f.decimal("orderFillTransaction.price", deprecated)
	}
	f.fail("orderFillTransaction's price", "", "given by its trades or its price field")
	return decimal.Zero
}

func readTrade(f *fieldReader, w *wireTrade) Trade {
	t := Trade{
		ID:           w.ID,
		Symbol:       DeskSymbol(w.Instrument),
		Price:        f.decimal("trade.price", w.Price),
		OpenTime:     f.time("trade.openTime", w.OpenTime),
		State:        w.State,
		InitialUnits: f.decimal("trade.initialUnits", w.InitialUnits),
		CurrentUnits: f.decimal("trade.currentUnits", w.CurrentUnits),
		RealizedPL:   f.optDecimal("trade.realizedPL", w.RealizedPL),
	}
	if w.AverageClosePrice != "" {
		p := f.decimal("trade.averageClosePrice", w.AverageClosePrice)
		t.AverageClosePrice = &p
	}
	if w.CloseTime != "" {
		ct := f.time("trade.closeTime", w.CloseTime)
		t.CloseTime = &ct
	}
	for _, id := range w.ClosingTransactionIDs {
		t.ClosingTransactionIDs = append(t.ClosingTransactionIDs, f.id("trade.closingTransactionIDs", id))
	}
	if w.ClientExtensions != nil {
		t.ClientID, t.Tag = w.ClientExtensions.ID, w.ClientExtensions.Tag
	}
	return t
}

// decodeTrades reads GET …/openTrades.
func decodeTrades(body []byte) ([]Trade, error) {
	a, err := parseAnswer(body)
	if err != nil {
		return nil, err
	}
	var f fieldReader
	trades := make([]Trade, 0, len(a.Trades))
	for i := range a.Trades {
		trades = append(trades, readTrade(&f, &a.Trades[i]))
	}
	if f.err != nil {
		return nil, fmt.Errorf("decode trades: %w", f.err)
	}
	return trades, nil
}

// decodeTrade reads GET …/trades/{tradeSpecifier}.
func decodeTrade(body []byte) (Trade, error) {
	a, err := parseAnswer(body)
	if err != nil {
		return Trade{}, err
	}
	if a.Trade == nil {
		return Trade{}, errors.New("decode trade: the answer has no trade")
	}
	var f fieldReader
	t := readTrade(&f, a.Trade)
	if f.err != nil {
		return Trade{}, fmt.Errorf("decode trade: %w", f.err)
	}
	return t, nil
}

// decodeOrder reads GET …/orders/{orderSpecifier}. The cancel reason is not part of an OANDA
// order; the client reads it from the cancelling transaction.
func decodeOrder(body []byte) (OrderInfo, int64, error) {
	a, err := parseAnswer(body)
	if err != nil {
		return OrderInfo{}, 0, err
	}
	if a.Order == nil {
		return OrderInfo{}, 0, errors.New("decode order: the answer has no order")
	}
	w := a.Order
	var f fieldReader
	o := OrderInfo{
		ID:                   w.ID,
		State:                w.State,
		Symbol:               DeskSymbol(w.Instrument),
		Units:                f.optDecimal("order.units", w.Units),
		FillingTransactionID: f.optID("order.fillingTransactionID", w.FillingTransactionID),
		TradeOpenedID:        w.TradeOpenedID,
		CreateTime:           f.optTime("order.createTime", w.CreateTime),
	}
	if w.ClientExtensions != nil {
		o.ClientID, o.Tag = w.ClientExtensions.ID, w.ClientExtensions.Tag
	}
	cancelling := f.optID("order.cancellingTransactionID", w.CancellingTransactionID)
	if f.err != nil {
		return OrderInfo{}, 0, fmt.Errorf("decode order: %w", f.err)
	}
	return o, cancelling, nil
}

// decodeSummary reads GET …/summary.
func decodeSummary(body []byte) (Summary, error) {
	a, err := parseAnswer(body)
	if err != nil {
		return Summary{}, err
	}
	if a.Account == nil {
		return Summary{}, errors.New("decode summary: the answer has no account")
	}
	w := a.Account
	var f fieldReader
	s := Summary{
		Currency:              w.Currency,
		Balance:               f.decimal("account.balance", w.Balance),
		NAV:                   f.decimal("account.NAV", w.NAV),
		MarginUsed:            f.decimal("account.marginUsed", w.MarginUsed),
		MarginAvailable:       f.decimal("account.marginAvailable", w.MarginAvailable),
		MarginCloseoutPercent: f.decimal("account.marginCloseoutPercent", w.MarginCloseoutPercent),
		OpenTradeCount:        w.OpenTradeCount,
		LastTransactionID:     f.optID("account.lastTransactionID", w.LastTransactionID),
	}
	if f.err != nil {
		return Summary{}, fmt.Errorf("decode summary: %w", f.err)
	}
	return s, nil
}

func readTransaction(f *fieldReader, w *wireTransaction) Transaction {
	t := Transaction{
		ID:       f.id("transaction.id", w.ID),
		Type:     w.Type,
		Time:     f.optTime("transaction.time", w.Time),
		OrderID:  w.OrderID,
		ClientID: w.ClientOrderID,
		Symbol:   DeskSymbol(w.Instrument),
		Units:    f.optDecimal("transaction.units", w.Units),
		Price:    f.optDecimal("transaction.price", w.Price),
		Reason:   w.Reason,
	}
	if t.ClientID == "" && w.ClientExtensions != nil {
		t.ClientID = w.ClientExtensions.ID
	}
	if w.TradeOpened != nil {
		t.TradeOpened = w.TradeOpened.TradeID
	}
	for _, c := range w.TradesClosed {
		t.Changes = append(t.Changes, readChange(f, c, t.Price))
	}
	if w.TradeReduced != nil {
		t.Changes = append(t.Changes, readChange(f, *w.TradeReduced, t.Price))
	}
	return t
}

// readChange is one trade's share of a fill; a share without its own price took the fill's.
func readChange(f *fieldReader, c wireTradeReduce, fillPrice decimal.Decimal) TradeChange {
	ch := TradeChange{TradeID: c.TradeID, Units: f.optDecimal("transaction.trade.units", c.Units), Price: f.optDecimal("transaction.trade.price", c.Price)}
	if ch.Price.IsZero() {
		ch.Price = fillPrice
	}
	return ch
}

// decodeTransactions reads GET …/transactions/sinceid.
func decodeTransactions(body []byte) ([]Transaction, int64, error) {
	a, err := parseAnswer(body)
	if err != nil {
		return nil, 0, err
	}
	var f fieldReader
	last := f.id("lastTransactionID", a.LastTransactionID)
	txs := make([]Transaction, 0, len(a.Transactions))
	for i := range a.Transactions {
		txs = append(txs, readTransaction(&f, &a.Transactions[i]))
	}
	if f.err != nil {
		return nil, 0, fmt.Errorf("decode transactions: %w", f.err)
	}
	return txs, last, nil
}

// decodeTransaction reads GET …/transactions/{id}.
func decodeTransaction(body []byte) (Transaction, error) {
	a, err := parseAnswer(body)
	if err != nil {
		return Transaction{}, err
	}
	if a.Transaction == nil {
		return Transaction{}, errors.New("decode transaction: the answer has no transaction")
	}
	var f fieldReader
	t := readTransaction(&f, a.Transaction)
	if f.err != nil {
		return Transaction{}, fmt.Errorf("decode transaction: %w", f.err)
	}
	return t, nil
}

// decodeError reads a 4xx answer into *Error; a body that is not the venue's JSON still makes
// an *Error, with the start of the body as its message.
func decodeError(status int, body []byte) *Error {
	e := &Error{Status: status}
	var a wireAnswer
	if json.Unmarshal(body, &a) == nil && (a.ErrorCode != "" || a.ErrorMessage != "") {
		e.Code, e.Message = a.ErrorCode, a.ErrorMessage
		return e
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	if msg == "" {
		msg = "(empty body)"
	}
	e.Message = msg
	return e
}
