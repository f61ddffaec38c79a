package invariant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// What a fill on a NETTING or FIFO account legitimately does (docs/orders.md, «Position
// modes»), as the other invariants need it: the fill may reduce, close or reverse the account's
// opposite positions (reason NETTED) and add to a same-side position instead of opening one, so
// "the position an order filled is the one it opened" does not hold there. Those checks keep
// their rule for HEDGING accounts and, for the accounts of a NETTING or FIFO group, judge the
// netting outcome instead: the fill's events (the outbox writes a batch's events in the order it
// applied them, trading.writeNet) name the positions it netted, in order — its NETTED closes,
// then the position it added to (position.modified, its initialVolume grown) or opened
// (position.opened), then the order's own event — and their volumes add up to the order's.

// nettedAccounts are the accounts whose group is NETTING or FIFO at the end (the soak's mode
// traders never change group).
func nettedAccounts(s *Snapshot) map[int64]bool {
	out := map[int64]bool{}
	for _, a := range s.Accounts {
		if m := s.PositionModes[a.Group]; m == "NETTING" || m == "FIFO" {
			out[a.ID] = true
		}
	}
	return out
}

// nettedFill is one fill of a netted account's order as its events tell it.
type nettedFill struct {
	event  int64           // the order's order.filled or order.triggered
	how    string          // "opened", "added" or "reduced"
	result int64           // the position the fill left: opened, added to, or the first reduced
	legs   []int64         // the positions it reduced or closed (NETTED), in order
	volume decimal.Decimal // the lots it took off them plus the lots it opened or added
}

// nettedPayload is what nettedFills reads of an event's payload.
type nettedPayload struct {
	ID            *int64 `json:"id"`
	Volume        string `json:"volume"`
	InitialVolume string `json:"initialVolume"`
	OpenPrice     string `json:"openPrice"`
	ClosedVolume  string `json:"closedVolume"`
	Reason        string `json:"reason"`
}

// nettedEvent is one event of a netted account, its payload, and for a position's event the
// position's initialVolume before it.
type nettedEvent struct {
	e      dbEvent
	p      nettedPayload
	before decimal.Decimal
}

// nettedFills reads each filled order of a netted account from the events: the run of its
// account's events just before the order's own event (an OCO partner's order.cancelled or a
// stop-limit's order.stop_triggered between them aside).
func nettedFills(s *Snapshot, accounts map[int64]bool) map[int64]nettedFill {
	initial := map[int64]decimal.Decimal{} // position → its initialVolume as last told
	byAccount := map[int64][]nettedEvent{}
	out := map[int64]nettedFill{}
	for _, e := range s.Events {
		if !accounts[e.Account] {
			continue
		}
		var p nettedPayload
		if json.Unmarshal([]byte(e.Payload), &p) != nil || p.ID == nil {
			continue // the events invariant reports it
		}
		x := nettedEvent{e: e, p: p}
		switch e.Type {
		case "position.opened", "position.modified", "position.closed", "position.partly_closed":
			x.before = initial[*p.ID]
			if v, err := decimal.NewFromString(p.InitialVolume); err == nil {
				initial[*p.ID] = v
			}
		case "order.filled", "order.triggered":
			f := readFill(byAccount[e.Account])
			f.event = e.ID
			out[*p.ID] = f
		}
		byAccount[e.Account] = append(byAccount[e.Account], x)
	}
	return out
}

// readFill is the fill told by the last events of prior, an account's events before its
// order's own: an opened or added position nearest, then the NETTED closes before it.
func readFill(prior []nettedEvent) nettedFill {
	f := nettedFill{volume: decimal.Zero}
	i := len(prior) - 1
	skip := func() {
		for i >= 0 && (prior[i].e.Type == "order.cancelled" || prior[i].e.Type == "order.stop_triggered") {
			i--
		}
	}
	skip()
	if i >= 0 {
		x := prior[i]
		now, _ := decimal.NewFromString(x.p.InitialVolume)
		switch {
		case x.e.Type == "position.opened":
			f.how, f.result, f.volume = "opened", *x.p.ID, now
			i--
		case x.e.Type == "position.modified" && now.GreaterThan(x.before):
			f.how, f.result, f.volume = "added", *x.p.ID, now.Sub(x.before)
			i--
		}
	}
	var legs []int64
	for skip(); i >= 0 && (prior[i].e.Type == "position.closed" || prior[i].e.Type == "position.partly_closed") && prior[i].p.Reason == "NETTED"; skip() {
		v, _ := decimal.NewFromString(prior[i].p.ClosedVolume)
		f.volume = f.volume.Add(v)
		legs = append(legs, *prior[i].p.ID)
		i--
	}
	slices.Reverse(legs)
	f.legs = legs
	if f.how == "" && len(legs) > 0 {
		f.how, f.result = "reduced", legs[0]
	}
	return f
}

// checkNettedFill judges the fill of order o of a netted account: its events tell a fill of
// the order's whole volume, its order event names the position the fill left, and the order
// opened a position exactly when its events say it did.
func checkNettedFill(r *Result, o dbOrder, fills map[int64]nettedFill, posByOrder map[int64]int64, payloads map[int64]eventPayload) {
	f, ok := fills[o.ID]
	if !ok {
		return // not filled: the counts above judge its events
	}
	p := payloads[f.event]
	opened, byOrder := posByOrder[o.ID]
	switch {
	case f.how == "":
		r.Add("", "event %d of order %d (%s lots, account %d): no NETTED close, add or open just before it", f.event, o.ID, o.Volume, o.Account)
	case p.PositionID == nil || *p.PositionID != f.result || p.Status != "FILLED":
		r.Add("", "event %d of order %d names position %v, status %s; its fill %s position %d", f.event, o.ID, p.PositionID, p.Status, f.how, f.result)
	case !f.volume.Equal(o.Volume):
		r.Add("", "order %d of %s lots: its fill's events net %s lots (%s %d, NETTED %v)", o.ID, o.Volume, f.volume, f.how, f.result, f.legs)
	case (f.how == "opened") != byOrder || (byOrder && opened != f.result):
		r.Add("", "order %d's fill %s position %d, but the order opened position %d (%v)", o.ID, f.how, f.result, opened, byOrder)
	}
}

// nettedCloseOpens is, for each position of a netted account, its initialVolume (openVolume)
// as each of its close events tells it, in order: a NETTING add grows it between closes.
func nettedCloseOpens(s *Snapshot, accounts map[int64]bool) map[int64][]decimal.Decimal {
	out := map[int64][]decimal.Decimal{}
	for _, e := range s.Events {
		if !accounts[e.Account] || (e.Type != "position.closed" && e.Type != "position.partly_closed") {
			continue
		}
		var p nettedPayload
		if json.Unmarshal([]byte(e.Payload), &p) != nil || p.ID == nil {
			continue // the events invariant reports it
		}
		v, err := decimal.NewFromString(p.InitialVolume)
		if err != nil {
			continue
		}
		out[*p.ID] = append(out[*p.ID], v)
	}
	return out
}

// nettedOpenBefore is the volume position p held open before its i-th close deal, left being
// its openVolume less the closes before that one. A HEDGING position's openVolume never moves,
// so that is left; a netted one's is the openVolume its i-th close event tells less the same
// closes (the events invariant matches each close deal to its close event). known is false for
// a close whose key names its filling order instead of the volume before it (a position its
// fill's batch opened, trading.nettedDeal) or whose event is missing (the events invariant
// reports that).
func nettedOpenBefore(grown map[int64][]decimal.Decimal, p dbPosition, key string, left decimal.Decimal, i int) (decimal.Decimal, bool) {
	opens, netted := grown[p.ID]
	if !netted {
		return left, true
	}
	if i >= len(opens) || strings.HasPrefix(key, "close:netted:") {
		return left, false
	}
	return opens[i].Sub(p.OpenVolume.Sub(left)), true
}

// nettedOpenPrices is the price each position of a netted account opened at, as its
// position.opened tells it: a NETTING add moves the row's openPrice to the volume-weighted
// average since.
func nettedOpenPrices(s *Snapshot, accounts map[int64]bool) map[int64]decimal.Decimal {
	out := map[int64]decimal.Decimal{}
	for _, e := range s.Events {
		if !accounts[e.Account] || e.Type != "position.opened" {
			continue
		}
		var p nettedPayload
		if json.Unmarshal([]byte(e.Payload), &p) != nil || p.ID == nil {
			continue // the events invariant reports it
		}
		if px, err := decimal.NewFromString(p.OpenPrice); err == nil {
			out[*p.ID] = px
		}
	}
	return out
}

// nettedState is a netted account's position as one of its events left it, on the database's
// clock.
type nettedState struct {
	at                time.Time
	volume, openPrice decimal.Decimal
}

// nettedHistories is each position of a netted account as its events (opened, modified —
// a NETTING add among them —, partly closed, closed) left it, in order.
func nettedHistories(s *Snapshot, accounts map[int64]bool) map[int64][]nettedState {
	out := map[int64][]nettedState{}
	for _, e := range s.Events {
		switch {
		case !accounts[e.Account]:
			continue
		case e.Type != "position.opened" && e.Type != "position.modified" && e.Type != "position.closed" && e.Type != "position.partly_closed":
			continue
		}
		var p nettedPayload
		if json.Unmarshal([]byte(e.Payload), &p) != nil || p.ID == nil {
			continue // the events invariant reports it
		}
		v, err1 := decimal.NewFromString(p.Volume)
		px, err2 := decimal.NewFromString(p.OpenPrice)
		if err1 != nil || err2 != nil {
			continue
		}
		out[*p.ID] = append(out[*p.ID], nettedState{at: e.CreatedAt, volume: v, openPrice: px})
	}
	return out
}

// nettedAtFreeze is openAtFreeze for a netted account, whose positions' openVolume and
// openPrice a NETTING add moves after the fact: each position as the last of its events
// written before the row left it. known is false when one was written within eodOpenSlack of
// the row (the read may or may not have seen it) or a position has no events (the events
// invariant reports that).
func nettedAtFreeze(ps []dbPosition, history map[int64][]nettedState, a dbEODAccount) (legs []eodLeg, open int, known bool) {
	at := map[[2]string]int{}
	for _, p := range ps {
		h := history[p.ID]
		if len(h) == 0 {
			return nil, 0, false
		}
		var last *nettedState
		for i, x := range h {
			if !x.at.Before(a.TakenAt) {
				break // committed after the row was written, so after the read
			}
			if x.at.After(a.TakenAt.Add(-eodOpenSlack)) {
				return nil, 0, false
			}
			last = &h[i]
		}
		if last == nil || !last.volume.IsPositive() {
			continue
		}
		open++
		k := [2]string{p.Symbol, p.Side}
		i, ok := at[k]
		if !ok {
			i = len(legs)
			at[k] = i
			legs = append(legs, eodLeg{symbol: p.Symbol, side: p.Side, volume: decimal.Zero, volumePrice: decimal.Zero})
		}
		legs[i].volume = legs[i].volume.Add(last.volume)
		legs[i].volumePrice = legs[i].volumePrice.Add(last.volume.Mul(last.openPrice))
	}
	return legs, open, true
}

// nettedFigures counts the fills of accounts the events tell, by what they did: the modes'
// invariants' figures show they judged accounts that really net.
func nettedFigures(s *Snapshot, accounts map[int64]bool) string {
	n := map[string]int{}
	for _, f := range nettedFills(s, accounts) {
		n[f.how]++
		if f.how == "opened" && len(f.legs) > 0 {
			n["reversed"]++
		}
	}
	return fmt.Sprintf("%d fills: %d opened (%d of them reversing), %d added, %d only reduced", n["opened"]+n["added"]+n["reduced"], n["opened"], n["reversed"], n["added"], n["reduced"])
}
