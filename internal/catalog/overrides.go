package catalog

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/shopspring/decimal"

	"fxdesk/internal/risk"
	"fxdesk/internal/store"
)

// TradeMode is what an account group's traders may do on a symbol (fx_symbol_override.tradeMode).
type TradeMode string

const (
	TradeFull      TradeMode = "FULL"       // open and close
	TradeCloseOnly TradeMode = "CLOSE_ONLY" // no new exposure: closes only
	TradeDisabled  TradeMode = "DISABLED"   // no trading on the symbol
)

// Valid reports whether m is one of the modes above.
func (m TradeMode) Valid() bool {
	switch m {
	case TradeFull, TradeCloseOnly, TradeDisabled:
		return true
	}
	return false
}

// Override is one row of fx_symbol_override: an account group's terms on one symbol (Symbol set)
// or on every symbol of a symbol group (SymbolGroup set). A nil term is not overridden.
type Override struct {
	AccountGroup       string           `json:"accountGroup"`
	Symbol             string           `json:"symbol"`
	SymbolGroup        string           `json:"symbolGroup"`
	MarkupPoints       *decimal.Decimal `json:"markupPoints,omitempty"`
	CommissionPerLot   *decimal.Decimal `json:"commissionPerLot,omitempty"`
	CommissionCurrency *string          `json:"commissionCurrency,omitempty"`
	SwapLong           *decimal.Decimal `json:"swapLong,omitempty"`
	SwapShort          *decimal.Decimal `json:"swapShort,omitempty"`
	LeverageMax        *int             `json:"leverageMax,omitempty"`
	VolumeMin          *decimal.Decimal `json:"volumeMin,omitempty"`
	VolumeMax          *decimal.Decimal `json:"volumeMax,omitempty"`
	TradeMode          *TradeMode       `json:"tradeMode,omitempty"`
}

const overrideCols = "`accountGroup`, `symbol`, `symbolGroup`, `markupPoints`, `commissionPerLot`, `commissionCurrency`, " +
	"`swapLong`, `swapShort`, `leverageMax`, `volumeMin`, `volumeMax`, `tradeMode`"

func scanOverride(sc store.Scanner) (Override, error) {
	var o Override
	var markup, commission, swapLong, swapShort, vmin, vmax decimal.NullDecimal
	var ccy, mode sql.NullString
	var lev sql.NullInt64
	if err := sc.Scan(&o.AccountGroup, &o.Symbol, &o.SymbolGroup, &markup, &commission, &ccy, &swapLong, &swapShort, &lev, &vmin, &vmax, &mode); err != nil {
		return Override{}, err
	}
	o.MarkupPoints, o.CommissionPerLot = nullDec(markup), nullDec(commission)
	o.SwapLong, o.SwapShort, o.VolumeMin, o.VolumeMax = nullDec(swapLong), nullDec(swapShort), nullDec(vmin), nullDec(vmax)
	if ccy.Valid {
		o.CommissionCurrency = &ccy.String
	}
	if lev.Valid {
		l := int(lev.Int64)
		o.LeverageMax = &l
	}
	if mode.Valid {
		m := TradeMode(mode.String)
		o.TradeMode = &m
	}
	return o, nil
}

func nullDec(d decimal.NullDecimal) *decimal.Decimal {
	if !d.Valid {
		return nil
	}
	return &d.Decimal
}

// overrideKey names an override's target within its account group: a symbol or a symbol group.
type overrideKey struct{ accountGroup, symbol, symbolGroup string }

// loadOverrides reads every override, keyed by target.
func loadOverrides(ctx context.Context, db *sql.DB) (map[overrideKey]Override, error) {
	list, err := store.QueryAll(ctx, db, "symbol overrides", scanOverride, "SELECT "+overrideCols+" FROM `fx_symbol_override`")
	if err != nil {
		return nil, fmt.Errorf("load symbol overrides: %w", err)
	}
	out := make(map[overrideKey]Override, len(list))
	for _, o := range list {
		out[overrideKey{o.AccountGroup, o.Symbol, o.SymbolGroup}] = o
	}
	return out, nil
}

// Terms are the effective settings an account group's traders get on one instrument. Instrument
// carries them in the fields every pricing path already reads (Group.MarkupPoints,
// Group.CommissionPerLot and CommissionCurrency, LeverageMax, SwapLong, SwapShort, VolumeMin,
// VolumeMax), so a fill, a close, a margin, a swap or a volume check priced with it needs no
// second lookup. From names the level each of those came from, for support staff.
type Terms struct {
	Instrument
	TradeMode TradeMode
	From      TermSources
}

// TermSources names, per term, where its effective value came from: "instrument",
// "symbolGroup", "override:symbolGroup" or "override:symbol".
type TermSources struct {
	Markup, Commission, SwapLong, SwapShort, LeverageMax, VolumeMin, VolumeMax, TradeMode string
}

// Sources of a term, least specific first.
const (
	FromInstrument          = "instrument"
	FromSymbolGroup         = "symbolGroup"
	FromSymbolGroupOverride = "override:symbolGroup"
	FromSymbolOverride      = "override:symbol"
)

// Effective resolves the terms of account group accountGroup on symbol: the instrument, its
// symbol group, then the group's override on that symbol group, then its override on that
// symbol — the most specific level that sets a term wins. ok is false for an unknown symbol.
// It reads the snapshot only, so every path (fills, closes, commissions, margins, swaps, stop-out,
// volume checks, trade mode) resolves the same terms from the same catalog.
func (c *Catalog) Effective(accountGroup, symbol string) (Terms, bool) {
	in, ok := c.Instruments[symbol]
	if !ok {
		return Terms{}, false
	}
	t := Terms{Instrument: in, TradeMode: TradeFull, From: TermSources{
		Markup: FromSymbolGroup, Commission: FromSymbolGroup, SwapLong: FromInstrument, SwapShort: FromInstrument,
		LeverageMax: FromInstrument, VolumeMin: FromInstrument, VolumeMax: FromInstrument, TradeMode: FromInstrument,
	}}
	if len(c.overrides) == 0 {
		return t, true
	}
	if o, ok := c.overrides[overrideKey{accountGroup, "", in.SymbolGroup}]; ok {
		t.apply(o, FromSymbolGroupOverride)
	}
	if o, ok := c.overrides[overrideKey{accountGroup, symbol, ""}]; ok {
		t.apply(o, FromSymbolOverride)
	}
	return t, true
}

// apply lays o's set terms over t, noting from as their source.
func (t *Terms) apply(o Override, from string) {
	if o.MarkupPoints != nil {
		t.Group.MarkupPoints, t.From.Markup = *o.MarkupPoints, from
	}
	if o.CommissionPerLot != nil {
		t.Group.CommissionPerLot, t.From.Commission = *o.CommissionPerLot, from
		if o.CommissionCurrency != nil {
			t.Group.CommissionCurrency = *o.CommissionCurrency
		}
	}
	if o.SwapLong != nil {
		t.SwapLong, t.From.SwapLong = *o.SwapLong, from
	}
	if o.SwapShort != nil {
		t.SwapShort, t.From.SwapShort = *o.SwapShort, from
	}
	if o.LeverageMax != nil {
		t.LeverageMax, t.From.LeverageMax = *o.LeverageMax, from
	}
	if o.VolumeMin != nil {
		t.VolumeMin, t.From.VolumeMin = *o.VolumeMin, from
	}
	if o.VolumeMax != nil {
		t.VolumeMax, t.From.VolumeMax = *o.VolumeMax, from
	}
	if o.TradeMode != nil {
		t.TradeMode, t.From.TradeMode = *o.TradeMode, from
	}
}

// OverriddenGroups lists the account groups that have at least one override.
func (c *Catalog) OverriddenGroups() []string {
	seen := map[string]bool{}
	var out []string
	for k := range c.overrides {
		if !seen[k.accountGroup] {
			seen[k.accountGroup] = true
			out = append(out, k.accountGroup)
		}
	}
	return out
}

// RiskGroupTerms are account group group's own markup and leverage cap on every symbol where an
// override sets one, for the risk engine (risk.GroupTerms): its stop-out marks the group's
// accounts as the fills do. Symbols lists none when the group overrides neither.
func (c *Catalog) RiskGroupTerms(group string) risk.GroupTerms {
	g := risk.GroupTerms{Group: group, Symbols: map[string]risk.SymbolTerms{}}
	for _, in := range c.List {
		t, _ := c.Effective(group, in.Symbol)
		if t.From.Markup == FromSymbolGroup && t.From.LeverageMax == FromInstrument {
			continue
		}
		g.Symbols[in.Symbol] = risk.SymbolTerms{Markup: t.Group.MarkupPoints.Mul(t.Point).InexactFloat64(), LeverageMax: t.LeverageMax}
	}
	return g
}

// RiskGroups are RiskGroupTerms of every account group with overrides.
func (c *Catalog) RiskGroups() []risk.GroupTerms {
	var out []risk.GroupTerms
	for _, g := range c.OverriddenGroups() {
		out = append(out, c.RiskGroupTerms(g))
	}
	return out
}
