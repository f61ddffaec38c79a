package tick

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// srcState is one configured source: its connection, its counters, and the Feed it is given.
type srcState struct {
	e        *Engine
	i        int
	name     string
	src      Source
	wantedCh chan struct{}

	connected      atomic.Bool
	connectedSince atomic.Int64 // Config.Now, Unix ns
	lastErr        atomic.Pointer[string]
	accepted       atomic.Uint64
	held           atomic.Uint64
	dropped        atomic.Uint64
	published      atomic.Uint64
}

var _ Feed = (*srcState)(nil)

func (s *srcState) Wanted() []string               { return s.e.Wanted() }
func (s *srcState) WantedChanged() <-chan struct{} { return s.wantedCh }

// Offer validates, stamps, filters, selects and publishes one quote of this source.
func (s *srcState) Offer(symbol string, bid, ask float64, providerTime time.Time) {
	e := s.e
	ev := Event{Bid: bid, Ask: ask, HasBid: true, HasAsk: true}
	if ms := providerTime.UnixMilli(); ms > 0 {
		ev.TimeMs = ms
	}
	if r := Validate(&ev); r != RejectNone {
		e.rejected[r].Add(1)
		return
	}
	sl := e.slots.Load().bySymbol[symbol]
	if sl == nil {
		e.rejected[counterUnknownPair].Add(1)
		return
	}
	recv := e.cfg.Now()
	e.notePause(recv.UnixNano())
	e.subsMu.RLock()
	e.offer(s, sl, bid, ask, providerTime, recv)
	e.subsMu.RUnlock()
	e.accepted.Add(1)
	e.lastTickAt.Store(recv.UnixNano())
}

// SetMarketOpen records this source's announcement of symbol's session.
func (s *srcState) SetMarketOpen(symbol string, open bool) {
	sl := s.e.slots.Load().bySymbol[symbol]
	if sl == nil {
		return
	}
	sl.mu.Lock()
	sl.st.per[s.i].closed = !open
	if sl.st.active == s.i && sl.providerClosed.Swap(!open) != !open {
		s.e.log.Info("provider changed a symbol's session", slog.String("source", s.name),
			slog.String("symbol", symbol), slog.Bool("open", open))
	}
	sl.mu.Unlock()
}

// SetConnected records the session up (clearing the source's old session announcements) or
// down; a disconnect fails every symbol quoting from this source over at once.
func (s *srcState) SetConnected(up bool, reason error) {
	e := s.e
	now := e.cfg.Now()
	if reason != nil {
		msg := reason.Error()
		s.lastErr.Store(&msg)
	}
	if up {
		// A new session starts with no provider announcements: the provider repeats a closure
		// on subscribe, and an old one must not outlive the connection that carried it.
		for _, sl := range e.slots.Load().bySymbol {
			sl.mu.Lock()
			sl.st.per[s.i].closed = false
			if sl.st.active == s.i {
				sl.providerClosed.Store(false)
			}
			sl.mu.Unlock()
		}
		s.connectedSince.Store(now.UnixNano())
		s.connected.Store(true)
		return
	}
	if !s.connected.Swap(false) {
		return
	}
	if len(e.srcs) > 1 {
		e.sweep(now)
	}
}

// symState is one symbol's selection and filter state, guarded by its slot's mu.
type symState struct {
	active    int
	pinned    int // -1: not pinned
	halted    bool
	since     int64 // Unix ns
	failovers uint64
	per       []srcSym

	moves  []float64 // ring of the last Window absolute mid moves of published ticks
	nMoves int
	pos    int
	band   float64 // cached spike band (price units), recomputed every bandEvery publishes
	fresh  int     // publishes since band was computed

	lastPubMid float64
	lastPubNs  int64 // 0: nothing published

	// agreedMid is the last published mid the desk knows was the market: another healthy source
	// quoted it (within BandPips), or it stayed within BandPips of the agreed mid before (a lone
	// source walking on). A source is off-band only when it stands off the others and off this
	// price, not off the last published one: a jump one source published alone (a real gap, or
	// an offset) is no evidence of which source moved when the other returns at the market.
	agreedMid float64
	agreedNs  int64 // 0: never agreed (a new holder)
	firstNs   int64 // the symbol's first quote from any source

	held       bool
	heldSrc    int
	heldQ      Quote
	heldReason string
	heldSeq    uint64 // the ring entry recording it
	// heldSince starts ConfirmAfter, on the engine's running clock (ran): the held tick's
	// arrival, or, for a source with no other healthy source to ask, the first of its ticks that
	// stayed near one another while they waited.
	heldSince int64
}

// srcSym is one source's state for one symbol.
type srcSym struct {
	bid, ask     float64
	recvNs, ptNs int64   // 0: no quote yet
	pausedAt     int64   // the engine's pausedNs when recvNs was stamped
	ewma         float64 // inter-arrival time, ns
	healthySince int64   // Unix ns; 0 while unhealthy
	lostHealth   bool    // it was healthy once and then was not: its return waits for HoldDown
	offRun       int     // consecutive ticks off the band around the other sources
	closed       bool
	held         uint64
	dropped      uint64
}

func (ss *srcSym) mid() float64 { return (ss.bid + ss.ask) / 2 }

const bandEvery = 8

func (e *Engine) newSymState() symState {
	st := symState{pinned: -1, per: make([]srcSym, len(e.srcs)), since: e.cfg.Now().UnixNano()}
	if !e.cfg.Filter.Disabled {
		st.moves = make([]float64, e.cfg.Filter.Window)
	}
	return st
}

// age is how long the engine has run since ss's last tick: the time since it, less the pauses
// noticed since (notePause). A process SIGSTOPped (or starved) for seconds reads each socket's
// backlog as fresh ticks when it resumes, one source's before the other's; judged by the wall
// clock, the source read second would look silent for that moment and the first one's backlog
// would stand alone — the soak (seed 221723382888820) saw a holder resume, publish the primary's
// 134-pip offset from its backlog with the backup "silent", and stop an account out there.
func (e *Engine) age(ss *srcSym, now int64) int64 {
	return now - ss.recvNs - (e.pausedNs.Load() - ss.pausedAt)
}

// ran is now on the engine's running clock: the time since the epoch less the pauses noticed.
func (e *Engine) ran(now int64) int64 { return now - e.pausedNs.Load() }

// pauseAfter is the gap in the sweep (every Failover.Sweep) that says the engine did not run:
// at least the shortest silence threshold, so a sweep merely late on a busy machine is no pause.
func (e *Engine) pauseAfter() int64 {
	return int64(max(e.cfg.Failover.SilentMin, 10*e.cfg.Failover.Sweep))
}

// notePause counts, at now (a tick offered or a sweep), the time since the last sweep beyond one
// sweep interval as a pause when it exceeds pauseAfter: whichever goroutine runs first after a
// resume — a source's reader with its backlog, or the sweep — notices it, once.
func (e *Engine) notePause(now int64) {
	last := e.sweptNs.Load()
	if last == 0 || now-last <= e.pauseAfter() {
		return
	}
	if e.sweptNs.CompareAndSwap(last, now) {
		e.pausedNs.Add(now - last - int64(e.cfg.Failover.Sweep))
		e.log.Warn("tick engine did not run; its sources' silence is judged without the pause",
			slog.Duration("paused", time.Duration(now-last)))
	}
}

func (e *Engine) silentAfter(ss *srcSym) int64 {
	f := &e.cfg.Failover
	if ss.ewma == 0 {
		return int64(f.SilentMax)
	}
	return int64(min(max(time.Duration(f.SilentFactor*ss.ewma), f.SilentMin), f.SilentMax))
}

// live: connected, quoted, not silent — a source whose price may be compared with.
func (e *Engine) live(st *symState, j int, now int64) bool {
	ss := &st.per[j]
	return e.srcs[j].connected.Load() && ss.recvNs != 0 && e.age(ss, now) <= e.silentAfter(ss)
}

func (e *Engine) health(st *symState, j int, now int64) (bool, string) {
	ss := &st.per[j]
	switch {
	case !e.srcs[j].connected.Load():
		return false, "disconnected"
	case ss.recvNs == 0:
		return false, "no quote"
	case e.age(ss, now) > e.silentAfter(ss):
		return false, "silent"
	case ss.offRun >= 2:
		return false, "off-band"
	}
	return true, ""
}

// othersMedian is the median mid of the sources other than j that are live (healthy, when
// healthy is set); n is how many there are.
func (e *Engine) othersMedian(st *symState, j int, now int64, healthy bool) (float64, int) {
	var buf [8]float64
	n := 0
	for k := range st.per {
		if k == j || n == len(buf) {
			continue
		}
		if healthy {
			if ok, _ := e.health(st, k, now); !ok {
				continue
			}
		} else if !e.live(st, k, now) {
			continue
		}
		m := st.per[k].mid()
		i := n
		for i > 0 && buf[i-1] > m {
			buf[i] = buf[i-1]
			i--
		}
		buf[i] = m
		n++
	}
	switch {
	case n == 0:
		return 0, 0
	case n%2 == 1:
		return buf[n/2], n
	}
	return (buf[n/2-1] + buf[n/2]) / 2, n
}

// offer records one valid quote of source s for sl and decides what it does. The caller holds
// subsMu for reading.
func (e *Engine) offer(s *srcState, sl *slot, bid, ask float64, pt, recv time.Time) {
	now := recv.UnixNano()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	st := &sl.st
	ss := &st.per[s.i]
	paused := e.pausedNs.Load()
	if ss.recvNs != 0 {
		if dt := e.age(ss, now); dt > 0 {
			if dt > e.silentAfter(ss) {
				if ss.healthySince != 0 {
					ss.lostHealth = true
				}
				ss.healthySince = 0
			}
			d := float64(min(dt, int64(e.cfg.Failover.SilentMax)))
			if ss.ewma == 0 {
				ss.ewma = d
			} else {
				ss.ewma += (d - ss.ewma) / 8
			}
		}
	}
	ss.bid, ss.ask, ss.recvNs, ss.ptNs, ss.pausedAt = bid, ask, now, pt.UnixNano(), paused
	if st.firstNs == 0 {
		st.firstNs = now
	}
	s.accepted.Add(1)
	multi := len(st.per) > 1
	if multi {
		mid := (bid + ask) / 2
		bandPx := e.cfg.Filter.BandPips * sl.pip
		ref, n := e.othersMedian(st, s.i, now, false)
		off := n > 0 && math.Abs(mid-ref) > bandPx
		switch {
		case st.agreedNs != 0:
			off = off && math.Abs(mid-st.agreedMid) > bandPx
		case now-st.firstNs < int64(e.cfg.Failover.HoldDown):
			// No price two sources agreed on yet (a new holder): nothing tells which of two
			// disagreeing sources moved, so neither is failed over from — the active one's ticks
			// are held as disagreeing — for HoldDown; past it, a lasting disagreement fails the
			// first source to stand off twice over, as before.
			off = false
		}
		if off {
			ss.offRun++
		} else {
			ss.offRun = 0
		}
		// A source whose last ticks stood off the others is back in the band once another
		// source comes to agree with its latest price (both gapped).
		for k := range st.per {
			if o := &st.per[k]; k != s.i && o.offRun > 0 {
				if ref, n := e.othersMedian(st, k, now, false); n > 0 && math.Abs(o.mid()-ref) <= bandPx {
					o.offRun = 0
				}
			}
		}
		if e.reselect(sl, now) {
			return // the switch considered the new active source's latest quote
		}
	}
	if st.halted {
		return
	}
	if s.i != st.active {
		if st.held {
			if ok, _ := e.health(st, s.i, now); ok {
				if math.Abs(ss.mid()-st.heldQ.Mid()) <= e.cfg.Filter.BandPips*sl.pip {
					e.releaseHeld(sl, now)
				} else {
					e.dropHeld(sl, now)
				}
			}
		}
		return
	}
	e.consider(sl, s.i, now, true)
}

// consider runs the active source j's latest quote through the spike filter: publish it, or
// hold it. own says it is a new tick of j (which decides a held tick of j first).
func (e *Engine) consider(sl *slot, j int, now int64, own bool) {
	st := &sl.st
	ss := &st.per[j]
	if e.cfg.Filter.Disabled {
		e.publish(sl, j, Quote{Bid: ss.bid, Ask: ss.ask, ReceivedAt: time.Unix(0, ss.recvNs), ProviderTime: time.Unix(0, ss.ptNs)}, now)
		return
	}
	mid := ss.mid()
	bandPx := e.cfg.Filter.BandPips * sl.pip
	multi := len(st.per) > 1
	var ref float64
	var nref int
	if multi {
		ref, nref = e.othersMedian(st, j, now, true)
	}
	var waiting int64 // a lone source's wait for ConfirmAfter, carried to its next held tick
	waitingReason := ""
	if st.held && own && st.heldSrc == j {
		hm := st.heldQ.Mid()
		dh, dp := math.Abs(mid-hm), math.Abs(mid-st.lastPubMid)
		agrees := nref == 0 || math.Abs(hm-ref) <= bandPx
		stays := agrees && dh <= e.band(st, sl.pip) && (st.heldReason == RejectUnreferenced || (st.heldReason == RejectSpike && dh <= dp))
		// On a desk of several sources, a source's own next tick confirms a held one only beside
		// another healthy source that agrees, or back at the price two sources last agreed on;
		// alone, it stands once ConfirmAfter passed (the other may be reconnecting).
		backToAgreed := st.agreedNs != 0 && math.Abs(hm-st.agreedMid) <= bandPx
		switch {
		case stays && (!multi || nref > 0 || backToAgreed || e.ran(now)-st.heldSince >= int64(e.cfg.Filter.ConfirmAfter)):
			e.releaseHeld(sl, now)
		default:
			if stays {
				waiting, waitingReason = st.heldSince, st.heldReason
			}
			e.dropHeld(sl, now)
		}
	}
	reason := ""
	// A jump another healthy source already quotes (both gapped, the other first) is confirmed
	// as it arrives.
	confirmed := nref > 0 && math.Abs(mid-ref) <= bandPx
	referenced := st.lastPubNs != 0 && now-st.lastPubNs <= int64(e.cfg.StaleAfter())
	switch {
	case !confirmed && referenced && math.Abs(mid-st.lastPubMid) > e.band(st, sl.pip):
		reason = RejectSpike
	case nref > 0 && !confirmed:
		reason = RejectDisagrees
	case multi && !confirmed && !referenced:
		// A new holder's first tick (or the first after a quiet) from a source no other
		// confirms: the backup's spike at a takeover must not set the price.
		reason = RejectUnreferenced
	}
	q := Quote{Bid: ss.bid, Ask: ss.ask, ReceivedAt: time.Unix(0, ss.recvNs), ProviderTime: time.Unix(0, ss.ptNs)}
	if reason == "" {
		e.publish(sl, j, q, now)
		return
	}
	if st.held { // a tick already held by the previous source
		e.dropHeld(sl, now)
	}
	st.held, st.heldSrc, st.heldQ, st.heldReason, st.heldSince = true, j, q, reason, ss.recvNs-ss.pausedAt
	if waiting != 0 && reason == waitingReason {
		st.heldSince = waiting
	}
	ss.held++
	e.srcs[j].held.Add(1)
	st.heldSeq = e.ring.add(RejectedTick{Symbol: sl.symbol, Source: e.srcs[j].name, Bid: q.Bid, Ask: q.Ask,
		ReceivedAt: q.ReceivedAt, Reason: reason, Outcome: OutcomeHeld})
}

// band is the spike band in price units: the floor, or the robust band of recent moves.
func (e *Engine) band(st *symState, pip float64) float64 {
	floor := e.cfg.Filter.FloorPips * pip
	if st.nMoves < e.cfg.Filter.MinMoves {
		return floor
	}
	if st.band == 0 || st.fresh >= bandEvery {
		var buf [256]float64
		m := buf[:st.nMoves]
		copy(m, st.moves[:st.nMoves])
		slices.Sort(m)
		med := median(m)
		for i := range m {
			m[i] = math.Abs(m[i] - med)
		}
		slices.Sort(m)
		st.band = med + e.cfg.Filter.K*1.4826*median(m)
		st.fresh = 0
	}
	return max(floor, st.band)
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func (e *Engine) releaseHeld(sl *slot, now int64) {
	st := &sl.st
	st.held = false
	e.ring.decide(st.heldSeq, OutcomePublished, now)
	e.publish(sl, st.heldSrc, st.heldQ, now)
}

func (e *Engine) dropHeld(sl *slot, now int64) {
	st := &sl.st
	st.held = false
	st.per[st.heldSrc].dropped++
	e.srcs[st.heldSrc].dropped.Add(1)
	e.ring.decide(st.heldSeq, OutcomeDropped, now)
}

// publish stores q as the symbol's quote and fans it out; the caller holds subsMu for reading.
func (e *Engine) publish(sl *slot, j int, q Quote, now int64) {
	st := &sl.st
	mid := q.Mid()
	if st.moves != nil && st.lastPubNs != 0 {
		st.moves[st.pos] = math.Abs(mid - st.lastPubMid)
		st.pos = (st.pos + 1) % len(st.moves)
		st.nMoves = min(st.nMoves+1, len(st.moves))
		st.fresh++
	}
	st.lastPubMid, st.lastPubNs = mid, now
	if len(st.per) > 1 {
		bandPx := e.cfg.Filter.BandPips * sl.pip
		ref, n := e.othersMedian(st, j, now, true)
		if (n > 0 && math.Abs(mid-ref) <= bandPx) || (st.agreedNs != 0 && math.Abs(mid-st.agreedMid) <= bandPx) {
			st.agreedMid, st.agreedNs = mid, now
		}
	}
	q.Source = e.srcs[j].name
	p := &q
	sl.q.Store(p)
	e.srcs[j].published.Add(1)
	if len(e.subs) > 0 {
		e.publishLocked(sl.symbol, p)
	}
}

// reselect applies the selection rule at now and switches when it says so; true if it did.
func (e *Engine) reselect(sl *slot, now int64) bool {
	st := &sl.st
	target, reason := st.active, ""
	first := -1
	for j := range st.per {
		ok, why := e.health(st, j, now)
		ss := &st.per[j]
		if !ok {
			if ss.healthySince != 0 {
				ss.lostHealth = true
			}
			ss.healthySince = 0
		} else if ss.healthySince == 0 {
			ss.healthySince = now
		}
		if ok && first < 0 {
			first = j
		}
		if j == st.active && !ok {
			reason = e.srcs[j].name + " " + why
		}
	}
	switch {
	case st.pinned >= 0:
		target, reason = st.pinned, "pinned"
	case first < 0:
		return false // none healthy: keep the current one, whose quote ages into QUOTING_HALTED
	case reason != "":
		target = first
	case first < st.active && !st.per[first].lostHealth:
		// A better source quoting for the first time (the sources coming up one after another
		// at a start) is not flapping: it is taken at once.
		target, reason = first, "first quote from a better source"
	case first < st.active && now-st.per[first].healthySince >= int64(e.cfg.Failover.HoldDown):
		target, reason = first, "fail-back after hold-down"
	}
	if target == st.active {
		return false
	}
	e.switchTo(sl, target, reason, now)
	return true
}

func (e *Engine) switchTo(sl *slot, to int, reason string, now int64) {
	st := &sl.st
	from := st.active
	if st.held {
		e.dropHeld(sl, now)
	}
	st.active, st.since = to, now
	st.failovers++
	sl.providerClosed.Store(st.per[to].closed)
	sw := Switch{Symbol: sl.symbol, From: e.srcs[from].name, To: e.srcs[to].name, Reason: reason, At: time.Unix(0, now)}
	e.log.Info("price source switched", slog.String("symbol", sw.Symbol), slog.String("from", sw.From),
		slog.String("to", sw.To), slog.String("reason", reason))
	e.emitSwitch(sw)
	if !st.halted && e.live(st, to, now) {
		e.consider(sl, to, now, false)
	}
}

// sweep notices silence, fail-back hold-downs and ConfirmAfter at now for every wanted symbol.
func (e *Engine) sweep(at time.Time) {
	now := at.UnixNano()
	p := e.wantedSlots.Load()
	if p == nil {
		return
	}
	confirm := int64(e.cfg.Filter.ConfirmAfter)
	e.subsMu.RLock()
	defer e.subsMu.RUnlock()
	for _, sl := range *p {
		sl.mu.Lock()
		st := &sl.st
		if len(st.per) > 1 {
			e.reselect(sl, now)
		}
		if st.held && e.ran(now)-st.heldSince >= confirm {
			if _, n := e.othersMedian(st, st.heldSrc, now, true); n == 0 {
				e.releaseHeld(sl, now)
			}
		}
		sl.mu.Unlock()
	}
}

func (e *Engine) runSweep(ctx interface{ Done() <-chan struct{} }) {
	t := time.NewTicker(e.cfg.Failover.Sweep)
	defer t.Stop()
	e.sweptNs.Store(e.cfg.Now().UnixNano())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.sweepTick(e.cfg.Now())
		}
	}
}

// sweepTick is one tick of Run's sweep: a pause noticed, then the sweep.
func (e *Engine) sweepTick(at time.Time) {
	now := at.UnixNano()
	e.notePause(now)
	e.sweptNs.Store(now)
	e.sweep(at)
}

// rejectRing keeps the last filtered ticks.
type rejectRing struct {
	mu   sync.Mutex
	buf  []RejectedTick
	seq  uint64 // entries ever added; entry k lives at buf[(k-1)%len]
	size int
}

func (r *rejectRing) add(t RejectedTick) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		r.buf = make([]RejectedTick, r.size)
	}
	r.seq++
	r.buf[(r.seq-1)%uint64(len(r.buf))] = t
	return r.seq
}

func (r *rejectRing) decide(seq uint64, outcome string, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq == 0 || r.seq-seq >= uint64(len(r.buf)) {
		return // already overwritten
	}
	t := &r.buf[(seq-1)%uint64(len(r.buf))]
	t.Outcome, t.DecidedAt = outcome, time.Unix(0, now)
}

// Rejected returns up to limit filtered ticks, newest first (limit <= 0: all kept).
func (e *Engine) Rejected(limit int) []RejectedTick {
	r := &e.ring
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int(min(r.seq, uint64(len(r.buf))))
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]RejectedTick, 0, n)
	for k := r.seq; len(out) < n; k-- {
		out = append(out, r.buf[(k-1)%uint64(len(r.buf))])
	}
	return out
}

// Switches subscribes to changes of active source. The channel has room for 256; a subscriber
// that falls further behind loses switches (each is also logged). cancel unsubscribes and
// closes the channel; it is safe to call more than once.
func (e *Engine) Switches() (<-chan Switch, func()) {
	ch := make(chan Switch, 256)
	e.swMu.Lock()
	e.swSubs[ch] = struct{}{}
	e.swMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			e.swMu.Lock()
			delete(e.swSubs, ch)
			e.swMu.Unlock()
			close(ch)
		})
	}
}

func (e *Engine) emitSwitch(sw Switch) {
	e.swMu.Lock()
	defer e.swMu.Unlock()
	for ch := range e.swSubs {
		select {
		case ch <- sw:
		default:
		}
	}
}

func (e *Engine) sourceIndex(name string) int {
	for i, s := range e.srcs {
		if s.name == name {
			return i
		}
	}
	return -1
}

// Pin makes symbol quote from source alone, healthy or not, at once; "" unpins (the symbol
// returns to the first healthy source, a higher one only after its hold-down). An unknown source
// or a symbol the desk does not quote is an error and changes nothing.
func (e *Engine) Pin(symbol, source string) error {
	j := -1
	if source != "" {
		if j = e.sourceIndex(source); j < 0 {
			return fmt.Errorf("pin %s: no price source named %q", symbol, source)
		}
	}
	sl := e.slots.Load().bySymbol[symbol]
	if sl == nil {
		return fmt.Errorf("pin %s: %w", symbol, errUnknownSymbol)
	}
	now := e.cfg.Now().UnixNano()
	e.subsMu.RLock()
	defer e.subsMu.RUnlock()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.st.pinned = j
	if j >= 0 && sl.st.active != j {
		e.switchTo(sl, j, "pinned", now)
	} else if j < 0 {
		e.reselect(sl, now)
	}
	return nil
}

var errUnknownSymbol = errors.New("the desk does not quote this symbol")

// Halt stops (halted) or resumes quoting symbol. While halted nothing is published and
// SymbolState is QUOTING_HALTED; resuming publishes the active source's next tick (or its
// latest, if fresh).
func (e *Engine) Halt(symbol string, halted bool) error {
	sl := e.slots.Load().bySymbol[symbol]
	if sl == nil {
		return fmt.Errorf("halt %s: %w", symbol, errUnknownSymbol)
	}
	now := e.cfg.Now().UnixNano()
	e.subsMu.RLock()
	defer e.subsMu.RUnlock()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	st := &sl.st
	if st.halted == halted {
		return nil
	}
	st.halted = halted
	sl.halted.Store(halted)
	if halted {
		if st.held {
			e.dropHeld(sl, now)
		}
		e.log.Info("symbol quoting halted by a dealer", slog.String("symbol", symbol))
		return nil
	}
	e.log.Info("symbol quoting resumed by a dealer", slog.String("symbol", symbol))
	if e.live(st, st.active, now) {
		e.consider(sl, st.active, now, false)
	}
	return nil
}

// Selections returns every wanted symbol's selection, in symbol order.
func (e *Engine) Selections() []Selection {
	p := e.wantedSlots.Load()
	if p == nil {
		return nil
	}
	now := e.cfg.Now().UnixNano()
	out := make([]Selection, 0, len(*p))
	for _, sl := range *p {
		sl.mu.Lock()
		st := &sl.st
		s := Selection{Symbol: sl.symbol, Source: e.srcs[st.active].name, Halted: st.halted,
			Failovers: st.failovers, Health: make([]SourceHealth, len(st.per))}
		if st.since != 0 {
			s.Since = time.Unix(0, st.since)
		}
		if st.pinned >= 0 {
			s.Pinned = e.srcs[st.pinned].name
		}
		for j := range st.per {
			ss := &st.per[j]
			ok, why := e.health(st, j, now)
			h := SourceHealth{Source: e.srcs[j].name, Healthy: ok, Reason: why,
				TickInterval: time.Duration(ss.ewma), SilentAfter: time.Duration(e.silentAfter(ss))}
			if ss.recvNs != 0 {
				h.LastTickAge = time.Duration(now - ss.recvNs)
			}
			s.Health[j] = h
		}
		sl.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// SourceStatuses returns every source's status, in priority order.
func (e *Engine) SourceStatuses() []SourceStatus {
	out := make([]SourceStatus, len(e.srcs))
	for i, s := range e.srcs {
		st := SourceStatus{Name: s.name, Connected: s.connected.Load(), Accepted: s.accepted.Load(),
			Held: s.held.Load(), Dropped: s.dropped.Load(), Published: s.published.Load()}
		if st.Connected {
			st.ConnectedSince = time.Unix(0, s.connectedSince.Load())
		}
		if p := s.lastErr.Load(); p != nil {
			st.LastError = *p
		}
		out[i] = st
	}
	return out
}

// FilterCount is the spike filter's counts for one symbol and source.
type FilterCount struct {
	Symbol, Source string
	Held, Dropped  uint64
}

// FilterCounts returns the held and dropped counts per wanted symbol and source, for metrics;
// pairs with nothing counted are left out.
func (e *Engine) FilterCounts() []FilterCount {
	p := e.wantedSlots.Load()
	if p == nil {
		return nil
	}
	var out []FilterCount
	for _, sl := range *p {
		sl.mu.Lock()
		for j := range sl.st.per {
			if ss := &sl.st.per[j]; ss.held != 0 || ss.dropped != 0 {
				out = append(out, FilterCount{Symbol: sl.symbol, Source: e.srcs[j].name, Held: ss.held, Dropped: ss.dropped})
			}
		}
		sl.mu.Unlock()
	}
	return out
}
