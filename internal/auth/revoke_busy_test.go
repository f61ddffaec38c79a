package auth

import (
	"context"
	"testing"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/testkit/dbtest"
)

// A revoked token is refused within CacheFor while the database answers, even when every lookup
// slot is taken (a flood of unknown tokens, which anyone can send): only a database that cannot
// answer lets the resolver honour what it resolved earlier (docs/identity.md, «Expiry,
// revocation and last use»).
func TestRevokedTokenIsNotHonouredWhileTheSlotsAreBusy(t *testing.T) {
	db, closeDB, err := dbtest.NewMigrated("auth_busy")
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	tok, id, err := Issue(ctx, db, Grant{UserID: 9, Role: RoleTrader, Scopes: AllScopes})
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(db)
	now := time.Now()
	r.now = func() time.Time { return now }
	if _, err := r.Resolve(ctx, "Bearer "+tok); err != nil {
		t.Fatal(err)
	}
	if _, err := Revoke(ctx, db, id, ""); err != nil {
		t.Fatal(err)
	}
	now = now.Add(CacheFor + time.Second) // every process's cached answer has let go
	for range LookupSlots {               // the flood holds every slot
		r.slots <- struct{}{}
	}
	if p, err := r.Resolve(ctx, "Bearer "+tok); err == nil {
		t.Fatalf("token %d, revoked %s ago, resolved to %+v while the database answers", id, CacheFor+time.Second, p)
	}
}
