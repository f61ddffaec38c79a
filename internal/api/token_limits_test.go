package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/trading"
)

// limitedDesk is the real router with a per-token rate of 1 request a second (bursts of 2) and
// no per-address limit, counting the admin-write notices it sends.
func limitedDesk(t *testing.T) (*httptest.Server, string, *atomic.Int64) {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated("api_attack")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	parts := newTestParts(t, db, false)
	settings := catalog.NewSettings(db, parts.log)
	g, err := gate.New(gate.Config{Lease: gate.NoLease, Log: parts.log, Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := trading.New(trading.Config{DB: db, Prices: &desk.Quotes{}, Gate: g, Log: parts.log, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	var notices atomic.Int64
	h, err := NewServer(Deps{Log: parts.log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, parts.log), Quotes: &desk.Quotes{}, Metrics: metrics.New("test"),
		Trading: svc, Catalog: parts.admin, Settings: settings, Alerts: alert.NewInbox(db, parts.log), Auth: auth.NewResolver(db),
		Limits:       config.Limits{RatePerToken: 1},
		AdminWritten: func(context.Context, string) { notices.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tok, _, err := auth.Issue(audit.WithActor(context.Background(), audit.Actor{Via: "test"}), db, auth.Grant{UserID: 7, Role: auth.RoleTrader, Scopes: auth.AllScopes})
	if err != nil {
		t.Fatal(err)
	}
	return srv, tok, &notices
}

func send(t *testing.T, srv *httptest.Server, method, path, authz string) int {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// One token is one token to the per-token limits (the request rate here; the stream caps use
// the same key), however its Authorization header is spelt.
func TestPerTokenLimitIsPerTokenNotPerHeaderSpelling(t *testing.T) {
	srv, tok, _ := limitedDesk(t)
	passed := 0
	for i := range 40 {
		// "Bearer", "bearer", "BEARER", … and one to forty spaces before the token.
		scheme := []string{"Bearer", "bearer", "BEARER", "bEARER"}[i%4]
		if send(t, srv, "GET", "/api/fx/accounts", scheme+strings.Repeat(" ", 1+i/4)+tok) == http.StatusOK {
			passed++
		}
	}
	if passed > 3 {
		t.Fatalf("one token at 1 request a second (bursts of 2) made %d of 40 back-to-back requests", passed)
	}
}

// A refused admin write (a trader's token: 403; a route that does not exist: 404) changes
// nothing, so it tells the lease holder nothing either.
func TestRefusedAdminWriteSendsNoNotice(t *testing.T) {
	srv, tok, notices := limitedDesk(t)
	for _, p := range []string{"/api/admin/fx/instruments", "/api/admin/fx/no-such-route/" + strings.Repeat("x", 2000)} {
		code := send(t, srv, "PUT", p, "Bearer "+tok)
		if code < 400 {
			t.Fatalf("PUT %s as a trader: %d", p[:30], code)
		}
	}
	if n := notices.Load(); n != 0 {
		t.Fatalf("two refused admin writes sent %d admin-write notices, want 0", n)
	}
}
