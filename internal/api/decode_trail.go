package api

import (
	"bytes"
	"encoding/json"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// trailWire is a position's "trailingStop" (docs/orders.md, «Trailing stops»): a distance in
// price units or a whole number of pips, one of the two.
type trailWire struct {
	Distance *string `json:"distance"`
	Pips     *int    `json:"pips"`
}

// maxTrailPips bounds pips before the instrument is known (its price bounds the distance).
const maxTrailPips = 100_000

// decodeTrail reads "trailingStop": absent leaves the trailing stop alone, null removes it, an
// object sets it.
func decodeTrail(raw json.RawMessage) (trading.TrailChange, error) {
	if len(raw) == 0 {
		return trading.TrailChange{}, nil
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return trading.TrailChange{Set: true}, nil
	}
	var w trailWire
	if err := decodeStrict(bytes.NewReader(raw), &w, false); err != nil {
		return trading.TrailChange{}, fx.Errorf(fx.EINVALID, "trailingStop: %s", fx.ErrorMessage(err))
	}
	switch {
	case w.Distance == nil && w.Pips == nil:
		return trading.TrailChange{}, fx.Errorf(fx.EINVALID, "trailingStop needs distance (price units) or pips; null removes it.")
	case w.Distance != nil && w.Pips != nil:
		return trading.TrailChange{}, fx.Errorf(fx.EINVALID, "trailingStop takes distance or pips, not both.")
	case w.Pips != nil:
		if *w.Pips <= 0 || *w.Pips > maxTrailPips {
			return trading.TrailChange{}, fx.Errorf(fx.EINVALID, "trailingStop.pips must be a whole number from 1 to %d.", maxTrailPips)
		}
		p := decimal.NewFromInt(int64(*w.Pips))
		return trading.TrailChange{Set: true, Pips: &p}, nil
	}
	d, err := fx.ParseDecimal("trailingStop.distance", *w.Distance, pricePlaces)
	if err != nil {
		return trading.TrailChange{}, err
	}
	if !d.IsPositive() {
		return trading.TrailChange{}, fx.Errorf(fx.EINVALID, "trailingStop.distance must be positive.")
	}
	return trading.TrailChange{Set: true, Distance: &d}, nil
}
