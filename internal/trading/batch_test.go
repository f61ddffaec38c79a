package trading

import (
	"context"
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/book"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// oneConn is a pool of one connection on the test database, so what one transaction leaves
// on its connection is what the next user of the pool finds.
func oneConn(t *testing.T) *sql.DB {
	t.Helper()
	var name string
	if err := testDB.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg, err := store.DSN(dbtest.ServerDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS `batch_probe` (`id` INT PRIMARY KEY, `v` INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return db
}

func inTransaction(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var in int
	if err := db.QueryRow("SELECT @@in_transaction").Scan(&in); err != nil {
		t.Fatal(err)
	}
	return in == 1
}

// Result sets reach their scans in order, past the statements that return none.
func TestBatchReadsResultSetsInOrder(t *testing.T) {
	ctx := context.Background()
	db := oneConn(t)
	var b book.Batch
	// The row this test writes; removed first so that the test runs again (-count=N).
	if _, err := db.Exec("DELETE FROM `batch_probe` WHERE `id` = 101"); err != nil {
		t.Fatal(err)
	}
	tx, err := book.BeginTxn(ctx, db, &b)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var first, second, third int64
	var found bool
	b.Query(book.ScanFirst(&found, func(r *sql.Rows) error { return r.Scan(&first) }), "SELECT ?", 1)
	b.Exec("INSERT INTO `batch_probe` (`id`, `v`) VALUES (?, ?)", 101, 7)
	b.Exec("SET @probe = ?", 5)
	b.Query(func(r *sql.Rows) error { // an empty result set still has its turn
		for r.Next() {
			second = -1
		}
		return nil
	}, "SELECT `v` FROM `batch_probe` WHERE `id` = ?", -1)
	b.Query(book.ScanFirst(new(bool), func(r *sql.Rows) error { return r.Scan(&third) }), "SELECT `v` + @probe FROM `batch_probe` WHERE `id` = ?", 101)
	if err := tx.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if !found || first != 1 || second != 0 || third != 12 {
		t.Fatalf("scans read %v %d %d %d, want true 1 0 12", found, first, second, third)
	}
	if inTransaction(t, db) {
		t.Fatal("the connection is still in a transaction after commit")
	}
}

// A statement that fails after the batch's last SELECT is still reported, COMMIT does not run,
// and the connection goes back to the pool with nothing open and nothing written.
func TestBatchFailureRollsBackAndFreesTheConnection(t *testing.T) {
	ctx := context.Background()
	db := oneConn(t)
	if _, err := db.Exec("INSERT IGNORE INTO `batch_probe` (`id`, `v`) VALUES (200, 1)"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		add  func(b *book.Batch)
	}{
		{"after the last select", func(b *book.Batch) {
			b.Query(book.ScanFirst(new(bool), func(*sql.Rows) error { return nil }), "SELECT 1")
			b.Exec("INSERT INTO `batch_probe` (`id`, `v`) VALUES (?, ?)", 200, 2) // duplicate key
		}},
		{"between selects", func(b *book.Batch) {
			b.Query(book.ScanFirst(new(bool), func(*sql.Rows) error { return nil }), "SELECT 1")
			b.Exec("INSERT INTO `batch_probe` (`id`, `v`) VALUES (?, ?)", 200, 2)
			b.Query(book.ScanFirst(new(bool), func(*sql.Rows) error { return nil }), "SELECT 2")
		}},
		{"without selects", func(b *book.Batch) {
			b.Exec("INSERT INTO `batch_probe` (`id`, `v`) VALUES (?, ?)", 200, 2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first book.Batch
			tx, err := book.BeginTxn(ctx, db, &first)
			if err != nil {
				t.Fatal(err)
			}
			first.Exec("UPDATE `batch_probe` SET `v` = `v` + 1 WHERE `id` = ?", 200)
			if err := first.Run(ctx, tx); err != nil {
				t.Fatal(err)
			}
			var b book.Batch
			b.Exec("INSERT INTO `batch_probe` (`id`, `v`) VALUES (?, ?)", 201, 1)
			tc.add(&b)
			err = tx.Commit(ctx, &b)
			if !store.IsDuplicateKey(err) {
				t.Fatalf("commit = %v, want the duplicate key error", err)
			}
			tx.Rollback()
			if inTransaction(t, db) {
				t.Fatal("the pooled connection is still in the failed transaction")
			}
			var v, n int
			if err := db.QueryRow("SELECT `v`, (SELECT COUNT(*) FROM `batch_probe` WHERE `id` = 201) FROM `batch_probe` WHERE `id` = 200").Scan(&v, &n); err != nil {
				t.Fatal(err)
			}
			if v != 1 || n != 0 {
				t.Fatalf("after the failed batch: v = %d, row 201 ×%d; want 1 and 0 (all rolled back)", v, n)
			}
		})
	}
}
