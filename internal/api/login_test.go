package api

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/dbtest"
)

// The operator's pages sign in by a form post that sets the cookie, never by a token in the URL,
// and refuse a post from another site. The status page is a stand-in naming the caller, mounted
// by the same operatorPages the desk uses; tokens are real, resolved against a real database.
func TestOperatorPagesSignInByFormOnly(t *testing.T) {
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	db, closeDB, err := dbtest.NewMigrated("api_login")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	admin, err := auth.Create(ctx, db, 1, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	trader, err := auth.Create(ctx, db, 2, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := chi.NewRouter()
	res := auth.NewResolver(db)
	operatorPages(r, log, res, requireToken(log, res, nil, nil, metrics.New("test")), guards{}.under("/admin"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "status for user "+strconv.FormatInt(principal(r.Context()).UserID, 10))
	}))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	// Redirects are checked, not followed.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	type answer struct {
		status   int
		location string
		body     string
		cookie   *http.Cookie
	}
	do := func(req *http.Request) answer {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(b)}
		for _, c := range resp.Cookies() {
			if c.Name == statusCookie {
				a.cookie = c
			}
		}
		return a
	}
	get := func(path string, cookie *http.Cookie) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		return do(req)
	}
	// post sends the form as a browser does; headers set or override what the browser sends.
	post := func(path, token string, headers map[string]string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for k, v := range headers {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		return do(req)
	}

	// Without a cookie the page sends the browser to the form, which asks for the token.
	if a := get("/admin/status", nil); a.status != http.StatusSeeOther || a.location != "/admin/login" {
		t.Errorf("status page without a cookie = %d to %q, want 303 to /admin/login", a.status, a.location)
	}
	if a := get("/admin/login", nil); a.status != http.StatusOK || !strings.Contains(a.body, `name="token"`) || !strings.Contains(a.body, `method="post"`) {
		t.Errorf("sign-in form = %d %s", a.status, a.body)
	}

	// A token in the URL is refused on every page, never echoed, and sets no cookie.
	for _, path := range []string{"/admin/status?token=" + admin, "/admin/login?token=" + admin, "/admin/status?a=1&token="} {
		a := get(path, nil)
		if a.status != http.StatusBadRequest || a.cookie != nil || strings.Contains(a.body, admin) || !strings.Contains(a.body, "Sign in with this form") {
			t.Errorf("GET %s = %d cookie %v:\n%s", strings.ReplaceAll(path, admin, "ADMIN"), a.status, a.cookie, a.body)
		}
	}

	// Refusals: each answers the form again with its reason, and no cookie.
	for _, tc := range []struct {
		name, token string
		headers     map[string]string
		status      int
		reason      string
	}{
		{"from another site", admin, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "own page"},
		{"from another origin, older browser", admin, map[string]string{"Sec-Fetch-Site": "", "Origin": "http://evil.example"}, http.StatusForbidden, "own page"},
		{"no token", "", nil, http.StatusBadRequest, "Enter an admin token"},
		{"a token nobody issued", "fxd_not-a-token", nil, http.StatusUnauthorized, "not a live token"},
		{"a trader's token", trader, nil, http.StatusForbidden, "trader"},
		{"a body past the form's bound", strings.Repeat("x", loginFormBytes), nil, http.StatusRequestEntityTooLarge, "could not be read"},
	} {
		a := post("/admin/login", tc.token, tc.headers)
		if a.status != tc.status || a.cookie != nil || !strings.Contains(a.body, tc.reason) {
			t.Errorf("sign-in %s = %d cookie %v, want %d naming %q:\n%s", tc.name, a.status, a.cookie, tc.status, tc.reason, a.body)
		}
	}

	// The admin's token from the form: an HttpOnly, SameSite=Strict cookie for /admin/ and a 303
	// to the status page, which the cookie then opens. A non-browser client (no Origin, no
	// Sec-Fetch-Site) may sign in too.
	for _, headers := range []map[string]string{nil, {"Origin": "", "Sec-Fetch-Site": ""}} {
		a := post("/admin/login", admin, headers)
		if a.status != http.StatusSeeOther || a.location != "/admin/status" || a.cookie == nil {
			t.Fatalf("sign-in with the admin token = %d to %q cookie %v:\n%s", a.status, a.location, a.cookie, a.body)
		}
		c := a.cookie
		if c.Value != admin || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/admin/" || c.Secure {
			t.Errorf("cookie over plain HTTP = %+v", c)
		}
		if page := get("/admin/status", c); page.status != http.StatusOK || page.body != "status for user 1" {
			t.Errorf("status page with the cookie = %d %q", page.status, page.body)
		}
		// Even signed in, a token in the URL is refused rather than used.
		if page := get("/admin/status?token="+trader, c); page.status != http.StatusBadRequest {
			t.Errorf("status page with the cookie and ?token= = %d", page.status)
		}
	}
	// Behind a proxy that terminated TLS the cookie is Secure.
	if a := post("/admin/login", admin, map[string]string{"X-Forwarded-Proto": "https"}); a.cookie == nil || !a.cookie.Secure {
		t.Errorf("cookie behind TLS = %+v", a.cookie)
	}

	// Signing out deletes the cookie; from another site it is refused.
	if a := post("/admin/logout", "", map[string]string{"Sec-Fetch-Site": "cross-site"}); a.status != http.StatusForbidden || a.cookie != nil {
		t.Errorf("sign-out from another site = %d cookie %v", a.status, a.cookie)
	}
	if a := post("/admin/logout", "", nil); a.status != http.StatusSeeOther || a.location != "/admin/login" || a.cookie == nil || a.cookie.MaxAge >= 0 {
		t.Errorf("sign-out = %d to %q cookie %+v", a.status, a.location, a.cookie)
	}

	if strings.Contains(logs.String(), admin) || strings.Contains(logs.String(), trader) {
		t.Errorf("a token reached the log:\n%s", logs.String())
	}
}
