package risk

import (
	"context"
	"log/slog"
	"math"
	"time"

	"fxdesk/internal/tick"
)

// The view is stored in slices of plain structs addressed by int32 indexes, with one map from
// database id to index per kind. A position or order holds no pointer, so the garbage collector
// scans none of the hundred thousand of them, and handing one off allocates nothing. Freed slots
// are reused.

// position is a Position under watch. While closing it is out of the trigger heaps and the
// exposure aggregates, and its estimated realised profit sits in its account's pending sum, so
// the margin level computed after the hand-off is the level the account will have once the
// close commits. Its SL is ref 2·index in e.posSlots, its TP 2·index+1.
type position struct {
	id     int64
	volume float64 // lots still open
	open   float64
	sl, tp float64 // 0 = none
	est    float64 // estimated realised profit in the account currency, while closing
	acct   int32   // e.accts
	sym    int32   // e.books
	inAcct int32   // index in its account's positions
	// refusedAt is its book's tick count when the executor last refused its close for market
	// state (refused set): stop-out passes it over until its symbol ticks again.
	refusedAt uint32
	side      Side
	closing   bool
	live      bool       // the slot holds a position
	refused   bool       // refusedAt is set
	skip      skipReason // why stop-out last passed it over in this episode (logged once)
}

// order is a resting Order under watch; ref index in e.ordSlots. While filling it is out of its
// trigger heap.
type order struct {
	id      int64
	price   float64
	exp     int64 // ExpiresAt as Unix nanoseconds; 0: never expires
	sym     int32
	side    Side
	typ     OrderType
	filling bool
	live    bool
}

func (o *order) expired(now time.Time) bool { return o.exp != 0 && now.UnixNano() >= o.exp }

func (o *order) expiresAt() time.Time { return time.Unix(0, o.exp).UTC() }

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

// marginLots is the lots x is margined on: its net lots, plus each hedged pair's two lots at
// the hedged margin rate. Marking (levelLocked) and the bands (band.go) must use this same
// figure: a band is sound only while it bounds exactly what marking computes.
func (x *exposure) marginLots() float64 {
	return math.Abs(x.buyLots-x.sellLots) + 2*min(x.buyLots, x.sellLots)*x.hedged
}

// exposureInfo is exposures[i]'s bookkeeping; its symbol is syms[i].
type exposureInfo struct {
	n    int32    // positions aggregated here; the exposure goes when it reaches 0
	deps [3]int32 // books whose quotes move the marks here; −1 = none
}

var noDeps = [3]int32{-1, -1, -1}

// acctDep is one symbol whose quote moves an account's marks, directly or as a conversion leg,
// with how many of its exposures depend on it and the margin band it keeps on that symbol.
type acctDep struct {
	sym  int32
	n    int32
	band int32 // e.bands
}

type account struct {
	Account
	idx          int32
	known        bool // an AccountUpserted (or the snapshot) described it
	marginCalled bool // the alert for the current crossing was raised
	// stale: something the marks read changed since the band was set (a position, the balance,
	// the terms); the account is re-marked on the next tick of any symbol it depends on.
	stale bool
	// skips counts its positions with a skip noted in the current stop-out episode; the notes
	// are cleared when its level recovers above the stop-out level.
	skips     int32
	pending   float64
	syms      []int32    // exposures[i] is on books[syms[i]]: one cache line to search
	exposures []exposure // by value, hot
	info      []exposureInfo
	positions []int32 // e.pos
	deps      []acctDep
	aref      legRef // the account currency's way to USD
	seen      uint64 // the evaluation generation that last picked it, so a tick marks it once
	band      float64
}

func (a *account) exposureOf(sym int32) int {
	for i, s := range a.syms {
		if s == sym {
			return i
		}
	}
	return -1
}

// bandEntry is one account's margin band on one symbol: ref 2·index in the book's lo heap,
// 2·index+1 in its hi heap (slots in e.bandSlots).
type bandEntry struct {
	acct   int32
	sym    int32
	listed int32 // 1 + the book whose stale list holds it; 0 = none
	live   bool
}

// book is everything watched on one symbol.
type book struct {
	// The symbol's quote as read once per evaluation (tick or sweep generation qgen), so
	// marking many accounts reads each price once and through a pointer, not a map.
	q      tick.Quote
	qok    bool
	qgen   uint64
	st     tick.State // SymbolState as read once per evaluation stgen
	stgen  uint64
	ticks  uint32 // ticks evaluated on this symbol (position.refusedAt)
	symbol string
	idx    int32
	// A buy's stops trigger on the bid, a sell's on the ask.
	buySL, buyTP, sellSL, sellTP triggerHeap
	// A buy order fills at the ask and triggers on it, a sell order on the bid.
	buyLimit, buyStop, sellLimit, sellStop triggerHeap
	// The margin bands of the accounts whose marks this symbol's quote moves, directly or as a
	// conversion leg: lo fires when the lower of bid and ask falls to an account's lower edge,
	// hi when the higher rises to its upper edge.
	lo, hi triggerHeap
	// stale lists band entries here whose account changed since its band was set.
	stale []int32
	// watched counts the open positions and resting orders on this symbol (ExposedSymbols).
	watched int32
}

func (e *Engine) newBook(symbol string, idx int32) *book {
	return &book{symbol: symbol, idx: idx,
		buySL:     newHeap(&e.posSlots, false), // bid ≤ SL
		buyTP:     newHeap(&e.posSlots, true),  // bid ≥ TP
		sellSL:    newHeap(&e.posSlots, true),  // ask ≥ SL
		sellTP:    newHeap(&e.posSlots, false), // ask ≤ TP
		buyLimit:  newHeap(&e.ordSlots, false), // ask ≤ price
		buyStop:   newHeap(&e.ordSlots, true),  // ask ≥ price
		sellLimit: newHeap(&e.ordSlots, true),  // bid ≥ price
		sellStop:  newHeap(&e.ordSlots, false), // bid ≤ price
		lo:        newHeap(&e.bandSlots, false),
		hi:        newHeap(&e.bandSlots, true),
	}
}

func (b *book) stopHeaps(s Side) (sl, tp *triggerHeap) {
	if s == Buy {
		return &b.buySL, &b.buyTP
	}
	return &b.sellSL, &b.sellTP
}

func (b *book) orderHeap(o *order) *triggerHeap {
	switch {
	case o.side == Buy && o.typ == Limit:
		return &b.buyLimit
	case o.side == Buy:
		return &b.buyStop
	case o.typ == Limit:
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
	if i, ok := e.bookBySym[symbol]; ok {
		return e.books[i]
	}
	b := e.newBook(symbol, int32(len(e.books)))
	e.bookBySym[symbol] = b.idx
	e.books = append(e.books, b)
	return b
}

func (e *Engine) accountFor(id int64) *account {
	if i, ok := e.acctByID[id]; ok {
		return e.accts[i]
	}
	a := &account{Account: Account{ID: id}, idx: int32(len(e.accts))}
	e.acctByID[id] = a.idx
	e.accts = append(e.accts, a)
	return a
}

// positionAt is the position a job names, if it is still the one the job was made for.
func (e *Engine) positionAt(idx int32, id int64) *position {
	if idx < 0 || int(idx) >= len(e.pos) {
		return nil
	}
	if p := &e.pos[idx]; p.live && p.id == id {
		return p
	}
	return nil
}

func (e *Engine) orderAt(idx int32, id int64) *order {
	if idx < 0 || int(idx) >= len(e.ord) {
		return nil
	}
	if o := &e.ord[idx]; o.live && o.id == id {
		return o
	}
	return nil
}

// ---- trigger index ----

func (e *Engine) indexPositionLocked(idx int32) {
	p := &e.pos[idx]
	sl, tp := e.books[p.sym].stopHeaps(p.side)
	if p.sl > 0 {
		sl.push(2*idx, p.sl)
	}
	if p.tp > 0 {
		tp.push(2*idx+1, p.tp)
	}
}

func (e *Engine) unindexPositionLocked(idx int32) {
	p := &e.pos[idx]
	sl, tp := e.books[p.sym].stopHeaps(p.side)
	sl.remove(2 * idx)
	tp.remove(2*idx + 1)
}

// setStop moves, adds or removes one stop of a watched position in O(log n).
func setStop(h *triggerHeap, ref int32, v float64) {
	if v <= 0 {
		h.remove(ref)
		return
	}
	h.set(ref, v)
}

func (e *Engine) indexOrderLocked(idx int32) {
	o := &e.ord[idx]
	e.books[o.sym].orderHeap(o).push(idx, o.price)
}

func (e *Engine) unindexOrderLocked(idx int32) {
	o := &e.ord[idx]
	e.books[o.sym].orderHeap(o).remove(idx)
}

// ---- exposure ----

// exposeLocked adds (sign +1) or removes (sign −1) p's lots from its account's aggregate.
func (e *Engine) exposeLocked(p *position, sign float64) {
	a := e.accts[p.acct]
	e.exposeAtLocked(a, a.exposureOf(p.sym), p, sign)
}

// exposeAtLocked is exposeLocked for a caller that has found p's exposure i already (−1: none).
func (e *Engine) exposeAtLocked(a *account, i int, p *position, sign float64) {
	e.markStaleLocked(a) // a dependency added below is listed by addDepLocked
	if i < 0 {
		if sign < 0 {
			return
		}
		i = len(a.exposures)
		a.syms = append(a.syms, p.sym)
		a.exposures = append(a.exposures, exposure{bk: e.books[p.sym]})
		a.info = append(a.info, exposureInfo{deps: noDeps})
		e.addDepsLocked(a, i)
	}
	x := &a.exposures[i]
	v := sign * p.volume
	if p.side == Buy {
		x.buyLots += v
		x.buyOpen += v * p.open
	} else {
		x.sellLots += v
		x.sellOpen += v * p.open
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
		a.syms[i], a.exposures[i], a.info[i] = a.syms[last], a.exposures[last], a.info[last]
	}
	a.exposures[last], a.info[last] = exposure{}, exposureInfo{}
	a.syms, a.exposures, a.info = a.syms[:last], a.exposures[:last], a.info[:last]
}

// depsOf lists the books whose quotes move an account's marks on a symbol: the symbol itself
// and, when its quote currency is not the account's, the USD-hub legs of both currencies
// (a EUR account holding USDJPY: USDJPY, and EURUSD).
func (e *Engine) depsOf(a *account, sym int32) [3]int32 {
	d := noDeps
	d[0] = sym
	in := e.instruments[e.books[sym].symbol]
	if in == nil || in.Quote == a.Currency {
		return d
	}
	if l, ok := e.legs[in.Quote]; ok && in.Quote != "USD" {
		d[1] = e.bookFor(l.symbol).idx
	}
	if l, ok := e.legs[a.Currency]; ok && a.Currency != "USD" {
		d[2] = e.bookFor(l.symbol).idx
	}
	return d
}

// addDepsLocked copies the instrument's terms into exposure i and gives the account a band on
// every symbol its marks there depend on.
func (e *Engine) addDepsLocked(a *account, i int) {
	x, info := &a.exposures[i], &a.info[i]
	a.aref = e.refFor(a.Currency)
	in := e.instruments[e.books[a.syms[i]].symbol]
	x.priced = in != nil
	if in != nil {
		x.qref = e.refFor(in.Quote)
		x.same = in.Quote == a.Currency
		x.contract, x.markup, x.hedged = in.ContractSize, in.Markup, in.HedgedMarginRate
		x.perLot = in.ContractSize / effectiveLeverage(a, in)
	}
	info.deps = e.depsOf(a, a.syms[i])
	for _, s := range info.deps {
		if s >= 0 {
			e.addDepLocked(a, s)
		}
	}
}

func (e *Engine) removeDepsLocked(a *account, i int) {
	info := &a.info[i]
	for _, s := range info.deps {
		if s >= 0 {
			e.removeDepLocked(a, s)
		}
	}
	info.deps = noDeps
}

func (e *Engine) addDepLocked(a *account, sym int32) {
	for k := range a.deps {
		if a.deps[k].sym == sym {
			a.deps[k].n++
			return
		}
	}
	var id int32
	if n := len(e.bandFree); n > 0 {
		id = e.bandFree[n-1]
		e.bandFree = e.bandFree[:n-1]
	} else {
		id = int32(len(e.bands))
		e.bands = append(e.bands, bandEntry{})
		e.bandSlots = append(e.bandSlots, -1, -1)
	}
	be := &e.bands[id]
	be.acct, be.sym, be.live = a.idx, sym, true
	// An edge that never fires until the account is marked: a new dependency always comes with
	// a change that makes the account stale.
	b := e.books[sym]
	b.lo.push(2*id, math.Inf(-1))
	b.hi.push(2*id+1, math.Inf(1))
	a.deps = append(a.deps, acctDep{sym: sym, n: 1, band: id})
	if a.stale {
		e.queueStaleLocked(id)
	}
}

func (e *Engine) removeDepLocked(a *account, sym int32) {
	for k := range a.deps {
		d := &a.deps[k]
		if d.sym != sym {
			continue
		}
		if d.n--; d.n > 0 {
			return
		}
		b := e.books[sym]
		b.lo.remove(2 * d.band)
		b.hi.remove(2*d.band + 1)
		// Its stale list keeps the id; takeStaleLocked skips it there unless it is listed again.
		e.bands[d.band] = bandEntry{}
		e.bandFree = append(e.bandFree, d.band)
		last := len(a.deps) - 1
		a.deps[k] = a.deps[last]
		a.deps = a.deps[:last]
		return
	}
}

// redepLocked recomputes an account's dependencies after its currency or the instruments
// changed.
func (e *Engine) redepLocked(a *account) {
	for i := range a.exposures {
		e.removeDepsLocked(a, i)
		e.addDepsLocked(a, i)
	}
	e.markStaleLocked(a)
}

// ---- staleness ----

// markStaleLocked notes that an account's marks changed without a tick: it is re-marked, and its
// band set anew, on the next tick of any symbol it depends on.
func (e *Engine) markStaleLocked(a *account) {
	if a.stale {
		return
	}
	a.stale = true
	for _, d := range a.deps {
		e.queueStaleLocked(d.band)
	}
}

func (e *Engine) queueStaleLocked(id int32) {
	be := &e.bands[id]
	if be.listed == be.sym+1 {
		return
	}
	be.listed = be.sym + 1
	b := e.books[be.sym]
	b.stale = append(b.stale, id)
	if len(b.stale) > 2*b.lo.Len()+64 {
		e.compactStaleLocked(b)
	}
}

// compactStaleLocked drops the entries freed (or moved to another book) since they were listed:
// an account that churns a symbol that never ticks cannot grow the list without bound.
func (e *Engine) compactStaleLocked(b *book) {
	mark := b.idx + 1
	kept := b.stale[:0]
	for _, id := range b.stale {
		if be := &e.bands[id]; be.live && be.sym == b.idx && be.listed == mark {
			be.listed = -mark // kept once
			kept = append(kept, id)
		}
	}
	for _, id := range kept {
		e.bands[id].listed = mark
	}
	b.stale = kept
}

// takeStaleLocked appends to dst the accounts listed stale on b that this generation has not
// picked yet, and empties the list when consume is set.
func (e *Engine) takeStaleLocked(dst []int32, b *book, gen uint64, consume bool) []int32 {
	mark := b.idx + 1
	for _, id := range b.stale {
		be := &e.bands[id]
		if !be.live || be.sym != b.idx || be.listed != mark {
			continue
		}
		if consume {
			be.listed = 0
		}
		if a := e.accts[be.acct]; a.stale && a.seen != gen {
			a.seen = gen
			dst = append(dst, a.idx)
		}
	}
	if consume {
		b.stale = b.stale[:0]
	}
	return dst
}

// ---- add and remove ----

func (e *Engine) addPositionLocked(ps Position) {
	if old, ok := e.posByID[ps.ID]; ok {
		e.removePositionLocked(old)
	}
	a := e.accountFor(ps.AccountID)
	b := e.bookFor(ps.Symbol)
	var idx int32
	if n := len(e.posFree); n > 0 {
		idx = e.posFree[n-1]
		e.posFree = e.posFree[:n-1]
	} else {
		idx = int32(len(e.pos))
		e.pos = append(e.pos, position{})
		e.posSlots = append(e.posSlots, -1, -1)
	}
	e.pos[idx] = position{id: ps.ID, volume: ps.Volume, open: ps.OpenPrice, sl: ps.SL, tp: ps.TP,
		acct: a.idx, sym: b.idx, inAcct: int32(len(a.positions)), side: ps.Side, live: true}
	a.positions = append(a.positions, idx)
	e.posByID[ps.ID] = idx
	b.watched++
	e.exposeLocked(&e.pos[idx], 1)
	e.indexPositionLocked(idx)
}

func (e *Engine) removePositionLocked(idx int32) {
	p := &e.pos[idx]
	a := e.accts[p.acct]
	if p.closing {
		a.pending -= p.est
		e.markStaleLocked(a)
	} else {
		e.exposeLocked(p, -1)
		e.unindexPositionLocked(idx)
	}
	last := len(a.positions) - 1
	if moved := a.positions[last]; int(p.inAcct) != last {
		a.positions[p.inAcct] = moved
		e.pos[moved].inAcct = p.inAcct
	}
	a.positions = a.positions[:last]
	if p.skip != skipNone {
		a.skips--
	}
	delete(e.posByID, p.id)
	e.books[p.sym].watched--
	*p = position{}
	e.posFree = append(e.posFree, idx)
}

func (e *Engine) addOrderLocked(os Order) {
	if old, ok := e.ordByID[os.ID]; ok {
		e.removeOrderLocked(old)
	}
	b := e.bookFor(os.Symbol)
	var idx int32
	if n := len(e.ordFree); n > 0 {
		idx = e.ordFree[n-1]
		e.ordFree = e.ordFree[:n-1]
	} else {
		idx = int32(len(e.ord))
		e.ord = append(e.ord, order{})
		e.ordSlots = append(e.ordSlots, -1)
	}
	o := order{id: os.ID, price: os.Price, sym: b.idx, side: os.Side, typ: os.Type, live: true}
	if !os.ExpiresAt.IsZero() {
		o.exp = os.ExpiresAt.UnixNano()
	}
	e.ord[idx] = o
	e.ordByID[os.ID] = idx
	e.indexOrderLocked(idx)
	b.watched++
}

func (e *Engine) removeOrderLocked(idx int32) {
	o := &e.ord[idx]
	if !o.filling {
		e.unindexOrderLocked(idx)
	}
	delete(e.ordByID, o.id)
	e.books[o.sym].watched--
	*o = order{}
	e.ordFree = append(e.ordFree, idx)
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
		idx, ok := e.posByID[c.Position.ID]
		if !ok {
			return
		}
		p := &e.pos[idx]
		p.sl, p.tp = c.Position.SL, c.Position.TP
		if p.closing {
			return // re-indexed with these values if the close does not happen
		}
		sl, tp := e.books[p.sym].stopHeaps(p.side)
		setStop(sl, 2*idx, p.sl)
		setStop(tp, 2*idx+1, p.tp)
	case PositionReduced:
		idx, ok := e.posByID[c.Position.ID]
		if !ok {
			return
		}
		p := &e.pos[idx]
		if p.closing {
			if p.volume > 0 {
				a := e.accts[p.acct]
				est := p.est * c.Position.Volume / p.volume
				a.pending += est - p.est
				p.est = est
				e.markStaleLocked(a)
			}
			p.volume = c.Position.Volume
			return
		}
		e.exposeLocked(p, -1)
		p.volume = c.Position.Volume
		e.exposeLocked(p, 1)
	case PositionClosed:
		if idx, ok := e.posByID[c.Position.ID]; ok {
			e.removePositionLocked(idx)
		}
	case OrderPlaced:
		e.addOrderLocked(c.Order)
	case OrderCancelled, OrderFilled, OrderExpired:
		if idx, ok := e.ordByID[c.Order.ID]; ok {
			e.removeOrderLocked(idx)
		}
	case AccountUpserted:
		e.setAccountLocked(c.Account)
	case BalanceChanged:
		a := e.accountFor(c.Account.ID)
		a.Balance = c.Account.Balance
		e.markStaleLocked(a)
	case InstrumentUpserted:
		e.setInstrumentLocked(c.Instrument)
		for _, a := range e.accts {
			e.redepLocked(a)
		}
	default:
		e.log.ErrorContext(ctx, "risk view: unknown change ignored", slog.Int("kind", int(c.Kind)))
	}
}

func (e *Engine) installLocked(s Snapshot) {
	e.pos = make([]position, 0, len(s.Positions))
	e.posSlots = make([]int32, 0, 2*len(s.Positions))
	e.posFree = nil
	e.posByID = make(map[int64]int32, len(s.Positions))
	e.ord = make([]order, 0, len(s.Orders))
	e.ordSlots = make([]int32, 0, len(s.Orders))
	e.ordFree = nil
	e.ordByID = make(map[int64]int32, len(s.Orders))
	e.accts = make([]*account, 0, len(s.Accounts))
	e.acctByID = make(map[int64]int32, len(s.Accounts))
	e.books = nil
	e.bookBySym = map[string]int32{}
	e.bands, e.bandSlots, e.bandFree = nil, nil, nil
	e.instruments = make(map[string]*Instrument, len(s.Instruments))
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
