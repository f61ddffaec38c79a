package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/routing"
	"fxdesk/internal/trading"
)

// Routing rules of an account group and the trader profile they read (admin, docs/routing.md).

// routingRuleWire is the body of POST /account-groups/{name}/routing and of PUT
// /account-groups/{name}/routing/{id}: a rule set whole. Only action is required.
type routingRuleWire struct {
	Accounts            []int64  `json:"accounts"`
	Symbols             []string `json:"symbols"`
	VolumeMin           *string  `json:"volumeMin"`
	VolumeMax           *string  `json:"volumeMax"`
	MinTrades           *int64   `json:"minTrades"`
	ProfitFactorMin     *string  `json:"profitFactorMin"`
	WinRateMin          *string  `json:"winRateMin"`
	AvgHoldSecondsMax   *string  `json:"avgHoldSecondsMax"`
	UnderMinuteShareMin *string  `json:"underMinuteShareMin"`
	Action              *string  `json:"action"`
	HedgePercent        *int     `json:"hedgePercent"`
	Note                *string  `json:"note"`
}

// Decimals a rule's fields keep (fx_routing_rule's columns).
const (
	profitFactorPlaces = 4
	percentPlaces      = 2
	holdSecondsPlaces  = 3
)

// decodeRoutingRule reads a rule body. The ranges, the accounts' and symbols' existence and the
// action's availability are the catalog's checks, made on the rule as it will be written.
func decodeRoutingRule(r *http.Request) (routing.Rule, error) {
	var w routingRuleWire
	var rule routing.Rule
	if err := decodeStrict(r.Body, &w, false); err != nil {
		return rule, err
	}
	if w.Action == nil {
		return rule, fx.Errorf(fx.EINVALID, "action (B_BOOK, A_BOOK or HEDGE) is required.")
	}
	a := strings.ToUpper(strings.TrimSpace(*w.Action))
	rule.HedgePercent = w.HedgePercent
	if rest, ok := strings.CutPrefix(a, string(routing.Hedge)); ok && rest != "" {
		// "HEDGE 50%", the spelling, is {"action":"HEDGE","hedgePercent":50}.
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "%")))
		if err != nil || !strings.HasSuffix(rest, "%") || !strings.HasPrefix(rest, " ") {
			return rule, fx.Errorf(fx.EINVALID, "action %q is not HEDGE n%%: write {\"action\":\"HEDGE\",\"hedgePercent\":n} with n from 1 to 100.", *w.Action)
		}
		if w.HedgePercent != nil && *w.HedgePercent != n {
			return rule, fx.Errorf(fx.EINVALID, "action %q and hedgePercent %d disagree.", *w.Action, *w.HedgePercent)
		}
		a, rule.HedgePercent = string(routing.Hedge), &n
	}
	rule.Action = routing.Action(a)
	rule.Accounts, rule.Symbols = w.Accounts, w.Symbols
	if rule.Accounts == nil {
		rule.Accounts = []int64{}
	}
	if rule.Symbols == nil {
		rule.Symbols = []string{}
	}
	for _, s := range rule.Symbols {
		if err := checkSymbol(s); err != nil {
			return rule, fx.Errorf(fx.EINVALID, "symbols: %s", fx.ErrorMessage(err))
		}
	}
	var err error
	for _, f := range []struct {
		name   string
		in     *string
		places int
		out    **decimal.Decimal
	}{
		{"volumeMin", w.VolumeMin, volumePlaces, &rule.VolumeMin},
		{"volumeMax", w.VolumeMax, volumePlaces, &rule.VolumeMax},
		{"profitFactorMin", w.ProfitFactorMin, profitFactorPlaces, &rule.ProfitFactorMin},
		{"winRateMin", w.WinRateMin, percentPlaces, &rule.WinRateMin},
		{"avgHoldSecondsMax", w.AvgHoldSecondsMax, holdSecondsPlaces, &rule.AvgHoldSecondsMax},
		{"underMinuteShareMin", w.UnderMinuteShareMin, percentPlaces, &rule.UnderMinuteShareMin},
	} {
		if *f.out, err = optDecimal(f.name, f.in, f.places); err != nil {
			return rule, err
		}
	}
	rule.MinTrades = w.MinTrades
	if w.Note != nil {
		rule.Note = *w.Note
	}
	return rule, nil
}

// routingView is an account group's routing: its default (the execution mode, as an action) and
// its rules in the order they are asked.
func routingView(g catalog.AccountGroup, rules []routing.Rule) map[string]any {
	return map[string]any{"accountGroup": g.Name, "default": routing.ActionOf(g.Execution), "rules": rules}
}

// handleRoutingRules lists an account group's routing rules (admin).
func handleRoutingRules(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		g, rules, err := svc.RoutingRules(r.Context(), chi.URLParam(r, "name"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, routingView(g, rules))
		return nil
	})
}

// handleCreateRoutingRule adds a rule after the group's others (admin).
func handleCreateRoutingRule(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		rule, err := decodeRoutingRule(r)
		if err != nil {
			return err
		}
		out, err := svc.CreateRoutingRule(r.Context(), chi.URLParam(r, "name"), rule)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, map[string]any{"rule": out})
		return nil
	})
}

// handleUpdateRoutingRule replaces a rule's match and action, keeping its place (admin).
func handleUpdateRoutingRule(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		rule, err := decodeRoutingRule(r)
		if err != nil {
			return err
		}
		out, err := svc.UpdateRoutingRule(r.Context(), chi.URLParam(r, "name"), id, rule)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"rule": out})
		return nil
	})
}

// handleDeleteRoutingRule deletes a rule (admin).
func handleDeleteRoutingRule(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		out, err := svc.DeleteRoutingRule(r.Context(), chi.URLParam(r, "name"), id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"rule": out, "deleted": true})
		return nil
	})
}

// handleReorderRoutingRules sets the order a group's rules are asked in (admin): {"ids": […]}.
func handleReorderRoutingRules(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			IDs []int64 `json:"ids"`
		}
		if err := decodeStrict(r.Body, &body, false); err != nil {
			return err
		}
		if body.IDs == nil {
			return fx.Errorf(fx.EINVALID, "ids (every rule id of the group, in the new order) is required.")
		}
		name := chi.URLParam(r, "name")
		if _, err := svc.ReorderRoutingRules(r.Context(), name, body.IDs); err != nil {
			return err
		}
		g, rules, err := svc.RoutingRules(r.Context(), name)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, routingView(g, rules))
		return nil
	})
}

// profileView is a trader profile as the dealer reads it: money in the account's currency,
// rates and shares in percent, holding time in seconds; a figure with nothing to measure is null
// (no trades; a profit factor with no loss).
type profileView struct {
	AccountID        int64      `json:"accountId"`
	Currency         string     `json:"currency"`
	ClosedTrades     int64      `json:"closedTrades"`
	Wins             int64      `json:"wins"`
	WinRate          *string    `json:"winRate"`
	ProfitFactor     *string    `json:"profitFactor"`
	GrossProfit      string     `json:"grossProfit"`
	GrossLoss        string     `json:"grossLoss"`
	NetProfit        string     `json:"netProfit"`
	AvgHoldSeconds   *string    `json:"avgHoldSeconds"`
	UnderMinuteShare *string    `json:"underMinuteShare"`
	LastTradeAt      *time.Time `json:"lastTradeAt"`
}

func fixedOrNil(d *decimal.Decimal, places int32) *string {
	if d == nil {
		return nil
	}
	s := d.StringFixed(places)
	return &s
}

func viewProfile(account int64, currency string, p routing.Profile) profileView {
	return profileView{AccountID: account, Currency: currency, ClosedTrades: p.Trades, Wins: p.Wins, WinRate: fixedOrNil(p.WinRate(), 2),
		ProfitFactor: fixedOrNil(p.ProfitFactor(), 4), GrossProfit: money(currency, p.GrossProfit), GrossLoss: money(currency, p.GrossLoss),
		NetProfit: money(currency, p.NetProfit()), AvgHoldSeconds: fixedOrNil(p.AvgHoldSeconds(), 3), UnderMinuteShare: fixedOrNil(p.UnderMinuteShare(), 2),
		LastTradeAt: p.LastTradeAt}
}

// adminAccountView is an account in the dealer's list: the account and its trader profile.
type adminAccountView struct {
	accountView
	Profile profileView `json:"profile"`
}

// handleAccountProfile shows an account's trader profile (admin).
func handleAccountProfile(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		a, p, err := svc.Accounts().Profile(r.Context(), id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"profile": viewProfile(a.ID, a.Currency, p)})
		return nil
	})
}
