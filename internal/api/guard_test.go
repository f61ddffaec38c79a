package api

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
)

// unguarded are the routes served without a token: probes and the sign-in form.
var unguarded = map[string]bool{
	"GET /healthz": true, "GET /readyz": true,
	"GET /admin/login": true, "POST /admin/login": true, "POST /admin/logout": true,
}

// walkRoutes is every route the router serves, as "METHOD /pattern".
func walkRoutes(t *testing.T, h http.Handler) []string {
	t.Helper()
	var out []string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, method+" "+strings.TrimSuffix(route, "/"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every route but the probes and the sign-in form names what it needs: a trader's route a
// scope, an admin route a permission. A route added with plain r.Get fails here.
func TestEveryRouteNamesWhatItNeeds(t *testing.T) {
	d, _ := newAuditDesk(t)
	h, g := guardedRoutes(d.deps)
	routes := walkRoutes(t, h)
	if len(routes) < 60 {
		t.Fatalf("the walk saw %d routes: it is not seeing the router", len(routes))
	}
	for _, key := range routes {
		need, guarded := g[key]
		switch {
		case unguarded[key]:
			if guarded {
				t.Errorf("%s is listed as served without a token but is guarded by %s", key, need)
			}
		case !guarded:
			t.Errorf("%s names no scope or permission: register it through a guard (internal/api/guard.go)", key)
		case strings.HasPrefix(key[strings.Index(key, " ")+1:], "/api/admin/") && !strings.HasPrefix(need, "permission "):
			t.Errorf("%s is an admin route guarded by %s, not a permission", key, need)
		case strings.HasPrefix(key[strings.Index(key, " ")+1:], "/api/fx/") && !strings.HasPrefix(need, "scope "):
			t.Errorf("%s is a trader's route guarded by %s, not a scope", key, need)
		}
	}
	for key := range g {
		if !slices.Contains(routes, key) {
			t.Errorf("the guards record %s, which the router does not serve", key)
		}
	}
}

// caller is one principal of the matrix: a staff role, or a trader token with some scopes.
type caller struct {
	name   string
	role   auth.Role
	scopes auth.Scopes
}

func (c caller) holds(need string) bool {
	kind, names, _ := strings.Cut(need, " ")
	p := auth.Principal{Role: c.role, Scopes: c.scopes}
	for _, n := range strings.Split(names, "|") {
		if kind == "scope" && p.May(auth.Scope(n)) || kind == "permission" && p.Can(auth.Permission(n)) {
			return true
		}
	}
	return false
}

// The whole matrix, generated from the router: every guarded route called by every staff role
// and by trader tokens of each scope set. A caller without what the route needs is refused with
// 403 naming it, and no table of the database changes; one that holds it is let through.
func TestEveryRoleIsRefusedOutsideItsPermissions(t *testing.T) {
	d, _ := newAuditDesk(t)
	d.fixtures()
	h, g := guardedRoutes(d.deps)
	callers := []caller{{name: "trader read", role: auth.RoleTrader, scopes: auth.Scopes{auth.ScopeRead}},
		{name: "trader trade", role: auth.RoleTrader, scopes: auth.Scopes{auth.ScopeTrade}},
		{name: "trader read trade", role: auth.RoleTrader, scopes: auth.AllScopes}}
	for _, r := range auth.StaffRoles {
		callers = append(callers, caller{name: string(r), role: r})
	}
	tokens := map[string]string{}
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	for i, c := range callers {
		tok, _, err := auth.Issue(ctx, d.db, auth.Grant{UserID: int64(900 + i), Role: c.role, Scopes: c.scopes, Label: "matrix"})
		if err != nil {
			t.Fatal(err)
		}
		tokens[c.name] = tok
	}
	keys := walkRoutes(t, h)
	before := checksums(t, d.db)
	refused, allowed := 0, 0
	type letThrough struct{ key, caller string }
	var allow []letThrough
	for _, key := range keys {
		need, ok := g[key]
		if !ok {
			continue // TestEveryRouteNamesWhatItNeeds fails it
		}
		method, pattern, _ := strings.Cut(key, " ")
		for _, c := range callers {
			if c.holds(need) {
				allow = append(allow, letThrough{key, c.name})
				continue
			}
			path, body := d.request(key, pattern)
			status, resp := d.doAs(tokens[c.name], method, path, body)
			_, wanted, _ := strings.Cut(need, " ")
			if status != http.StatusForbidden || !strings.Contains(resp, strings.Split(wanted, "|")[0]) {
				t.Errorf("%s by %s (needs %s): %d %s, want 403 naming %s", key, c.name, need, status, resp, wanted)
			}
			refused++
		}
	}
	if after := checksums(t, d.db); !maps.Equal(before, after) {
		t.Fatalf("refused requests changed the database:\nbefore %v\nafter  %v", before, after)
	}
	// Let through: the guard passes it to the handler, whatever the handler then answers.
	for _, a := range allow {
		method, pattern, _ := strings.Cut(a.key, " ")
		if strings.HasSuffix(pattern, "/stream") || pattern == "/admin/status" || pattern == "/api/admin/fx/desk" {
			// A stream holds the answer open, and the desk's status reads Redis, which this desk
			// has none of; their guards are the read routes' own.
			continue
		}
		path, body := d.request(a.key, pattern)
		status, resp := d.doAs(tokens[a.caller], method, path, body)
		if status == http.StatusForbidden && (strings.Contains(resp, "This needs the") || strings.Contains(resp, "This route needs a token") || strings.Contains(resp, "This route acts for a trader")) {
			t.Errorf("%s by %s was refused by its guard: %s", a.key, a.caller, resp)
		}
		allowed++
	}
	if refused < 200 || allowed < 60 {
		t.Fatalf("the matrix refused %d and let through %d calls: it is not walking the router", refused, allowed)
	}
}

// request is a request to key's route: the walk's valid request where it has one, else the
// pattern with its parameters filled from the fixtures.
func (d *auditDesk) request(key, pattern string) (path, body string) {
	if w, ok := auditedWrites[key]; ok {
		return w.path(d), w.body(d)
	}
	fill := map[string]string{"id": strconv.FormatInt(d.account, 10), "name": "default", "symbol": "EURUSD", "group": "metals",
		"eventId": strconv.FormatInt(d.deadEvent, 10)}
	path = regexp.MustCompile(`\{(\w+)\}`).ReplaceAllStringFunc(pattern, func(p string) string { return fill[p[1:len(p)-1]] })
	if strings.HasPrefix(path, "/api/admin/fx/webhooks/") {
		path = strings.Replace(path, "/webhooks/"+fill["id"], "/webhooks/"+strconv.FormatInt(d.webhook, 10), 1)
	}
	return path, "{}"
}

// doAs sends one request with token and returns its status and body.
func (d *auditDesk) doAs(token, method, path, body string) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

// checksums is every table's CHECKSUM TABLE, by name.
func checksums(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query("SELECT `table_name` FROM information_schema.tables WHERE `table_schema` = DATABASE()")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	out := map[string]string{}
	for _, n := range names {
		var table string
		var sum sql.NullInt64
		if err := db.QueryRow(fmt.Sprintf("CHECKSUM TABLE `%s`", n)).Scan(&table, &sum); err != nil {
			t.Fatal(err)
		}
		out[n] = strconv.FormatInt(sum.Int64, 10)
	}
	return out
}

// PUT /settings lets in the dealer and the risk desk; each setting then needs its own
// permission, and a request naming one the caller lacks changes none of its settings.
func TestEachSettingNeedsItsOwnPermission(t *testing.T) {
	d, _ := newAuditDesk(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	token := func(r auth.Role) string {
		tok, _, err := auth.Issue(ctx, d.db, auth.Grant{UserID: 1, Role: r})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	dealer, risk := token(auth.RoleDealer), token(auth.RoleRisk)
	for _, tc := range []struct {
		who, token, body string
		want             int
	}{
		{"dealer", dealer, `{"fxHedgeBandLots":"2"}`, http.StatusOK},
		{"dealer", dealer, `{"fxHedgeBandLots":"3","fxMaxAccountsPerUser":"9"}`, http.StatusForbidden},
		{"risk", risk, `{"fxMaxAccountsPerUser":"9"}`, http.StatusOK},
		{"risk", risk, `{"fxMaxAccountsPerUser":"8","fxHedgeLimitLots.EURUSD":"5"}`, http.StatusForbidden},
	} {
		before := checksums(t, d.db)
		status, body := d.doAs(tc.token, http.MethodPut, "/api/admin/fx/settings", tc.body)
		if status != tc.want {
			t.Fatalf("%s PUT %s: %d %s, want %d", tc.who, tc.body, status, body, tc.want)
		}
		if tc.want == http.StatusForbidden && !maps.Equal(before, checksums(t, d.db)) {
			t.Fatalf("%s PUT %s was refused but changed the database", tc.who, tc.body)
		}
	}
}
