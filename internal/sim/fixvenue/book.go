package fixvenue

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/shopspring/decimal"
)

// Sides and statuses as FIX spells them (Side 54, OrdStatus 39, ExecType 150).
const (
	sideBuy  = "1"
	sideSell = "2"

	statusNew      = "0"
	statusFilled   = "2"
	statusCanceled = "4"
	statusRejected = "8"

	execNew      = "0"
	execCanceled = "4"
	execRejected = "8"
	execTrade    = "F"
	execStatus   = "I"
)

// OrdRejReason (103) values the venue uses.
const (
	RejectBroker        = 0
	RejectUnknownSymbol = 1
	RejectMarketClosed  = 2
	RejectExceedsLimit  = 3
	RejectUnknownOrder  = 5
	RejectDuplicate     = 6 // duplicate order: a ClOrdID seen before, sent again without PossDupFlag
	RejectUnsupported   = 11
)

// Fault kinds (POST /control/fault).
const (
	FaultReject = "reject" // the order is rejected with the fault's reason and text
	FaultHold   = "hold"   // the order executes; its report waits for Release
	FaultLose   = "lose"   // the order executes; its report is never sent
	// FaultSplit: the order executes in Executions executions (default 2), each reported
	// (split.go).
	FaultSplit = "split"
	// FaultIgnore counts queries, not orders: the next Count queries (OrderStatusRequest,
	// OrderMassStatusRequest, RequestForPositions) are received and never answered, as a query
	// the venue never got (one gap-filled in a resend) looks to the desk.
	FaultIgnore = "ignore"
	// FaultPartial fills Units of the next Count orders (partial.go): an IOC order executes
	// those units and the rest is cancelled; a FOK order is cancelled whole, nothing executed.
	FaultPartial = "partial"
	// FaultRefuse counts position requests: the next Count RequestForPositions are refused with
	// a RequestForPositionsAck PosReqStatus=2 (rejected), PosReqResult Reason (default 3, not
	// authorized) and Text.
	FaultRefuse = "refuse"
)

// Fault is one injected fault for the next Count orders (for FaultIgnore: queries).
type Fault struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count,omitempty"` // default 1
	Reason int    `json:"reason,omitempty"`
	Text   string `json:"text,omitempty"`
	// Units is what FaultPartial fills of each order.
	Units *decimal.Decimal `json:"units,omitempty"`
	// Executions is how many executions a FaultSplit order fills in (default 2).
	Executions int `json:"executions,omitempty"`
}

// Order is the venue's record of one order, as reports and the control API show it.
type Order struct {
	ClOrdID      string          `json:"clOrdId"`
	OrderID      string          `json:"orderId"`
	Symbol       string          `json:"symbol"`
	Side         string          `json:"side"`              // 1 buy, 2 sell
	OrdType      string          `json:"ordType,omitempty"` // as received when not MARKET (1)
	Qty          decimal.Decimal `json:"qty"`
	CumQty       decimal.Decimal `json:"cumQty"`
	AvgPx        decimal.Decimal `json:"avgPx"`
	Status       string          `json:"status"` // OrdStatus
	RejectReason int             `json:"rejectReason,omitempty"`
	Text         string          `json:"text,omitempty"`
	ExecID       string          `json:"execId,omitempty"` // the last execution's
	Time         time.Time       `json:"time"`
	Reported     bool            `json:"reported"` // its execution report was sent
	// SeqNums are the MsgSeqNums of the NewOrderSingles that carried this ClOrdID, each once: a
	// library resend (PossDupFlag=Y) keeps its message's number, an order sent again is a new one.
	SeqNums []int `json:"seqNums,omitempty"`
	// DuplicatesRefused counts the NewOrderSingles that carried this ClOrdID again without
	// PossDupFlag, each refused as a duplicate order (OrdRejReason 6) and executed nothing.
	DuplicatesRefused int `json:"duplicatesRefused,omitempty"`
	// Own is true for an order the venue made itself (a venue-side close), whatever its ClOrdID.
	Own bool `json:"own,omitempty"`
	// Limit is an immediate LIMIT order's price (OrdType=2, limit.go); nil for MARKET.
	Limit *decimal.Decimal `json:"limit,omitempty"`

	// LastQty and LastPx are the last execution's (the whole fill's unless it was split).
	LastQty decimal.Decimal `json:"lastQty"`
	LastPx  decimal.Decimal `json:"lastPx"`
	// Executions are every execution of the order, in the order made (split.go): what a reader
	// of /control/state holds the desk's journal to, ExecID by ExecID.
	Executions []Execution `json:"executions,omitempty"`
}

// position is one symbol's net: signed units and the average price of what is open.
type position struct {
	units, avgPx decimal.Decimal
}

// book is the venue's state: every order by ClOrdID, the net per symbol, pending faults and
// held reports. Reports go out through s.send, outside the lock.
type book struct {
	s *Server

	mu      sync.Mutex
	orders  map[string]*Order
	pos     map[string]*position
	faults  []Fault
	ignore  int // queries still to ignore (FaultIgnore)
	refuse  int // position requests still to refuse (FaultRefuse)
	refusal Fault
	queries Queries
	held    map[string]func() // by ClOrdID: sends the held report
	seq     int64
	timers  map[*time.Timer]struct{}
	stopped bool
	epoch   string
}

func newBook(s *Server) *book {
	return &book{s: s, orders: map[string]*Order{}, pos: map[string]*position{}, held: map[string]func(){},
		timers: map[*time.Timer]struct{}{}, epoch: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

// nextID is a new order, execution or report id. The venue's start time is in every id, so that
// a restarted venue never reuses one: the desk keys its journal on them, as it would on a real
// venue's.
func (b *book) nextID(prefix string) string {
	b.seq++
	return fmt.Sprintf("%s%s-%d", prefix, b.epoch, b.seq)
}

// takeFault pops the fault the next order meets, if any.
func (b *book) takeFault() (Fault, bool) {
	if len(b.faults) == 0 {
		return Fault{}, false
	}
	f := &b.faults[0]
	f.Count--
	out := *f
	if f.Count <= 0 {
		b.faults = b.faults[1:]
	}
	return out, true
}

func (b *book) inject(f Fault) error {
	switch f.Kind {
	case FaultReject, FaultHold, FaultLose, FaultIgnore, FaultRefuse, FaultSessionReject, FaultBusinessReject, FaultSplit:
	case FaultPartial:
		if f.Units == nil || !f.Units.IsPositive() {
			return fmt.Errorf("a partial fault needs positive units")
		}
	default:
		return fmt.Errorf("unknown fault kind %q (reject, hold, lose, ignore, partial, refuse, session-reject, business-reject, split)", f.Kind)
	}
	if f.Count < 0 {
		return fmt.Errorf("count %d must not be negative", f.Count)
	}
	if err := f.checkExecutions(); err != nil {
		return err
	}
	if f.Count == 0 {
		f.Count = 1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch f.Kind {
	case FaultIgnore:
		b.ignore += f.Count
		return nil
	case FaultRefuse:
		b.refuse, b.refusal = b.refuse+f.Count, f
		return nil
	}
	b.faults = append(b.faults, f)
	return nil
}

// Queries counts the queries the venue received, by message, and those it ignored (FaultIgnore).
type Queries struct {
	OrderStatus int `json:"orderStatus"`
	MassStatus  int `json:"massStatus"`
	Positions   int `json:"positions"`
	Ignored     int `json:"ignored"`
}

// query counts one query of msgType and answers whether to ignore it (FaultIgnore).
func (b *book) query(msgType string) (ignore bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch msgType {
	case msgOrderStatusRequest:
		b.queries.OrderStatus++
	case msgMassStatusRequest:
		b.queries.MassStatus++
	case msgRequestForPos:
		b.queries.Positions++
	}
	if b.ignore > 0 {
		b.ignore--
		b.queries.Ignored++
		return true
	}
	return false
}

func (b *book) queryCounts() Queries {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queries
}

// order takes one market order (tif its TimeInForce). A ClOrdID seen before executes nothing:
// sent again without PossDupFlag it is a new order with an old id, refused as a duplicate order
// (OrdRejReason 6, FIX 4.4) — never answered with the old order's status, which a desk would
// take for this order's; a library resend (PossDupFlag=Y) is the same message again and answers
// its status.
func (b *book) order(clOrdID, symbol, side string, qty decimal.Decimal, tif string, seqNum int, possDup bool) {
	b.orderAt(clOrdID, symbol, side, qty, tif, nil, seqNum, possDup)
}

// orderAt is order with a limit (nil: MARKET): an immediate LIMIT executes only at the limit or
// better (limit.go).
func (b *book) orderAt(clOrdID, symbol, side string, qty decimal.Decimal, tif string, limit *decimal.Decimal, seqNum int, possDup bool) {
	b.mu.Lock()
	if o, seen := b.orders[clOrdID]; seen {
		o.sentIn(seqNum)
		if !possDup {
			o.DuplicatesRefused++
		}
		snap := *o
		_, isHeld := b.held[clOrdID]
		b.mu.Unlock()
		if !possDup {
			b.s.sendReport(Order{ClOrdID: clOrdID, OrderID: "NONE", Symbol: symbol, Side: side, Qty: qty, Status: statusRejected,
				RejectReason: RejectDuplicate, Text: "duplicate ClOrdID " + strconv.Quote(clOrdID), Time: b.s.cfg.Now()}, execRejected)
			b.s.log.Info("duplicate ClOrdID without PossDupFlag; refused, nothing executed", "clOrdId", clOrdID)
			return
		}
		// A held or lost report stays so: a duplicate must not leak what the fault hides.
		if snap.Reported && !isHeld {
			b.s.sendReport(snap, execStatus)
		}
		b.s.log.Info("duplicate ClOrdID; nothing executed", "clOrdId", clOrdID, "possDup", possDup)
		return
	}
	o := &Order{ClOrdID: clOrdID, OrderID: b.nextID("V"), Symbol: symbol, Side: side, Qty: qty, Status: statusNew, Time: b.s.cfg.Now(), Limit: limit}
	if limit != nil {
		o.OrdType = ordLimit
	}
	o.sentIn(seqNum)
	b.orders[clOrdID] = o
	fault, faulted := b.takeFault()
	b.mu.Unlock()

	if faulted && fault.Kind == FaultReject {
		b.reject(o, fault.Reason, fault.Text)
		return
	}
	execute := func() {
		if !b.withinLimit(o) {
			return
		}
		filled := false
		switch {
		case faulted && fault.Kind == FaultSplit:
			b.fillSplit(o, fault.executions())
			return
		case !faulted && b.s.cfg.Executions > 1:
			b.fillSplit(o, b.s.cfg.Executions)
			return
		case faulted && fault.Kind == FaultPartial:
			filled = b.fillPart(o, *fault.Units, tif)
		default:
			filled = b.fill(o)
		}
		if !filled {
			return
		}
		switch {
		case faulted && fault.Kind == FaultLose:
			b.s.log.Info("report lost after execution (fault)", "clOrdId", clOrdID)
		case faulted && fault.Kind == FaultHold:
			b.mu.Lock()
			b.held[clOrdID] = func() { b.report(o) }
			b.mu.Unlock()
			b.s.log.Info("report held (fault)", "clOrdId", clOrdID)
		default:
			b.report(o)
		}
	}
	if b.s.cfg.Latency <= 0 {
		execute()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(b.s.cfg.Latency, func() {
		b.mu.Lock()
		delete(b.timers, t)
		b.mu.Unlock()
		execute()
	})
	b.timers[t] = struct{}{}
}

// sentIn records that the message numbered seqNum carried o (0: unknown, not recorded).
func (o *Order) sentIn(seqNum int) {
	if seqNum > 0 && !slices.Contains(o.SeqNums, seqNum) {
		o.SeqNums = append(o.SeqNums, seqNum)
	}
}

// fill executes o, all of it, in one execution (execute), or rejects it when the symbol has no
// price.
func (b *book) fill(o *Order) bool { return b.execute(o, o.Qty) }

// fillUnits executes qty of o (less than its OrderQty) in one execution; the rest is done
// (OrdStatus=4, cancelled: the venue's orders are immediate).
func (b *book) fillUnits(o *Order, qty decimal.Decimal) bool {
	if !b.execute(o, qty) {
		return false
	}
	b.mu.Lock()
	if o.CumQty.LessThan(o.Qty) {
		o.Status = statusCanceled
	}
	b.mu.Unlock()
	return true
}

// netLocked adds signed units at px to symbol's net position: an increase averages the price,
// a reduction keeps it, a flip starts at px.
func (b *book) netLocked(symbol string, signed, px decimal.Decimal) {
	p := b.pos[symbol]
	if p == nil {
		p = &position{}
		b.pos[symbol] = p
	}
	next := p.units.Add(signed)
	switch {
	case p.units.IsZero() || p.units.Sign() == signed.Sign():
		p.avgPx = p.units.Mul(p.avgPx).Add(signed.Mul(px)).Div(next)
	case next.IsZero():
		p.avgPx = decimal.Zero
	case next.Sign() != p.units.Sign():
		p.avgPx = px
	}
	p.units = next
	if p.units.IsZero() {
		delete(b.pos, symbol)
	}
}

func (b *book) reject(o *Order, reason int, text string) {
	b.mu.Lock()
	o.Status, o.RejectReason, o.Text, o.Time = statusRejected, reason, text, b.s.cfg.Now()
	snap := *o
	o.Reported = true
	b.mu.Unlock()
	b.s.sendReport(snap, execRejected)
}

func (b *book) report(o *Order) {
	b.mu.Lock()
	o.Reported = true
	snap := *o
	b.mu.Unlock()
	b.s.sendReport(snap, execTrade)
}

// release sends the held report of clOrdID ("" : every held one) and answers how many.
func (b *book) release(clOrdID string) int {
	b.mu.Lock()
	var sends []func()
	for id, send := range b.held {
		if clOrdID == "" || id == clOrdID {
			sends = append(sends, send)
			delete(b.held, id)
		}
	}
	b.mu.Unlock()
	for _, send := range sends {
		send()
	}
	return len(sends)
}

// status is the order of clOrdID as an OrderStatusRequest sees it.
func (b *book) status(clOrdID string) (Order, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.orders[clOrdID]
	if !ok {
		return Order{}, false
	}
	return *o, true
}

// all is every order, oldest first.
func (b *book) all() []Order {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Order, 0, len(b.orders))
	for _, o := range b.orders {
		c := *o
		c.SeqNums = slices.Clone(o.SeqNums)
		c.Executions = slices.Clone(o.Executions)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Time.Before(out[j].Time) || (out[i].Time.Equal(out[j].Time) && out[i].OrderID < out[j].OrderID)
	})
	return out
}

// Position is one symbol's net as the control API and position reports show it.
type Position struct {
	Symbol string          `json:"symbol"`
	Units  decimal.Decimal `json:"units"` // signed
	AvgPx  decimal.Decimal `json:"avgPx"`
}

func (b *book) positions() []Position {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Position, 0, len(b.pos))
	for sym, p := range b.pos {
		out = append(out, Position{Symbol: sym, Units: p.units, AvgPx: p.avgPx})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Symbol < out[j].Symbol })
	return out
}

func (b *book) net(symbol string) (decimal.Decimal, decimal.Decimal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.pos[symbol]; p != nil {
		return p.units, p.avgPx
	}
	return decimal.Zero, decimal.Zero
}

func (b *book) heldIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.held))
	for id := range b.held {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// stop cancels executions still waiting for their latency.
func (b *book) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	for t := range b.timers {
		t.Stop()
	}
	clear(b.timers)
}
