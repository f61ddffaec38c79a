package api

import (
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/trading"
)

// testParts are the desk parts most api tests build on their database: a trading service with
// no lease (gate.NoLease) and an empty price view, and the catalog's admin (venue: whether the
// desk has a venue, as an EXTERNAL group needs).
type testParts struct {
	log   *slog.Logger
	svc   *trading.Service
	admin *catalog.Admin
}

func newTestParts(t *testing.T, db *sql.DB, venue bool) testParts {
	t.Helper()
	p := testParts{log: slog.New(slog.DiscardHandler)}
	g, err := gate.New(gate.Config{Lease: gate.NoLease, Log: p.log, Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	if p.svc, err = trading.New(trading.Config{DB: db, Prices: &desk.Quotes{}, Gate: g, Log: p.log}); err != nil {
		t.Fatal(err)
	}
	if p.admin, err = catalog.NewAdmin(catalog.AdminConfig{DB: db, Cache: catalog.NewCache(db, 5*time.Second), Log: p.log, Venue: venue}); err != nil {
		t.Fatal(err)
	}
	return p
}
