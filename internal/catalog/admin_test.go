package catalog

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/dbtest"
)

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "catalog", &testDB)) }

func newAdmin(t *testing.T) *Admin {
	t.Helper()
	a, err := NewAdmin(AdminConfig{DB: testDB, Cache: NewCache(testDB, time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ptr[T any](v T) *T { return &v }

// Every instrument term an admin sends is checked against its column and against the others
// before anything is written: a volume past DECIMAL(12,4), a minimum that is not a whole
// multiple of the step (it could never be traded), a maximum below the minimum. The refusal
// names the field and its range, and the row is unchanged.
func TestPutInstrumentsRangeChecked(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	svc := newAdmin(t)
	d := func(s string) *decimal.Decimal { return ptr(decimal.RequireFromString(s)) }
	row := func() string {
		var s string
		if err := testDB.QueryRow("SELECT CONCAT_WS(' ', `volumeMin`, `volumeStep`, `volumeMax`, `leverageMax`, `status`) FROM `fx_instrument` WHERE `symbol` = 'USDPLN'").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := row()
	for _, tc := range []struct {
		patch InstrumentPatch
		want  []string // every fragment the message must hold
	}{
		{InstrumentPatch{VolumeMax: d("1000000000")}, []string{"instruments[0].volumeMax", "0.0001 to 99999999.9999"}},
		{InstrumentPatch{VolumeMax: d("100000000")}, []string{"instruments[0].volumeMax", "99999999.9999"}},
		{InstrumentPatch{VolumeMin: d("0")}, []string{"instruments[0].volumeMin", "0.0001"}},
		{InstrumentPatch{VolumeStep: d("0.00001")}, []string{"instruments[0].volumeStep", "at most 4 decimals"}},
		{InstrumentPatch{VolumeMin: d("0.01"), VolumeStep: d("0.03")}, []string{"volumeMin 0.01 must be a whole multiple of volumeStep 0.03"}},
		{InstrumentPatch{VolumeStep: d("0.03")}, []string{"volumeMin 0.01 must be a whole multiple of volumeStep 0.03"}}, // against the stored minimum
		{InstrumentPatch{VolumeMin: d("60")}, []string{"volumeMax 50 must be at least volumeMin 60"}},
		{InstrumentPatch{LeverageMax: ptr(0)}, []string{"instruments[0].leverageMax", "from 1 to 10000"}},
		{InstrumentPatch{LeverageMax: ptr(1 << 40)}, []string{"instruments[0].leverageMax", "from 1 to 10000"}},
		{InstrumentPatch{Status: ptr(fx.InstrumentStatus("OPEN"))}, []string{"instruments[0].status", "ACTIVE, CLOSE_ONLY or HALTED"}},
	} {
		tc.patch.Symbol = "USDPLN"
		_, err := svc.PutInstruments(ctx, []InstrumentPatch{tc.patch})
		for _, w := range tc.want {
			if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), w) {
				t.Errorf("%+v: %v; want %s naming %q", tc.patch, err, fx.EINVALID, w)
				break
			}
		}
	}
	// A good change with a bad one: neither is written.
	_, err := svc.PutInstruments(ctx, []InstrumentPatch{{Symbol: "USDPLN", VolumeMax: d("40")}, {Symbol: "USDPLN", VolumeStep: d("0.03")}})
	if fx.ErrorCode(err) != fx.EINVALID {
		t.Errorf("a good and a bad change: %v", err)
	}
	if after := row(); after != before {
		t.Fatalf("refused changes wrote USDPLN: %s → %s", before, after)
	}
}

// Every setting is a whole number in its range; anything else names the setting and the range
// and writes nothing.
func TestPutSettingsRangeChecked(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	s := NewSettings(testDB, slog.New(slog.DiscardHandler))
	before, err := s.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, value, want string
	}{
		{SettingMaxPendingOrders, "0", "from 1 to 10000"},
		{SettingMaxPendingOrders, "10001", "from 1 to 10000"},
		{SettingMaxPendingOrders, "1.5", "whole number of orders"},
		{SettingMaxAccountsPerUser, "0", "from 1 to 1000"},
		{SettingMaxAccountsPerUser, "99999999999999999999", "from 1 to 1000"},
		{SettingQuoteStale, "3601", "from 1 to 3600"},
	} {
		_, err := s.Put(ctx, map[string]string{tc.name: tc.value, SettingQuoteStale: "30"})
		if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), tc.name) || !strings.Contains(fx.ErrorMessage(err), tc.want) {
			t.Errorf("%s = %q: %v; want %s naming the setting and %q", tc.name, tc.value, err, fx.EINVALID, tc.want)
		}
	}
	after, err := s.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || after[SettingQuoteStale] != before[SettingQuoteStale] {
		t.Fatalf("refused settings wrote: %v → %v", before, after)
	}
	if s.MaxPendingOrders() != DefaultMaxPendingOrders || s.MaxAccountsPerUser() != DefaultMaxAccountsPerUser {
		t.Fatalf("caps %d, %d; want the defaults while none is stored", s.MaxPendingOrders(), s.MaxAccountsPerUser())
	}
}
