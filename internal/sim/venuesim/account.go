package venuesim

import (
	"sort"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/venue"
)

// moneyPlaces: the venue reports account amounts to 4 decimals, as OANDA does.
const moneyPlaces = 4

// Transaction types and reasons the simulator records, as OANDA spells them.
const (
	txTransferFunds = "TRANSFER_FUNDS"
	txMarketOrder   = "MARKET_ORDER"
	txOrderFill     = "ORDER_FILL"
	txOrderCancel   = "ORDER_CANCEL"

	reasonClientOrder      = "CLIENT_ORDER"             // MARKET_ORDER: the client sent it
	reasonTradeClose       = "TRADE_CLOSE"              // MARKET_ORDER: PUT …/trades/{id}/close
	reasonMarginCloseout   = "MARGIN_CLOSEOUT"          // MARKET_ORDER: the venue closed it
	fillMarketOrder        = "MARKET_ORDER"             // ORDER_FILL of an open
	fillTradeClose         = "MARKET_ORDER_TRADE_CLOSE" // ORDER_FILL of a client close
	fillMarginCloseout     = "MARKET_ORDER_MARGIN_CLOSEOUT"
	reasonAccountFunding   = "CLIENT_FUNDING"
	positionFillDefault    = "DEFAULT"
	positionFillReduceOnly = "REDUCE_ONLY"
)

// trade is one venue trade; its id is the id of the fill that opened it.
type trade struct {
	id           int64
	symbol       string
	price        decimal.Decimal
	openTime     time.Time
	initialUnits decimal.Decimal
	currentUnits decimal.Decimal
	realizedPL   decimal.Decimal
	// closedUnits and closedNotional (Σ |units| × price) give the average close price.
	closedUnits, closedNotional decimal.Decimal
	closingTxIDs                []int64
	closeTime                   time.Time
	ext                         *clientExtensions // tradeClientExtensions; nil when untagged
}

func (t *trade) long() bool { return t.initialUnits.IsPositive() }
func (t *trade) open() bool { return !t.currentUnits.IsZero() }

// state is OPEN or CLOSED, as the venue spells it.
func (t *trade) state() string {
	if t.open() {
		return venue.TradeOpen
	}
	return venue.TradeClosed
}

// averageClose is the average price of the units closed so far; ok is false before the first
// close or reduction.
func (t *trade) averageClose() (price decimal.Decimal, ok bool) {
	if !t.closedUnits.IsPositive() {
		return decimal.Decimal{}, false
	}
	return t.closedNotional.Div(t.closedUnits).Round(6), true
}

// order is one client MARKET order that carried a client id, for GET …/orders/@{clientId}.
type order struct {
	id         int64 // its MARKET_ORDER transaction
	symbol     string
	units      decimal.Decimal
	createTime time.Time
	ext        *clientExtensions
	tradeExt   *clientExtensions
	state      string
	resultTxID int64 // the fill or the cancel
	resultTime time.Time
	tradeID    int64
}

// exposure sums one symbol's open trades so the account's money is computed per symbol, not
// per trade: units and cost (Σ units × open price) of the longs and of the shorts.
type exposure struct {
	longUnits, longCost, shortUnits, shortCost decimal.Decimal
}

func (e *exposure) add(long bool, units, price decimal.Decimal) {
	if long {
		e.longUnits = e.longUnits.Add(units)
		e.longCost = e.longCost.Add(units.Mul(price))
		return
	}
	e.shortUnits = e.shortUnits.Add(units)
	e.shortCost = e.shortCost.Add(units.Mul(price))
}

// account is the simulated venue account; every field is guarded by Server.mu.
//
// It is a hedging account: every order opens its own trade, and a sell never reduces a buy.
// The desk links one position to one trade and closes it by id, which is what it needs.
type account struct {
	id       string
	currency string
	leverage decimal.Decimal
	balance  decimal.Decimal

	// txs are the recorded transactions, oldest first, their ids increasing; last is the
	// newest id given. A gap (SkipTransactionIDs) leaves ids nothing has, as a rolled-back batch
	// or a cluster's id stride does at a real venue, so an id is never an index.
	txs            []transaction
	last           int64
	trades         map[int64]*trade
	tradeList      []*trade // by id
	tradesByClient map[string]*trade
	orders         map[string]*order // by clientExtensions.id
	reserved       map[string]bool   // client ids received and not yet executed
	exposure       map[string]*exposure

	openTrades                                  int
	ordersFilled, ordersCancelled, closesFilled int
}

func newAccount(cfg Config, now time.Time) *account {
	a := &account{
		id:             cfg.AccountID,
		currency:       cfg.Currency,
		leverage:       decimal.NewFromInt(int64(cfg.Leverage)),
		balance:        cfg.Balance,
		trades:         make(map[int64]*trade),
		tradesByClient: make(map[string]*trade),
		orders:         make(map[string]*order),
		reserved:       make(map[string]bool),
		exposure:       make(map[string]*exposure),
	}
	// The account starts funded, as a real one does: the first transaction is the deposit.
	a.record(transaction{Time: wireTime(now), Type: txTransferFunds, Amount: money(cfg.Balance),
		FundingReason: reasonAccountFunding, AccountBalance: money(cfg.Balance)})
	return a
}

func money(d decimal.Decimal) string { return d.StringFixed(moneyPlaces) }

func (a *account) lastID() int64 { return a.last }

// record assigns tx the next id and appends it.
func (a *account) record(tx transaction) transaction {
	a.last++
	tx.ID = wireID(a.last)
	tx.AccountID = a.id
	if tx.BatchID == "" {
		tx.BatchID = tx.ID
	}
	a.txs = append(a.txs, tx)
	return tx
}

// after is the index in txs of the first transaction whose id is above id.
func (a *account) after(id int64) int {
	return sort.Search(len(a.txs), func(i int) bool {
		n, _ := strconv.ParseInt(a.txs[i].ID, 10, 64)
		return n > id
	})
}

// transactionByID is the transaction with id; ok is false for an id nothing has.
func (a *account) transactionByID(id int64) (tx *transaction, ok bool) {
	i := a.after(id - 1)
	if i == len(a.txs) || a.txs[i].ID != wireID(id) {
		return nil, false
	}
	return &a.txs[i], true
}

// figures is the account's money at one set of prices.
type figures struct {
	balance, unrealized, nav, marginUsed, marginAvailable, closeoutPercent decimal.Decimal
	openTrades                                                             int
}

// figures prices the account. Margin is Σ |units| × mid ÷ leverage per symbol, converted to the
// account currency; marginCloseoutPercent approximates OANDA's closeout margin (half the
// initial margin) over NAV: 1 or more means a closeout is due. A symbol that is not quotable
// now counts at its open prices with no unrealized P&L.
func (a *account) figures(pb *priceBook) figures {
	f := figures{balance: a.balance}
	for sym, e := range a.exposure {
		quoteCcy := sym[3:]
		var upl, notional decimal.Decimal
		if q, ok := pb.quote(sym); ok {
			upl = e.longUnits.Mul(q.bid).Sub(e.longCost).Add(e.shortUnits.Mul(q.ask)).Sub(e.shortCost)
			notional = e.longUnits.Sub(e.shortUnits).Mul(q.mid())
		} else {
			notional = e.longCost.Sub(e.shortCost)
		}
		f.unrealized = f.unrealized.Add(pb.convert(upl, quoteCcy, a.currency))
		f.marginUsed = f.marginUsed.Add(pb.convert(notional, quoteCcy, a.currency).Div(a.leverage))
	}
	f.openTrades = a.openTrades
	f.nav = f.balance.Add(f.unrealized)
	f.marginAvailable = f.nav.Sub(f.marginUsed)
	f.closeoutPercent = decimal.NewFromInt(1)
	if f.nav.IsPositive() {
		f.closeoutPercent = f.marginUsed.Div(decimal.NewFromInt(2)).Div(f.nav).Round(5)
	}
	return f
}

// marginFor is the margin a new trade of units in symbol takes, in the account currency.
func (a *account) marginFor(pb *priceBook, symbol string, units decimal.Decimal, q quote) decimal.Decimal {
	return pb.convert(units.Abs().Mul(q.mid()), symbol[3:], a.currency).Div(a.leverage)
}

// marketRequest is one MARKET order as the venue received it.
type marketRequest struct {
	symbol   string
	units    decimal.Decimal
	ext      *clientExtensions
	tradeExt *clientExtensions
	// fillPercent, when above 0, fills only that share of units (FaultPartial): the trade opens
	// with the units filled, as a venue that found liquidity for part of the order.
	fillPercent int
	// ioc is timeInForce IOC (a part may fill); otherwise FOK, which a part cancels whole.
	ioc bool
	// bound is the priceBound (nil: none): a fill beyond it is cancelled (bound.go).
	bound *decimal.Decimal
}

// filled is the units the order fills: all of them, or fillPercent of them rounded down to
// whole partStep units (bound.go).
func (r marketRequest) filled() decimal.Decimal {
	if r.fillPercent <= 0 {
		return r.units
	}
	part := r.units.Abs().Mul(decimal.NewFromInt(int64(r.fillPercent))).Div(decimal.NewFromInt(100))
	part = part.Div(partStep).Floor().Mul(partStep)
	if r.units.IsNegative() {
		part = part.Neg()
	}
	return part
}

// placeMarket records the order's creation and then its fill, or its cancel: cancelReason
// when a fault asks for one, MARKET_HALTED when the symbol is not quotable, INSUFFICIENT_MARGIN
// when the trade would take more margin than is available.
func (a *account) placeMarket(now time.Time, pb *priceBook, req marketRequest, cancelReason string) (create, result transaction) {
	instrument := venue.InstrumentName(req.symbol)
	create = a.record(transaction{
		Time: wireTime(now), Type: txMarketOrder, Instrument: instrument, Units: req.units.String(),
		TimeInForce: req.timeInForce(), PriceBound: req.boundText(), PositionFill: positionFillDefault, Reason: reasonClientOrder,
		ClientExtensions: req.ext, TradeClientExtensions: req.tradeExt,
	})
	clientID := ""
	if req.ext != nil {
		clientID = req.ext.ID
	}
	var o *order
	if clientID != "" {
		o = &order{id: a.lastID(), symbol: req.symbol, units: req.units, createTime: now, ext: req.ext, tradeExt: req.tradeExt}
		a.orders[clientID] = o
		delete(a.reserved, clientID)
	}

	q, quotable := pb.quote(req.symbol)
	switch {
	case cancelReason != "":
	case !quotable:
		cancelReason = venue.ReasonMarketHalted
	case a.figures(pb).marginAvailable.Sub(a.marginFor(pb, req.symbol, req.units, q)).IsNegative():
		cancelReason = venue.ReasonInsufficientMargin
	default:
		cancelReason = req.policyCancel(q)
	}
	if cancelReason != "" {
		result = a.record(transaction{Time: wireTime(now), Type: txOrderCancel, BatchID: create.ID,
			OrderID: create.ID, ClientOrderID: clientID, Reason: cancelReason})
		a.ordersCancelled++
		if o != nil {
			o.state, o.resultTxID, o.resultTime = venue.OrderCancelled, a.lastID(), now
		}
		return create, result
	}

	units := req.filled()
	price := q.ask
	if req.units.IsNegative() {
		price = q.bid
	}
	id := a.lastID() + 1
	t := &trade{id: id, symbol: req.symbol, price: price, openTime: now,
		initialUnits: units, currentUnits: units, ext: req.tradeExt}
	a.trades[id] = t
	a.tradeList = append(a.tradeList, t)
	if req.tradeExt != nil && req.tradeExt.ID != "" {
		a.tradesByClient[req.tradeExt.ID] = t
	}
	a.openTrades++
	a.exposureOf(req.symbol).add(t.long(), units, price)
	result = a.record(transaction{
		Time: wireTime(now), Type: txOrderFill, BatchID: create.ID, OrderID: create.ID, ClientOrderID: clientID,
		Instrument: instrument, Units: units.String(), Price: price.String(), Reason: fillMarketOrder,
		PL: money(decimal.Zero), AccountBalance: money(a.balance),
		TradeOpened: &tradeOpenJSON{TradeID: wireID(id), Units: units.String(), Price: price.String()},
	})
	a.ordersFilled++
	if o != nil {
		o.state, o.resultTxID, o.resultTime, o.tradeID = venue.OrderFilled, id, now, id
	}
	return create, result
}

func (a *account) exposureOf(symbol string) *exposure {
	e, ok := a.exposure[symbol]
	if !ok {
		e = &exposure{}
		a.exposure[symbol] = e
	}
	return e
}

// closeTrade closes units (positive; nil: all) of open trade t at the current price: a long at
// the bid, a short at the ask. createReason and fillReason tell a client close from the
// venue's own. An unquotable symbol cancels the close (MARKET_HALTED). fill is result in the
// venue's own types when it is a fill (zero when the close was cancelled), so no caller parses
// back the strings just written.
func (a *account) closeTrade(now time.Time, pb *priceBook, t *trade, units *decimal.Decimal, createReason, fillReason string) (create, result transaction, fill VenueClose) {
	closing := t.currentUnits.Abs()
	closeUnits := "ALL"
	if units != nil {
		closing, closeUnits = *units, units.String()
	}
	part := closing // the signed share of the trade that closes
	if !t.long() {
		part = closing.Neg()
	}
	fillUnits := part.Neg()
	instrument := venue.InstrumentName(t.symbol)
	create = a.record(transaction{
		Time: wireTime(now), Type: txMarketOrder, Instrument: instrument, Units: fillUnits.String(),
		TimeInForce: "FOK", PositionFill: positionFillReduceOnly, Reason: createReason,
		TradeClose: &tradeCloseJSON{TradeID: wireID(t.id), Units: closeUnits},
	})
	q, ok := pb.quote(t.symbol)
	if !ok {
		result = a.record(transaction{Time: wireTime(now), Type: txOrderCancel, BatchID: create.ID,
			OrderID: create.ID, Reason: venue.ReasonMarketHalted})
		return create, result, VenueClose{}
	}
	price := q.bid
	if !t.long() {
		price = q.ask
	}
	pl := pb.convert(part.Mul(price.Sub(t.price)), t.symbol[3:], a.currency).Round(moneyPlaces)
	a.balance = a.balance.Add(pl)
	fillID := a.lastID() + 1
	t.currentUnits = t.currentUnits.Sub(part)
	t.realizedPL = t.realizedPL.Add(pl)
	t.closedUnits = t.closedUnits.Add(closing)
	t.closedNotional = t.closedNotional.Add(closing.Mul(price))
	t.closingTxIDs = append(t.closingTxIDs, fillID)
	a.exposureOf(t.symbol).add(t.long(), part.Neg(), t.price)
	reduce := tradeReduceJSON{TradeID: wireID(t.id), Units: fillUnits.String(), Price: price.String(), RealizedPL: money(pl)}
	tx := transaction{
		Time: wireTime(now), Type: txOrderFill, BatchID: create.ID, OrderID: create.ID,
		Instrument: instrument, Units: fillUnits.String(), Price: price.String(), Reason: fillReason,
		PL: money(pl), AccountBalance: money(a.balance),
	}
	if t.open() {
		tx.TradeReduced = &reduce
	} else {
		t.closeTime = now
		a.openTrades--
		tx.TradesClosed = []tradeReduceJSON{reduce}
	}
	a.closesFilled++
	fill = VenueClose{TransactionID: fillID, TradeID: wireID(t.id), Units: fillUnits, Price: price, RealizedPL: pl}
	return create, a.record(tx), fill
}

// tradeJSON renders t; pb prices the unrealized P&L of an open trade (nil: leave it out).
func (a *account) tradeJSON(t *trade, pb *priceBook) tradeJSON {
	w := tradeJSON{
		ID: wireID(t.id), Instrument: venue.InstrumentName(t.symbol), Price: t.price.String(),
		OpenTime: wireTime(t.openTime), State: t.state(), InitialUnits: t.initialUnits.String(),
		CurrentUnits: t.currentUnits.String(), RealizedPL: money(t.realizedPL),
		ClosingTransactionIDs: []string{}, ClientExtensions: t.ext,
	}
	for _, id := range t.closingTxIDs {
		w.ClosingTransactionIDs = append(w.ClosingTransactionIDs, wireID(id))
	}
	if p, ok := t.averageClose(); ok {
		w.AverageClosePrice = p.String()
	}
	if !t.open() {
		w.CloseTime = wireTime(t.closeTime)
	} else if pb != nil {
		if q, ok := pb.quote(t.symbol); ok {
			price := q.bid
			if !t.long() {
				price = q.ask
			}
			w.UnrealizedPL = money(pb.convert(t.currentUnits.Mul(price.Sub(t.price)), t.symbol[3:], a.currency))
		}
	}
	return w
}

func (o *order) json() orderJSON {
	w := orderJSON{
		ID: wireID(o.id), CreateTime: wireTime(o.createTime), State: o.state, Type: "MARKET",
		Instrument: venue.InstrumentName(o.symbol), Units: o.units.String(), TimeInForce: "FOK",
		PositionFill: positionFillDefault, ClientExtensions: o.ext, TradeClientExtensions: o.tradeExt,
	}
	switch o.state {
	case venue.OrderFilled:
		w.FillingTransactionID, w.FilledTime, w.TradeOpenedID = wireID(o.resultTxID), wireTime(o.resultTime), wireID(o.tradeID)
	case venue.OrderCancelled:
		w.CancellingTransactionID, w.CancelledTime = wireID(o.resultTxID), wireTime(o.resultTime)
	}
	return w
}

func (a *account) summaryJSON(pb *priceBook) accountJSON {
	f := a.figures(pb)
	return accountJSON{
		ID: a.id, Currency: a.currency, Balance: money(f.balance), NAV: money(f.nav),
		UnrealizedPL: money(f.unrealized), MarginUsed: money(f.marginUsed),
		MarginAvailable: money(f.marginAvailable), MarginCloseoutPercent: f.closeoutPercent.String(),
		MarginRate: decimal.NewFromInt(1).Div(a.leverage).String(), OpenTradeCount: f.openTrades,
		HedgingEnabled: true, LastTransactionID: wireID(a.lastID()),
	}
}
