package risk

import (
	"context"
	"log/slog"

	"fxdesk/internal/tick"
)

// position is a Position under watch. While closing it is out of the trigger heaps and the
// exposure aggregates, and its estimated realised profit sits in its account's pending sum, so
// the margin level computed after the hand-off is the level the account will have once the
// close commits.
type position struct {
	Position
	acct    *account
	sl, tp  trigger
	closing bool
	est     float64 // estimated realised profit in the account currency, while closing
}

// order is a resting Order under watch. While filling it is out of its trigger heap.
type order struct {
	Order
	trig    trigger
	filling bool
}

// exposure is one account's aggregate on one symbol: the sums the equity and margin of every
// position there need, so an account is marked in O(its symbols), never O(its positions).
// It holds only what marking reads, with the instrument's terms copied in, so one account's
// marks read one contiguous block; the bookkeeping lives in exposureInfo beside it.
type exposure struct {
	bk       *book
	qref     legRef // the quote currency's way to USD
	buyLots  float64
	buyOpen  float64 // Σ lots × open price
	sellLots float64
	sellOpen float64
	contract float64
	markup   float64
	hedged   float64 // hedged margin rate
	perLot   float64 // contract ÷ effective leverage
	priced   bool    // the instrument is known; otherwise the account is unpriceable
	same     bool    // quoted in the account currency: no conversion
}

type exposureInfo struct {
	symbol string
	n      int // positions aggregated here; the exposure goes when it reaches 0
	deps   [3]string
}

type account struct {
	Account
	known        bool // an AccountUpserted (or the snapshot) described it
	pending      float64
	exposures    []exposure // by value, hot
	info         []exposureInfo
	bySymbol     map[string]int
	aref         legRef // the account currency's way to USD
	positions    map[int64]*position
	deps         map[string]int // symbol → how many exposures depend on its quote
	marginCalled bool           // the alert for the current crossing was raised
}

// book is everything watched on one symbol.
type book struct {
	// The symbol's quote as read once per evaluation (tick or sweep generation qgen), so
	// marking many accounts reads each price once and through a pointer, not a map.
	q      tick.Quote
	qok    bool
	qgen   uint64
	symbol string
	// A buy's stops trigger on the bid, a sell's on the ask.
	buySL, buyTP, sellSL, sellTP triggerHeap
	// A buy order fills at the ask and triggers on it, a sell order on the bid.
	buyLimit, buyStop, sellLimit, sellStop triggerHeap
	// accounts whose margin level this symbol's quote moves, directly or as a conversion leg.
	accounts []*account
	at       map[int64]int
}

func newBook(symbol string) *book {
	b := &book{symbol: symbol, at: map[int64]int{}}
	b.buySL.above = false    // bid ≤ SL
	b.buyTP.above = true     // bid ≥ TP
	b.sellSL.above = true    // ask ≥ SL
	b.sellTP.above = false   // ask ≤ TP
	b.buyLimit.above = false // ask ≤ price
	b.buyStop.above = true   // ask ≥ price
	b.sellLimit.above = true // bid ≥ price
	b.sellStop.above = false // bid ≤ price
	return b
}

func (b *book) addAccount(a *account) {
	if _, ok := b.at[a.ID]; ok {
		return
	}
	b.at[a.ID] = len(b.accounts)
	b.accounts = append(b.accounts, a)
}

func (b *book) removeAccount(a *account) {
	i, ok := b.at[a.ID]
	if !ok {
		return
	}
	last := len(b.accounts) - 1
	if i != last {
		b.accounts[i] = b.accounts[last]
		b.at[b.accounts[i].ID] = i
	}
	b.accounts[last] = nil
	b.accounts = b.accounts[:last]
	delete(b.at, a.ID)
}

func (b *book) stopHeaps(s Side) (sl, tp *triggerHeap) {
	if s == Buy {
		return &b.buySL, &b.buyTP
	}
	return &b.sellSL, &b.sellTP
}

func (b *book) orderHeap(o *order) *triggerHeap {
	switch {
	case o.Side == Buy && o.Type == Limit:
		return &b.buyLimit
	case o.Side == Buy:
		return &b.buyStop
	case o.Type == Limit:
		return &b.sellLimit
	default:
		return &b.sellStop
	}
}

// legRef is a currency's way to USD as the hot loop reads it.
type legRef struct {
	b   *book
	inv bool // USDCCY: one CCY is 1 / mid USD
	usd bool // the currency is USD
	ok  bool // some leg is known
}

func (e *Engine) refFor(ccy string) legRef {
	if ccy == "USD" {
		return legRef{usd: true, ok: true}
	}
	l, ok := e.legs[ccy]
	if !ok {
		return legRef{}
	}
	return legRef{b: e.bookFor(l.symbol), inv: l.inverted, ok: true}
}

// leg is the symbol that converts a currency to USD: CCYUSD (mid) or USDCCY (1 / mid).
type leg struct {
	symbol   string
	inverted bool
}

func (e *Engine) bookFor(symbol string) *book {
	b := e.books[symbol]
	if b == nil {
		b = newBook(symbol)
		e.books[symbol] = b
	}
	return b
}

func (e *Engine) accountFor(id int64) *account {
	a := e.accounts[id]
	if a == nil {
		a = &account{Account: Account{ID: id}, bySymbol: map[string]int{}, positions: map[int64]*position{}, deps: map[string]int{}}
		e.accounts[id] = a
	}
	return a
}

// ---- trigger index ----

func (e *Engine) indexPositionLocked(p *position) {
	b := e.bookFor(p.Symbol)
	sl, tp := b.stopHeaps(p.Side)
	if p.SL > 0 {
		p.sl.key = p.SL
		sl.push(&p.sl)
	}
	if p.TP > 0 {
		p.tp.key = p.TP
		tp.push(&p.tp)
	}
}

func (e *Engine) unindexPositionLocked(p *position) {
	b := e.books[p.Symbol]
	if b == nil {
		return
	}
	sl, tp := b.stopHeaps(p.Side)
	sl.remove(&p.sl)
	tp.remove(&p.tp)
}

// setStopLocked moves, adds or removes one stop of a watched position in O(log n).
func setStop(h *triggerHeap, t *trigger, v float64) {
	switch {
	case v <= 0:
		h.remove(t)
	case t.slot >= 0:
		t.key = v
		h.fix(t)
	default:
		t.key = v
		h.push(t)
	}
}

func (e *Engine) indexOrderLocked(o *order) {
	o.trig.key = o.Price
	e.bookFor(o.Symbol).orderHeap(o).push(&o.trig)
}

func (e *Engine) unindexOrderLocked(o *order) {
	if b := e.books[o.Symbol]; b != nil {
		b.orderHeap(o).remove(&o.trig)
	}
}

// ---- exposure ----

// exposeLocked adds (sign +1) or removes (sign −1) p's lots from its account's aggregate.
func (e *Engine) exposeLocked(p *position, sign float64) {
	a := p.acct
	i, ok := a.bySymbol[p.Symbol]
	if !ok {
		if sign < 0 {
			return
		}
		i = len(a.exposures)
		a.exposures = append(a.exposures, exposure{bk: e.bookFor(p.Symbol)})
		a.info = append(a.info, exposureInfo{symbol: p.Symbol})
		a.bySymbol[p.Symbol] = i
		e.addDepsLocked(a, i)
	}
	x := &a.exposures[i]
	v := sign * p.Volume
	if p.Side == Buy {
		x.buyLots += v
		x.buyOpen += v * p.OpenPrice
	} else {
		x.sellLots += v
		x.sellOpen += v * p.OpenPrice
	}
	if sign > 0 {
		a.info[i].n++
		return
	}
	if a.info[i].n--; a.info[i].n > 0 {
		return
	}
	e.removeDepsLocked(a, i)
	last := len(a.exposures) - 1
	if i != last {
		a.exposures[i], a.info[i] = a.exposures[last], a.info[last]
		a.bySymbol[a.info[i].symbol] = i
	}
	a.exposures[last], a.info[last] = exposure{}, exposureInfo{}
	a.exposures, a.info = a.exposures[:last], a.info[:last]
	delete(a.bySymbol, p.Symbol)
}

// depsOf lists the symbols whose quotes move an account's marks on a symbol: the symbol itself
// and, when its quote currency is not the account's, the USD-hub legs of both currencies
// (a EUR account holding USDJPY: USDJPY, and EURUSD).
func (e *Engine) depsOf(a *account, symbol string) [3]string {
	d := [3]string{symbol}
	in := e.instruments[symbol]
	if in == nil || in.Quote == a.Currency {
		return d
	}
	if l, ok := e.legs[in.Quote]; ok && in.Quote != "USD" {
		d[1] = l.symbol
	}
	if l, ok := e.legs[a.Currency]; ok && a.Currency != "USD" {
		d[2] = l.symbol
	}
	return d
}

// addDepsLocked copies the instrument's terms into exposure i and lists the account on every
// symbol its marks there depend on.
func (e *Engine) addDepsLocked(a *account, i int) {
	x, info := &a.exposures[i], &a.info[i]
	a.aref = e.refFor(a.Currency)
	in := e.instruments[info.symbol]
	x.priced = in != nil
	if in != nil {
		x.qref = e.refFor(in.Quote)
		x.same = in.Quote == a.Currency
		x.contract, x.markup, x.hedged = in.ContractSize, in.Markup, in.HedgedMarginRate
		x.perLot = in.ContractSize / effectiveLeverage(a, in)
	}
	info.deps = e.depsOf(a, info.symbol)
	for _, s := range info.deps {
		if s == "" {
			continue
		}
		if a.deps[s]++; a.deps[s] == 1 {
			e.bookFor(s).addAccount(a)
		}
	}
}

func (e *Engine) removeDepsLocked(a *account, i int) {
	info := &a.info[i]
	for _, s := range info.deps {
		if s == "" {
			continue
		}
		if a.deps[s]--; a.deps[s] <= 0 {
			delete(a.deps, s)
			if b := e.books[s]; b != nil {
				b.removeAccount(a)
			}
		}
	}
	info.deps = [3]string{}
}

// redepLocked recomputes an account's dependencies after its currency or the instruments
// changed.
func (e *Engine) redepLocked(a *account) {
	for i := range a.exposures {
		e.removeDepsLocked(a, i)
		e.addDepsLocked(a, i)
	}
}

// ---- add and remove ----

func (e *Engine) addPositionLocked(ps Position) {
	if old := e.positions[ps.ID]; old != nil {
		e.removePositionLocked(old)
	}
	p := &position{Position: ps, acct: e.accountFor(ps.AccountID)}
	p.sl = trigger{slot: -1, kind: trigSL, pos: p}
	p.tp = trigger{slot: -1, kind: trigTP, pos: p}
	e.positions[p.ID] = p
	p.acct.positions[p.ID] = p
	e.exposeLocked(p, 1)
	e.indexPositionLocked(p)
}

func (e *Engine) removePositionLocked(p *position) {
	if p.closing {
		p.acct.pending -= p.est
	} else {
		e.exposeLocked(p, -1)
		e.unindexPositionLocked(p)
	}
	delete(e.positions, p.ID)
	delete(p.acct.positions, p.ID)
}

func (e *Engine) addOrderLocked(os Order) {
	if old := e.orders[os.ID]; old != nil {
		e.removeOrderLocked(old)
	}
	o := &order{Order: os}
	o.trig = trigger{slot: -1, kind: trigOrder, ord: o}
	e.orders[o.ID] = o
	e.indexOrderLocked(o)
}

func (e *Engine) removeOrderLocked(o *order) {
	if !o.filling {
		e.unindexOrderLocked(o)
	}
	delete(e.orders, o.ID)
}

func (e *Engine) setInstrumentLocked(in Instrument) {
	if cur := e.instruments[in.Symbol]; cur != nil {
		*cur = in
	} else {
		c := in
		e.instruments[in.Symbol] = &c
	}
	// CCYUSD wins over USDCCY, as in the trading core's hub.
	e.legs = map[string]leg{}
	for _, in := range e.instruments {
		if in.Quote == "USD" {
			e.legs[in.Base] = leg{symbol: in.Symbol}
		}
	}
	for _, in := range e.instruments {
		if _, ok := e.legs[in.Quote]; in.Base == "USD" && !ok {
			e.legs[in.Quote] = leg{symbol: in.Symbol, inverted: true}
		}
	}
}

func (e *Engine) setAccountLocked(ac Account) {
	a := e.accountFor(ac.ID)
	a.Account = ac
	a.known = true
	e.redepLocked(a) // currency, leverage or group cap may have changed

}

// applyLocked applies one committed change.
func (e *Engine) applyLocked(ctx context.Context, c Change) {
	switch c.Kind {
	case PositionOpened:
		e.addPositionLocked(c.Position)
	case PositionModified:
		p := e.positions[c.Position.ID]
		if p == nil {
			return
		}
		p.SL, p.TP = c.Position.SL, c.Position.TP
		if p.closing {
			return // re-indexed with these values if the close does not happen
		}
		b := e.bookFor(p.Symbol)
		sl, tp := b.stopHeaps(p.Side)
		setStop(sl, &p.sl, p.SL)
		setStop(tp, &p.tp, p.TP)
	case PositionReduced:
		p := e.positions[c.Position.ID]
		if p == nil {
			return
		}
		if p.closing {
			if p.Volume > 0 {
				est := p.est * c.Position.Volume / p.Volume
				p.acct.pending += est - p.est
				p.est = est
			}
			p.Volume = c.Position.Volume
			return
		}
		e.exposeLocked(p, -1)
		p.Volume = c.Position.Volume
		e.exposeLocked(p, 1)
	case PositionClosed:
		if p := e.positions[c.Position.ID]; p != nil {
			e.removePositionLocked(p)
		}
	case OrderPlaced:
		e.addOrderLocked(c.Order)
	case OrderCancelled, OrderFilled, OrderExpired:
		if o := e.orders[c.Order.ID]; o != nil {
			e.removeOrderLocked(o)
		}
	case AccountUpserted:
		e.setAccountLocked(c.Account)
	case BalanceChanged:
		e.accountFor(c.Account.ID).Balance = c.Account.Balance
	case InstrumentUpserted:
		e.setInstrumentLocked(c.Instrument)
		for _, a := range e.accounts {
			e.redepLocked(a)
		}
	default:
		e.log.ErrorContext(ctx, "risk view: unknown change ignored", slog.Int("kind", int(c.Kind)))
	}
}

func (e *Engine) installLocked(s Snapshot) {
	e.positions = make(map[int64]*position, len(s.Positions))
	e.orders = make(map[int64]*order, len(s.Orders))
	e.accounts = make(map[int64]*account, len(s.Accounts))
	e.instruments = make(map[string]*Instrument, len(s.Instruments))
	e.books = map[string]*book{}
	e.legs = map[string]leg{}
	for _, in := range s.Instruments {
		c := in
		e.instruments[in.Symbol] = &c
	}
	if len(s.Instruments) > 0 {
		e.setInstrumentLocked(s.Instruments[0]) // rebuilds the legs from the whole set
	}
	for _, a := range s.Accounts {
		e.setAccountLocked(a)
	}
	for _, p := range s.Positions {
		e.addPositionLocked(p)
	}
	for _, o := range s.Orders {
		e.addOrderLocked(o)
	}
}
