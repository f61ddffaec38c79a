package trading

import (
	"strconv"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/routing"
)

// routeOf is where an order of volume lots of symbol on the locked account a executes, the
// rule that decided it (nil: the account group's execution mode, read with the account), and
// the percent of it a HEDGE rule opens at the venue in the hedge book (nil: none). It is asked
// once per order, at acceptance; nothing asks it again later (a resting order that triggers, a
// close: each follows what its order or position records).
func routeOf(cat *catalog.Catalog, a *book.Account, symbol string, volume decimal.Decimal, p routing.Profile) (fx.ExecutionMode, *int64, *int) {
	rules := cat.Routing[a.Group]
	if len(rules) == 0 {
		return a.Execution, nil, nil
	}
	r := routing.Match(rules, routing.Order{AccountID: a.ID, Symbol: symbol, Volume: volume, Default: routing.ActionOf(a.Execution)}, p)
	if r == nil {
		return a.Execution, nil, nil
	}
	id := r.ID
	var hedge *int
	if r.Action == routing.Hedge && r.HedgePercent != nil {
		n := *r.HedgePercent
		hedge = &n
	}
	return r.Action.Execution(), &id, hedge
}

// profileNow is account's profile as the holder's memory holds it now — moved by any close
// committed since read was read — or read; read alone when no rule of cat reads a profile.
func (s *Service) profileNow(cat *catalog.Catalog, account int64, read routing.Profile) routing.Profile {
	if !cat.RoutingUsesProfile {
		return read
	}
	if p, _, ok := s.profiles.get(s.term(), account); ok {
		return p
	}
	return read
}

// routedBy names what routed an order, for a message.
func routedBy(rule *int64) string {
	if rule == nil {
		return "its account group's execution mode"
	}
	return "routing rule " + strconv.FormatInt(*rule, 10)
}
