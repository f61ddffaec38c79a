package invariant

import (
	"encoding/json"
	"slices"
	"strconv"
)

// executionOf is the execution an order routed by action gets: A_BOOK fills at the venue, B_BOOK
// and HEDGE n% on the desk.
func executionOf(action string) string {
	if action == "A_BOOK" {
		return "EXTERNAL"
	}
	return "INTERNAL"
}

// matches reports whether rule u's conditions hold for order o of account (profile conditions
// aside: the snapshot cannot judge them).
func (u dbRule) matches(o dbOrder) bool {
	if u.Accounts.Valid {
		var ids []int64
		if json.Unmarshal([]byte(u.Accounts.String), &ids) == nil && len(ids) > 0 && !slices.Contains(ids, o.Account) {
			return false
		}
	}
	if u.Symbols.Valid {
		var syms []string
		if json.Unmarshal([]byte(u.Symbols.String), &syms) == nil && len(syms) > 0 && !slices.Contains(syms, o.Symbol) {
			return false
		}
	}
	if u.VolumeMin.Valid && o.Volume.LessThan(u.VolumeMin.Decimal) {
		return false
	}
	if u.VolumeMax.Valid && o.Volume.GreaterThan(u.VolumeMax.Decimal) {
		return false
	}
	return true
}

// checkRouting: every order was routed as its group's rules say. An order that names a rule
// matches that rule, no rule asked before it in its group matched, and its execution is the
// rule's; an order that names none matched no rule of its account's group and has the group's
// execution mode. The soak's rules never change and the groups an account moves between carry
// equal rules, so the account's group now answers for its group then. A rule with a profile
// condition (the profile has moved on since) and a rule since deleted are not judged.
func checkRouting(s *Snapshot) Result {
	r := Result{Name: "routing"}
	byGroup := map[string][]dbRule{}
	byID := map[int64]dbRule{}
	for _, u := range s.Rules {
		byGroup[u.Group] = append(byGroup[u.Group], u)
		byID[u.ID] = u
	}
	group := map[int64]string{}
	for _, a := range s.Accounts {
		group[a.ID] = a.Group
	}
	routed, judged := 0, 0
	for _, o := range s.Orders {
		rules := byGroup[group[o.Account]]
		if o.RouteRule.Valid {
			routed++
			u, ok := byID[o.RouteRule.Int64]
			if !ok || u.UsesProfile {
				continue
			}
			judged++
			if !u.matches(o) {
				r.Add("", "order %d (%s %s lots) names rule %d, whose conditions it does not meet", o.ID, o.Symbol, o.Volume, u.ID)
			}
			if want := executionOf(u.Action); o.Execution != want {
				r.Add("", "order %d was routed by rule %d (%s) but executes %s", o.ID, u.ID, u.Action, o.Execution)
			}
			for _, before := range byGroup[u.Group] {
				if before.ID == u.ID {
					break
				}
				if !before.UsesProfile && before.matches(o) {
					r.Add("", "order %d names rule %d, but rule %d is asked first and matches it", o.ID, u.ID, before.ID)
					break
				}
			}
			continue
		}
		if slices.ContainsFunc(rules, func(u dbRule) bool { return u.UsesProfile }) {
			continue
		}
		judged++
		for _, u := range rules {
			if u.matches(o) {
				r.Add("", "order %d (%s %s lots, account %d) names no rule, but rule %d of its group %s matches it", o.ID, o.Symbol, o.Volume, o.Account, u.ID, u.Group)
				break
			}
		}
		if want := s.Modes[group[o.Account]]; want != "" && o.Execution != want {
			r.Add("", "order %d names no rule and executes %s, its group %s's mode is %s", o.ID, o.Execution, group[o.Account], want)
		}
	}
	r.Figures = "orders=" + strconv.Itoa(len(s.Orders)) + " routedByRule=" + strconv.Itoa(routed) + " judged=" + strconv.Itoa(judged) + " rules=" + strconv.Itoa(len(s.Rules))
	return r
}
