package catalog

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
)

// The hedger's terms: a limit per listed symbol, a band and a minimum, each in lots, checked
// before anything is written (a refusal names the setting and its range, and a Put with one bad
// change writes none of the others), audited one row per setting, and read back at once.
// Not parallel: TestPutSettingsRangeChecked counts the stored settings.
func TestHedgeSettings(t *testing.T) {
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	s := NewSettings(testDB, slog.New(slog.DiscardHandler))
	terms := s.HedgeTerms()
	if len(terms.Limits) != 0 || !terms.Band.Equal(DefaultHedgeBand) || !terms.Min.Equal(DefaultHedgeMin) {
		t.Fatalf("terms before any is stored: %+v; want no limit and the defaults", terms)
	}
	eurusd := SettingHedgeLimitPrefix + "EURUSD"
	for _, tc := range []struct {
		name, value, want string
	}{
		{eurusd, "-1", "from 0 to 99999999.9999 with at most 4 decimals, or \"off\""},
		{eurusd, "1.23456", "at most 4 decimals"},
		{eurusd, "100000000", "from 0 to 99999999.9999"},
		{eurusd, "ten", "lots from 0"},
		{eurusd, "OFF", "lots from 0"},
		{SettingHedgeLimitPrefix + "NOSUCH", "10", "a symbol the desk lists"},
		{SettingHedgeLimitPrefix, "10", "a symbol the desk lists"},
		{SettingHedgeBand, "-0.5", "lots from 0"},
		{SettingHedgeBand, "off", "lots from 0"},
		{SettingHedgeMin, "0.00001", "at most 4 decimals"},
	} {
		// A good change beside the bad one: neither is written.
		_, err := s.Put(ctx, map[string]string{tc.name: tc.value, SettingHedgeLimitPrefix + "GBPUSD": "5"})
		if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), tc.name) || !strings.Contains(fx.ErrorMessage(err), tc.want) ||
			!strings.HasSuffix(fx.ErrorMessage(err), ".") {
			t.Errorf("%s = %q: %v; want %s naming the setting and %q", tc.name, tc.value, err, fx.EINVALID, tc.want)
		}
	}
	all, err := s.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range all {
		if strings.HasPrefix(name, "fxHedge") {
			t.Fatalf("refused changes wrote %s = %s", name, all[name])
		}
	}
	if len(auditRows(t, "setting", SettingHedgeLimitPrefix+"GBPUSD")) != 0 {
		t.Fatal("refused changes were audited")
	}

	if _, err := s.Put(ctx, map[string]string{eurusd: "10", SettingHedgeLimitPrefix + "XAUUSD": "2.5", SettingHedgeBand: "2", SettingHedgeMin: "0.5"}); err != nil {
		t.Fatal(err)
	}
	terms = s.HedgeTerms()
	if len(terms.Limits) != 2 || terms.Limits["EURUSD"].String() != "10" || terms.Limits["XAUUSD"].String() != "2.5" || terms.Band.String() != "2" || terms.Min.String() != "0.5" {
		t.Fatalf("terms %+v; want EURUSD 10, XAUUSD 2.5, band 2, min 0.5", terms)
	}
	// Another process reads them on its next load.
	other := NewSettings(testDB, slog.New(slog.DiscardHandler))
	if err := other.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := other.HedgeTerms(); len(got.Limits) != 2 || got.Band.String() != "2" {
		t.Fatalf("terms loaded elsewhere %+v", got)
	}
	// "off" removes a limit; the row stays, its audit row says so.
	if _, err := s.Put(ctx, map[string]string{eurusd: HedgeLimitOff}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.HedgeTerms().Limits["EURUSD"]; ok {
		t.Fatalf("EURUSD still limited after %q: %+v", HedgeLimitOff, s.HedgeTerms())
	}
	rows := auditRows(t, "setting", eurusd)
	if len(rows) != 2 || rows[0].Before != nil || field(t, rows[0].After, "value") != "10" || field(t, rows[1].Before, "value") != "10" || field(t, rows[1].After, "value") != HedgeLimitOff {
		t.Fatalf("audit rows of %s: %+v", eurusd, rows)
	}
	// A value written by hand that no rule passes counts as unset.
	if _, err := testDB.ExecContext(ctx, "UPDATE `fx_setting` SET `value` = 'lots' WHERE `name` = ?", SettingHedgeLimitPrefix+"XAUUSD"); err != nil {
		t.Fatal(err)
	}
	if err := other.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.HedgeTerms().Limits["XAUUSD"]; ok {
		t.Fatalf("a bad stored limit was taken: %+v", other.HedgeTerms())
	}
	if _, err := testDB.ExecContext(ctx, "DELETE FROM `fx_setting` WHERE `name` LIKE 'fxHedge%'"); err != nil {
		t.Fatal(err)
	}
}
