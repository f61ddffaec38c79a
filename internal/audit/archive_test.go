package audit

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// The archival moves, in batches of at most the batch's ids, exactly the rows past the
// retention from the log to fx_audit_archive, column for column; the rows stay readable there,
// and the log keeps the recent ones. A second pass finds nothing, and a row already in the
// archive fails its batch rather than leave the log unarchived.
func TestArchiveMovesRowsPastTheRetention(t *testing.T) {
	t.Parallel()
	db, _ := loggedSettings(t, "audit_archive", 25)
	// The first 18 rows are 40 days old.
	if _, err := db.Exec("UPDATE `fx_audit` SET `at` = NOW(3) - INTERVAL 40 DAY ORDER BY `id` LIMIT 18"); err != nil {
		t.Fatal(err)
	}
	count := func(table string) (n int) {
		if err := db.QueryRow("SELECT COUNT(*) FROM `" + table + "`").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	task, err := NewArchiveTask(db, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	backlog, err := task.Plan(context.Background())
	if err != nil || backlog != 18 {
		t.Fatalf("backlog %d (%v), want 18", backlog, err)
	}
	var batches []int64
	for left := backlog; left > 0; {
		var n int64
		if n, left, err = task.Step(context.Background(), 5); err != nil || n > 5 {
			t.Fatalf("a batch of 5 moved %d (%v)", n, err)
		}
		batches = append(batches, n)
	}
	if len(batches) != 4 || batches[3] != 3 || count("fx_audit") != 7 || count("fx_audit_archive") != 18 {
		t.Fatalf("batches %v, log %d, archive %d; want 5+5+5+3, 7 and 18", batches, count("fx_audit"), count("fx_audit_archive"))
	}
	var same int
	if err := db.QueryRow("SELECT COUNT(*) FROM `fx_audit_archive` WHERE `actorTokenId` = 3 AND `actorUserId` = 4 AND `actorVia` = 'api' " +
		"AND `action` = 'setting.update' AND `entityId` = 's' AND `before` IS NOT NULL AND `requestId` = 'r1' AND `at` < NOW(3) - INTERVAL 39 DAY").Scan(&same); err != nil || same != 18 {
		t.Fatalf("%d archived rows carry their columns (%v), want 18", same, err)
	}
	if backlog, err := task.Plan(context.Background()); backlog != 0 || err != nil {
		t.Fatalf("a second pass found %d (%v)", backlog, err)
	}

	// A row already archived (an operator put it back by hand, say): the batch fails whole.
	if _, err := db.Exec("UPDATE `fx_audit` SET `at` = NOW(3) - INTERVAL 40 DAY ORDER BY `id` LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	var first int64
	if err := db.QueryRow("SELECT MIN(`id`) FROM `fx_audit`").Scan(&first); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO `fx_audit_archive` (`id`, `at`, `actorVia`, `action`, `entityType`, `entityId`) VALUES (?, NOW(3), 'cli', 'x', 'x', 'x')", first); err != nil {
		t.Fatal(err)
	}
	if backlog, err := task.Plan(context.Background()); backlog != 1 || err != nil {
		t.Fatalf("backlog %d (%v), want 1", backlog, err)
	}
	if _, _, err := task.Step(context.Background(), 5); err == nil || count("fx_audit") != 7 {
		t.Fatalf("a batch over an archived id: err %v, log %d rows; want an error and 7", err, count("fx_audit"))
	}
}

// loggedSettings is a fresh database whose audit log holds n setting changes, one transaction
// each, and the ids they got, oldest first.
func loggedSettings(t *testing.T, prefix string, n int) (*sql.DB, []int64) {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	ctx := WithActor(context.Background(), Actor{TokenID: 3, UserID: 4, Via: "api", RequestID: "r1"})
	var ids []int64
	for i := range n {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := Record(ctx, tx, Change{Action: "setting.update", EntityType: "setting", EntityID: "s", Before: i, After: i + 1}); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := tx.QueryRow("SELECT MAX(`id`) FROM `fx_audit`").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return db, ids
}
