package catalog

import (
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// The resolver's precedence: the override on the symbol beats the override on its symbol group,
// which beats the symbol group and the instrument; a term nobody overrides falls through, and
// another account group sees none of it.
func TestEffectivePrecedence(t *testing.T) {
	t.Parallel()
	d := func(s string) *decimal.Decimal { v := decimal.RequireFromString(s); return &v }
	in := Instrument{Instrument: fx.Instrument{Symbol: "EURUSD", SymbolGroup: "majors", Point: decimal.RequireFromString("0.00001"),
		VolumeMin: *d("0.01"), VolumeMax: *d("100"), SwapLong: *d("-7.5"), SwapShort: *d("2.2")}, LeverageMax: 500,
		Group: SymbolGroup{Name: "majors", MarkupPoints: *d("1"), CommissionPerLot: *d("7"), CommissionCurrency: "USD"}}
	lev, closeOnly := 30, TradeCloseOnly
	cat := &Catalog{Instruments: map[string]Instrument{"EURUSD": in}, List: []Instrument{in}, overrides: map[overrideKey]Override{
		{"vip", "", "majors"}:   {MarkupPoints: d("4"), CommissionPerLot: d("3"), SwapLong: d("-5")},
		{"vip", "EURUSD", ""}:   {MarkupPoints: d("10"), LeverageMax: &lev, TradeMode: &closeOnly},
		{"other", "", "exotic"}: {MarkupPoints: d("99")},
	}}
	vip, ok := cat.Effective("vip", "EURUSD")
	if !ok {
		t.Fatal("EURUSD not resolved")
	}
	for _, c := range []struct{ term, got, want, from, wantFrom string }{
		{"markup", vip.Group.MarkupPoints.String(), "10", vip.From.Markup, FromSymbolOverride},
		{"commission", vip.Group.CommissionPerLot.String(), "3", vip.From.Commission, FromSymbolGroupOverride},
		{"swap long", vip.SwapLong.String(), "-5", vip.From.SwapLong, FromSymbolGroupOverride},
		{"swap short", vip.SwapShort.String(), "2.2", vip.From.SwapShort, FromInstrument},
		{"leverage", decimal.NewFromInt(int64(vip.LeverageMax)).String(), "30", vip.From.LeverageMax, FromSymbolOverride},
		{"volume max", vip.VolumeMax.String(), "100", vip.From.VolumeMax, FromInstrument},
		{"trade mode", string(vip.TradeMode), "CLOSE_ONLY", vip.From.TradeMode, FromSymbolOverride},
	} {
		if c.got != c.want || c.from != c.wantFrom {
			t.Errorf("vip %s = %s from %s, want %s from %s", c.term, c.got, c.from, c.want, c.wantFrom)
		}
	}
	plain, _ := cat.Effective("other", "EURUSD")
	if !plain.Group.MarkupPoints.Equal(*d("1")) || plain.LeverageMax != 500 || plain.TradeMode != TradeFull || plain.From.Markup != FromSymbolGroup {
		t.Errorf("a group without an override on EURUSD got %+v", plain)
	}
	if !cat.Instruments["EURUSD"].Group.MarkupPoints.Equal(*d("1")) {
		t.Error("resolving changed the shared snapshot's instrument")
	}
	if _, ok := cat.Effective("vip", "NOSUCH"); ok {
		t.Error("an unknown symbol resolved")
	}
	rt := cat.RiskGroupTerms("vip")
	if st, ok := rt.Symbols["EURUSD"]; !ok || st.LeverageMax != 30 || st.Markup < 0.000099 || st.Markup > 0.000101 {
		t.Errorf("risk terms of vip = %+v", rt)
	}
}
