package dbtest_test

import (
	"context"
	"testing"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// A session on a test database runs in MySQL 8's default sql_mode, through the desk's own
// Connect, so a grouped query MySQL 8 would refuse is refused here too.
func TestSessionsRunInMySQL8DefaultSQLMode(t *testing.T) {
	t.Parallel()
	d, err := dbtest.NewDatabase("sqlmode")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	db, err := store.Connect(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var mode string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != dbtest.SQLMode {
		t.Fatalf("session sql_mode %q, want %q", mode, dbtest.SQLMode)
	}
	var a, n int
	err = db.QueryRowContext(ctx, "SELECT a, COUNT(*) FROM (SELECT 1 AS a, 2 AS b) t GROUP BY b").Scan(&a, &n)
	if err == nil {
		t.Fatal("a column neither grouped nor aggregated was accepted; ONLY_FULL_GROUP_BY is off")
	}
}
