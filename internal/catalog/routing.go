package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/routing"
	"fxdesk/internal/store"
)

// An account group's routing rules (fx_routing_rule, docs/routing.md): read into every catalog
// snapshot, in the order they are asked, and changed by the admin, each change audited.

// Bounds of a routing rule (migration 000019's columns and the desk's own limits): few enough
// rules and list entries that routing an order stays a short loop.
const (
	maxRoutingRules    = 100
	maxRuleAccounts    = 1000
	maxRuleSymbols     = 200
	maxRuleNote        = 255
	maxRuleMinTrades   = 1_000_000_000
	percentPlaces      = 2
	holdSecondsPlaces  = 3
	profitFactorPlaces = 4
)

var (
	hundredPercent    = decimal.NewFromInt(100)
	profitFactorMax   = decimal.RequireFromString("99999999.9999")
	holdSecondsColMax = decimal.RequireFromString("999999999999.999")
)

const routingRuleCols = "`id`, `accountGroup`, `priority`, `accounts`, `symbols`, `volumeMin`, `volumeMax`, `minTrades`, `profitFactorMin`, " +
	"`winRateMin`, `avgHoldSecondsMax`, `underMinuteShareMin`, `action`, `hedgePercent`, `note`, `updatedAt`"

// rowQueryer reads rows and single rows: *sql.DB or *sql.Tx.
type rowQueryer interface {
	store.Queryer
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func scanRoutingRule(sc store.Scanner) (routing.Rule, error) {
	var r routing.Rule
	var accounts, symbols sql.NullString
	var vmin, vmax, pf, wr, hold, share decimal.NullDecimal
	var minTrades, hedgePercent sql.NullInt64
	if err := sc.Scan(&r.ID, &r.AccountGroup, &r.Priority, &accounts, &symbols, &vmin, &vmax, &minTrades, &pf, &wr, &hold, &share, &r.Action, &hedgePercent, &r.Note, &r.UpdatedAt); err != nil {
		return r, err
	}
	if hedgePercent.Valid {
		n := int(hedgePercent.Int64)
		r.HedgePercent = &n
	}
	r.Accounts, r.Symbols = []int64{}, []string{}
	if accounts.Valid && accounts.String != "" {
		if err := json.Unmarshal([]byte(accounts.String), &r.Accounts); err != nil {
			return r, fmt.Errorf("routing rule %d: accounts: %w", r.ID, err)
		}
	}
	if symbols.Valid && symbols.String != "" {
		if err := json.Unmarshal([]byte(symbols.String), &r.Symbols); err != nil {
			return r, fmt.Errorf("routing rule %d: symbols: %w", r.ID, err)
		}
	}
	r.VolumeMin, r.VolumeMax, r.ProfitFactorMin, r.WinRateMin = nullDec(vmin), nullDec(vmax), nullDec(pf), nullDec(wr)
	r.AvgHoldSecondsMax, r.UnderMinuteShareMin = nullDec(hold), nullDec(share)
	if minTrades.Valid {
		r.MinTrades = &minTrades.Int64
	}
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r, nil
}

// loadRoutingRules reads every account group's rules, each group's in the order they are asked.
func loadRoutingRules(ctx context.Context, q store.Queryer) (map[string][]routing.Rule, bool, error) {
	list, err := store.QueryAll(ctx, q, "routing rules", scanRoutingRule, "SELECT "+routingRuleCols+" FROM `fx_routing_rule` ORDER BY `accountGroup`, `priority`, `id`")
	if err != nil {
		return nil, false, fmt.Errorf("load routing rules: %w", err)
	}
	out := map[string][]routing.Rule{}
	profile := false
	for _, r := range list {
		out[r.AccountGroup] = append(out[r.AccountGroup], r)
		profile = profile || r.UsesProfile()
	}
	return out, profile, nil
}

// RoutingRules is account group name's rules in the order they are asked, read from the
// database (ENOTFOUND when there is no such group), with the group.
func (s *Admin) RoutingRules(ctx context.Context, name string) (AccountGroup, []routing.Rule, error) {
	g, err := s.AccountGroup(ctx, name)
	if err != nil {
		return g, nil, err
	}
	rules, err := groupRules(ctx, s.db, name, false)
	return g, rules, err
}

// groupRules reads group's rules in order, locked when lock is set.
func groupRules(ctx context.Context, q store.Queryer, group string, lock bool) ([]routing.Rule, error) {
	stmt := "SELECT " + routingRuleCols + " FROM `fx_routing_rule` WHERE `accountGroup` = ? ORDER BY `priority`, `id`"
	if lock {
		stmt += " FOR UPDATE"
	}
	rules, err := store.QueryAll(ctx, q, "routing rules of "+group, scanRoutingRule, stmt, group)
	if rules == nil {
		rules = []routing.Rule{}
	}
	return rules, err
}

// checkRoutingRule checks r as it will be written: each field in its column's range, listed
// accounts that exist, known symbols, an action built today. A refusal names the field.
func (s *Admin) checkRoutingRule(ctx context.Context, q rowQueryer, r *routing.Rule) error {
	if !r.Action.Valid() {
		return fx.Errorf(fx.EINVALID, "action must be B_BOOK (the desk fills), A_BOOK (the venue fills) or HEDGE (the desk fills and opens hedgePercent of it at the venue), not %q.", r.Action)
	}
	switch {
	case r.Action == routing.Hedge && r.HedgePercent == nil:
		return fx.Errorf(fx.EINVALID, "action HEDGE needs hedgePercent: the percent of each order opened at the venue in the hedge book, a whole number from 1 to 100.")
	case r.Action == routing.Hedge && (*r.HedgePercent < 1 || *r.HedgePercent > 100):
		return fx.Errorf(fx.EINVALID, "hedgePercent must be a whole number from 1 to 100 (got %d).", *r.HedgePercent)
	case r.Action != routing.Hedge && r.HedgePercent != nil:
		return fx.Errorf(fx.EINVALID, "hedgePercent is for action HEDGE only; action %s takes none.", r.Action)
	}
	if r.Action != routing.BBook && !s.venue {
		return fx.Errorf(fx.EUNAVAILABLE, "No execution venue is configured on this desk (FXDESK_VENUE): a rule cannot route to %s.", r.Action)
	}
	if len(r.Accounts) > maxRuleAccounts {
		return fx.Errorf(fx.EINVALID, "accounts may list at most %d account ids (got %d).", maxRuleAccounts, len(r.Accounts))
	}
	for i, id := range r.Accounts {
		if id <= 0 {
			return fx.Errorf(fx.EINVALID, "accounts must be account ids above 0 (got %d).", id)
		}
		if slices.Contains(r.Accounts[:i], id) {
			return fx.Errorf(fx.EINVALID, "accounts lists account %d twice.", id)
		}
	}
	if len(r.Accounts) > 0 {
		var found int
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_account` WHERE `id` IN ("+store.Placeholders(len(r.Accounts))+")", store.Int64Args(r.Accounts)...).Scan(&found); err != nil {
			return fmt.Errorf("routing rule: accounts: %w", err)
		}
		if found != len(r.Accounts) {
			return fx.Errorf(fx.EINVALID, "accounts names %d accounts that do not exist.", len(r.Accounts)-found)
		}
	}
	if len(r.Symbols) > maxRuleSymbols {
		return fx.Errorf(fx.EINVALID, "symbols may list at most %d symbols (got %d).", maxRuleSymbols, len(r.Symbols))
	}
	if len(r.Symbols) > 0 {
		cat, err := Load(ctx, s.db)
		if err != nil {
			return err
		}
		for i, sym := range r.Symbols {
			if _, ok := cat.Instruments[sym]; !ok {
				return fx.Errorf(fx.EINVALID, "symbols: unknown symbol %q.", sym)
			}
			if slices.Contains(r.Symbols[:i], sym) {
				return fx.Errorf(fx.EINVALID, "symbols lists %s twice.", sym)
			}
		}
	}
	for _, f := range []struct {
		name string
		v    *decimal.Decimal
	}{{"volumeMin", r.VolumeMin}, {"volumeMax", r.VolumeMax}} {
		if f.v != nil && (!f.v.IsPositive() || f.v.GreaterThan(volumeColumnMax) || !f.v.Equal(f.v.Truncate(4))) {
			return fx.Errorf(fx.EINVALID, "%s must be lots above 0, at most %s, with at most 4 decimals (got %s).", f.name, volumeColumnMax, f.v)
		}
	}
	if r.VolumeMin != nil && r.VolumeMax != nil && r.VolumeMax.LessThan(*r.VolumeMin) {
		return fx.Errorf(fx.EINVALID, "volumeMax %s must be at least volumeMin %s.", r.VolumeMax, r.VolumeMin)
	}
	if r.MinTrades != nil && (*r.MinTrades < 1 || *r.MinTrades > maxRuleMinTrades) {
		return fx.Errorf(fx.EINVALID, "minTrades must be a whole number of closed trades from 1 to %d (got %d).", maxRuleMinTrades, *r.MinTrades)
	}
	if v := r.ProfitFactorMin; v != nil && (v.IsNegative() || v.GreaterThan(profitFactorMax) || !v.Equal(v.Truncate(profitFactorPlaces))) {
		return fx.Errorf(fx.EINVALID, "profitFactorMin must be from 0 to %s with at most %d decimals (got %s).", profitFactorMax, profitFactorPlaces, v)
	}
	for _, f := range []struct {
		name string
		v    *decimal.Decimal
	}{{"winRateMin", r.WinRateMin}, {"underMinuteShareMin", r.UnderMinuteShareMin}} {
		if f.v != nil && (f.v.IsNegative() || f.v.GreaterThan(hundredPercent) || !f.v.Equal(f.v.Truncate(percentPlaces))) {
			return fx.Errorf(fx.EINVALID, "%s must be a percentage from 0 to 100 with at most %d decimals (got %s).", f.name, percentPlaces, f.v)
		}
	}
	if v := r.AvgHoldSecondsMax; v != nil && (!v.IsPositive() || v.GreaterThan(holdSecondsColMax) || !v.Equal(v.Truncate(holdSecondsPlaces))) {
		return fx.Errorf(fx.EINVALID, "avgHoldSecondsMax must be seconds above 0 with at most %d decimals (got %s).", holdSecondsPlaces, v)
	}
	if len(r.Note) > maxRuleNote {
		return fx.Errorf(fx.EINVALID, "note must be at most %d characters.", maxRuleNote)
	}
	return nil
}

// lockGroup takes account group name's row for the change of its rules (ENOTFOUND without it):
// changes of one group's rules queue on it, so priorities are given out one at a time.
func lockGroup(ctx context.Context, tx *sql.Tx, name string) error {
	var n string
	err := tx.QueryRowContext(ctx, "SELECT `name` FROM `fx_account_group` WHERE `name` = ? FOR UPDATE", name).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return groupNotFound(name)
	}
	if err != nil {
		return fmt.Errorf("account group %s: %w", name, err)
	}
	return nil
}

// ruleArgs are r's columns from `accounts` to `note`, as written.
func ruleArgs(r routing.Rule) []any {
	var accounts, symbols any
	if len(r.Accounts) > 0 {
		b, _ := json.Marshal(r.Accounts)
		accounts = string(b)
	}
	if len(r.Symbols) > 0 {
		b, _ := json.Marshal(r.Symbols)
		symbols = string(b)
	}
	return []any{accounts, symbols, r.VolumeMin, r.VolumeMax, r.MinTrades, r.ProfitFactorMin, r.WinRateMin, r.AvgHoldSecondsMax, r.UnderMinuteShareMin, r.Action, r.HedgePercent, r.Note}
}

// CreateRoutingRule adds r to account group name's rules, asked after every rule it has. A
// group with maxRoutingRules rules refuses another (ECONFLICT); bad fields are EINVALID.
func (s *Admin) CreateRoutingRule(ctx context.Context, name string, r routing.Rule) (routing.Rule, error) {
	var out routing.Rule
	err := s.ruleChange(ctx, name, func(tx *sql.Tx, rules []routing.Rule) error {
		if len(rules) >= maxRoutingRules {
			return fx.Errorf(fx.ECONFLICT, "Account group %q already has %d routing rules, the most a group may have: delete one first.", name, len(rules))
		}
		if err := s.checkRoutingRule(ctx, tx, &r); err != nil {
			return err
		}
		r.AccountGroup, r.Priority = name, len(rules)+1
		if len(rules) > 0 {
			r.Priority = rules[len(rules)-1].Priority + 1
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO `fx_routing_rule` (`accountGroup`, `priority`, `accounts`, `symbols`, `volumeMin`, `volumeMax`, `minTrades`, "+
			"`profitFactorMin`, `winRateMin`, `avgHoldSecondsMax`, `underMinuteShareMin`, `action`, `hedgePercent`, `note`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			append([]any{name, r.Priority}, ruleArgs(r)...)...)
		if err != nil {
			return fmt.Errorf("create routing rule: %w", err)
		}
		if r.ID, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("create routing rule: %w", err)
		}
		if out, err = readRule(ctx, tx, name, r.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Change{Action: "routing_rule.create", EntityType: "routing_rule", EntityID: strconv.FormatInt(r.ID, 10), After: out})
	})
	if err != nil {
		return routing.Rule{}, err
	}
	s.log.InfoContext(ctx, "routing rule created", slog.String("group", name), slog.Int64("rule", out.ID), slog.String("action", string(out.Action)))
	return out, nil
}

// UpdateRoutingRule replaces the match and action of rule id of account group name with r's,
// keeping its place (ENOTFOUND when the group has no such rule).
func (s *Admin) UpdateRoutingRule(ctx context.Context, name string, id int64, r routing.Rule) (routing.Rule, error) {
	var out routing.Rule
	err := s.ruleChange(ctx, name, func(tx *sql.Tx, rules []routing.Rule) error {
		i := slices.IndexFunc(rules, func(x routing.Rule) bool { return x.ID == id })
		if i < 0 {
			return ruleNotFound(name, id)
		}
		if err := s.checkRoutingRule(ctx, tx, &r); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_routing_rule` SET `accounts` = ?, `symbols` = ?, `volumeMin` = ?, `volumeMax` = ?, `minTrades` = ?, "+
			"`profitFactorMin` = ?, `winRateMin` = ?, `avgHoldSecondsMax` = ?, `underMinuteShareMin` = ?, `action` = ?, `hedgePercent` = ?, `note` = ? WHERE `id` = ?",
			append(ruleArgs(r), id)...); err != nil {
			return fmt.Errorf("update routing rule %d: %w", id, err)
		}
		var err error
		if out, err = readRule(ctx, tx, name, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Change{Action: "routing_rule.update", EntityType: "routing_rule", EntityID: strconv.FormatInt(id, 10), Before: rules[i], After: out})
	})
	if err != nil {
		return routing.Rule{}, err
	}
	s.log.InfoContext(ctx, "routing rule changed", slog.String("group", name), slog.Int64("rule", id))
	return out, nil
}

// DeleteRoutingRule deletes rule id of account group name and returns it as it was. The orders
// it routed keep its id.
func (s *Admin) DeleteRoutingRule(ctx context.Context, name string, id int64) (routing.Rule, error) {
	var out routing.Rule
	err := s.ruleChange(ctx, name, func(tx *sql.Tx, rules []routing.Rule) error {
		i := slices.IndexFunc(rules, func(x routing.Rule) bool { return x.ID == id })
		if i < 0 {
			return ruleNotFound(name, id)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM `fx_routing_rule` WHERE `id` = ?", id); err != nil {
			return fmt.Errorf("delete routing rule %d: %w", id, err)
		}
		out = rules[i]
		return audit.Record(ctx, tx, audit.Change{Action: "routing_rule.delete", EntityType: "routing_rule", EntityID: strconv.FormatInt(id, 10), Before: out})
	})
	if err != nil {
		return routing.Rule{}, err
	}
	s.log.InfoContext(ctx, "routing rule deleted", slog.String("group", name), slog.Int64("rule", id))
	return out, nil
}

// ReorderRoutingRules asks account group name's rules in the order of ids, which must name each
// of its rules exactly once (EINVALID otherwise): priorities become 1, 2, 3, … in that order.
func (s *Admin) ReorderRoutingRules(ctx context.Context, name string, ids []int64) ([]routing.Rule, error) {
	var out []routing.Rule
	err := s.ruleChange(ctx, name, func(tx *sql.Tx, rules []routing.Rule) error {
		have := make([]int64, 0, len(rules))
		for _, r := range rules {
			have = append(have, r.ID)
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		sorted := slices.Clone(have)
		slices.Sort(sorted)
		if !slices.Equal(want, sorted) {
			return fx.Errorf(fx.EINVALID, "ids must list each of account group %q's routing rules exactly once, in the new order (its rules: %v; got %v).", name, have, ids)
		}
		for i, id := range ids {
			if _, err := tx.ExecContext(ctx, "UPDATE `fx_routing_rule` SET `priority` = ? WHERE `id` = ?", i+1, id); err != nil {
				return fmt.Errorf("reorder routing rules: %w", err)
			}
		}
		var err error
		if out, err = groupRules(ctx, tx, name, false); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Change{Action: "routing_rule.reorder", EntityType: "account_group", EntityID: name,
			Before: map[string]any{"order": have}, After: map[string]any{"order": ids}})
	})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "routing rules reordered", slog.String("group", name), slog.Any("order", ids))
	return out, nil
}

// ruleChange runs change in one transaction that holds account group name's row and its rules
// (locked, in order), then invalidates the cache, so the next order is routed by the new rules.
func (s *Admin) ruleChange(ctx context.Context, name string, change func(tx *sql.Tx, rules []routing.Rule) error) error {
	err := s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("routing rules: begin: %w", err)
		}
		defer tx.Rollback()
		if err := lockGroup(ctx, tx, name); err != nil {
			return err
		}
		rules, err := groupRules(ctx, tx, name, true)
		if err != nil {
			return err
		}
		if err := change(tx, rules); err != nil {
			return err
		}
		if err := store.Commit(tx); err != nil {
			return fmt.Errorf("routing rules: commit: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.cache.Invalidate()
	return nil
}

func readRule(ctx context.Context, q rowQueryer, group string, id int64) (routing.Rule, error) {
	r, err := scanRoutingRule(q.QueryRowContext(ctx, "SELECT "+routingRuleCols+" FROM `fx_routing_rule` WHERE `id` = ? AND `accountGroup` = ?", id, group))
	if errors.Is(err, sql.ErrNoRows) {
		return r, ruleNotFound(group, id)
	}
	if err != nil {
		return r, fmt.Errorf("routing rule %d: %w", id, err)
	}
	return r, nil
}

func ruleNotFound(group string, id int64) error {
	return fx.Errorf(fx.ENOTFOUND, "Account group %q has no routing rule %d.", group, id)
}
