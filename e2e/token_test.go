package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/auth"
)

// Operators list tokens without their text and revoke them from the command line: a revoked
// token the web process has not cached is refused at once, one it has cached within its 5 s
// cache; a revoke that names nothing, or names it twice, fails and changes nothing.
func TestTokenListAndRevoke(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	e := d.e
	used := e.issueToken(7, false)
	unused := e.issueToken(7, false)
	if code := d.web.getAs(used, "/api/fx/accounts", nil); code != http.StatusOK {
		t.Fatalf("live token: %d", code)
	}
	token := func(args ...string) (string, error) {
		return runOnce(e.env("LOG_LEVEL=warn"), "fxdesk-web", append([]string{"token"}, args...)...)
	}
	// list: newest first, user 7's two tokens, no token text.
	out, err := token("list", "--user", "7")
	if err != nil {
		t.Fatalf("token list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || strings.Contains(out, "fxd_") {
		t.Fatalf("token list --user 7:\n%s", out)
	}
	usedID := strings.Fields(lines[2])[0]
	// Each issue is one audit row, the command line's, naming the token by id and never its text.
	var via, after string
	if err := e.sql.QueryRow("SELECT `actorVia`, `after` FROM `fx_audit` WHERE `action` = 'token.create' AND `entityType` = 'token' AND `entityId` = ?", usedID).Scan(&via, &after); err != nil {
		t.Fatalf("the audit row of token %s: %v", usedID, err)
	}
	if via != "cli" || !strings.Contains(after, `"userId":7`) || strings.Contains(after, "fxd_") || strings.Contains(after, used[4:]) {
		t.Fatalf("token %s audited by %q as %s", usedID, via, after)
	}
	if f := listColumns(lines[1]); len(f) < 7 || f[1] != "7" || f[2] != "trader" || f[3] != "read,trade" || f[6] != "-" {
		t.Fatalf("token list row %q", lines[1])
	}

	count := func() int {
		var n int
		if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_api_token` WHERE `revokedAt` IS NOT NULL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	for _, bad := range [][]string{
		{"revoke"},
		{"revoke", "--id", usedID, "--token", unused},
		{"revoke", "--id", "-3"},
		{"revoke", "--id", "999999"},
		{"revoke", "--token", "fxd_not-a-token"},
		{"revoke", "--id", usedID, "extra"},
		{"rotate"},
	} {
		if out, err := token(bad...); err == nil {
			t.Errorf("token %v succeeded:\n%s", bad, out)
		}
	}
	if n := count(); n != before {
		t.Fatalf("refused revokes revoked %d tokens", n-before)
	}
	// A bad command line is refused before the database is touched.
	env := append(e.env("LOG_LEVEL=warn"), "FXDESK_MYSQL_DSN=root@tcp(127.0.0.1:1)/fxdesk")
	if out, err := runOnce(env, "fxdesk-web", "token", "revoke"); err == nil || !strings.Contains(out, "exactly one of --id") {
		t.Fatalf("token revoke without arguments, database unreachable: %v\n%s", err, out)
	}

	if out, err := token("revoke", "--token", unused); err != nil {
		t.Fatalf("revoke --token: %v\n%s", err, out)
	}
	if code := d.web.getAs(unused, "/api/fx/accounts", nil); code != http.StatusUnauthorized {
		t.Fatalf("revoked, never cached token: %d, want 401", code)
	}
	if out, err := token("revoke", "--token", unused); err == nil || !strings.Contains(out, "already revoked") {
		t.Fatalf("second revoke of the same token: %v\n%s", err, out)
	}
	if out, err := token("revoke", "--id", usedID); err != nil {
		t.Fatalf("revoke --id: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, 100*time.Millisecond, "the cached revoked token refused", func() bool {
		return d.web.getAs(used, "/api/fx/accounts", nil) == http.StatusUnauthorized
	})
	out, err = token("list", "--user", "7")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 {
		t.Fatalf("token list after revokes (%v):\n%s", err, out)
	}
	for _, l := range lines[1:] {
		if f := listColumns(l); len(f) < 7 || f[2] != "trader" || f[6] == "-" {
			t.Fatalf("token list after revokes: row %q is not a revoked trader's token", l)
		}
	}
}

// listColumns splits a row of `token list` into its columns: the table pads each with at least
// two spaces; a column may hold one space (LAST USED in the header).
func listColumns(row string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(row), -1)
}

// apiToken is what the admin API answers about a token: its text when it was just issued, and
// the record.
type apiToken struct {
	Token                          string     `json:"token"`
	ID                             int64      `json:"id"`
	ExpiresAt                      *time.Time `json:"expiresAt"`
	RevokedAt                      *time.Time `json:"revokedAt"`
	Live                           bool       `json:"live"`
	RefusedEverywhereWithinSeconds int        `json:"refusedEverywhereWithinSeconds"`
}

// A token revoked over the admin API on the lease holder is refused there at once and on the
// follower within the bound the answer states (each web process remembers a resolved token for
// auth.CacheFor), though the follower accepted it just before the revoke. A token issued over
// the follower's API that expires is refused by both from its expiry on, though both had just
// accepted it. Each issue and revoke is an audit row naming the superadmin's token.
func TestTokenRevokedOverTheAPIIsRefusedOnEveryProcess(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	holder, follower, admin := w.d.web, w.follower, w.d.admin
	issue := func(via *proc, body string) apiToken {
		t.Helper()
		code, b := call(t, via, admin, http.MethodPost, "/api/admin/fx/tokens", body)
		if code != http.StatusCreated {
			t.Fatalf("issue via %s: %d %s", via.name, code, b)
		}
		var tok apiToken
		if err := json.Unmarshal(b, &tok); err != nil || !strings.HasPrefix(tok.Token, "fxd_") {
			t.Fatalf("issue via %s answered %s (%v)", via.name, b, err)
		}
		return tok
	}
	accounts := func(p *proc, token string) int { return p.getAs(token, "/api/fx/accounts", nil) }

	tok := issue(holder, `{"userId":7,"role":"trader","label":"e2e revoke","expiresIn":"1h"}`)
	for _, p := range []*proc{holder, follower} {
		if code := accounts(p, tok.Token); code != http.StatusOK {
			t.Fatalf("the new token on the %s: %d", p.name, code)
		}
	}
	// The follower accepts it the moment before the revoke: from here it may remember it for
	// at most auth.CacheFor.
	lastAccepted := time.Now()
	if code := accounts(follower, tok.Token); code != http.StatusOK {
		t.Fatalf("the token on the follower just before the revoke: %d", code)
	}
	code, b := call(t, holder, admin, http.MethodDelete, "/api/admin/fx/tokens/"+strconv.FormatInt(tok.ID, 10), "")
	var revoked apiToken
	if code != http.StatusOK || json.Unmarshal(b, &revoked) != nil || revoked.RevokedAt == nil || revoked.Live ||
		revoked.RefusedEverywhereWithinSeconds != int(auth.CacheFor/time.Second) {
		t.Fatalf("revoke via the holder: %d %s", code, b)
	}
	if code := accounts(holder, tok.Token); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token on the holder that revoked it: %d, want 401 at once", code)
	}
	// The holder announced the revocation on Redis: the follower forgets the token as it hears
	// it, and refuses it from then on, its cache notwithstanding.
	follower.waitLog(3*auth.CacheFor, func(l logLine) bool { return l.msg() == "revoked token forgotten" && l["token_id"] == float64(tok.ID) })
	if code := accounts(follower, tok.Token); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token on the follower once it heard the revocation: %d, want 401", code)
	}
	// The deadline is well past the bound, so a slow run fails on the bound's check below,
	// which says by how much, rather than here.
	eventually(t, 3*auth.CacheFor, 50*time.Millisecond, "the revoked token refused on the follower", func() bool {
		return accounts(follower, tok.Token) == http.StatusUnauthorized
	})
	// The follower's cached answer was at most auth.CacheFor old when it let go; the slack is
	// the requests' own time on a busy machine.
	if took := time.Since(lastAccepted); took > auth.CacheFor+2*time.Second {
		t.Fatalf("the follower refused the revoked token %s after it last accepted it; the bound is %s", took, auth.CacheFor)
	}

	brief := issue(follower, `{"userId":7,"role":"trader","label":"e2e expiry","expiresIn":"3s"}`)
	for _, p := range []*proc{holder, follower} {
		if code := accounts(p, brief.Token); code != http.StatusOK {
			t.Fatalf("the brief token on the %s before its expiry: %d", p.name, code)
		}
	}
	if !time.Now().Before(*brief.ExpiresAt) {
		t.Fatalf("the brief token expired (%s) before both processes had used it: too slow a run to tell", brief.ExpiresAt)
	}
	// Time passing is the condition: nothing announces it.
	eventually(t, 10*time.Second, 10*time.Millisecond, "the brief token's expiry passes", func() bool { return time.Now().After(*brief.ExpiresAt) })
	for _, p := range []*proc{holder, follower} {
		if code := accounts(p, brief.Token); code != http.StatusUnauthorized {
			t.Fatalf("the expired token on the %s: %d, want 401 at its first request past the expiry", p.name, code)
		}
	}

	var adminID int64
	if err := w.d.e.sql.QueryRow("SELECT `id` FROM `fx_api_token` WHERE `tokenHash` = ?", auth.Hash(admin)).Scan(&adminID); err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct {
		action string
		id     int64
	}{{"token.create", tok.ID}, {"token.revoke", tok.ID}, {"token.create", brief.ID}} {
		var n int
		if err := w.d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `action` = ? AND `entityType` = 'token' AND `entityId` = ? AND `actorVia` = 'api' AND `actorTokenId` = ?",
			row.action, strconv.FormatInt(row.id, 10), adminID).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s of token %d by the superadmin's token: %d audit rows (%v), want 1", row.action, row.id, n, err)
		}
	}
}
