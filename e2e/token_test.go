package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
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
	if f := strings.Fields(lines[1]); f[1] != "7" || f[2] != "trader" || f[3] != "read,trade" || f[6] != "-" {
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
		if f := strings.Fields(l); f[2] != "trader" || f[6] == "-" {
			t.Fatalf("token list after revokes: a row not revoked:\n%s", out)
		}
	}
}
