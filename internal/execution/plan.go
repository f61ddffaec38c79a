package execution

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/venue"
)

// DeskPosition is one open EXTERNAL position linked to a venue trade.
type DeskPosition struct {
	PositionID, OrderID, AccountID int64
	Symbol                         string
	Side                           fx.Side
	Volume                         decimal.Decimal // lots open on the desk
	TradeID                        string          // the linked venue trade
	// Booked are the venue fills (transaction ids) the desk booked closes of this position from.
	Booked []int64
}

// DeskOrder is one desk order the plan may need: every SENDING order, and every order a tagged
// venue trade names by its client id.
type DeskOrder struct {
	OrderID, AccountID int64
	ClientID           string
	Symbol             string
	Side               fx.Side
	Volume             decimal.Decimal
	Status             string    // SENDING, NOT_SENT, FILLED, REJECTED, …
	SentAt             time.Time // when the SENDING row was written (database clock)
	PositionID         int64     // the position it opened; 0 when none
	PositionOpen       bool      // that position is still OPEN on the desk
	TradeID            string    // the venue trade its position is linked to, when any
	// LastVenueTx is the newest venue transaction the desk booked on that position (its
	// close's, once closed); 0 when none.
	LastVenueTx int64
}

// HedgePosition is one open position of the desk's hedge book (internal/hedge) and its venue
// trade.
type HedgePosition struct {
	PositionID, OrderID int64
	Symbol              string
	Units               decimal.Decimal // signed venue units
	TradeID             string
}

// HedgeOrder is one hedge order the plan may need: every SENDING one, and every one a tagged
// venue trade names by its client id ("H<id>").
type HedgeOrder struct {
	OrderID      int64
	ClientID     string
	Symbol       string
	Units        decimal.Decimal // signed, as ordered
	Status       string          // SENDING, NOT_SENT, FILLED, REJECTED
	SentAt       time.Time
	PositionID   int64 // the hedge position it opened; 0 when none
	PositionOpen bool
	TradeID      string
	// LastVenueTx is the venue transaction that closed its hedge position; 0 when none.
	LastVenueTx int64
	// Reduces is the hedge position a reduction (a partial close the hedge book sent) closes
	// part of; 0 for an open. Leave is the signed units that position holds once it filled.
	Reduces int64
	Leave   decimal.Decimal
}

// DeskState is what the desk's database says about its venue business.
type DeskState struct {
	Positions []DeskPosition
	Orders    map[string]DeskOrder // by client id
	// HedgePositions and HedgeOrders are the desk's own hedge book: its trades are told from
	// client trades by their client id (hedge.ClientID), are never orphans and never adopted as
	// a client's.
	HedgePositions []HedgePosition
	HedgeOrders    map[string]HedgeOrder // by client id
	// ContractSize converts lots and venue units per symbol (units = lots × contract size).
	ContractSize map[string]decimal.Decimal
	// AppliedTransactionID is the last venue transaction whose effect the desk stored; a venue
	// snapshot older than it is ignored.
	AppliedTransactionID int64
}

// ClientLookup is what the targeted lookups by client id found (nil: the venue answered 404).
type ClientLookup struct {
	Order *venue.OrderInfo
	Trade *venue.Trade
}

// VenueState is what the venue says, gathered before Plan runs.
type VenueState struct {
	// AsOf is the account's last transaction id when the snapshot was taken.
	AsOf       int64
	OpenTrades []venue.Trade
	// Trades holds GET …/trades/{id} for every desk-linked trade (client or hedge book) missing
	// from OpenTrades or whose units differ from the desk's; a trade absent here was not found
	// (404).
	Trades map[string]venue.Trade
	// ByClientID holds the lookups by client id of every SENDING order (client or hedge), and the
	// order lookup of every order an open tagged trade names that has no position yet (the trade
	// is adopted from the listing; the lookup gives the venue's order id).
	ByClientID map[string]ClientLookup
	// Fills holds the closing fills (by transaction id) of every desk-linked trade the venue
	// closed or reduced beyond what the desk booked: each share is booked at its own fill's
	// price, never at the trade's average, which mixes in closes the desk booked itself.
	Fills map[int64]venue.Transaction
}

// Config tunes the plan.
type Config struct {
	// NotSentAfter is how old a SENDING row must be before a targeted miss marks it NOT_SENT;
	// a miss right after a send means "not visible yet". It must be positive; whoever builds the
	// Config validates it.
	NotSentAfter time.Duration
}

// ActionKind names what an action does.
type ActionKind string

const (
	// Adopt books a tagged venue trade for the desk order that sent it (FILLED, a position
	// linked to the trade, at the trade's price): the trade is adopted, never reopened.
	Adopt ActionKind = "adopt"
	// MarkNotSent ends a SENDING order the venue has no trace of. It is never re-sent.
	MarkNotSent ActionKind = "mark_not_sent"
	// MarkRejected ends a SENDING order the venue cancelled (with the venue's reason).
	MarkRejected ActionKind = "mark_rejected"
	// CloseOrphan closes (Units nil: all, else that many units of) a tagged venue trade that no
	// open desk position explains.
	CloseOrphan ActionKind = "close_orphan"
	// CloseDeskSide closes a desk position whose venue trade is gone, at the venue's close price.
	CloseDeskSide ActionKind = "close_desk_side"
	// BookPartial reduces a desk position by the share the venue closed and nobody booked.
	BookPartial ActionKind = "book_partial"
	// AlertUntagged reports an untagged venue trade; it is never touched.
	AlertUntagged ActionKind = "alert_untagged"
	// AdoptClosed books a tagged venue trade that opened and closed at the venue while the desk
	// did not know: the desk order is filled at the trade's open price and its position closed at
	// once at the venue's average close price, in one booking. One action rather than an Adopt
	// and a CloseDeskSide so that no action depends on another having run first.
	AdoptClosed ActionKind = "adopt_closed"

	// The hedge book's repairs. Its trades are never closed by the plan and never adopted for a
	// client order.

	// AdoptHedge books a tagged venue trade into the hedge book for the hedge order that sent it
	// (OrderID is the hedge order's): FILLED, an open hedge position at the trade's price.
	AdoptHedge ActionKind = "hedge_adopt"
	// AdoptHedgeClosed is AdoptHedge for a trade the venue opened and closed already: adopted,
	// then closed at the trade's average close price (ClosePrice, CloseTransactionID, ClosedAt).
	AdoptHedgeClosed ActionKind = "hedge_adopt_closed"
	// MarkHedgeNotSent ends a SENDING hedge order the venue has no trace of; never re-sent.
	MarkHedgeNotSent ActionKind = "hedge_mark_not_sent"
	// MarkHedgeRejected ends a SENDING hedge order the venue cancelled.
	MarkHedgeRejected ActionKind = "hedge_mark_rejected"
	// CloseHedgeSide closes a hedge position (PositionID is the hedge position's) whose venue
	// trade the venue closed, at the venue's average close price.
	CloseHedgeSide ActionKind = "hedge_close_side"
	// BookHedgePartial books a hedge position whose venue trade the venue reduced (a netting
	// venue's own close allocated to it): its units become the trade's (Units, signed), its
	// realised P&L the venue's average close price (Price) over what was closed.
	BookHedgePartial ActionKind = "hedge_book_partial"
	// ResolveHedgeReduce ends a SENDING reduction (OrderID) whose hedge position's trade holds
	// no more than the reduction leaves, or whose hedge position is closed: the position booked
	// down to the trade's units (Units, signed) at the venue's average close price (Price), as
	// BookHedgePartial books it, and the order FILLED, in one booking.
	ResolveHedgeReduce ActionKind = "hedge_resolve_reduce"
	// ReportHedge reports an open trade carrying a hedge client id that the hedge book does not
	// explain (another desk's, or a repair by hand); it is never touched.
	ReportHedge ActionKind = "hedge_report"
)

// Hedge reports whether the action is on the hedge book: its OrderID and PositionID are a hedge
// order's and a hedge position's.
func (k ActionKind) Hedge() bool {
	switch k {
	case AdoptHedge, AdoptHedgeClosed, MarkHedgeNotSent, MarkHedgeRejected, CloseHedgeSide, BookHedgePartial, ResolveHedgeReduce, ReportHedge:
		return true
	}
	return false
}

// Action is one step of a plan. The fields an action kind does not use are zero.
type Action struct {
	Kind       ActionKind
	OrderID    int64
	PositionID int64
	TradeID    string
	Symbol     string
	// Volume is the lots an Adopt/AdoptClosed opens or a BookPartial/CloseDeskSide books.
	Volume decimal.Decimal
	// Units is the signed venue units an Adopt/AdoptClosed opens or an AlertUntagged reports,
	// or the positive count of units a partial CloseOrphan closes (the venue's
	// PUT …/trades/{id}/close takes a positive count whatever the trade's side; nil Units on a
	// CloseOrphan: all of it).
	Units *decimal.Decimal
	// Price is the venue price to book: the trade's open price (Adopt, AdoptClosed) or the price
	// of the one fill the action books (CloseDeskSide, BookPartial).
	Price decimal.Decimal
	// TransactionID is the venue transaction the booking stems from: the fill a CloseDeskSide or
	// BookPartial books (stored on its deal, unique per position, and in the cursor), or the
	// trade's id for an Adopt/AdoptClosed.
	TransactionID int64
	// OpenedAt is when the venue opened the trade an Adopt/AdoptClosed books: the position's
	// openedAt, so that a rollover between the venue's fill and the desk's adoption is charged.
	OpenedAt time.Time
	// VenueOrderID is the venue's id of the order an Adopt/AdoptClosed fills, from the lookup by
	// client id ("" when the plan had none), stored on the order as a fill from its answer is.
	VenueOrderID string
	// ClosePrice and CloseTransactionID are the close an AdoptClosed books: the trade's average
	// close price and its last closing transaction. The average is right there, unlike for a
	// position the desk booked part of: the desk booked no share of a trade it adopts closed, so
	// every fill is unbooked and their average is the position's one close.
	ClosePrice         decimal.Decimal
	CloseTransactionID int64
	// ClosedAt is when the venue closed the trade a CloseHedgeSide or AdoptHedgeClosed books
	// (zero: unknown, the booking's time).
	ClosedAt time.Time
	// Reason says why, for the log and the alert; on a MarkRejected it is the venue's cancel
	// reason verbatim (INSUFFICIENT_MARGIN, …), which the desk words for the trader.
	Reason string
}

// Plan compares what the venue holds with what the desk booked and returns the actions that bring
// the desk back in line with the venue, sorted by kind, then order, position and trade id. It
// reads only its arguments: the same states give the same plan, and work dropped earlier is not
// replayed, because no history goes in. It never plans an order that opens a trade (a send
// whose outcome is unknown is resolved, not repeated), never acts on an untagged trade
// (it only reports an open one), and never books a price the venue did not give: a case that
// lacks one waits for a later cycle.
//
// A snapshot older than the last transaction the desk applied describes a past the desk has
// already moved on from, so it yields no actions at all.
func Plan(v VenueState, d DeskState, now time.Time, cfg Config) []Action {
	if v.AsOf < d.AppliedTransactionID {
		return nil
	}
	p := planner{v: v, d: d, linked: linkedTrades(d), adoptedOrders: map[string]bool{}, adoptedTrades: map[string]bool{}}
	p.openTrades()
	p.sendingOrders(now, cfg)
	p.sendingHedgeOrders(now, cfg)
	p.positions()
	p.hedgePositions()
	slices.SortStableFunc(p.actions, func(a, b Action) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.OrderID, b.OrderID),
			cmp.Compare(a.PositionID, b.PositionID), cmp.Compare(a.TradeID, b.TradeID))
	})
	return p.actions
}

type planner struct {
	v      VenueState
	d      DeskState
	linked map[string]bool // trades an open desk position is linked to
	// adoptedOrders and adoptedTrades keep one plan from adopting an order or a trade twice.
	adoptedOrders, adoptedTrades map[string]bool
	actions                      []Action
}

// linkedTrades is every venue trade an open desk position is linked to, as the positions say and
// as the orders that opened them say.
func linkedTrades(d DeskState) map[string]bool {
	linked := make(map[string]bool, len(d.Positions))
	for _, pos := range d.Positions {
		linked[pos.TradeID] = true
	}
	for _, o := range d.Orders {
		if o.PositionOpen && o.TradeID != "" {
			linked[o.TradeID] = true
		}
	}
	for _, pos := range d.HedgePositions {
		linked[pos.TradeID] = true
	}
	for _, o := range d.HedgeOrders {
		if o.PositionOpen && o.TradeID != "" {
			linked[o.TradeID] = true
		}
	}
	return linked
}

// openTrades adopts or closes every tagged open trade no open desk position explains, and reports
// every untagged one. Trades are visited by id so that which of two trades naming the same order
// gets adopted does not depend on the venue's listing order.
func (p *planner) openTrades() {
	trades := slices.SortedFunc(slices.Values(p.v.OpenTrades), func(a, b venue.Trade) int { return cmp.Compare(a.ID, b.ID) })
	for _, t := range trades {
		switch {
		case t.Tag != venue.Tag:
			units := t.CurrentUnits
			p.add(Action{Kind: AlertUntagged, TradeID: t.ID, Symbol: t.Symbol, Units: &units,
				Reason: "an untagged trade is open at the venue; the desk does not touch it"})
		case p.linked[t.ID]:
			// Its desk position is compared in positions, its hedge position in hedgePositions.
		case isHedge(t.ClientID):
			p.hedgeTrade(t)
		default:
			o, ok := p.d.Orders[t.ClientID]
			switch {
			case ok && o.PositionID != 0 && o.LastVenueTx > p.v.AsOf:
				// The desk booked a venue transaction on its position (its close) that the
				// snapshot predates: the trade looks open only because the venue was read first.
			case !ok || o.PositionID != 0:
				p.add(Action{Kind: CloseOrphan, OrderID: o.OrderID, TradeID: t.ID, Symbol: t.Symbol,
					Reason: "a tagged venue trade that no open desk position explains"})
			case p.adoptedOrders[t.ClientID]:
				// A second trade for one order: once the first is adopted, the next cycle
				// sees this one explained by no open position and closes it.
			default:
				p.adopt(o, t, t.CurrentUnits)
			}
		}
	}
}

// sendingOrders resolves every SENDING order that no open trade listed by the venue carries, from
// the targeted lookups by its client id. A miss never leads to a send: past the threshold the
// order is marked NOT_SENT, and a trade that shows up later is adopted.
func (p *planner) sendingOrders(now time.Time, cfg Config) {
	carried := make(map[string]bool, len(p.v.OpenTrades))
	for _, t := range p.v.OpenTrades {
		if t.Tag == venue.Tag {
			carried[t.ClientID] = true
		}
	}
	for _, clientID := range slices.Sorted(maps.Keys(p.d.Orders)) {
		o := p.d.Orders[clientID]
		if o.Status != fx.OrderSending || carried[clientID] || p.adoptedOrders[clientID] || isHedge(clientID) {
			continue
		}
		lookup, ok := p.v.ByClientID[clientID]
		switch {
		case !ok:
			// Not looked up this cycle: nothing is known about it.
		case lookup.Trade != nil:
			p.sendingWithTrade(o, *lookup.Trade)
		case lookup.Order != nil:
			if lookup.Order.State == venue.OrderCancelled {
				p.add(Action{Kind: MarkRejected, OrderID: o.OrderID, Symbol: o.Symbol, Reason: cancelledBecause(*lookup.Order)})
			}
			// FILLED or PENDING without a visible trade: the trade is not visible yet.
		case now.Sub(o.SentAt) >= cfg.NotSentAfter:
			p.add(Action{Kind: MarkNotSent, OrderID: o.OrderID, Symbol: o.Symbol,
				Reason: "the venue has no trace of the order past the threshold; it is not re-sent"})
		}
	}
}

// sendingWithTrade resolves a SENDING order whose trade the lookup by client id found.
func (p *planner) sendingWithTrade(o DeskOrder, t venue.Trade) {
	if t.Tag != venue.Tag || p.linked[t.ID] || p.adoptedTrades[t.ID] || isHedge(t.ClientID) {
		return
	}
	switch t.State {
	case venue.TradeOpen:
		p.adopt(o, t, t.CurrentUnits)
	case venue.TradeClosed:
		price, closeTx, ok := closeOf(t)
		lots, sized := p.lots(t.Symbol, t.InitialUnits)
		if !ok || !sized {
			return
		}
		units := t.InitialUnits
		p.adoptedOrders[o.ClientID], p.adoptedTrades[t.ID] = true, true
		p.add(Action{Kind: AdoptClosed, OrderID: o.OrderID, TradeID: t.ID, Symbol: t.Symbol, Volume: lots,
			Units: &units, Price: t.Price, TransactionID: openTransaction(t), OpenedAt: t.OpenTime, VenueOrderID: p.venueOrderID(o.ClientID),
			ClosePrice: price, CloseTransactionID: closeTx, Reason: "the venue opened and closed the trade while the desk did not know"})
	}
}

// adopt books trade t for desk order o, for the units given; without a contract size for the
// symbol it waits, since lots cannot be derived.
func (p *planner) adopt(o DeskOrder, t venue.Trade, units decimal.Decimal) {
	lots, ok := p.lots(t.Symbol, units)
	if !ok {
		return
	}
	p.adoptedOrders[o.ClientID], p.adoptedTrades[t.ID] = true, true
	p.add(Action{Kind: Adopt, OrderID: o.OrderID, TradeID: t.ID, Symbol: t.Symbol, Volume: lots, Units: &units,
		Price: t.Price, TransactionID: openTransaction(t), OpenedAt: t.OpenTime, VenueOrderID: p.venueOrderID(o.ClientID),
		Reason: "the venue opened the trade for the desk order; adopted, not reopened"})
}

// venueOrderID is the venue's id of the order with client id clientID, when a lookup found it.
func (p *planner) venueOrderID(clientID string) string {
	if lk, ok := p.v.ByClientID[clientID]; ok && lk.Order != nil {
		return lk.Order.ID
	}
	return ""
}

// positions compares every open desk position with its venue trade.
func (p *planner) positions() {
	open := make(map[string]venue.Trade, len(p.v.OpenTrades))
	for _, t := range p.v.OpenTrades {
		open[t.ID] = t
	}
	for _, pos := range p.d.Positions {
		if t, ok := open[pos.TradeID]; ok {
			p.openPosition(pos, t)
			continue
		}
		t, ok := p.v.Trades[pos.TradeID]
		if !ok || t.Tag != venue.Tag || t.State != venue.TradeClosed {
			// Not found, or open after all (it opened or the listing raced): nothing to book.
			continue
		}
		size, ok := p.d.ContractSize[pos.Symbol]
		if !ok || !size.IsPositive() {
			continue
		}
		shares, ok := p.unbooked(pos, t, pos.Volume.Mul(size), size)
		if !ok {
			continue
		}
		lots, ok := shareLotsTo(shares, size, pos.Volume)
		if !ok {
			continue
		}
		for i, sh := range shares {
			a := Action{Kind: BookPartial, OrderID: pos.OrderID, PositionID: pos.PositionID, TradeID: t.ID, Symbol: pos.Symbol,
				Volume: lots[i], Price: sh.Price, TransactionID: sh.TransactionID,
				Reason: "the venue closed part of the trade and the desk did not book it"}
			if i == len(shares)-1 {
				a.Kind, a.Reason = CloseDeskSide, "closed at the venue"
			}
			p.add(a)
		}
	}
}

// share is one venue fill's part of a trade that the desk has not booked: its units (positive)
// and price.
type share struct {
	TransactionID int64
	Units         decimal.Decimal
	Price         decimal.Decimal
}

// lotPlaces is the most decimals a position's or a deal's volume holds (DECIMAL(12,4)).
const lotPlaces = 4

// shareLots are the lots each share books: the shares' running total in lots, rounded to what
// the book holds, less what the shares before it booked. The booked lots then add up to the
// units the shares closed (a close the venue filled as 3,333 + 3,333 + 3,334 units of a 100,000
// contract books 0.0333 + 0.0333 + 0.0334 lots), where rounding each share alone would leave the
// position off the venue by a few units for ever (0.0333 × 3 = 9,990 units).
func shareLots(shares []share, size decimal.Decimal) []decimal.Decimal {
	out := make([]decimal.Decimal, len(shares))
	units, booked := decimal.Zero, decimal.Zero
	for i, sh := range shares {
		units = units.Add(sh.Units)
		through := units.Div(size).Round(lotPlaces)
		out[i], booked = through.Sub(booked), through
	}
	return out
}

// unbooked is what the venue closed of pos's trade t and the desk did not book, fill by fill,
// oldest first. ok is false — wait for a later run — unless every such fill is known and they
// add up to want units, to within what the book's lots cannot tell apart (less than one step of
// 0.0001 lots of size units): the plan never guesses a price or a size. Exactly would be
// never when a close filled in executions of odd units was booked over two runs: the first
// run's shares book their running total's lots, and the units left (23,334) are not what the
// lots left hold (0.2333: 23,330; soak seed 237868095786120).
//
// A close the desk booked on pos may have executed past the trade (t.ClosedPast: on a netting
// venue the venue's own close crossed it; docs/fix.md, «A close that crosses the venue's own»):
// the desk booked those units off the position, the trade never gave them up, so the fills
// nobody booked close that much more than the position holds. They are then to add up to want
// and what went past, and the shares are cut to want, oldest first: the position ends at what
// the venue holds. Without it a partial close of the desk that crossed the venue's own close of
// the whole trade left the position open for ever (soak seed 74061369, position 167069).
func (p *planner) unbooked(pos DeskPosition, t venue.Trade, want, size decimal.Decimal) ([]share, bool) {
	booked := make(map[int64]bool, len(pos.Booked))
	past := decimal.Zero
	for _, id := range pos.Booked {
		if !booked[id] {
			past = past.Add(t.ClosedPast[id])
		}
		booked[id] = true
	}
	var out []share
	total := decimal.Zero
	for _, id := range t.ClosingTransactionIDs {
		if booked[id] {
			continue
		}
		tx, ok := p.v.Fills[id]
		if !ok {
			return nil, false
		}
		found := false
		for _, ch := range tx.Changes {
			if ch.TradeID == t.ID {
				out = append(out, share{TransactionID: id, Units: ch.Units.Abs(), Price: ch.Price})
				total, found = total.Add(ch.Units.Abs()), true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	if len(out) == 0 || !total.Sub(want.Add(past)).Abs().LessThan(lotStep.Mul(size)) {
		return nil, false
	}
	if past.IsPositive() {
		out = upTo(out, want)
	}
	return out, len(out) > 0
}

// upTo is shares, oldest first, as far as they add up to want units: the last one kept is cut
// to what is left of want, and the ones after it are dropped.
func upTo(shares []share, want decimal.Decimal) []share {
	left := want
	for i := range shares {
		if !left.IsPositive() {
			return shares[:i]
		}
		if shares[i].Units.GreaterThanOrEqual(left) {
			shares[i].Units = left
			return shares[:i+1]
		}
		left = left.Sub(shares[i].Units)
	}
	return shares
}

// lotStep is the least a position's or a deal's volume tells apart.
var lotStep = decimal.New(1, -lotPlaces)

// shareLotsTo is shareLots with the last share booking what is left of lots, so that the shares
// book lots in all: what the desk is to hold after them (nothing of a closed trade, the venue's
// units at the book's precision of an open one), whatever lots earlier runs booked. ok is false
// when that leaves the last share nothing to book.
func shareLotsTo(shares []share, size, lots decimal.Decimal) ([]decimal.Decimal, bool) {
	out := shareLots(shares, size)
	last := len(out) - 1
	for _, l := range out[:last] {
		lots = lots.Sub(l)
	}
	out[last] = lots
	return out, lots.IsPositive()
}

// openPosition compares a desk position with its open venue trade by units.
func (p *planner) openPosition(pos DeskPosition, t venue.Trade) {
	size, ok := p.d.ContractSize[pos.Symbol]
	if t.Tag != venue.Tag || !ok || !size.IsPositive() {
		return
	}
	deskUnits, venueUnits := pos.Volume.Mul(size), t.CurrentUnits.Abs()
	switch deskUnits.Cmp(venueUnits) {
	case 1:
		// The venue closed a share nobody booked; book each of its fills at that fill's price
		// once the lookups say what they were.
		detail, ok := p.v.Trades[t.ID]
		if !ok {
			return
		}
		shares, ok := p.unbooked(pos, detail, deskUnits.Sub(venueUnits), size)
		if !ok {
			return
		}
		lots, ok := shareLotsTo(shares, size, pos.Volume.Sub(venueUnits.Div(size).Round(lotPlaces)))
		if !ok {
			return
		}
		for i, sh := range shares {
			p.add(Action{Kind: BookPartial, OrderID: pos.OrderID, PositionID: pos.PositionID, TradeID: t.ID, Symbol: pos.Symbol,
				Volume: lots[i], Price: sh.Price, TransactionID: sh.TransactionID,
				Reason: "the venue closed part of the trade and the desk did not book it"})
		}
	case -1:
		if slices.Max(append([]int64{0}, pos.Booked...)) > p.v.AsOf {
			// The desk booked a close share the snapshot predates: the larger trade is its past.
			return
		}
		excess := venueUnits.Sub(deskUnits)
		p.add(Action{Kind: CloseOrphan, OrderID: pos.OrderID, PositionID: pos.PositionID, TradeID: t.ID, Symbol: pos.Symbol,
			Units: &excess, Reason: "the venue holds more units than the desk position; the excess is closed"})
	}
}

func (p *planner) add(a Action) { p.actions = append(p.actions, a) }

// cancelledBecause is why the venue cancelled o, as the rejection records it.
func cancelledBecause(o venue.OrderInfo) string {
	if o.CancelReason == "" {
		return "the venue cancelled the order without a reason"
	}
	return o.CancelReason
}

// lots converts venue units of symbol to lots; ok is false without a positive contract size.
func (p *planner) lots(symbol string, units decimal.Decimal) (decimal.Decimal, bool) {
	size, ok := p.d.ContractSize[symbol]
	if !ok || !size.IsPositive() {
		return decimal.Decimal{}, false
	}
	return units.Abs().Div(size), true
}

// closeOf is the close a closed or reduced trade records: its average close price and its last
// closing transaction; ok is false while the venue reports neither.
func closeOf(t venue.Trade) (price decimal.Decimal, transactionID int64, ok bool) {
	if t.AverageClosePrice == nil || len(t.ClosingTransactionIDs) == 0 {
		return decimal.Decimal{}, 0, false
	}
	return *t.AverageClosePrice, t.ClosingTransactionIDs[len(t.ClosingTransactionIDs)-1], true
}

// openTransaction is the transaction that opened t: a venue trade's id is its opening fill's.
// 0 when the id is not a number.
func openTransaction(t venue.Trade) int64 {
	id, err := strconv.ParseInt(t.ID, 10, 64)
	if err != nil {
		return 0
	}
	return id
}
