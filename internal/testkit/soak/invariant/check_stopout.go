package invariant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/events"
)

// termsLag is how long after an admin change's audit row a stop-out may still be decided under
// the terms before it: the holder reads the audit log at least every 5 s when the Redis notice
// is lost (docs/groups.md, «How a change reaches the risk engine»), plus 1 s for the read
// itself and the row's commit after its `at` (taken at INSERT).
const termsLag = 6 * time.Second

// stopOutTerms: every stop-out happened at or below the stop-out level of the terms in force at
// that moment. Each account.stop_out carries the risk engine's decision (docs/architecture.md,
// «Events»); the check replays the audit log — the account's moves (account.move), its groups'
// levels (account_group.create, .update) — to the decision's time, and holds that:
//
//   - the group the engine marked with is one the account was in at some moment of
//     [decidedAt − termsLag, decidedAt]: a move reaches the engine within termsLag, never before
//     it committed (the defect this catches: a stop-out judged under the old group after a move);
//   - the stop-out level it used is one that group had in that window;
//   - the margin level it decided on is at or below that level, and is its recorded equity ÷
//     used margin × 100, within what rounding those two to the currency's minor unit can move it.
//
// It does not recompute the level from the positions and prices: the decision's prices (every
// symbol and conversion leg at the engine's tick) are not recorded, and the close fill is a later
// quote; the terms (group, level) are what the check replays exactly.
func checkStopOutTerms(s *Snapshot) Result {
	r := Result{Name: "stopOutTerms"}
	h := replayTerms(s)
	judged, undecided := 0, 0
	for _, e := range s.Events {
		if e.Type != "account.stop_out" {
			continue
		}
		var p events.StopOut
		if err := json.Unmarshal([]byte(e.Payload), &p); err != nil {
			r.Add("", "event %d (account.stop_out): payload %s: %v", e.ID, Truncate(e.Payload, 200), err)
			continue
		}
		if p.Decision == nil {
			// Only the risk engine stops accounts out in the soak: its record must say why.
			undecided++
			r.Add("", "event %d: stop-out of position %d (account %d) records no decision", e.ID, p.PositionID, p.AccountID)
			continue
		}
		judged++
		for _, why := range judgeStopOut(h, p.AccountID, *p.Decision) {
			r.Add("", "event %d: stop-out of position %d (account %d, decided %s): %s", e.ID, p.PositionID, p.AccountID, TimeOfDay(p.Decision.DecidedAt), why)
		}
	}
	r.Figures = fmt.Sprintf("%d stop-outs judged against the audit log's terms (%d moves, %d group level changes replayed), %d without a decision",
		judged, h.moves, h.levelChanges, undecided)
	return r
}

// judgeStopOut is why decision d, a stop-out of account, breaks the invariant (none: it holds).
func judgeStopOut(h termsHistory, account int64, d events.StopOutDecision) []string {
	var out []string
	from, to := d.DecidedAt.Add(-termsLag), d.DecidedAt
	groups := h.groupOf(account).during(from, to)
	if !slices.Contains(groups, d.Group) {
		out = append(out, fmt.Sprintf("marked with group %q, but the account was in %q from %s to %s (audit log)", d.Group, groups, TimeOfDay(from), TimeOfDay(to)))
	}
	stopOut, err1 := decimal.NewFromString(d.StopOutLevel)
	level, err2 := decimal.NewFromString(d.MarginLevel)
	if err1 != nil || err2 != nil {
		return append(out, fmt.Sprintf("stop-out level %q, margin level %q: not decimals", d.StopOutLevel, d.MarginLevel))
	}
	if levels := h.levelOf(d.Group).during(from, to); len(levels) > 0 && !containsDecimal(levels, stopOut) {
		out = append(out, fmt.Sprintf("used stop-out level %s, but group %q's level from %s to %s was %s (audit log)", stopOut, d.Group, TimeOfDay(from), TimeOfDay(to), levels))
	}
	if level.GreaterThan(stopOut) {
		out = append(out, fmt.Sprintf("margin level %s is above the stop-out level %s", level, stopOut))
	}
	if lo, hi, ok := levelBounds(d.Equity, d.UsedMargin); !ok {
		out = append(out, fmt.Sprintf("equity %q over used margin %q: no margin level", d.Equity, d.UsedMargin))
	} else if f := level.InexactFloat64(); f < lo-1e-9 || f > hi+1e-9 {
		out = append(out, fmt.Sprintf("margin level %s is not equity %s ÷ used margin %s × 100 (%.6f–%.6f)", level, d.Equity, d.UsedMargin, lo, hi))
	}
	return out
}

// levelBounds is the range of equity ÷ used × 100 over the values the two money strings round
// from (± half their last place).
func levelBounds(equity, used string) (lo, hi float64, ok bool) {
	eq, err1 := decimal.NewFromString(equity)
	u, err2 := decimal.NewFromString(used)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	half := func(d decimal.Decimal) float64 { return 0.5 * pow10(int(d.Exponent())) }
	e0, eh, u0, uh := eq.InexactFloat64(), half(eq), u.InexactFloat64(), half(u)
	if u0-uh <= 0 {
		return 0, 0, false
	}
	lo, hi = (e0-eh)/(u0+uh)*100, (e0+eh)/(u0-uh)*100
	if e0-eh < 0 { // a negative equity is lowest over the smallest margin
		lo = (e0 - eh) / (u0 - uh) * 100
	}
	if e0+eh < 0 {
		hi = (e0 + eh) / (u0 + uh) * 100
	}
	return lo, hi, true
}

func pow10(n int) float64 {
	f, _ := strconv.ParseFloat("1e"+strconv.Itoa(n), 64)
	return f
}

// termsHistory is the audit log replayed: each account's group and each group's stop-out level
// over time.
type termsHistory struct {
	groups              map[int64]*timeline[string]
	levels              map[string]*timeline[decimal.Decimal]
	now                 map[int64]string // each account's group in the snapshot
	nowLevels           map[string]decimal.Decimal
	moves, levelChanges int
}

// timeline is a value from the start, then each change at its time, in order.
type timeline[T any] struct {
	initial T
	changes []change[T]
}

type change[T any] struct {
	at time.Time
	v  T
}

// during is every value the timeline held at some moment of [from, to].
func (tl *timeline[T]) during(from, to time.Time) []T {
	v := tl.initial
	var out []T
	for _, c := range tl.changes {
		if c.at.After(from) {
			break
		}
		v = c.v
	}
	out = append(out, v)
	for _, c := range tl.changes {
		if c.at.After(from) && !c.at.After(to) {
			out = append(out, c.v)
		}
	}
	return out
}

func (h termsHistory) groupOf(account int64) *timeline[string] {
	if tl := h.groups[account]; tl != nil {
		return tl
	}
	return &timeline[string]{initial: h.now[account]}
}

// levelOf is group's level over time; empty when the snapshot does not know the group (deleted).
func (h termsHistory) levelOf(group string) *timeline[decimal.Decimal] {
	if tl := h.levels[group]; tl != nil {
		return tl
	}
	if l, ok := h.nowLevels[group]; ok {
		return &timeline[decimal.Decimal]{initial: l}
	}
	return &timeline[decimal.Decimal]{}
}

// replayTerms reads the moves and the group levels from the audit log, in id order (each row
// is written under the lock of the row it changes, so one entity's rows are in commit order).
func replayTerms(s *Snapshot) termsHistory {
	h := termsHistory{groups: map[int64]*timeline[string]{}, levels: map[string]*timeline[decimal.Decimal]{},
		now: map[int64]string{}, nowLevels: s.StopOutLevels}
	for _, a := range s.Accounts {
		h.now[a.ID] = a.Group
	}
	for _, a := range s.Audits {
		switch {
		case a.Action == "account.move":
			var before, after struct {
				Group string `json:"group"`
			}
			id, err := strconv.ParseInt(a.EntityID, 10, 64)
			if err != nil || json.Unmarshal([]byte(a.Before.String), &before) != nil || json.Unmarshal([]byte(a.After.String), &after) != nil {
				continue
			}
			tl := h.groups[id]
			if tl == nil {
				tl = &timeline[string]{initial: before.Group}
				h.groups[id] = tl
			}
			tl.changes = append(tl.changes, change[string]{a.At, after.Group})
			h.moves++
		case a.Action == "account_group.create" || a.Action == "account_group.update":
			var before, after struct {
				StopOutLevel *decimal.Decimal `json:"stopOutLevel"`
			}
			if json.Unmarshal([]byte(a.After.String), &after) != nil || after.StopOutLevel == nil {
				continue
			}
			tl := h.levels[a.EntityID]
			if tl == nil {
				tl = &timeline[decimal.Decimal]{initial: *after.StopOutLevel}
				if a.Before.Valid && json.Unmarshal([]byte(a.Before.String), &before) == nil && before.StopOutLevel != nil {
					tl.initial = *before.StopOutLevel
				}
				h.levels[a.EntityID] = tl
			}
			tl.changes = append(tl.changes, change[decimal.Decimal]{a.At, *after.StopOutLevel})
			h.levelChanges++
		}
	}
	return h
}

func containsDecimal(xs []decimal.Decimal, x decimal.Decimal) bool {
	for _, v := range xs {
		if v.Equal(x) {
			return true
		}
	}
	return false
}
