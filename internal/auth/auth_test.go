package auth_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/dbtest"
)

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	db, closeDB, err := dbtest.NewMigrated("auth")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer closeDB()
	testDB = db
	return m.Run()
}

// A flood of one bad token costs one lookup, and a token of a shape the desk never issues costs
// none; a good token still resolves, and a just-issued one is never held back by the cache.
func TestBadTokensCostNoLookupAfterTheFirst(t *testing.T) {
	ctx := context.Background()
	res := auth.NewResolver(testDB)
	unknown := "fxd_" + "A123456789012345678901234567890123456789012" // well formed, never issued
	for i := range 1000 {
		if _, err := res.Resolve(ctx, "Bearer "+unknown); fx.ErrorCode(err) != fx.EUNAUTH {
			t.Fatalf("attempt %d: %v, want EUNAUTH", i, err)
		}
	}
	if n := res.Lookups(); n != 1 {
		t.Fatalf("1,000 attempts of one unknown token made %d lookups, want 1", n)
	}
	for _, h := range []string{"Bearer nope", "Bearer fxd_short", "Bearer fxd_" + "!!!3456789012345678901234567890123456789012", "Bearer x" + unknown} {
		if _, err := res.Resolve(ctx, h); fx.ErrorCode(err) != fx.EUNAUTH {
			t.Fatalf("%q: %v, want EUNAUTH", h, err)
		}
	}
	if n := res.Lookups(); n != 1 {
		t.Fatalf("malformed tokens made %d lookups in all, want still 1", n)
	}
	tok, err := auth.Create(audit.WithActor(ctx, audit.Actor{Via: "test"}), testDB, 7, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := res.Resolve(ctx, "Bearer "+tok); err != nil || p.UserID != 7 {
		t.Fatalf("a good token resolved to %+v, %v", p, err)
	}
}

// Issuing a token is one audit row in the token's own transaction (its id, user, role and label,
// never its text); with no actor it is refused and no token exists.
func TestCreateIsAudited(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "cli"})
	tok, err := auth.Create(ctx, testDB, 8801, true, "audited")
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_api_token` WHERE `tokenHash` = ?", auth.Hash(tok)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	es, err := audit.List(ctx, testDB, audit.Filter{EntityType: "token", EntityID: strconv.FormatInt(id, 10)})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Action != "token.create" || es[0].ActorVia != "cli" || es[0].Before != nil ||
		string(es[0].After) != `{"userId":8801,"role":"superadmin","label":"audited"}` {
		t.Fatalf("audit rows = %+v", es)
	}
	if _, err := auth.Create(context.Background(), testDB, 8802, false, "audited"); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("no actor: %v", err)
	}
	var n int
	testDB.QueryRow("SELECT COUNT(*) FROM `fx_api_token` WHERE `userId` = 8802").Scan(&n)
	if n != 0 {
		t.Fatalf("a refused issue left %d tokens", n)
	}
}

// Revoking a token is one audit row in its own transaction (the token's record before and after);
// a token already revoked is not revoked again and records nothing; with no actor it is refused
// and the token stays live.
func TestRevokeIsAudited(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "cli"})
	tok, err := auth.Create(ctx, testDB, 8803, false, "revoked")
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_api_token` WHERE `tokenHash` = ?", auth.Hash(tok)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Revoke(context.Background(), testDB, id, ""); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("no actor: %v", err)
	}
	for i, want := range []bool{true, false} {
		revoked, err := auth.Revoke(ctx, testDB, 0, tok)
		if err != nil || revoked != want {
			t.Fatalf("revoke %d: %v, %v; want %v", i+1, revoked, err, want)
		}
	}
	es, err := audit.List(ctx, testDB, audit.Filter{EntityType: "token", EntityID: strconv.FormatInt(id, 10)})
	if err != nil {
		t.Fatal(err)
	}
	var revokes []audit.Entry
	for _, e := range es {
		if e.Action == "token.revoke" {
			revokes = append(revokes, e)
		}
	}
	if len(revokes) != 1 || revokes[0].ActorVia != "cli" || string(revokes[0].Before) != `{"userId":8803,"role":"trader","scopes":"read trade","label":"revoked"}` ||
		string(revokes[0].After) != `{"userId":8803,"role":"trader","scopes":"read trade","label":"revoked","revoked":true}` {
		t.Fatalf("audit rows = %+v", es)
	}
}

// A token the process heard was revoked (Forget) is refused from the next request on: its cached
// answer is dropped, and a lookup that still reads it as live — one that raced the revocation's
// commit, as here where the row is never revoked at all — is refused too.
func TestAForgottenTokenIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	tok, id, err := auth.Issue(ctx, testDB, auth.Grant{UserID: 8810, Role: auth.RoleTrader, Scopes: auth.AllScopes, Label: "forget"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := auth.Issue(ctx, testDB, auth.Grant{UserID: 8811, Role: auth.RoleTrader, Scopes: auth.AllScopes, Label: "forget"})
	if err != nil {
		t.Fatal(err)
	}
	res := auth.NewResolver(testDB)
	for _, tk := range []string{tok, other} {
		if _, err := res.Resolve(ctx, "Bearer "+tk); err != nil {
			t.Fatal(err)
		}
	}
	res.Forget(id)
	if _, err := res.Resolve(ctx, "Bearer "+tok); fx.ErrorCode(err) != fx.EUNAUTH {
		t.Fatalf("a forgotten token, still live in its row: %v, want EUNAUTH", err)
	}
	if p, err := res.Resolve(ctx, "Bearer "+other); err != nil || p.UserID != 8811 {
		t.Fatalf("another token after the forget: %+v %v", p, err)
	}
}
