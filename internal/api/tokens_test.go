package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/testkit/poll"
)

func init() {
	auditedWrites["POST /api/admin/fx/tokens"] = auditedWrite{
		path: fixed("/api/admin/fx/tokens"), body: fixed(`{"userId":601,"role":"viewer","label":"walk"}`),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/tokens", `{"userId":601,"role":"janitor"}` },
		action: "token.create", entityType: "token",
		entityID: func(d *auditDesk) string {
			var id int64
			if err := d.db.QueryRow("SELECT MAX(`id`) FROM `fx_api_token`").Scan(&id); err != nil {
				d.t.Fatal(err)
			}
			return strconv.FormatInt(id, 10)
		},
		before: false, after: `"role":"viewer"`,
	}
	auditedWrites["DELETE /api/admin/fx/tokens/{id}"] = auditedWrite{
		path:   func(d *auditDesk) string { return "/api/admin/fx/tokens/" + strconv.FormatInt(d.revokable, 10) },
		body:   fixed(""),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/tokens/999999", "" },
		action: "token.revoke", entityType: "token", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.revokable, 10) },
		before: true, after: `"revoked":true`,
	}
}

// callAs sends one request to the server at base with token and returns its status and body.
func callAs(t *testing.T, base, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// decodeAs decodes body into a new T, failing the test when it is not one.
func decodeAs[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

// anotherProcess is a second server over d's database with a token resolver of its own: another
// web process, whose cache holds nothing d's has seen.
func (d *auditDesk) anotherProcess(t *testing.T) string {
	t.Helper()
	deps := d.deps
	deps.Auth = auth.NewResolver(d.db)
	h, err := NewServer(deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// issue creates a token over the API with d's superadmin token and returns the answer.
func (d *auditDesk) issue(t *testing.T, body string) issuedTokenView {
	t.Helper()
	code, resp := callAs(t, d.srv.URL, d.admin, http.MethodPost, "/api/admin/fx/tokens", body)
	if code != http.StatusCreated {
		t.Fatalf("POST /tokens %s: %d %s", body, code, resp)
	}
	return decodeAs[issuedTokenView](t, resp)
}

type tokenPage struct {
	Tokens     []tokenView `json:"tokens"`
	NextBefore *int64      `json:"nextBefore"`
}

func (p tokenPage) ids() []int64 {
	out := make([]int64, len(p.Tokens))
	for i, v := range p.Tokens {
		out[i] = v.ID
	}
	return out
}

// tokenIDOf is the id of the row holding token.
func (d *auditDesk) tokenIDOf(t *testing.T, token string) int64 {
	t.Helper()
	var id int64
	if err := d.db.QueryRow("SELECT `id` FROM `fx_api_token` WHERE `tokenHash` = ?", auth.Hash(token)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A superadmin issues a trader's read-only token and a dealer's over the API: each answer shows
// the token once beside its record, each resolves to what was asked for, the trader's reads and
// cannot trade, the dealer's cannot manage tokens, and each issue is one audit row naming the
// calling token. The list never shows a token's text, filters by user and pages like the audit
// log. A revoked token is refused at once by the process that revoked it and by one that never
// saw it; a second revoke is a conflict and an unknown id not found, and neither writes a row.
func TestTokensIssuedListedAndRevokedOverTheAPI(t *testing.T) {
	t.Parallel()
	d, _ := newAuditDesk(t)
	ctx := context.Background()
	adminID := d.tokenIDOf(t, d.admin)
	start := time.Now()

	reader := d.issue(t, `{"userId":501,"role":"trader","scopes":["read"],"label":"reader","expiresIn":"720h"}`)
	if !strings.HasPrefix(reader.Token, "fxd_") || reader.UserID != 501 || reader.Role != "trader" || !slices.Equal(reader.Scopes, []auth.Scope{auth.ScopeRead}) ||
		reader.Label != "reader" || !reader.Live || reader.RevokedAt != nil || reader.LastUsedAt != nil || reader.LastUsedFrom != nil || reader.ExpiresAt == nil ||
		reader.ExpiresAt.Before(start.Add(720*time.Hour-time.Second)) || reader.ExpiresAt.After(time.Now().Add(720*time.Hour)) {
		t.Fatalf("the reader's token: %+v", reader)
	}
	if id := d.tokenIDOf(t, reader.Token); id != reader.ID {
		t.Fatalf("the answer names token %d; the stored hash is token %d's", reader.ID, id)
	}
	p, err := auth.NewResolver(d.db).Resolve(ctx, "Bearer "+reader.Token)
	if err != nil || p.UserID != 501 || p.Role != auth.RoleTrader || !slices.Equal(p.Scopes, auth.Scopes{auth.ScopeRead}) || p.TokenID != reader.ID || !p.Expires.Equal(*reader.ExpiresAt) {
		t.Fatalf("the reader's token resolves to %+v, %v", p, err)
	}
	if code, body := callAs(t, d.srv.URL, reader.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"id":%d`, d.account)) {
		t.Fatalf("the reader reads its accounts: %d %s", code, body)
	}
	before := checksums(t, d.db)
	order := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":"reader-1"}`, d.account)
	if code, body := callAs(t, d.srv.URL, reader.Token, http.MethodPost, "/api/fx/orders", order); code != http.StatusForbidden || !strings.Contains(body, "trade scope") {
		t.Fatalf("a read-only token places an order: %d %s; want 403 naming the trade scope", code, body)
	}
	if !maps.Equal(before, checksums(t, d.db)) {
		t.Fatal("the refused order changed the database")
	}

	dealer := d.issue(t, `{"userId":2,"role":"dealer","label":"desk dealer"}`)
	if dealer.Role != "dealer" || len(dealer.Scopes) != 0 || dealer.ExpiresAt == nil ||
		dealer.ExpiresAt.Before(start.Add(auth.MaxLifetime-time.Second)) || dealer.ExpiresAt.After(time.Now().Add(auth.MaxLifetime)) {
		t.Fatalf("the dealer's token, with no expiry asked for: %+v; want the longest life, %s", dealer, auth.MaxLifetime)
	}
	if p, err := auth.NewResolver(d.db).Resolve(ctx, "Bearer "+dealer.Token); err != nil || p.Role != auth.RoleDealer || len(p.Scopes) != 0 || p.UserID != 2 {
		t.Fatalf("the dealer's token resolves to %+v, %v", p, err)
	}
	if code, body := callAs(t, d.srv.URL, dealer.Token, http.MethodGet, "/api/admin/fx/accounts", ""); code != http.StatusOK {
		t.Fatalf("the dealer reads the accounts: %d %s", code, body)
	}
	if code, body := callAs(t, d.srv.URL, dealer.Token, http.MethodGet, "/api/admin/fx/tokens", ""); code != http.StatusForbidden || !strings.Contains(body, "tokens permission") {
		t.Fatalf("the dealer lists tokens: %d %s; want 403 naming the tokens permission", code, body)
	}

	for _, tc := range []struct {
		id    int64
		token string
		after string
	}{{reader.ID, reader.Token, `"role":"trader","scopes":"read","label":"reader"`}, {dealer.ID, dealer.Token, `"role":"dealer","label":"desk dealer"`}} {
		es, err := audit.List(ctx, d.db, audit.Filter{EntityType: "token", EntityID: strconv.FormatInt(tc.id, 10)})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].Action != "token.create" || es[0].ActorVia != "api" || es[0].ActorTokenID == nil || *es[0].ActorTokenID != adminID ||
			!strings.Contains(string(es[0].After), tc.after) || strings.Contains(string(es[0].After), tc.token[4:]) {
			t.Fatalf("token %d's audit rows: %+v", tc.id, es)
		}
	}

	list := func(query string) tokenPage {
		t.Helper()
		code, body := callAs(t, d.srv.URL, d.admin, http.MethodGet, "/api/admin/fx/tokens"+query, "")
		if code != http.StatusOK {
			t.Fatalf("GET /tokens%s: %d %s", query, code, body)
		}
		for _, secret := range []string{"fxd_", auth.Hash(reader.Token), auth.Hash(d.admin), "tokenHash"} {
			if strings.Contains(body, secret) {
				t.Fatalf("GET /tokens%s shows %q: %s", query, secret, body)
			}
		}
		return decodeAs[tokenPage](t, body)
	}
	if all := list(""); !slices.Equal(all.ids(), []int64{dealer.ID, reader.ID, adminID}) || all.NextBefore != nil {
		t.Fatalf("every token, newest first: %v next %v", all.ids(), all.NextBefore)
	}
	if mine := list("?userId=501"); !slices.Equal(mine.ids(), []int64{reader.ID}) || mine.Tokens[0].Label != "reader" || !mine.Tokens[0].Live {
		t.Fatalf("user 501's tokens: %+v", mine.Tokens)
	}
	first := list("?limit=2")
	if !slices.Equal(first.ids(), []int64{dealer.ID, reader.ID}) || first.NextBefore == nil || *first.NextBefore != reader.ID {
		t.Fatalf("first page: %v next %v", first.ids(), first.NextBefore)
	}
	if second := list("?limit=2&before=" + strconv.FormatInt(*first.NextBefore, 10)); !slices.Equal(second.ids(), []int64{adminID}) || second.NextBefore != nil {
		t.Fatalf("second page: %v next %v", second.ids(), second.NextBefore)
	}

	code, body := callAs(t, d.srv.URL, d.admin, http.MethodDelete, "/api/admin/fx/tokens/"+strconv.FormatInt(reader.ID, 10), "")
	if code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	revoked := decodeAs[revokedTokenView](t, body)
	if revoked.ID != reader.ID || revoked.RevokedAt == nil || revoked.Live || revoked.RefusedEverywhereWithinSeconds != int(auth.CacheFor/time.Second) {
		t.Fatalf("the revoke's answer: %s", body)
	}
	// This process resolved the token a moment ago; it refuses it from its next request on, as
	// does a process that never saw it.
	if code, body := callAs(t, d.srv.URL, reader.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token on the process that revoked it: %d %s", code, body)
	}
	if code, body := callAs(t, d.anotherProcess(t), reader.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token on another process: %d %s", code, body)
	}
	es, err := audit.List(ctx, d.db, audit.Filter{EntityType: "token", EntityID: strconv.FormatInt(reader.ID, 10)})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Action != "token.revoke" || es[0].ActorTokenID == nil || *es[0].ActorTokenID != adminID || es[0].Before == nil {
		t.Fatalf("token %d's audit rows after the revoke: %+v", reader.ID, es)
	}
	before = checksums(t, d.db)
	for _, tc := range []struct {
		path string
		want int
		says string
	}{
		{"/api/admin/fx/tokens/" + strconv.FormatInt(reader.ID, 10), http.StatusConflict, "already revoked"},
		{"/api/admin/fx/tokens/999999", http.StatusNotFound, "No token 999999"},
		{"/api/admin/fx/tokens/x", http.StatusNotFound, "No token"},
	} {
		if code, body := callAs(t, d.srv.URL, d.admin, http.MethodDelete, tc.path, ""); code != tc.want || !strings.Contains(body, tc.says) {
			t.Errorf("DELETE %s: %d %s; want %d saying %q", tc.path, code, body, tc.want, tc.says)
		}
	}
	if !maps.Equal(before, checksums(t, d.db)) {
		t.Fatal("refused revokes changed the database")
	}
}

// Every bad request to issue a token is refused with 400 naming what was wrong, and changes
// nothing; so is every bad query of the list.
func TestTokenIssueRefusesBadInputAndChangesNothing(t *testing.T) {
	t.Parallel()
	d, _ := newAuditDesk(t)
	before := checksums(t, d.db)
	for _, tc := range []struct{ body, says string }{
		{`{"userId":501,"role":"janitor"}`, "role must be one of"},
		{`{"userId":501}`, "role is required"},
		{`{"role":"trader"}`, "userId"},
		{`{"userId":0,"role":"trader"}`, "userId must be a positive whole number"},
		{`{"userId":"501","role":"trader"}`, "userId must be a whole number"},
		{`{"userId":2,"role":"dealer","scopes":["read"]}`, "Scopes are a trader's token's"},
		{`{"userId":501,"role":"trader","scopes":[]}`, "scopes must name at least one"},
		{`{"userId":501,"role":"trader","scopes":["read","withdraw"]}`, `scope \"withdraw\" is not one the desk knows`},
		{`{"userId":501,"role":"trader","expiresAt":"2020-01-01T00:00:00Z"}`, "must be in the future"},
		{`{"userId":501,"role":"trader","expiresAt":"tomorrow"}`, "expiresAt must be an RFC 3339 time"},
		{`{"userId":501,"role":"trader","expiresIn":"-1h"}`, "expiresIn must be a positive duration"},
		{`{"userId":501,"role":"trader","expiresIn":"a month"}`, "expiresIn must be a positive duration"},
		{`{"userId":501,"role":"trader","expiresIn":"8800h"}`, "at most 366 days"},
		{fmt.Sprintf(`{"userId":501,"role":"trader","expiresAt":%q}`, time.Now().Add(auth.MaxLifetime+time.Hour).Format(time.RFC3339)), "at most 366 days"},
		{fmt.Sprintf(`{"userId":501,"role":"trader","expiresIn":"1h","expiresAt":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339)), "not both"},
		{fmt.Sprintf(`{"userId":501,"role":"trader","label":%q}`, strings.Repeat("x", auth.MaxLabel+1)), "label must be at most 64 bytes"},
		{`{"userId":501,"role":"trader","admin":true}`, `Unknown field \"admin\"`},
		{`{"userId":501,"role":"trader","role":"superadmin"}`, "Duplicate key"},
		{`{"userId":501,"Role":"superadmin"}`, "keys are case-sensitive"},
		{``, "empty"},
	} {
		code, body := callAs(t, d.srv.URL, d.admin, http.MethodPost, "/api/admin/fx/tokens", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid"`) || !strings.Contains(body, tc.says) {
			t.Errorf("POST /tokens %s: %d %s; want 400 saying %q", tc.body, code, body, tc.says)
		}
	}
	for _, tc := range []struct{ query, names string }{
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"before=0", "before"},
		{"userId=x", "userId"},
		{"user=1", "user"},
		{"limit=1&limit=2", "limit"},
	} {
		code, body := callAs(t, d.srv.URL, d.admin, http.MethodGet, "/api/admin/fx/tokens?"+tc.query, "")
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid"`) || !strings.Contains(body, tc.names) {
			t.Errorf("GET /tokens?%s: %d %s; want 400 naming %s", tc.query, code, body, tc.names)
		}
	}
	if !maps.Equal(before, checksums(t, d.db)) {
		t.Fatal("refused requests changed the database")
	}
}

// A token that expires is refused from its expiry on, though the process resolved it moments
// before: the resolver remembers a token no longer than until its expiry. A token whose expiry
// the database already shows past is refused at its first request.
func TestExpiredTokenIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	d, _ := newAuditDesk(t)
	brief := d.issue(t, `{"userId":501,"role":"trader","label":"brief","expiresIn":"2s"}`)
	firstUse := time.Now()
	if code, body := callAs(t, d.srv.URL, brief.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusOK {
		t.Fatalf("the brief token before its expiry: %d %s", code, body)
	}
	lookups := d.deps.Auth.Lookups()
	if code, _ := callAs(t, d.srv.URL, brief.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusOK || d.deps.Auth.Lookups() != lookups {
		t.Fatalf("the brief token's second use: %d, %d lookups more; want 200 from the cache", code, d.deps.Auth.Lookups()-lookups)
	}
	if !time.Now().Before(*brief.ExpiresAt) {
		t.Fatalf("the token expired (%s) before the test could use it twice: too slow a machine to tell", brief.ExpiresAt)
	}
	// Time passing is the condition: nothing announces it.
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the brief token's expiry passes", func() bool { return time.Now().After(*brief.ExpiresAt) })
	if code, body := callAs(t, d.srv.URL, brief.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusUnauthorized {
		t.Fatalf("the brief token past its expiry: %d %s; want 401 at once", code, body)
	}
	if waited := time.Since(firstUse); waited >= auth.CacheFor {
		t.Fatalf("the refusal came %s after the first use, past the cache's %s: this run cannot tell the expiry from the cache", waited, auth.CacheFor)
	}
	if code, body := callAs(t, d.anotherProcess(t), brief.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusUnauthorized {
		t.Fatalf("the brief token past its expiry on another process: %d %s", code, body)
	}

	lapsed := d.issue(t, `{"userId":501,"role":"trader","label":"lapsed","expiresIn":"1h"}`)
	if _, err := d.db.Exec("UPDATE `fx_api_token` SET `expiresAt` = DATE_SUB(NOW(3), INTERVAL 1 SECOND) WHERE `id` = ?", lapsed.ID); err != nil {
		t.Fatal(err)
	}
	if code, body := callAs(t, d.srv.URL, lapsed.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusUnauthorized {
		t.Fatalf("a token the database shows expired: %d %s", code, body)
	}
	code, body := callAs(t, d.srv.URL, d.admin, http.MethodGet, "/api/admin/fx/tokens?userId=501", "")
	if code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, v := range decodeAs[tokenPage](t, body).Tokens {
		if v.Live || v.RevokedAt != nil {
			t.Errorf("token %d (%s) listed live %v, revoked %v; want expired: not live, not revoked", v.ID, v.Label, v.Live, v.RevokedAt)
		}
	}
}

// The desk keeps one live superadmin token over the API: the last cannot be revoked there, by
// another or by itself (409, nothing changed; an expired one does not count), while the command
// line still can. A superadmin may revoke its own token while another is live. Two superadmins
// revoking each other at once leave one of them live, never none.
func TestLastLiveSuperadminTokenIsKept(t *testing.T) {
	t.Parallel()
	d, _ := newAuditDesk(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	revoke := func(token string, id int64) (int, string) {
		t.Helper()
		return callAs(t, d.srv.URL, token, http.MethodDelete, "/api/admin/fx/tokens/"+strconv.FormatInt(id, 10), "")
	}
	adminID := d.tokenIDOf(t, d.admin)
	before := checksums(t, d.db)
	if code, body := revoke(d.admin, adminID); code != http.StatusConflict || !strings.Contains(body, "last live superadmin token") || !strings.Contains(body, "fxdesk-web token revoke") {
		t.Fatalf("the last superadmin revoking itself: %d %s; want 409 saying why and what to do", code, body)
	}
	if !maps.Equal(before, checksums(t, d.db)) {
		t.Fatal("the refused revoke changed the database")
	}

	second := d.issue(t, `{"userId":3,"role":"superadmin","label":"second"}`)
	if code, body := revoke(d.admin, adminID); code != http.StatusOK {
		t.Fatalf("a superadmin revoking its own token while another is live: %d %s", code, body)
	}
	if code, _ := callAs(t, d.srv.URL, d.admin, http.MethodGet, "/api/admin/fx/tokens", ""); code != http.StatusUnauthorized {
		t.Fatalf("the self-revoked token still works here: %d", code)
	}
	// An expired superadmin token is no superadmin: second stays the last live one.
	lapsed, lapsedID, err := auth.Issue(ctx, d.db, auth.Grant{UserID: 4, Role: auth.RoleSuperadmin, Label: "lapsed", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.Exec("UPDATE `fx_api_token` SET `expiresAt` = DATE_SUB(NOW(3), INTERVAL 1 SECOND) WHERE `id` = ?", lapsedID); err != nil {
		t.Fatal(err)
	}
	if code, body := revoke(second.Token, second.ID); code != http.StatusConflict || !strings.Contains(body, "last live superadmin token") {
		t.Fatalf("the last live superadmin (another expired) revoking itself: %d %s", code, body)
	}
	if code, body := revoke(second.Token, lapsedID); code != http.StatusOK {
		t.Fatalf("revoking an expired superadmin token: %d %s (%s)", code, body, lapsed[:8])
	}

	// Each round: exactly two live superadmin tokens, each revoking the other at the same time.
	live := func() int {
		var n int
		if err := d.db.QueryRow("SELECT COUNT(*) FROM `fx_api_token` WHERE `role` = 'superadmin' AND `revokedAt` IS NULL AND (`expiresAt` IS NULL OR `expiresAt` > NOW(3))").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	survivor := second.ID
	for round := range 10 {
		var pair [2]string
		var ids [2]int64
		for i := range pair {
			if pair[i], ids[i], err = auth.Issue(ctx, d.db, auth.Grant{UserID: int64(10 + i), Role: auth.RoleSuperadmin, Label: fmt.Sprintf("round %d", round)}); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := auth.Revoke(ctx, d.db, survivor, ""); err != nil || !ok {
			t.Fatalf("the command line revoking the last round's survivor: %v %v", ok, err)
		}
		if n := live(); n != 2 {
			t.Fatalf("round %d starts with %d live superadmin tokens, want 2", round, n)
		}
		var wg sync.WaitGroup
		var codes [2]int
		var bodies [2]string
		for i := range pair {
			wg.Go(func() { codes[i], bodies[i] = revoke(pair[i], ids[1-i]) })
		}
		wg.Wait()
		ok := 0
		for i, c := range codes {
			switch c {
			case http.StatusOK:
				ok++
				survivor = ids[i]
			case http.StatusConflict, http.StatusUnauthorized: // refused, or its token already revoked by the other
			default:
				t.Fatalf("round %d: revoke by %d answered %d %s", round, ids[i], c, bodies[i])
			}
		}
		if n := live(); ok != 1 || n != 1 {
			t.Fatalf("round %d: %d revokes succeeded (%v %v), %d live superadmin tokens left; want 1 and 1", round, ok, codes, bodies, n)
		}
	}
	// The command line may revoke the last one: it needs the database's credentials, not a token.
	if ok, err := auth.Revoke(ctx, d.db, survivor, ""); err != nil || !ok {
		t.Fatalf("the command line revoking the last superadmin token: %v %v", ok, err)
	}
	if n := live(); n != 0 {
		t.Fatalf("%d live superadmin tokens after the command line revoked the last", n)
	}
}

// A token's requests are recorded, at the resolver's flush, as its last use and the client
// address it came from, and the list shows them.
func TestTokenLastUseIsListed(t *testing.T) {
	t.Parallel()
	d, _ := newAuditDesk(t)
	used := d.issue(t, `{"userId":501,"role":"trader","label":"used"}`)
	idle := d.issue(t, `{"userId":501,"role":"trader","label":"idle"}`)
	start := time.Now()
	for range 3 {
		if code, body := callAs(t, d.srv.URL, used.Token, http.MethodGet, "/api/fx/accounts", ""); code != http.StatusOK {
			t.Fatalf("use: %d %s", code, body)
		}
	}
	end := time.Now()
	if _, err := d.deps.Auth.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, body := callAs(t, d.srv.URL, d.admin, http.MethodGet, "/api/admin/fx/tokens?userId=501", "")
	if code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	got := map[int64]tokenView{}
	for _, v := range decodeAs[tokenPage](t, body).Tokens {
		got[v.ID] = v
	}
	u := got[used.ID]
	if u.LastUsedAt == nil || u.LastUsedAt.Before(start.Add(-time.Millisecond)) || u.LastUsedAt.After(end.Add(time.Millisecond)) || u.LastUsedFrom == nil || *u.LastUsedFrom != "127.0.0.1" {
		t.Fatalf("the used token lists last used %v from %v; want within [%s, %s] from 127.0.0.1", u.LastUsedAt, u.LastUsedFrom, start, end)
	}
	if i := got[idle.ID]; i.ID != idle.ID || i.LastUsedAt != nil || i.LastUsedFrom != nil {
		t.Fatalf("the idle token lists %+v; want never used", i)
	}
}
