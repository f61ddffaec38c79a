package invariant

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// The FIX lane's execution invariants (docs/soak.md, «The FIX lane»): every execution the venue
// made is in the desk's journal exactly once and booked once on the desk's positions
// (venueExecutionsBooked), and no position was dropped from the risk engine's watch while the
// venue held its trade (venueWatched). Both read the FIX journal (fx_fix_execution,
// fx_fix_allocation): which trade a venue-side close reduced is the desk's choice, so they hold
// the journal to the venue order by order, and the book (what the risk engine watches) to the
// journal trade by trade.

// dbFIXExecution is one row of fx_fix_execution: an execution the desk's journal recorded,
// signed units, at the venue's TransactTime (or when it was journaled, when the report had none).
type dbFIXExecution struct {
	ID              int64
	ExecID, ClOrdID string
	Symbol          string
	Units, Price    decimal.Decimal
	At              time.Time
}

// dbFIXAllocation is one row of fx_fix_allocation: a trade's signed share of an execution
// ("" the share no desk trade explains).
type dbFIXAllocation struct {
	Execution int64
	Trade     string
	Units     decimal.Decimal
}

// fixStatusExecMark is in the ExecID the journal gives an execution it learned from a status
// report (<ClOrdID>#<CumQty>): such a report names itself, not the execution it shows.
const fixStatusExecMark = "#"

// WatchDrop is one moment a web process was told the venue no longer held an EXTERNAL position's
// trade (a close answered "no such trade"), and so stopped watching the position: read from its
// log.
type WatchDrop struct {
	Proc     string
	At       time.Time
	Position int64
}

// venueWatchSlack absorbs the millisecond rounding of the database's and the venue's times.
const venueWatchSlack = 50 * time.Millisecond

// fixVenueKeyPrefix starts the desk journal's key of an order the venue made itself: the
// journal records it under the venue's OrderID, never the LP's ClOrdID (docs/fix.md, «Whose
// execution»).
const fixVenueKeyPrefix = "venue:"

// journalKey is the ClOrdID under which the desk's journal records o's executions.
func journalKey(o VenueOrder) string {
	if o.Own {
		return fixVenueKeyPrefix + o.OrderID
	}
	return o.ClOrdID
}

// executed is what the venue executed of o: its executions' quantities, or its CumQty when it
// reported them as one.
func executed(o VenueOrder) decimal.Decimal {
	if len(o.Executions) == 0 {
		return o.CumQty
	}
	var sum decimal.Decimal
	for _, e := range o.Executions {
		sum = sum.Add(e.Qty)
	}
	return sum
}

// fixTrade is one desk trade as the journal allocated executions to it, in the venue's order.
type fixTrade struct {
	id     string
	shares []fixShare
}

type fixShare struct {
	exec  dbFIXExecution
	units decimal.Decimal
}

// held is what the venue holds of the trade per the journal: the sum of its shares.
func (t fixTrade) held() decimal.Decimal {
	var sum decimal.Decimal
	for _, sh := range t.shares {
		sum = sum.Add(sh.units)
	}
	return sum
}

// fixTrades are the journal's A-book trades and what closes executed past their trades (hedge
// trades and the untagged remainder left out), each with its shares in execution time order.
func fixTrades(s *Snapshot) map[string]*fixTrade {
	execs := make(map[int64]dbFIXExecution, len(s.FIXExecutions))
	for _, e := range s.FIXExecutions {
		execs[e.ID] = e
	}
	out := map[string]*fixTrade{}
	for _, a := range s.FIXAllocations {
		if _, _, hedge := hedgeOrderOf(a.Trade); a.Trade == "" || hedge && !strings.Contains(a.Trade, fixCloseMark) {
			continue // a hedge trade (unless what a hedge close executed past it) or the untagged remainder
		}
		t := out[a.Trade]
		if t == nil {
			t = &fixTrade{id: a.Trade}
			out[a.Trade] = t
		}
		t.shares = append(t.shares, fixShare{exec: execs[a.Execution], units: a.Units})
	}
	for _, t := range out {
		slices.SortStableFunc(t.shares, func(a, b fixShare) int {
			return cmp.Or(a.exec.At.Compare(b.exec.At), cmp.Compare(a.exec.ID, b.exec.ID))
		})
	}
	return out
}

// linkedByTrade is the linked desk positions by the journal's trade: the ClOrdID of the order
// that opened them, the desk's order id. (Their venueTradeId is the trade's public id, its first
// execution's number in the journal, which the venue never sees.)
func linkedByTrade(s *Snapshot) map[string][]dbPosition {
	out := map[string][]dbPosition{}
	for _, p := range s.Positions {
		if p.VenueTradeID.Valid {
			id := strconv.FormatInt(p.Order, 10)
			out[id] = append(out[id], p)
		}
	}
	return out
}

// venueExecutionsBooked (end, FIX): every execution the venue made — for the desk's opens and
// closes, its hedge orders and its own orders alike — is in the desk's journal exactly once (per
// ClOrdID the journal's units add up to what the venue executed, and every journal execution
// reported as a trade names one of the venue's ExecIDs); and what the journal allocated to each
// A-book trade is booked once on the desk: one position is linked to it, opened with the units
// of its opening executions, and holding (signed, 0 once CLOSED) what its executions leave.
func checkVenueExecutionsBooked(s *Snapshot, vs *VenueState) Result {
	r := Result{Name: "venueExecutionsBooked"}
	journal := map[string][]dbFIXExecution{}
	for _, e := range s.FIXExecutions {
		journal[e.ClOrdID] = append(journal[e.ClOrdID], e)
	}
	filled := map[string]bool{}
	executions := 0
	for _, o := range vs.Orders {
		want := executed(o)
		if !want.IsPositive() {
			continue
		}
		key := journalKey(o)
		filled[key] = true
		executions += max(1, len(o.Executions))
		ids := map[string]bool{}
		for _, e := range o.Executions {
			ids[e.ExecID] = true
		}
		var got decimal.Decimal
		for _, e := range journal[key] {
			got = got.Add(e.Units.Abs())
			if len(ids) > 0 && !strings.Contains(e.ExecID, fixStatusExecMark) && !ids[e.ExecID] {
				r.Add("", "the desk's journal records execution %s of %s (%s units at %s), which the venue never made (its executions: %s)", e.ExecID, key, e.Units, e.Price, execsText(o.Executions))
			}
		}
		switch got.Cmp(want) {
		case -1:
			r.Add("", "the venue executed %s units of %s (%s %s, executions %s); the desk's journal records %s", want, key, o.Symbol, o.Side, execsText(o.Executions), got)
		case 1:
			r.Add("", "the venue executed %s units of %s (%s %s, executions %s); the desk's journal records %s, more than once", want, key, o.Symbol, o.Side, execsText(o.Executions), got)
		}
	}
	for id, es := range journal {
		if !filled[id] {
			r.Add("", "the desk's journal records %d executions of %s (first %s, %s units), which the venue never filled", len(es), id, es[0].ExecID, es[0].Units)
		}
	}
	linked := linkedByTrade(s)
	trades := fixTrades(s)
	orphans := 0
	for _, id := range slices.Sorted(maps.Keys(trades)) {
		t := trades[id]
		if strings.Contains(id, fixCloseMark) {
			// What a close executed past its trade, the venue's own order having closed the
			// trade first (docs/fix.md, «A close that crosses the venue's own»): no position is
			// linked to it, and the reconciler closes it as an orphan.
			orphans++
			if held := t.held(); !held.IsZero() {
				r.Add("", "close %s executed %s units past its trade, and the venue still holds them (%s): the reconciler closes such a trade as an orphan", id, held, sharesText(t.shares))
			}
			continue
		}
		ps := linked[id]
		if len(ps) != 1 {
			r.Add("", "the journal allocates executions to trade %s (it holds %s units), and %d desk positions are linked to it (%s)", id, t.held(), len(ps), positionsText(ps))
			continue
		}
		p := ps[0]
		size := s.Instruments[p.Symbol].Contract
		var opened decimal.Decimal
		for _, sh := range t.shares {
			if sh.exec.ClOrdID == id {
				opened = opened.Add(sh.units)
			}
		}
		if !opened.Abs().Equal(p.OpenVolume.Mul(size)) {
			r.Add("", "trade %s opened with %s units at the venue; its position %d opened %s lots", id, opened, p.ID, p.OpenVolume)
		}
		if held := t.held(); !held.Equal(signedUnits(s, p)) {
			r.Add("", "position %d (%s %s, %s, %s lots left) books %s units of trade %s; the executions the journal allocated to it leave %s (%s)",
				p.ID, p.Symbol, p.Side, p.Status, p.Volume, signedUnits(s, p), id, held, sharesText(t.shares))
		}
	}
	r.Figures = fmt.Sprintf("%d venue executions of %d filled orders, %d in the desk's journal, %d A-book trades booked, %d closes past their trade closed as orphans", executions, len(filled), len(s.FIXExecutions), len(trades)-orphans, orphans)
	return r
}

// venueWatched (end, FIX): no desk position was dropped from the risk engine's watch while the
// venue held its trade. The journal says, in the venue's time, from when a trade was held until
// its executions first took it to zero (or past it, on the other side); the desk may close the
// position only from then on, and a web process may be told the venue no longer holds the trade
// (drops, read from its log: the risk engine stops watching there) only from then on; and a
// position is OPEN at the end exactly when the venue still holds its trade.
func checkVenueWatched(s *Snapshot, drops []WatchDrop) Result {
	r := Result{Name: "venueWatched"}
	trades := fixTrades(s)
	linked := linkedByTrade(s)
	positions := map[int64]dbPosition{}
	for _, p := range s.Positions {
		positions[p.ID] = p
	}
	// flat is when trade t, of a position on side, stopped being held at the venue (zero: never).
	flat := func(t *fixTrade, side string) (heldFrom, flatAt time.Time) {
		var run decimal.Decimal
		for _, sh := range t.shares {
			run = run.Add(sh.units)
			inSide := run.IsPositive()
			if side == "SELL" {
				inSide = run.IsNegative()
			}
			switch {
			case inSide && heldFrom.IsZero():
				heldFrom = sh.exec.At
			case !inSide && !heldFrom.IsZero():
				return heldFrom, sh.exec.At
			}
		}
		return heldFrom, time.Time{}
	}
	judged := 0
	for _, id := range slices.Sorted(maps.Keys(trades)) {
		ps := linked[id]
		if len(ps) != 1 {
			continue // venueExecutionsBooked's
		}
		p := ps[0]
		heldFrom, flatAt := flat(trades[id], p.Side)
		if heldFrom.IsZero() {
			continue
		}
		judged++
		switch {
		case p.Status == "OPEN" && !flatAt.IsZero():
			r.Add("", "position %d (%s %s %s lots) is open on the desk; the venue stopped holding its trade %s at %s", p.ID, p.Symbol, p.Side, p.Volume, id, TimeOfDay(flatAt))
		case p.Status != "OPEN" && flatAt.IsZero():
			r.Add("", "position %d (%s %s) was closed on the desk at %s while the venue still holds %s units of its trade %s", p.ID, p.Symbol, p.Side, closedText(p), trades[id].held(), id)
		case p.Status != "OPEN" && p.ClosedAt.Valid && p.ClosedAt.Time.Add(venueWatchSlack).Before(flatAt):
			r.Add("", "position %d (%s %s) was closed on the desk at %s, %s before the venue stopped holding its trade %s (at %s)",
				p.ID, p.Symbol, p.Side, closedText(p), flatAt.Sub(p.ClosedAt.Time).Round(time.Millisecond), id, TimeOfDay(flatAt))
		}
	}
	for _, d := range drops {
		p, ok := positions[d.Position]
		trade := strconv.FormatInt(p.Order, 10)
		if !ok || !p.VenueTradeID.Valid || trades[trade] == nil {
			continue
		}
		heldFrom, flatAt := flat(trades[trade], p.Side)
		if heldFrom.IsZero() || d.At.Before(heldFrom) || !flatAt.IsZero() && !d.At.Add(venueWatchSlack).Before(flatAt) {
			continue
		}
		until := "still holds it"
		if !flatAt.IsZero() {
			until = "held it until " + TimeOfDay(flatAt)
		}
		r.Add("", "%s was told at %s that the venue no longer held position %d's trade %s (%s %s) and stopped watching it; the venue %s",
			d.Proc, TimeOfDay(d.At), p.ID, trade, p.Symbol, p.Side, until)
	}
	r.Figures = fmt.Sprintf("%d A-book trades the venue held, %d times a web process was told the venue no longer held one", judged, len(drops))
	return r
}

func closedText(p dbPosition) string {
	if !p.ClosedAt.Valid {
		return "an unknown time"
	}
	return TimeOfDay(p.ClosedAt.Time)
}

func execsText(es []VenueExecution) string {
	if len(es) == 0 {
		return "as one"
	}
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %s@%s", e.ExecID, e.Qty, e.Px))
	}
	return strings.Join(out, " ")
}

func sharesText(shs []fixShare) string {
	var out []string
	for i, sh := range shs {
		if i == 8 {
			out = append(out, fmt.Sprintf("and %d more", len(shs)-8))
			break
		}
		out = append(out, fmt.Sprintf("%s %s %s", sh.exec.ClOrdID, sh.units, TimeOfDay(sh.exec.At)))
	}
	return strings.Join(out, ", ")
}
