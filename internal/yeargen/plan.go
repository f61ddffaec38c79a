package yeargen

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"fxdesk/internal/sim/feedsim"
)

// The history is planned whole in memory before a row is written: every account's deals,
// positions and orders with their times, then each kind sorted by time so that ids follow
// commit order as they do on a live desk (a deal's id is later than every deal committed before
// it, whatever the account). Money is in the account currency's cents (int64), prices in the
// instrument's points, volumes in hundredths of a lot: exact integers, formatted once as
// decimal text when written.

const (
	hourMS = int64(time.Hour / time.Millisecond)
	// quietMS is how long after a rollover nothing trades: the swap charges and the freeze run
	// then, so every trading deal falls clearly before or after a day's snapshot.
	quietMS = 5 * 60 * 1000
	// freezeMS is when, after its rollover, a day's snapshot is taken (after the swaps).
	freezeMS = 60 * 1000
)

const (
	sideBuy = iota
	sideSell
)

var sideNames = [2]string{"BUY", "SELL"}

// Deal types, in fx_deal's names.
const (
	dealDeposit = iota
	dealCommission
	dealProfit
	dealSwap
)

var dealTypes = [...]string{"DEPOSIT", "COMMISSION", "PROFIT", "SWAP"}

// Close reasons.
const (
	closeClient = iota
	closeSL
	closeTP
	closeDealer
)

var closeReasons = [...]string{"CLIENT", "SL", "TP", "DEALER"}

// Order types and statuses.
const (
	orderMarket = iota
	orderLimit
	orderStop
)

var orderTypes = [...]string{"MARKET", "LIMIT", "STOP"}

const (
	statusFilled = iota
	statusPending
	statusCancelled
)

var orderStatuses = [...]string{"FILLED", "PENDING", "CANCELLED"}

// Account currencies.
var currencies = [...]string{"USD", "EUR", "GBP"}

type instrument struct {
	symbol, base, quote string
	digits              int
	point, contract     float64
	swapLong, swapShort string // points, as fx_instrument holds them
	swapLongF           float64
	swapShortF          float64
	tripleDay           time.Weekday
	halfSpread          int64     // points
	mids                []float64 // mid price per hour of the range
}

type account struct {
	id, user  int64
	ccy       uint8
	leverage  int
	created   int64 // ms
	initial   int64 // cents: the first deposit, and each top-up
	dealerCut float64
	// filled by the chain
	balance, version int64
	closed, open     int
}

type position struct {
	acct            int32
	sym             uint8
	side, reason    uint8
	open            bool
	lots            int32 // hundredths
	openAt, closeAt int64
	openPx, closePx int64
	sl, tp          int64 // points, 0 none
	commission      int64
	markupOpen      int64
	markupClose     int64
	profit          int64
	swap            int64
	swapThrough     int32 // cut index + 1 of the last charge, 0 none
	order           int32
	id              int64
}

type order struct {
	acct            int32
	sym             uint8
	side, typ       uint8
	status          uint8
	byDealer        bool
	lots            int32
	price           int64 // points, 0 for MARKET
	sl, tp          int64
	createdAt, done int64 // done: filled or cancelled (0 while pending)
	pos             int32 // -1 none
	id              int64
}

type deal struct {
	t             int64
	acct          int32
	seq           int32 // order within the account
	typ           uint8
	amount, after int64
	pos           int32 // -1 none
	cut           int32 // a swap's rollover (index into cuts)
	days          int8
	id            int64
}

// Event kinds.
const (
	evDeposit = iota
	evOrderFilled
	evOrderAccepted
	evOrderTriggered
	evOrderCancelled
	evPositionOpened
	evPositionClosed
	evSwap
)

type eventRef struct {
	t    int64
	acct int32
	seq  int32
	kind uint8
	ref  int32 // deal, order or position index
}

type plan struct {
	size       Size
	ny         *time.Location
	seed       int64
	start, end int64 // ms
	cuts       []int64
	cutDates   []string
	hourW      []float64 // weight of each hour of the range (0: market closed)
	hourCum    []float64 // cumulative weights, len(hourW)+1
	quietHour  []bool    // the hour starting at a weekday rollover
	ins        []instrument
	usd        map[string]float64
	accounts   []account
	positions  []position
	orders     []order
	deals      []deal
	events     []eventRef
	dealsOf    [][]int32 // per account, deal indices in id order
}

func (p *plan) rng(stream, i uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(p.seed)^0x9e3779b97f4a7c15*stream, i))
}

// hour is t's hour index in the range, clamped.
func (p *plan) hour(t int64) int {
	h := int((t - p.start) / hourMS)
	return max(0, min(h, len(p.hourW)-1))
}

// mid is sym's mid price at t.
func (p *plan) mid(sym uint8, t int64) float64 { return p.ins[sym].mids[p.hour(t)] }

// sampleTime draws a time in [from, to) weighted by the hours' trading activity, never in the
// quiet minutes after a rollover; ok is false when the market is closed over the whole span.
func (p *plan) sampleTime(r *rand.Rand, from, to int64) (int64, bool) {
	if to <= from {
		return from, false
	}
	hf, ht := p.hour(from), p.hour(to-1)
	lo, hi := p.hourCum[hf], p.hourCum[ht+1]
	if hi-lo <= 0 {
		return from, false
	}
	for try := 0; try < 8; try++ {
		u := lo + r.Float64()*(hi-lo)
		h, _ := slices.BinarySearch(p.hourCum, u)
		h = max(0, min(h-1, len(p.hourW)-1))
		for h < ht && p.hourW[h] == 0 {
			h++
		}
		base := p.start + int64(h)*hourMS
		off := int64(r.Float64() * float64(hourMS))
		if p.quietHour[h] && off < quietMS {
			off = quietMS + off%(hourMS-quietMS)
		}
		t := base + off
		if t >= from && t < to {
			return t, true
		}
	}
	return from + int64(r.Float64()*float64(to-from)), p.hourW[hf] > 0
}

// cutAfter is the index of the first rollover strictly after t (len(cuts) if none).
func (p *plan) cutAfter(t int64) int {
	i, _ := slices.BinarySearch(p.cuts, t+1)
	return i
}

// rate converts an amount in currency from into currency to.
func (p *plan) rate(from, to string) float64 {
	f, t := p.usd[from], p.usd[to]
	if f == 0 || t == 0 {
		return 1
	}
	return f / t
}

// buildPrices walks each instrument's mid backwards from the simulator's starting price at the
// end, so that the generated book agrees with the prices a desk started on it will quote.
func (p *plan) buildPrices(sims []feedsim.Instrument) {
	simOf := map[string]feedsim.Instrument{}
	for _, s := range sims {
		simOf[s.Symbol] = s
	}
	n := len(p.hourW)
	p.usd = map[string]float64{"USD": 1}
	for i := range p.ins {
		in := &p.ins[i]
		s, ok := simOf[in.symbol]
		if !ok {
			s = feedsim.Instrument{Symbol: in.symbol, Digits: in.digits, Mid: 1, Spread: 20 * in.point, Volatility: 0.00004}
		}
		in.halfSpread = max(1, int64(math.Round(s.Spread/in.point/2)))
		r := p.rng(1, uint64(i))
		sigma := s.Volatility / 0.00003 * 0.0011
		in.mids = make([]float64, n)
		x := 0.0
		for h := n - 1; h >= 0; h-- {
			in.mids[h] = s.Mid * math.Exp(x)
			x = 0.999*x + sigma*r.NormFloat64()
		}
		switch {
		case in.quote == "USD":
			p.usd[in.base] = s.Mid
		case in.base == "USD":
			p.usd[in.quote] = 1 / s.Mid
		}
	}
}

// points is price rounded to in's points.
func (in *instrument) points(price float64) int64 { return int64(math.Round(price / in.point)) }

// quoteValue is lots (hundredths) × points of in in its quote currency.
func (in *instrument) quoteValue(lots int32, pts int64) float64 {
	return float64(pts) * in.point * in.contract * float64(lots) / 100
}

// counts splits total over weights, exactly.
func counts(total int, w []float64) []int {
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	out := make([]int, len(w))
	if sum == 0 || total <= 0 {
		return out
	}
	cum, prev := 0.0, 0
	for i, x := range w {
		cum += x
		c := int(math.Round(cum / sum * float64(total)))
		out[i] = c - prev
		prev = c
	}
	return out
}

// lots draws a volume in hundredths of a lot.
func lots(r *rand.Rand) int32 {
	v := math.Exp(math.Log(30) + 1.0*r.NormFloat64())
	return int32(max(1, min(2000, math.Round(v))))
}

// cents rounds an amount to cents.
func cents(x float64) int64 { return int64(math.Round(x * 100)) }

// planAccounts draws the accounts and how many positions and orders each one has.
func (p *plan) planAccounts() (closedN, openN, pendingN []int) {
	s := p.size
	n := s.Accounts
	p.accounts = make([]account, n)
	wClosed := make([]float64, n)
	wOpen := make([]float64, n)
	r := p.rng(2, 0)
	user := int64(100000)
	for i := range p.accounts {
		a := &p.accounts[i]
		a.id = int64(i + 1)
		// A few users hold two accounts: every 25th account is its predecessor's user's second.
		if i < 2 || i%25 != 24 {
			user++
		}
		a.user = user
		a.leverage = []int{100, 100, 100, 30, 200, 500}[r.IntN(6)]
		a.created = p.start
		if i >= 2 && r.Float64() < 0.4 {
			a.created, _ = p.sampleTime(r, p.start, p.start+(p.end-p.start)*8/10)
		}
		switch u := r.Float64(); {
		case i < 2 || u < 0.7:
			a.ccy = 0
		case u < 0.9:
			a.ccy = 1
		default:
			a.ccy = 2
		}
		a.initial = 100 * int64(max(5, math.Round(math.Exp(math.Log(50)+0.9*r.NormFloat64())))) * 100
		wClosed[i] = math.Exp(1.2 * r.NormFloat64())
		// Accounts created late trade less.
		wClosed[i] *= float64(p.end-a.created) / float64(p.end-p.start)
		wOpen[i] = math.Exp(0.8 * r.NormFloat64())
	}
	// The named traders: account 1 (big), account 2 (small).
	big, small := 0, 1
	p.accounts[big].initial = 100000 * 100
	p.accounts[small].initial = 5000 * 100
	wClosed[big], wClosed[small] = 0, 0
	wOpen[big], wOpen[small] = 0, 0
	rest := max(0, s.ClosedPositions-s.BigClosed-s.SmallClosed)
	closedN = counts(rest, wClosed)
	capN := max(1, s.BigClosed/2)
	// Nobody else trades as much as the big trader: what the cap takes goes round the others.
	excess := 0
	for i := range closedN {
		if closedN[i] > capN {
			excess += closedN[i] - capN
			closedN[i] = capN
		}
	}
	for i := 2; excess > 0 && i < len(closedN)*capN; i++ {
		if k := i % len(closedN); k >= 2 && closedN[k] < capN {
			closedN[k]++
			excess--
		}
	}
	closedN[big], closedN[small] = s.BigClosed, s.SmallClosed
	openBig, openSmall := min(5, s.OpenPositions), min(2, max(0, s.OpenPositions-5))
	openN = counts(max(0, s.OpenPositions-openBig-openSmall), wOpen)
	openN[big], openN[small] = openBig, openSmall
	pendBig, pendSmall := min(5, s.RestingOrders), min(2, max(0, s.RestingOrders-5))
	pendingN = counts(max(0, s.RestingOrders-pendBig-pendSmall), wOpen)
	pendingN[big], pendingN[small] = pendBig, pendSmall
	return closedN, openN, pendingN
}

// planAccount draws account i's positions and orders and the deals they post, appending them
// to the plan's lists; the deals' balances are worked out by chain.
func (p *plan) planAccount(i int, closedN, openN, pendingN int, dealerShare float64) {
	a := &p.accounts[i]
	r := p.rng(3, uint64(i))
	ccy := currencies[a.ccy]
	a.closed, a.open, a.dealerCut = closedN, openN, dealerShare
	var mine []deal
	add := func(d deal) { d.acct = int32(i); mine = append(mine, d) }
	add(deal{t: a.created, typ: dealDeposit, amount: a.initial, pos: -1})
	newPosition := func(open bool) {
		sym := uint8(r.IntN(len(p.ins)))
		// Majors trade most.
		if r.Float64() < 0.5 {
			sym = uint8(r.IntN(min(8, len(p.ins))))
		}
		in := &p.ins[sym]
		ps := position{acct: int32(i), sym: sym, side: uint8(r.IntN(2)), lots: lots(r), open: open, order: -1}
		if open {
			ps.openAt, _ = p.sampleTime(r, max(a.created+1000, p.end-15*24*hourMS), p.end)
		} else {
			ps.openAt, _ = p.sampleTime(r, a.created+1000, p.end-60*1000)
			hold := int64(math.Exp(math.Log(3*float64(hourMS)) + 1.6*r.NormFloat64()))
			hold = max(1000, min(hold, 20*24*hourMS))
			to := min(ps.openAt+hold, p.end)
			t, ok := p.sampleTime(r, ps.openAt+1000, to)
			if !ok {
				t, ok = p.sampleTime(r, ps.openAt+1000, min(ps.openAt+4*24*hourMS, p.end))
			}
			if !ok {
				t = ps.openAt + 1000 + int64(r.IntN(50000))
			}
			ps.closeAt = t
		}
		mid := p.mid(sym, ps.openAt)
		pt := in.points(mid)
		dir := int64(1)
		if ps.side == sideSell {
			dir = -1
			ps.openPx = pt - in.halfSpread
		} else {
			ps.openPx = pt + in.halfSpread
		}
		rt := p.rate(in.quote, ccy)
		ps.commission = max(1, cents(7*float64(ps.lots)/100*p.rate("USD", ccy)))
		ps.markupOpen = cents(in.quoteValue(ps.lots, in.halfSpread) / 2 * rt)
		// Stops and targets on some positions; an open one's are far from the end's price so
		// that a desk booted on the history does not close them at once.
		if r.Float64() < 0.4 {
			ref := ps.openPx
			dist := in.points(mid*0.004) + 1
			if open {
				ref = in.points(p.ins[sym].mids[len(p.hourW)-1])
				dist = in.points(mid*0.03) + 1
			}
			ps.sl, ps.tp = ref-dir*dist, ref+dir*dist*3/2
		}
		if !open {
			cm := in.points(p.mid(sym, ps.closeAt))
			if ps.side == sideBuy {
				ps.closePx = cm - in.halfSpread
			} else {
				ps.closePx = cm + in.halfSpread
			}
			ps.reason = closeClient
			switch {
			case ps.sl != 0 && dir*(ps.closePx-ps.sl) <= 0:
				ps.closePx, ps.reason = ps.sl, closeSL
			case ps.tp != 0 && dir*(ps.closePx-ps.tp) >= 0:
				ps.closePx, ps.reason = ps.tp, closeTP
			case r.Float64() < a.dealerCut:
				ps.reason = closeDealer
			}
			ps.profit = cents(in.quoteValue(ps.lots, dir*(ps.closePx-ps.openPx)) * rt)
			ps.markupClose = cents(in.quoteValue(ps.lots, in.halfSpread) / 2 * rt)
		}
		// Its order: a MARKET order filled at once, or now and then a LIMIT or STOP that rested.
		o := order{acct: int32(i), sym: sym, side: ps.side, typ: orderMarket, status: statusFilled, lots: ps.lots, sl: ps.sl, tp: ps.tp,
			createdAt: ps.openAt - int64(1+r.IntN(20)), done: ps.openAt}
		if r.Float64() < 0.1 {
			o.typ = uint8(orderLimit + r.IntN(2))
			o.price = ps.openPx
			o.createdAt = max(a.created+1, ps.openAt-int64(r.Float64()*float64(6*hourMS)))
		}
		pi := int32(len(p.positions))
		o.pos = pi
		ps.order = int32(len(p.orders))
		p.orders = append(p.orders, o)
		// Its deals: the commission at the fill, a swap at each weekday rollover it is held over,
		// the profit at the close.
		add(deal{t: ps.openAt, typ: dealCommission, amount: -ps.commission, pos: pi})
		last := p.end
		if !open {
			last = ps.closeAt
		}
		for c := p.cutAfter(ps.openAt); c < len(p.cuts) && p.cuts[c]+2000 < last; c++ {
			days := int8(1)
			if time.UnixMilli(p.cuts[c]).In(p.ny).Weekday() == in.tripleDay {
				days = 3
			}
			pts := in.swapLongF
			if ps.side == sideSell {
				pts = in.swapShortF
			}
			amt := cents(pts * in.point * in.contract * float64(ps.lots) / 100 * float64(days) * rt)
			if amt == 0 {
				continue
			}
			ps.swap += amt
			ps.swapThrough = int32(c + 1)
			add(deal{t: p.cuts[c] + 2000 + int64(i%1000), typ: dealSwap, amount: amt, pos: pi, cut: int32(c), days: days})
		}
		if !open {
			add(deal{t: ps.closeAt, typ: dealProfit, amount: ps.profit, pos: pi})
		}
		p.positions = append(p.positions, ps)
	}
	for k := 0; k < closedN; k++ {
		newPosition(false)
	}
	for k := 0; k < openN; k++ {
		newPosition(true)
	}
	// Resting orders at the end: far from the end's price, so that none triggers at a boot.
	restingOrder := func(pending bool) {
		sym := uint8(r.IntN(len(p.ins)))
		in := &p.ins[sym]
		o := order{acct: int32(i), sym: sym, side: uint8(r.IntN(2)), typ: uint8(orderLimit + r.IntN(2)), lots: lots(r), pos: -1}
		if pending {
			o.status = statusPending
			o.createdAt, _ = p.sampleTime(r, max(a.created+1000, p.end-10*24*hourMS), p.end)
		} else {
			o.status = statusCancelled
			o.createdAt, _ = p.sampleTime(r, a.created+1000, p.end-60*1000)
			o.done, _ = p.sampleTime(r, o.createdAt+1000, min(p.end, o.createdAt+3*24*hourMS))
			if o.done <= o.createdAt {
				o.done = o.createdAt + 1000
			}
			o.byDealer = r.Float64() < 0.5
		}
		ref := in.points(in.mids[len(in.mids)-1])
		if !pending {
			ref = in.points(p.mid(sym, o.createdAt))
		}
		dist := in.points(p.mid(sym, o.createdAt)*0.03) + 1
		// A BUY LIMIT rests below the market, a BUY STOP above; a SELL the other way round.
		below := (o.side == sideBuy) == (o.typ == orderLimit)
		if below {
			o.price = ref - dist
		} else {
			o.price = ref + dist
		}
		p.orders = append(p.orders, o)
	}
	for k := 0; k < pendingN; k++ {
		restingOrder(true)
	}
	for k := 0; k < closedN/20; k++ {
		restingOrder(false)
	}
	// The chain: in time order, each deal's balance after it; a deposit tops the account up
	// before a deal would take it below a fifth of its first deposit.
	slices.SortStableFunc(mine, func(x, y deal) int { return cmp.Compare(x.t, y.t) })
	floor := a.initial / 5
	var bal int64
	chain := make([]deal, 0, len(mine)+8)
	for _, d := range mine {
		if d.typ != dealDeposit && bal+d.amount < floor {
			t := d.t - 1000
			if n := len(chain); n > 0 && t < chain[n-1].t {
				t = chain[n-1].t
			}
			top := a.initial
			for bal+top+d.amount < floor {
				top += a.initial
			}
			bal += top
			chain = append(chain, deal{t: t, acct: int32(i), typ: dealDeposit, amount: top, after: bal, pos: -1})
		}
		bal += d.amount
		d.after = bal
		chain = append(chain, d)
	}
	for k := range chain {
		chain[k].seq = int32(k)
	}
	a.balance, a.version = bal, int64(len(chain))
	p.deals = append(p.deals, chain...)
}

// number assigns ids in time order: positions by their opening, orders by their creation,
// deals by their time (an account's own in chain order).
func (p *plan) number() {
	byTime := func(n int, at func(int) int64) []int32 {
		idx := make([]int32, n)
		for k := range idx {
			idx[k] = int32(k)
		}
		slices.SortStableFunc(idx, func(x, y int32) int { return cmp.Compare(at(int(x)), at(int(y))) })
		return idx
	}
	for rank, k := range byTime(len(p.positions), func(k int) int64 { return p.positions[k].openAt }) {
		p.positions[k].id = int64(rank + 1)
	}
	for rank, k := range byTime(len(p.orders), func(k int) int64 { return p.orders[k].createdAt }) {
		p.orders[k].id = int64(rank + 1)
	}
	slices.SortFunc(p.deals, func(x, y deal) int {
		return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.acct, y.acct), cmp.Compare(x.seq, y.seq))
	})
	p.dealsOf = make([][]int32, len(p.accounts))
	for k := range p.deals {
		p.deals[k].id = int64(k + 1)
		a := p.deals[k].acct
		p.dealsOf[a] = append(p.dealsOf[a], int32(k))
	}
}

// planEvents lists the outbox as the desk would have written it, in commit order.
func (p *plan) planEvents() {
	ev := make([]eventRef, 0, len(p.positions)*3+len(p.deals)/4)
	for k, d := range p.deals {
		switch d.typ {
		case dealDeposit:
			ev = append(ev, eventRef{t: d.t, acct: d.acct, seq: 0, kind: evDeposit, ref: int32(k)})
		case dealSwap:
			ev = append(ev, eventRef{t: d.t, acct: d.acct, seq: 0, kind: evSwap, ref: int32(k)})
		}
	}
	for k, o := range p.orders {
		switch {
		case o.status == statusFilled && o.typ == orderMarket:
			ev = append(ev, eventRef{t: o.done, acct: o.acct, seq: 0, kind: evOrderFilled, ref: int32(k)})
		case o.status == statusFilled:
			ev = append(ev, eventRef{t: o.createdAt, acct: o.acct, kind: evOrderAccepted, ref: int32(k)},
				eventRef{t: o.done, acct: o.acct, seq: 0, kind: evOrderTriggered, ref: int32(k)})
		case o.status == statusPending:
			ev = append(ev, eventRef{t: o.createdAt, acct: o.acct, kind: evOrderAccepted, ref: int32(k)})
		case o.status == statusCancelled:
			ev = append(ev, eventRef{t: o.createdAt, acct: o.acct, kind: evOrderAccepted, ref: int32(k)},
				eventRef{t: o.done, acct: o.acct, kind: evOrderCancelled, ref: int32(k)})
		}
	}
	for k, ps := range p.positions {
		ev = append(ev, eventRef{t: ps.openAt, acct: ps.acct, seq: 1, kind: evPositionOpened, ref: int32(k)})
		if !ps.open {
			ev = append(ev, eventRef{t: ps.closeAt, acct: ps.acct, seq: 2, kind: evPositionClosed, ref: int32(k)})
		}
	}
	slices.SortFunc(ev, func(x, y eventRef) int {
		return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.acct, y.acct), cmp.Compare(x.seq, y.seq), cmp.Compare(x.kind, y.kind))
	})
	p.events = ev
}
