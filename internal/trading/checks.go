package trading

import (
	"strconv"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
)

// The checks a request's terms pass before any row is locked.

// checkPrice checks that p is positive and carries at most the instrument's digits.
func checkPrice(field string, in catalog.Instrument, p decimal.Decimal) error {
	if !p.IsPositive() {
		return fx.Errorf(fx.EINVALID, "%s must be positive.", field)
	}
	if !p.Equal(p.Truncate(int32(in.Digits))) {
		return fx.Errorf(fx.EINVALID, "%s %s has more decimals than %s quotes (%d).", field, p, in.Symbol, in.Digits)
	}
	return nil
}

// checkVolume checks lots against the instrument's min, step and max; in carries the account
// group's terms (termsOf) wherever the account is known, so its limits are the group's.
func checkVolume(in catalog.Instrument, v decimal.Decimal) error {
	if err := checkVolumeStep(in, v); err != nil {
		return err
	}
	switch {
	case v.LessThan(in.VolumeMin):
		return fx.Errorf(fx.EINVALID, "volume %s is below %s's minimum of %s lots.", v, in.Symbol, in.VolumeMin)
	case v.GreaterThan(in.VolumeMax):
		return fx.Errorf(fx.EINVALID, "volume %s is above %s's maximum of %s lots.", v, in.Symbol, in.VolumeMax)
	}
	return nil
}

// checkVolumeStep checks what no account group changes: lots are positive and a multiple of the
// instrument's step. The min and max are the account group's (checkVolume), checked once the
// account is known.
func checkVolumeStep(in catalog.Instrument, v decimal.Decimal) error {
	switch {
	case !v.IsPositive():
		return fx.Errorf(fx.EINVALID, "volume must be positive.")
	case !v.Mod(in.VolumeStep).IsZero():
		return fx.Errorf(fx.EINVALID, "volume %s is not a multiple of %s's step of %s lots.", v, in.Symbol, in.VolumeStep)
	}
	return nil
}

// termsOf is the terms account group group gets on symbol (catalog.Catalog.Effective): every
// fill, close, commission, margin and volume check of its accounts reads them. ok is false for
// a symbol the catalog does not have.
func termsOf(cat *catalog.Catalog, group, symbol string) (catalog.Terms, bool) {
	return cat.Effective(group, symbol)
}

// checkOpen refuses new exposure the account group may not take on t's symbol: a CLOSE_ONLY or
// DISABLED trade mode (ECONFLICT), or volume outside the group's limits (EINVALID).
func checkOpen(t catalog.Terms, v decimal.Decimal) error {
	switch t.TradeMode {
	case catalog.TradeCloseOnly:
		return fx.Errorf(fx.ECONFLICT, "%s is close-only for this account's group: new positions and orders are refused.", t.Symbol)
	case catalog.TradeDisabled:
		return fx.Errorf(fx.ECONFLICT, "Trading in %s is disabled for this account's group.", t.Symbol)
	}
	return checkVolume(t.Instrument, v)
}

// checkTraderClose refuses a trader's close on a symbol DISABLED for the account's group. The
// desk's own closes (stop-out, SL, TP) are not refused: they protect the account and the desk.
func checkTraderClose(t catalog.Terms) error {
	if t.TradeMode == catalog.TradeDisabled {
		return fx.Errorf(fx.ECONFLICT, "Trading in %s is disabled for this account's group.", t.Symbol)
	}
	return nil
}

// checkStops checks SL and TP against the price a position on side is marked at: a buy's
// stops trigger on the bid, so its SL must be below and its TP above; a sell's the other way
// round against the ask. For a resting order that price is the order's own price.
func checkStops(in catalog.Instrument, side fx.Side, ref decimal.Decimal, sl, tp *decimal.Decimal) error {
	for _, f := range []struct {
		name string
		v    *decimal.Decimal
	}{{"sl", sl}, {"tp", tp}} {
		if f.v != nil {
			if err := checkPrice(f.name, in, *f.v); err != nil {
				return err
			}
		}
	}
	below, above := "sl", "tp"
	if side == fx.Sell {
		below, above = "tp", "sl"
	}
	lo, hi := sl, tp
	if side == fx.Sell {
		lo, hi = tp, sl
	}
	refText := ref.StringFixed(int32(in.Digits))
	if lo != nil && !lo.LessThan(ref) {
		return fx.Errorf(fx.EINVALID, "%s %s of a %s must be below %s.", below, lo.StringFixed(int32(in.Digits)), sideWord(side), refText)
	}
	if hi != nil && !hi.GreaterThan(ref) {
		return fx.Errorf(fx.EINVALID, "%s %s of a %s must be above %s.", above, hi.StringFixed(int32(in.Digits)), sideWord(side), refText)
	}
	return nil
}

func sideWord(s fx.Side) string {
	if s == fx.Buy {
		return "buy"
	}
	return "sell"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
