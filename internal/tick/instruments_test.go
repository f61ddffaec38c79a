package tick

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/session"
	"fxdesk/internal/sim/feedsim"
	"fxdesk/internal/testkit/dbtest"
)

// testDB creates a fresh database fxdesk_test_tick_<random> on the test server, applies the
// 000002 migration as the runner does (comment lines dropped, statements end with ";" at a line
// end), and
// drops the database when the test ends.
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.ServerDSN())
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "fxdesk_test_tick_" + hex.EncodeToString(b)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("create test database (is MariaDB on %s?): %v", cfg.Addr, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE `" + name + "`"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	cfg.DBName = name
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	applyFile(t, db, "../../migrations/000002_instruments.up.sql")
	return db
}

func applyFile(t *testing.T, db *sql.DB, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Split as the migration runner does: drop comment lines, end a statement at a line ending
	// in ";".
	var stmt strings.Builder
	for line := range strings.SplitSeq(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		stmt.WriteString(line + "\n")
		if strings.HasSuffix(trimmed, ";") {
			if _, err := db.Exec(stmt.String()); err != nil {
				t.Fatalf("%s: %v\n%s", path, err, stmt.String())
			}
			stmt.Reset()
		}
	}
	if strings.TrimSpace(stmt.String()) != "" {
		t.Fatalf("%s: trailing text without a final \";\": %s", path, stmt.String())
	}
}

func TestSeededInstrumentsMatchTheSimulatorAndEditsReadBack(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	ctx := context.Background()
	got, err := LoadInstruments(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// The seed and the simulator must offer the same symbols, digits and calendars, or the desk
	// would enable instruments its default provider never quotes.
	sim := map[string]feedsim.Instrument{}
	for _, in := range feedsim.DefaultInstruments() {
		sim[in.Symbol] = in
	}
	if len(got) != len(sim) || len(got) < 32 {
		t.Fatalf("seeded %d instruments, simulator quotes %d", len(got), len(sim))
	}
	for _, in := range got {
		s, ok := sim[in.Symbol]
		if !ok {
			t.Errorf("%s seeded but not simulated", in.Symbol)
			continue
		}
		if in.Digits != s.Digits || in.SessionCalendar != s.Calendar {
			t.Errorf("%s: seed digits %d calendar %s, simulator %d %s", in.Symbol, in.Digits, in.SessionCalendar, s.Digits, s.Calendar)
		}
		if !in.Point.Equal(decimal.New(1, int32(-in.Digits))) {
			t.Errorf("%s: point %s is not 10^-%d", in.Symbol, in.Point, in.Digits)
		}
		if in.Base+in.Quote != in.Symbol || in.Status != fx.InstrumentActive || !in.Enabled ||
			in.TripleSwapDay != time.Wednesday || !in.VolumeMin.Equal(decimal.RequireFromString("0.01")) {
			t.Errorf("%s: %+v", in.Symbol, in)
		}
	}
	gold := got[slices.IndexFunc(got, func(in fx.Instrument) bool { return in.Symbol == "XAUUSD" })]
	if !gold.ContractSize.Equal(decimal.NewFromInt(100)) || gold.SymbolGroup != "metals" || !gold.SwapLong.IsNegative() {
		t.Errorf("XAUUSD %+v", gold)
	}

	// Operator edits are read back as written.
	if _, err := db.Exec("UPDATE `fx_instrument` SET `status`='CLOSE_ONLY', `enabled`=FALSE, `swapLong`=-1.2345, `tripleSwapDay`=5 WHERE `symbol`='EURUSD'"); err != nil {
		t.Fatal(err)
	}
	got, err = LoadInstruments(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	eur := got[slices.IndexFunc(got, func(in fx.Instrument) bool { return in.Symbol == "EURUSD" })]
	if eur.Status != fx.InstrumentCloseOnly || eur.Enabled || !eur.SwapLong.Equal(decimal.RequireFromString("-1.2345")) || eur.TripleSwapDay != time.Friday {
		t.Errorf("edited EURUSD read back as %+v", eur)
	}

	// The schema refuses what the desk could not use.
	for _, bad := range []string{
		"UPDATE `fx_instrument` SET `sessionCalendar`='crypto' WHERE `symbol`='USDJPY'", // no such calendar
		"UPDATE `fx_instrument` SET `status`='OPEN' WHERE `symbol`='USDJPY'",            // no such status
		"UPDATE `fx_instrument` SET `tripleSwapDay`=7 WHERE `symbol`='USDJPY'",          // no such weekday
	} {
		if _, err := db.Exec(bad); err == nil {
			t.Errorf("accepted: %s", bad)
		}
	}

	applyFile(t, db, "../../migrations/000002_instruments.down.sql")
	if _, err := LoadInstruments(ctx, db); err == nil {
		t.Error("fx_instrument still readable after the down migration")
	}
}

func TestSeededCalendarsMatchTheBuiltins(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	reg, err := LoadCalendars(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	// The seeded calendars must be the built-in ones: same answer every hour of a year.
	for _, want := range []*session.Calendar{session.Forex(), session.Metals()} {
		got, ok := reg.Lookup(want.Name())
		if !ok {
			t.Fatalf("calendar %s not seeded", want.Name())
		}
		for at := time.Date(2025, 1, 1, 0, 30, 0, 0, time.UTC); at.Year() == 2025; at = at.Add(time.Hour) {
			if got.IsOpen(at) != want.IsOpen(at) {
				t.Fatalf("%s from the database disagrees with the built-in at %s", want.Name(), at)
			}
		}
	}
	if _, err := db.Exec("UPDATE `fx_session_calendar` SET `weeklySchedule`='[{\"open\":\"Sunday\"}]' WHERE `name`='metals'"); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCalendars(context.Background(), db); err == nil || !strings.Contains(err.Error(), "metals") {
		t.Fatalf("a broken calendar row loaded: %v", err)
	}
}
