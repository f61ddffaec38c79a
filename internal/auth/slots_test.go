package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/testkit/dbtest"
)

// With every lookup slot taken (a flood of distinct unknown tokens), a token the resolver saw
// lately is still looked up, in slots of its own, and any other is refused with ErrBusy once
// LookupWait has passed.
func TestLookupsPastTheSlotsAreRefusedAtOnce(t *testing.T) {
	db, closeDB, err := dbtest.NewMigrated("auth_slots")
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	known, _, err := Issue(ctx, db, Grant{UserID: 3, Role: RoleTrader, Scopes: AllScopes})
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(db)
	now := time.Now()
	r.now = func() time.Time { return now }
	if _, err := r.Resolve(ctx, "Bearer "+known); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute) // its cached answer has let go
	for range LookupSlots {
		r.slots <- struct{}{}
	}
	if p, err := r.Resolve(ctx, "Bearer "+known); err != nil || p.UserID != 3 {
		t.Fatalf("a token seen lately: %+v, %v; want looked up and honoured", p, err)
	}
	lookups := r.Lookups()
	unknown := "fxd_" + "U123456789012345678901234567890123456789012"
	if _, err := r.Resolve(ctx, "Bearer "+unknown); !errors.Is(err, ErrBusy) {
		t.Fatalf("an unseen token with every slot taken: %v, want ErrBusy", err)
	}
	if n := r.Lookups(); n != lookups {
		t.Fatalf("%d lookups made with every slot taken", n-lookups)
	}
}
