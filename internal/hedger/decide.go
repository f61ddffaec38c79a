package hedger

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/shopspring/decimal"
)

// HedgePosition is one open hedge position the hedger opened (a venue trade in the hedge book).
type HedgePosition struct {
	ID    int64
	Units decimal.Decimal // signed venue units: positive bought
}

// State is what one symbol's decision reads.
type State struct {
	Symbol string
	// DeskLots is the B-book's net exposure in lots on the desk's side: the opposite of its
	// traders' net INTERNAL positions (traders net long 10 lots: −10). EXTERNAL (A-book)
	// positions are not in it: the venue carries them.
	DeskLots decimal.Decimal
	// HedgeUnits is the hedge book's net at the venue in signed venue units: every open hedge
	// position of the symbol, the hedger's and the routing rules' (HEDGE n%).
	HedgeUnits decimal.Decimal
	// Positions are the open hedge positions the hedger opened: the only ones it may close.
	Positions []HedgePosition
	// Unresolved counts the symbol's hedge orders whose outcome is not known yet (SENDING).
	Unresolved int
	// ContractSize is venue units per lot.
	ContractSize decimal.Decimal
}

// Limit is the dealer's terms for one symbol, in lots.
type Limit struct {
	// Max is the most net exposure the desk carries, either side; nil: the symbol has no limit
	// and is never hedged.
	Max *decimal.Decimal
	// Band is the hysteresis: a hedge brings the net to Max − Band (not to Max), so the next
	// tick does not trade again; an unwind must leave the net within Max − Band too.
	Band decimal.Decimal
	// Min is the smallest hedge order; a smaller one is raised to it when that still lands
	// inside the limit.
	Min decimal.Decimal
}

// Kind is what a decision does.
type Kind string

const (
	Nothing Kind = "nothing"
	Open    Kind = "open"  // open a hedge position of Units
	Close   Kind = "close" // close hedge position PositionID, whole
)

// Decision is one symbol's venue order, if any.
type Decision struct {
	Symbol string
	Kind   Kind
	// Units: the signed venue units an Open sends; the units a Close takes off (the position's
	// units, negated).
	Units      decimal.Decimal
	PositionID int64
	// Net and NetAfter are the desk's net exposure (B-book + hedge book) in venue units before
	// and after the order; LimitUnits the limit in venue units.
	Net, NetAfter, LimitUnits decimal.Decimal
	// Breached says the net is past the limit and this decision does not bring it back: the
	// runner raises exposure-limit-breached (Reason says why).
	Breached bool
	Reason   string
}

// Decide returns the one venue order that keeps symbol s inside its limit, or Nothing.
//
// Everything is counted in venue units: the B-book's lots × contract size, plus the hedge book.
// With N the net, L the limit and T = max(L − band, 0) the target:
//
//   - no limit: nothing, ever;
//   - a hedge order with an unknown outcome: nothing until the reconciler resolves it (the
//     hedger never sends twice what may have been sent once);
//   - |N| > L: close the largest of the hedger's positions whose close alone lands within T
//     (a hedge the exposure has turned against); else open −sign(N) × (|N| − T) rounded up to
//     whole units and raised to the minimum size, which lands the net at ±T or nearer to zero.
//     A minimum that would carry the net past the limit on the other side: nothing, breached;
//   - |N| ≤ L: close the largest of the hedger's positions whose close leaves the net within
//     T (the exposure it covered has shrunk); else nothing.
//
// Closes are of whole positions: the venue (a hedging account) then holds exactly the trades
// the hedge book records, and an unwind never opens a second, offsetting trade.
func Decide(s State, l Limit) Decision {
	d := Decision{Symbol: s.Symbol, Kind: Nothing}
	if l.Max == nil {
		d.Reason = "no limit: the symbol is not hedged"
		return d
	}
	if !s.ContractSize.IsPositive() {
		d.Reason = "no contract size: the symbol is not hedged"
		return d
	}
	limit := l.Max.Mul(s.ContractSize)
	target := decimal.Max(l.Max.Sub(l.Band), decimal.Zero).Mul(s.ContractSize)
	minUnits := l.Min.Mul(s.ContractSize).Ceil()
	net := s.DeskLots.Mul(s.ContractSize).Add(s.HedgeUnits)
	d.Net, d.NetAfter, d.LimitUnits = net, net, limit
	over := net.Abs().GreaterThan(limit)
	if s.Unresolved > 0 {
		d.Breached = over
		d.Reason = fmt.Sprintf("%d hedge order(s) of the symbol with an outcome not known yet: nothing is sent until the reconciler resolves them", s.Unresolved)
		return d
	}
	if p, ok := closable(s.Positions, net, target); ok {
		d.Kind, d.PositionID, d.Units, d.NetAfter = Close, p.ID, p.Units.Neg(), net.Sub(p.Units)
		if over {
			d.Reason = "past the limit: a hedge position now adds to the exposure; closed"
		} else {
			d.Reason = "the exposure the hedge position covered has shrunk; closed"
		}
		return d
	}
	if !over {
		d.Reason = "inside the limit"
		return d
	}
	size := net.Abs().Sub(target).Ceil()
	if size.LessThan(minUnits) {
		size = minUnits
	}
	after := net.Abs().Sub(size) // the net's magnitude on its own side; negative: crossed over
	if after.Neg().GreaterThan(limit) {
		d.Breached = true
		d.Reason = fmt.Sprintf("the minimum hedge size (%s units) would carry the net past the limit on the other side", minUnits)
		return d
	}
	d.Kind, d.Units = Open, size
	if net.IsPositive() {
		d.Units = size.Neg()
	}
	d.NetAfter = net.Add(d.Units)
	d.Reason = "past the limit: hedged back to the limit less the band"
	return d
}

// closable is the largest hedge position (by units; the oldest of equals) whose close leaves
// the net within target.
func closable(positions []HedgePosition, net, target decimal.Decimal) (HedgePosition, bool) {
	var fit []HedgePosition
	for _, p := range positions {
		if p.Units.IsZero() {
			continue
		}
		if net.Sub(p.Units).Abs().LessThanOrEqual(target) {
			fit = append(fit, p)
		}
	}
	if len(fit) == 0 {
		return HedgePosition{}, false
	}
	slices.SortFunc(fit, func(a, b HedgePosition) int {
		if c := b.Units.Abs().Cmp(a.Units.Abs()); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return fit[0], true
}
