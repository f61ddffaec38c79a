package api

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/testkit/dbtest"
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

// adminRouter is a router whose requests carry an admin's actor, as requireToken sets it for an
// admin token, for tests that mount admin handlers without the token check.
func adminRouter() chi.Router {
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), principalKey{}, auth.Principal{UserID: 7, Role: auth.RoleSuperadmin, TokenID: 1})
			next.ServeHTTP(w, r.WithContext(audit.WithActor(ctx, audit.Actor{TokenID: 1, UserID: 7, Via: "api"})))
		})
	})
	return r
}

// migratedDB is a fresh migrated database named after name, dropped when the test ends.
func migratedDB(t *testing.T, name string) *sql.DB {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	return db
}
