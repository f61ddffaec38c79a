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

// checkVolume checks lots against the instrument's min, step and max.
func checkVolume(in catalog.Instrument, v decimal.Decimal) error {
	switch {
	case !v.IsPositive():
		return fx.Errorf(fx.EINVALID, "volume must be positive.")
	case v.LessThan(in.VolumeMin):
		return fx.Errorf(fx.EINVALID, "volume %s is below %s's minimum of %s lots.", v, in.Symbol, in.VolumeMin)
	case v.GreaterThan(in.VolumeMax):
		return fx.Errorf(fx.EINVALID, "volume %s is above %s's maximum of %s lots.", v, in.Symbol, in.VolumeMax)
	case !v.Mod(in.VolumeStep).IsZero():
		return fx.Errorf(fx.EINVALID, "volume %s is not a multiple of %s's step of %s lots.", v, in.Symbol, in.VolumeStep)
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
