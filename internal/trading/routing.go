package trading

import (
	"strconv"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/routing"
)

// routeOf is where an order of volume lots of symbol on the locked account a executes, and the
// rule that decided it (nil: the account group's execution mode, read with the account). It is
// asked once per order, at acceptance; nothing asks it again later (a resting order that
// triggers, a close: each follows what its order or position records).
func routeOf(cat *catalog.Catalog, a *book.Account, symbol string, volume decimal.Decimal, p routing.Profile) (fx.ExecutionMode, *int64) {
	rules := cat.Routing[a.Group]
	if len(rules) == 0 {
		return a.Execution, nil
	}
	action, id := routing.Route(rules, routing.Order{AccountID: a.ID, Symbol: symbol, Volume: volume, Default: routing.ActionOf(a.Execution)}, p)
	if id == 0 {
		return a.Execution, nil
	}
	return action.Execution(), &id
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
