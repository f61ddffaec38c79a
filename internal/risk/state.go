package risk

import (
	"math"
	"time"

	"fxdesk/internal/tick"
)

// The view is stored in slices of plain structs addressed by int32 indexes, with one map from
// database id to index per kind. A position or order holds no pointer, so the garbage collector
// scans none of the hundred thousand of them, and handing one off allocates nothing. Freed slots
// are reused.

// view is what the engine watches: slices addressed by int32 indexes, one id → index map per
// kind. The engine holds it by pointer, so a view built off the engine's lock (ViewBuilder) is
// installed by swapping one pointer; the books' heaps point into its slot slices.
type view struct {
	pos         []position
	posSlots    []int32 // SL and TP heap slots, 2 per position
	posFree     []int32
	posByID     map[int64]int32
	ord         []order
	ordSlots    []int32
	ordFree     []int32
	ordByID     map[int64]int32
	accts       []*account
	acctByID    map[int64]int32
	books       []*book
	bookBySym   map[string]int32
	bands       []bandEntry // margin bands (band.go)
	bandSlots   []int32     // lo and hi heap slots, 2 per band
	bandFree    []int32
	instruments map[string]*Instrument
	groupTerms  map[string]map[string]SymbolTerms // account group → symbol → its own terms
	legs        map[string]leg
}

// newView is an empty view.
func newView() *view {
	return &view{posByID: map[int64]int32{}, ordByID: map[int64]int32{}, acctByID: map[int64]int32{},
		bookBySym: map[string]int32{}, instruments: map[string]*Instrument{}, legs: map[string]leg{},
		groupTerms: map[string]map[string]SymbolTerms{}}
}

// position is a Position under watch. While closing it is out of the trigger heaps and the
// exposure aggregates, and its estimated realised profit sits in its account's pending sum, so
// the margin level computed after the hand-off is the level the account will have once the
// close commits. Its SL is ref 2·index in e.posSlots, its TP 2·index+1.
type position struct {
	id     int64
	volume float64 // lots still open
	open   float64
	sl, tp float64 // 0 = none
	trailD float64 // trailing stop distance; 0 = none
	// tlevel is the trailing stop's level while it is out of its trail book (closing, or not
	// yet indexed); inside it, the book holds it (node tnode−1; 0 = in none).
	tlevel float64
	tnode  int32
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
	// Trailing stops (trail.go): a buy's trail on the bid, a sell's on the ask.
	buyTrail, sellTrail *trailBook
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
		buyTrail:  newTrailBook(false, e.view.relinkTrail),
		sellTrail: newTrailBook(true, e.view.relinkTrail),
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
