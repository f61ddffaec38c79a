package catalog

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
)

// The four-eyes threshold: 10000 until one is stored; an amount with at most the money columns'
// places, or "off"; a refused value names the setting and writes nothing; a stored value applies
// at once; one written by hand that breaks the rule leaves the default in force, never "off".
// Not parallel: TestPutSettingsRangeChecked counts the stored settings.
func TestFourEyesSetting(t *testing.T) {
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	s := NewSettings(testDB, slog.New(slog.DiscardHandler))
	want := func(what string, above string, on bool) {
		t.Helper()
		got, gotOn := s.FourEyesAbove()
		if gotOn != on || on && !got.Equal(decimal.RequireFromString(above)) {
			t.Fatalf("%s: fxFourEyesAbove = %s (on %v), want %s (on %v)", what, got, gotOn, above, on)
		}
	}
	want("before any is stored", DefaultFourEyesAbove, true)
	for _, v := range []string{"-1", "1.2345", "ten", "OFF", "", "1000000000000000.001"} {
		_, err := s.Put(ctx, map[string]string{SettingFourEyesAbove: v})
		if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), SettingFourEyesAbove+" must be an amount") {
			t.Errorf("fxFourEyesAbove = %q: %v, want EINVALID naming the setting", v, err)
		}
	}
	if all, err := s.All(ctx); err != nil || all[SettingFourEyesAbove] != "" {
		t.Fatalf("refused values wrote %q (%v)", all[SettingFourEyesAbove], err)
	}
	if _, err := s.Put(ctx, map[string]string{SettingFourEyesAbove: FourEyesOff}); err != nil {
		t.Fatal(err)
	}
	want("off", "", false)
	if _, err := s.Put(ctx, map[string]string{SettingFourEyesAbove: "2500.5"}); err != nil {
		t.Fatal(err)
	}
	want("2500.5", "2500.5", true)
	if _, err := testDB.Exec("UPDATE `fx_setting` SET `value` = 'none' WHERE `name` = ?", SettingFourEyesAbove); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	want("a value written by hand that breaks the rule", DefaultFourEyesAbove, true)
}
