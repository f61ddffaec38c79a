package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Symbol groups and the account groups' symbol overrides, as the dealer changes them. Every
// write is checked whole against the rules and its columns before anything is written, runs in
// one transaction with its audit row (before and after), invalidates the Cache and tells the
// risk engine the terms it marks with.

// Column bounds (migrations 000003, 000014): markup, swaps and volumes are DECIMAL(12,4),
// commission DECIMAL(20,4), the hedged margin rate DECIMAL(6,4) from 0 to 1.
var (
	column12x4Max = decimal.RequireFromString("99999999.9999")
	column20x4Max = decimal.RequireFromString("9999999999999999.9999")
	hedgedRateMax = decimal.NewFromInt(1)
)

const symbolGroupName = 32 // a group name's VARCHAR(32)

// checkTerm checks v against a DECIMAL(·,4) column from lo to hi.
func checkTerm(field string, v, lo, hi decimal.Decimal) error {
	if v.LessThan(lo) || v.GreaterThan(hi) || !v.Equal(v.Truncate(volumeScale)) {
		return fx.Errorf(fx.EINVALID, "%s must be from %s to %s with at most %d decimals (got %s).", field, lo, hi, volumeScale, v)
	}
	return nil
}

// SymbolGroupPatch creates or changes a symbol group; nil fields keep their value (or the
// column's default for a new group: no markup, no commission in USD, hedged pairs at half margin).
type SymbolGroupPatch struct {
	Name               string
	MarkupPoints       *decimal.Decimal
	CommissionPerLot   *decimal.Decimal
	CommissionCurrency *string
	HedgedMarginRate   *decimal.Decimal
}

const symbolGroupCols = "`name`, `markupPoints`, `commissionPerLot`, `commissionCurrency`, `hedgedMarginRate`"

func scanSymbolGroup(sc store.Scanner) (SymbolGroup, error) {
	var g SymbolGroup
	err := sc.Scan(&g.Name, &g.MarkupPoints, &g.CommissionPerLot, &g.CommissionCurrency, &g.HedgedMarginRate)
	return g, err
}

// SymbolGroups lists the symbol groups, by name.
func (s *Admin) SymbolGroups(ctx context.Context) ([]SymbolGroup, error) {
	return store.QueryAll(ctx, s.db, "symbol groups", scanSymbolGroup, "SELECT "+symbolGroupCols+" FROM `fx_symbol_group` ORDER BY `name`")
}

// checkName checks a group name against its VARCHAR(32) column: 1 to 32 letters, digits, '-' or '_'.
func checkName(field, name string) error {
	if len(name) == 0 || len(name) > symbolGroupName || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		return fx.Errorf(fx.EINVALID, "%s must be 1 to %d letters, digits, '-' or '_' (got %q).", field, symbolGroupName, name)
	}
	return nil
}

// checkCurrency checks a commission currency: one the desk can convert through its USD hub.
func checkCurrency(cat *Catalog, field, ccy string) error {
	if !cat.Currencies[ccy] {
		return fx.Errorf(fx.EINVALID, "%s %q is not a currency the desk can convert (three capital letters reachable through USD, such as USD or EUR).", field, ccy)
	}
	return nil
}

// PutSymbolGroup creates symbol group p.Name or changes the terms p sets (EINVALID names the
// first bad field and its range). created is true for a new group.
func (s *Admin) PutSymbolGroup(ctx context.Context, p SymbolGroupPatch) (g SymbolGroup, created bool, err error) {
	if err := checkName("name", p.Name); err != nil {
		return SymbolGroup{}, false, err
	}
	cat, err := s.cache.Get(ctx)
	if err != nil {
		return SymbolGroup{}, false, err
	}
	if p.MarkupPoints != nil {
		if err := checkTerm("markupPoints", *p.MarkupPoints, decimal.Zero, column12x4Max); err != nil {
			return SymbolGroup{}, false, err
		}
	}
	if p.CommissionPerLot != nil {
		if err := checkTerm("commissionPerLot", *p.CommissionPerLot, decimal.Zero, column20x4Max); err != nil {
			return SymbolGroup{}, false, err
		}
	}
	if p.CommissionCurrency != nil {
		if err := checkCurrency(cat, "commissionCurrency", *p.CommissionCurrency); err != nil {
			return SymbolGroup{}, false, err
		}
	}
	if p.HedgedMarginRate != nil {
		if err := checkTerm("hedgedMarginRate", *p.HedgedMarginRate, decimal.Zero, hedgedRateMax); err != nil {
			return SymbolGroup{}, false, err
		}
	}
	err = s.retry(ctx, func() (err error) {
		g, created, err = s.putSymbolGroup(ctx, p)
		return err
	})
	if err != nil {
		return SymbolGroup{}, false, err
	}
	s.changed()
	s.log.InfoContext(ctx, "symbol group changed", slog.String("group", g.Name), slog.Bool("created", created))
	return g, created, nil
}

func (s *Admin) putSymbolGroup(ctx context.Context, p SymbolGroupPatch) (SymbolGroup, bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return SymbolGroup{}, false, fmt.Errorf("put symbol group: begin: %w", err)
	}
	defer tx.Rollback()
	before, err := scanSymbolGroup(tx.QueryRowContext(ctx, "SELECT "+symbolGroupCols+" FROM `fx_symbol_group` WHERE `name` = ? FOR UPDATE", p.Name))
	created := errors.Is(err, sql.ErrNoRows)
	if err != nil && !created {
		return SymbolGroup{}, false, fmt.Errorf("put symbol group %s: %w", p.Name, err)
	}
	if created {
		before = SymbolGroup{Name: p.Name, MarkupPoints: decimal.Zero, CommissionPerLot: decimal.Zero, CommissionCurrency: "USD", HedgedMarginRate: decimal.RequireFromString("0.5")}
	}
	after := before
	if p.MarkupPoints != nil {
		after.MarkupPoints = *p.MarkupPoints
	}
	if p.CommissionPerLot != nil {
		after.CommissionPerLot = *p.CommissionPerLot
	}
	if p.CommissionCurrency != nil {
		after.CommissionCurrency = *p.CommissionCurrency
	}
	if p.HedgedMarginRate != nil {
		after.HedgedMarginRate = *p.HedgedMarginRate
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_symbol_group` ("+symbolGroupCols+") VALUES (?, ?, ?, ?, ?) "+
		"ON DUPLICATE KEY UPDATE `markupPoints` = VALUES(`markupPoints`), `commissionPerLot` = VALUES(`commissionPerLot`), "+
		"`commissionCurrency` = VALUES(`commissionCurrency`), `hedgedMarginRate` = VALUES(`hedgedMarginRate`)",
		after.Name, after.MarkupPoints, after.CommissionPerLot, after.CommissionCurrency, after.HedgedMarginRate); err != nil {
		return SymbolGroup{}, false, fmt.Errorf("put symbol group %s: %w", p.Name, err)
	}
	change := audit.Change{Action: "symbol_group.update", EntityType: "symbol_group", EntityID: p.Name, Before: before, After: after}
	if created {
		change.Action, change.Before = "symbol_group.create", nil
	}
	if err := audit.Record(ctx, tx, change); err != nil {
		return SymbolGroup{}, false, err
	}
	if err := store.Commit(tx); err != nil {
		return SymbolGroup{}, false, fmt.Errorf("put symbol group %s: commit: %w", p.Name, err)
	}
	return after, created, nil
}

// DeleteSymbolGroup removes symbol group name. A group an instrument or an override still names
// is refused (ECONFLICT); an unknown one is ENOTFOUND.
func (s *Admin) DeleteSymbolGroup(ctx context.Context, name string) error {
	err := s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("delete symbol group: begin: %w", err)
		}
		defer tx.Rollback()
		before, err := scanSymbolGroup(tx.QueryRowContext(ctx, "SELECT "+symbolGroupCols+" FROM `fx_symbol_group` WHERE `name` = ? FOR UPDATE", name))
		if errors.Is(err, sql.ErrNoRows) {
			return fx.Errorf(fx.ENOTFOUND, "Symbol group %q not found.", name)
		}
		if err != nil {
			return fmt.Errorf("delete symbol group %s: %w", name, err)
		}
		var instruments, overrides int
		if err := tx.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM `fx_instrument` WHERE `symbolGroup` = ? LIMIT 1), "+
			"(SELECT COUNT(*) FROM `fx_symbol_override` WHERE `symbolGroup` = ? LIMIT 1)", name, name).Scan(&instruments, &overrides); err != nil {
			return fmt.Errorf("delete symbol group %s: %w", name, err)
		}
		if instruments > 0 || overrides > 0 {
			return fx.Errorf(fx.ECONFLICT, "Symbol group %q still has %d instruments and %d account-group overrides: move the instruments and delete the overrides first.", name, instruments, overrides)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM `fx_symbol_group` WHERE `name` = ?", name); err != nil {
			return fmt.Errorf("delete symbol group %s: %w", name, err)
		}
		if err := audit.Record(ctx, tx, audit.Change{Action: "symbol_group.delete", EntityType: "symbol_group", EntityID: name, Before: before}); err != nil {
			return err
		}
		return store.Commit(tx)
	})
	if err != nil {
		return err
	}
	s.changed()
	return nil
}

// Overrides lists account group group's overrides (ENOTFOUND for an unknown group), symbol
// groups first.
func (s *Admin) Overrides(ctx context.Context, group string) ([]Override, error) {
	if err := s.accountGroupExists(ctx, s.db, group); err != nil {
		return nil, err
	}
	return store.QueryAll(ctx, s.db, "symbol overrides", scanOverride, "SELECT "+overrideCols+" FROM `fx_symbol_override` WHERE `accountGroup` = ? ORDER BY `symbol`, `symbolGroup`", group)
}

func (s *Admin) accountGroupExists(ctx context.Context, q store.Queryer, group string) error {
	rows, err := q.QueryContext(ctx, "SELECT 1 FROM `fx_account_group` WHERE `name` = ?", group)
	if err != nil {
		return fmt.Errorf("account group %s: %w", group, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("account group %s: %w", group, err)
		}
		return fx.Errorf(fx.ENOTFOUND, "Account group %q not found.", group)
	}
	return nil
}

// checkOverride checks o whole against the catalog and its columns: its target exists, each term
// in its column's range, a commission currency only with a commission, and on every instrument
// it reaches the volume limits it leaves are tradable (checkVolumeTerms).
func checkOverride(cat *Catalog, o Override) error {
	var reach []Instrument
	switch {
	case (o.Symbol == "") == (o.SymbolGroup == ""):
		return fx.Errorf(fx.EINVALID, "An override names exactly one symbol or one symbol group.")
	case o.Symbol != "":
		in, ok := cat.Instruments[o.Symbol]
		if !ok {
			return fx.Errorf(fx.ENOTFOUND, "Unknown symbol %q.", o.Symbol)
		}
		reach = []Instrument{in}
	default:
		if _, ok := cat.SymbolGroups[o.SymbolGroup]; !ok {
			return fx.Errorf(fx.ENOTFOUND, "Symbol group %q not found.", o.SymbolGroup)
		}
		for _, in := range cat.List {
			if in.SymbolGroup == o.SymbolGroup {
				reach = append(reach, in)
			}
		}
	}
	for _, t := range []struct {
		name   string
		v      *decimal.Decimal
		lo, hi decimal.Decimal
	}{
		{"markupPoints", o.MarkupPoints, decimal.Zero, column12x4Max},
		{"commissionPerLot", o.CommissionPerLot, decimal.Zero, column20x4Max},
		{"swapLong", o.SwapLong, column12x4Max.Neg(), column12x4Max},
		{"swapShort", o.SwapShort, column12x4Max.Neg(), column12x4Max},
	} {
		if t.v != nil {
			if err := checkTerm(t.name, *t.v, t.lo, t.hi); err != nil {
				return err
			}
		}
	}
	if o.CommissionCurrency != nil {
		if o.CommissionPerLot == nil {
			return fx.Errorf(fx.EINVALID, "commissionCurrency is set with commissionPerLot only.")
		}
		if err := checkCurrency(cat, "commissionCurrency", *o.CommissionCurrency); err != nil {
			return err
		}
	}
	if o.LeverageMax != nil && (*o.LeverageMax < leverageMaxLow || *o.LeverageMax > leverageMaxTop) {
		return fx.Errorf(fx.EINVALID, "leverageMax must be a whole number from %d to %d (got %d).", leverageMaxLow, leverageMaxTop, *o.LeverageMax)
	}
	if o.TradeMode != nil && !o.TradeMode.Valid() {
		return fx.Errorf(fx.EINVALID, "tradeMode must be FULL, CLOSE_ONLY or DISABLED, not %q.", *o.TradeMode)
	}
	if o.VolumeMin != nil || o.VolumeMax != nil {
		for _, in := range reach {
			vmin, vmax := in.VolumeMin, in.VolumeMax
			if o.VolumeMin != nil {
				vmin = *o.VolumeMin
			}
			if o.VolumeMax != nil {
				vmax = *o.VolumeMax
			}
			if err := checkVolumeTerms(in.Symbol, vmin, in.VolumeStep, vmax); err != nil {
				return err
			}
		}
	}
	return nil
}

// PutOverride sets account group o.AccountGroup's override on o's symbol or symbol group to o,
// whole: a nil term is not overridden. created is true for a new override.
func (s *Admin) PutOverride(ctx context.Context, o Override) (out Override, created bool, err error) {
	cat, err := s.cache.Get(ctx)
	if err != nil {
		return Override{}, false, err
	}
	if err := checkOverride(cat, o); err != nil {
		return Override{}, false, err
	}
	err = s.retry(ctx, func() (err error) {
		created, err = s.writeOverride(ctx, o, false)
		return err
	})
	if err != nil {
		return Override{}, false, err
	}
	s.changed()
	s.log.InfoContext(ctx, "symbol override set", slog.String("account_group", o.AccountGroup), slog.String("symbol", o.Symbol), slog.String("symbol_group", o.SymbolGroup))
	return o, created, nil
}

// DeleteOverride removes account group group's override on symbol or symbolGroup (one is "").
func (s *Admin) DeleteOverride(ctx context.Context, group, symbol, symbolGroup string) error {
	err := s.retry(ctx, func() error {
		_, err := s.writeOverride(ctx, Override{AccountGroup: group, Symbol: symbol, SymbolGroup: symbolGroup}, true)
		return err
	})
	if err != nil {
		return err
	}
	s.changed()
	return nil
}

// writeOverride is PutOverride's (or, with remove, DeleteOverride's) transaction.
func (s *Admin) writeOverride(ctx context.Context, o Override, remove bool) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("symbol override: begin: %w", err)
	}
	defer tx.Rollback()
	// The override's foreign key keeps the group from being deleted under it.
	if err := s.accountGroupExists(ctx, tx, o.AccountGroup); err != nil {
		return false, err
	}
	id := o.AccountGroup + "/" + o.Symbol + o.SymbolGroup
	before, err := scanOverride(tx.QueryRowContext(ctx, "SELECT "+overrideCols+" FROM `fx_symbol_override` WHERE `accountGroup` = ? AND `symbol` = ? AND `symbolGroup` = ? FOR UPDATE",
		o.AccountGroup, o.Symbol, o.SymbolGroup))
	missing := errors.Is(err, sql.ErrNoRows)
	if err != nil && !missing {
		return false, fmt.Errorf("symbol override %s: %w", id, err)
	}
	change := audit.Change{EntityType: "symbol_override", EntityID: id}
	switch {
	case remove && missing:
		return false, fx.Errorf(fx.ENOTFOUND, "Account group %q has no override on %q.", o.AccountGroup, o.Symbol+o.SymbolGroup)
	case remove:
		if _, err := tx.ExecContext(ctx, "DELETE FROM `fx_symbol_override` WHERE `accountGroup` = ? AND `symbol` = ? AND `symbolGroup` = ?", o.AccountGroup, o.Symbol, o.SymbolGroup); err != nil {
			return false, fmt.Errorf("symbol override %s: %w", id, err)
		}
		change.Action, change.Before = "symbol_override.delete", before
	default:
		if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_symbol_override` ("+overrideCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "+
			"ON DUPLICATE KEY UPDATE `markupPoints` = VALUES(`markupPoints`), `commissionPerLot` = VALUES(`commissionPerLot`), "+
			"`commissionCurrency` = VALUES(`commissionCurrency`), `swapLong` = VALUES(`swapLong`), `swapShort` = VALUES(`swapShort`), "+
			"`leverageMax` = VALUES(`leverageMax`), `volumeMin` = VALUES(`volumeMin`), `volumeMax` = VALUES(`volumeMax`), `tradeMode` = VALUES(`tradeMode`)",
			o.AccountGroup, o.Symbol, o.SymbolGroup, o.MarkupPoints, o.CommissionPerLot, o.CommissionCurrency, o.SwapLong, o.SwapShort,
			o.LeverageMax, o.VolumeMin, o.VolumeMax, o.TradeMode); err != nil {
			return false, fmt.Errorf("symbol override %s: %w", id, err)
		}
		change.Action, change.After = "symbol_override.update", o
		if missing {
			change.Action = "symbol_override.create"
		} else {
			change.Before = before
		}
	}
	if err := audit.Record(ctx, tx, change); err != nil {
		return false, err
	}
	if err := store.Commit(tx); err != nil {
		return false, fmt.Errorf("symbol override %s: commit: %w", id, err)
	}
	return missing, nil
}

// changed follows a committed change of symbol terms: the Cache is re-read, so this process's
// next order has them; the holder's risk engine gets them from the audit row (TermsFollower).
func (s *Admin) changed() {
	s.cache.Invalidate()
}

// AccountTerms are one account's effective terms on every symbol asked for, for support staff.
type AccountTerms struct {
	AccountID    int64
	AccountGroup string
	Terms        []Terms
}

// EffectiveFor resolves account id's terms on symbol, or on every instrument when symbol is ""
// (ENOTFOUND for an unknown account or symbol).
func (s *Admin) EffectiveFor(ctx context.Context, id int64, symbol string) (AccountTerms, error) {
	var group string
	err := s.db.QueryRowContext(ctx, "SELECT `accountGroup` FROM `fx_account` WHERE `id` = ?", id).Scan(&group)
	if errors.Is(err, sql.ErrNoRows) {
		return AccountTerms{}, fx.Errorf(fx.ENOTFOUND, "Account %d not found.", id)
	}
	if err != nil {
		return AccountTerms{}, fmt.Errorf("effective terms of account %d: %w", id, err)
	}
	cat, err := s.cache.Get(ctx)
	if err != nil {
		return AccountTerms{}, err
	}
	out := AccountTerms{AccountID: id, AccountGroup: group}
	if symbol != "" {
		t, ok := cat.Effective(group, symbol)
		if !ok {
			return AccountTerms{}, fx.Errorf(fx.ENOTFOUND, "Unknown symbol %q.", symbol)
		}
		out.Terms = []Terms{t}
		return out, nil
	}
	for _, in := range cat.List {
		t, _ := cat.Effective(group, in.Symbol)
		out.Terms = append(out.Terms, t)
	}
	return out, nil
}
