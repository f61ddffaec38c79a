package auth_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"

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
	tok, err := auth.Create(ctx, testDB, 7, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := res.Resolve(ctx, "Bearer "+tok); err != nil || p.UserID != 7 {
		t.Fatalf("a good token resolved to %+v, %v", p, err)
	}
}
