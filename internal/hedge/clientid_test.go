package hedge

import (
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// Intent: only "H" followed by a positive id in canonical form names a hedge order; a client
// order's bare number, the venue's own ids, a FIX close's ClOrdID and junk do not.
func TestOrderOfClientID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		id   int64
		want bool
	}{
		{"H12", 12, true}, {ClientID(9007199254740993), 9007199254740993, true},
		{"12", 0, false}, {"", 0, false}, {"H", 0, false}, {"H0", 0, false}, {"H012", 0, false},
		{"H-3", 0, false}, {"H+3", 0, false}, {"H12.c1", 0, false}, {"h12", 0, false}, {"VENUE-7", 0, false},
		{"H99999999999999999999", 0, false},
	} {
		id, ok := OrderOfClientID(tc.in)
		if ok != tc.want || (ok && id != tc.id) {
			t.Errorf("OrderOfClientID(%q) = %d, %v; want %d, %v", tc.in, id, ok, tc.id, tc.want)
		}
	}
}

// Intent: a HEDGE share is n% of the position in whole venue units, on the client's side; the
// same rounding sizes the share of what is left after each partial close (Rules.reduce).
func TestShareUnits(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	for _, tc := range []struct {
		volume, size string
		percent      int64
		side         fx.Side
		want         string
	}{
		{"2", "100000", 50, fx.Buy, "100000"},
		{"2", "100000", 50, fx.Sell, "-100000"},
		{"0.01", "100000", 33, fx.Buy, "330"},
		{"0.01", "100", 33, fx.Buy, "0"},   // 0.33 units: nothing to hedge
		{"0.03", "100", 50, fx.Sell, "-2"}, // 1.5 units rounds half away from zero
		{"1.2345", "100000", 100, fx.Buy, "123450"},
		{"1", "100000", 50, fx.Buy, "50000"},   // 2 lots, 1 closed
		{"0.5", "100000", 50, fx.Buy, "25000"}, // then 0.5 more
		{"0.33", "100", 30, fx.Buy, "10"},      // 9.9 units left to hedge
		{"0.31", "100", 30, fx.Sell, "-9"},     // 9.3
	} {
		if got := ShareUnits(d(tc.volume), d(tc.size), tc.percent, tc.side); !got.Equal(d(tc.want)) {
			t.Errorf("ShareUnits(%s lots × %s, %d%%, %s) = %s, want %s", tc.volume, tc.size, tc.percent, tc.side, got, tc.want)
		}
	}
}
