package store_test

import (
	"context"
	"database/sql"
	"testing"

	"fxdesk/internal/fx"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// A connection lost under a COMMIT answers EUNKNOWN (the change may have been made), never the
// outage that says nothing was written; a COMMIT the server answers is passed on as it was.
func TestCommitWithItsConnectionLostIsOfUnknownOutcome(t *testing.T) {
	t.Parallel()
	d, err := dbtest.NewDatabase("store_commit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	db, err := sql.Open("mysql", d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE `t` (`id` INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var conn int64
	if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&conn); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO `t` (`id`) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// The server drops the transaction's connection, as a cut or a failover would.
	if _, err := db.ExecContext(ctx, "KILL ?", conn); err != nil {
		t.Fatal(err)
	}
	err = store.Commit(tx)
	if fx.ErrorCode(err) != fx.EUNKNOWN || !store.ConnectionLost(err) {
		t.Fatalf("a COMMIT whose connection was lost: %v (code %s), want EUNKNOWN keeping the driver's error", err, fx.ErrorCode(err))
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO `t` (`id`) VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if err := store.Commit(tx); err != nil {
		t.Fatalf("a COMMIT the server answered: %v", err)
	}
}
