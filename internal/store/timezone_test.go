package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// Whatever zone an operator's DSN asks for, in whatever spelling, and whatever loc, the desk's
// sessions run in UTC and the driver reads and writes DATETIMEs as UTC: DATETIME holds no
// zone, so NOW(3) and CURRENT_TIMESTAMP(3) defaults must mean UTC.
func TestDSNPinsSessionsToUTC(t *testing.T) {
	t.Parallel()
	cfg, err := store.DSN("fx@tcp(db:3306)/fxdesk?time_zone=%27%2B09%3A00%27&TIME_ZONE=%27SYSTEM%27&loc=Local&sql_mode=%27ANSI%27")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Params) != 2 || cfg.Params["time_zone"] != "'+00:00'" || cfg.Params["sql_mode"] != "'ANSI'" {
		t.Fatalf("session variables %v, want time_zone '+00:00' alone of its spellings and the rest kept", cfg.Params)
	}
	if cfg.Loc != time.UTC {
		t.Fatalf("loc %v, want UTC", cfg.Loc)
	}
	if _, err := mysql.ParseDSN(cfg.FormatDSN()); err != nil {
		t.Fatalf("the pinned DSN %q does not parse: %v", cfg.FormatDSN(), err)
	}
}

// On the server: a DSN whose session would run in +09:00 gets sessions in UTC through Connect,
// where NOW(3) is UTC_TIMESTAMP(3).
func TestConnectSessionsRunInUTC(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN(dbtest.ServerDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"time_zone": "'+09:00'"}
	db, err := store.Connect(cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var zone string
	var skew int
	if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone, TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW())").Scan(&zone, &skew); err != nil {
		t.Fatalf("tests need MariaDB on 127.0.0.1:3306: %v", err)
	}
	if zone != store.SessionTimeZone || skew != 0 {
		t.Fatalf("session in %s, NOW() %d minutes from UTC; want %s, 0", zone, skew, store.SessionTimeZone)
	}
}
