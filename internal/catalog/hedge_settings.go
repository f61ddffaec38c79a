package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// The hedger's terms (docs/routing.md, «The hedger»), stored in fx_setting like every setting:
// one limit per symbol, and one band and one minimum for every symbol, all in lots.
const (
	// SettingHedgeLimitPrefix names a symbol's net exposure limit: fxHedgeLimitLots.EURUSD. Its
	// value is lots, either side, or "off" (no limit: the symbol is not hedged).
	SettingHedgeLimitPrefix = "fxHedgeLimitLots."
	// SettingHedgeBand is the hysteresis: a hedge brings the net to the limit less this.
	SettingHedgeBand = "fxHedgeBandLots"
	// SettingHedgeMin is the smallest hedge order the hedger sends.
	SettingHedgeMin = "fxHedgeMinLots"
	// HedgeLimitOff is the value that removes a symbol's limit.
	HedgeLimitOff = "off"
)

// Defaults of the band and the minimum, used until a value is stored.
var (
	DefaultHedgeBand = decimal.NewFromInt(1)
	DefaultHedgeMin  = decimal.New(1, -2)
)

// hedgeLotsMax bounds every hedge setting: the positions' volume column, DECIMAL(12,4).
var hedgeLotsMax = decimal.RequireFromString("99999999.9999")

// HedgeTerms is the hedger's terms as stored: Limits by symbol (a symbol absent, or "off", has
// none), Band and Min for all.
type HedgeTerms struct {
	Limits    map[string]decimal.Decimal
	Band, Min decimal.Decimal
}

// lotsSetting is the rule of a setting holding lots from 0 to hedgeLotsMax, at most 4 decimals.
func lotsSetting(name string, off bool) func(string) error {
	return func(v string) error {
		if off && v == HedgeLimitOff {
			return nil
		}
		d, err := decimal.NewFromString(v)
		if err != nil || d.IsNegative() || d.GreaterThan(hedgeLotsMax) || !d.Equal(d.Truncate(volumeScale)) {
			also := ""
			if off {
				also = fmt.Sprintf(", or %q for no limit", HedgeLimitOff)
			}
			return fx.Errorf(fx.EINVALID, "%s must be lots from 0 to %s with at most %d decimals%s (got %q).", name, hedgeLotsMax, volumeScale, also, v)
		}
		return nil
	}
}

// hedgeLimitSymbol is the symbol a limit's setting name names ("" when name is not one).
func hedgeLimitSymbol(name string) string {
	if sym, ok := strings.CutPrefix(name, SettingHedgeLimitPrefix); ok {
		return sym
	}
	return ""
}

// checkHedgeLimitSymbols refuses a limit for a symbol the desk does not list; names are the
// changes' names, in order.
func (s *Settings) checkHedgeLimitSymbols(ctx context.Context, names []string) error {
	for _, name := range names {
		sym, ok := strings.CutPrefix(name, SettingHedgeLimitPrefix)
		if !ok {
			continue
		}
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_instrument` WHERE `symbol` = ?", sym).Scan(&n); err != nil {
			return fmt.Errorf("check setting %s: %w", name, err)
		}
		if n == 0 {
			return fx.Errorf(fx.EINVALID, "Unknown setting %q: %s must be followed by a symbol the desk lists, such as %sEURUSD.", name, SettingHedgeLimitPrefix, SettingHedgeLimitPrefix)
		}
	}
	return nil
}

// hedgeTerms reads the hedger's terms out of every stored setting; a value that does not pass
// its rule (written by hand) counts as unset: no limit, or the default band or minimum.
func hedgeTerms(all map[string]string) *HedgeTerms {
	t := &HedgeTerms{Limits: map[string]decimal.Decimal{}, Band: DefaultHedgeBand, Min: DefaultHedgeMin}
	for name, v := range all {
		sym := hedgeLimitSymbol(name)
		if sym == "" || v == HedgeLimitOff || lotsSetting(name, true)(v) != nil {
			continue
		}
		t.Limits[sym] = decimal.RequireFromString(v)
	}
	if v, ok := all[SettingHedgeBand]; ok && settingRules[SettingHedgeBand](v) == nil {
		t.Band = decimal.RequireFromString(v)
	}
	if v, ok := all[SettingHedgeMin]; ok && settingRules[SettingHedgeMin](v) == nil {
		t.Min = decimal.RequireFromString(v)
	}
	return t
}

// HedgeTerms is the hedger's terms, as last loaded. It never blocks on the database; the value
// returned is never changed afterwards (a reload replaces it).
func (s *Settings) HedgeTerms() *HedgeTerms {
	return s.hedge.Load()
}
