package relay_test

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/events"
	"fxdesk/internal/relay"
	"fxdesk/internal/testkit/dbtest"
)

// pruneDB is a database of the test's own, so the ages it sets and the rows it deletes are the
// only ones there; it returns the database and the ids of n committed events.
func pruneDB(t *testing.T, n int) (*sql.DB, []int64) {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated("relay_prune")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	ctx := context.Background()
	ids := make([]int64, n)
	for i := range n {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := events.Record(ctx, tx, events.Event{AccountID: 100, UserID: 9, Type: events.Deposit,
			Payload: events.Balance{AccountID: 100, Type: "DEPOSIT", Amount: "1", Currency: "USD", IdempotencyKey: "p" + strconv.Itoa(i)}}); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT MAX(`id`) FROM `fx_event`").Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	return db, ids
}

// kept lists which of ids are still in the outbox.
func kept(t *testing.T, db *sql.DB, ids []int64) []bool {
	t.Helper()
	out := make([]bool, len(ids))
	for i, id := range ids {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `id` = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[i] = n == 1
	}
	return out
}

// pass runs one pass of task in batches of batch and returns the planned backlog and each
// batch's rows and rows left.
func pass(t *testing.T, task *relay.PruneTask, batch int) (backlog int64, steps [][2]int64) {
	t.Helper()
	ctx := context.Background()
	backlog, err := task.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for left := backlog; left > 0; {
		n, l, err := task.Step(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if n > int64(batch) || l >= left {
			t.Fatalf("a batch of %d deleted %d and left %d of %d", batch, n, l, left)
		}
		steps = append(steps, [2]int64{n, l})
		left = l
	}
	return backlog, steps
}

// The prune deletes only events past the retention that every enabled consumer has relayed and
// no open dead letter names, in batches of at most the batch's ids, with an exact backlog.
func TestPruneKeepsWhatAConsumerStillNeeds(t *testing.T) {
	t.Parallel()
	db, ids := pruneDB(t, 10)
	// The first seven were written two hours ago; the last three are new.
	if _, err := db.Exec("UPDATE `fx_event` SET `createdAt` = NOW(3) - INTERVAL 2 HOUR WHERE `id` <= ?", ids[6]); err != nil {
		t.Fatal(err)
	}
	cursor := func(pos int64) {
		if _, err := db.Exec("UPDATE `fx_event_relay` SET `position` = ? WHERE `name` = 'stream'", pos); err != nil {
			t.Fatal(err)
		}
	}
	task, err := relay.NewPruneTask(db, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	// The stream has relayed up to ids[4]: those five go, two at a time; ids[5] and ids[6] are
	// old but not relayed.
	cursor(ids[4])
	backlog, steps := pass(t, task, 2)
	if backlog != 5 || len(steps) != 3 || steps[0] != [2]int64{2, 3} || steps[2] != [2]int64{1, 0} {
		t.Fatalf("backlog %d, batches %v; want 5 in batches (2,3) (2,1) (1,0)", backlog, steps)
	}
	want := []bool{false, false, false, false, false, true, true, true, true, true}
	if got := kept(t, db, ids); !slices.Equal(got, want) {
		t.Fatalf("after the first pass kept %v, want %v", got, want)
	}

	// An enabled webhook behind at ids[4] holds the rest back; a disabled one does not.
	cursor(ids[9])
	if _, err := db.Exec("INSERT INTO `fx_webhook` (`id`, `url`, `secret`, `enabled`) VALUES (1, 'http://a', 's', 1), (2, 'http://b', 's', 0)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO `fx_event_relay` (`name`, `position`) VALUES ('webhook:1', ?), ('webhook:2', 0)", ids[4]); err != nil {
		t.Fatal(err)
	}
	if backlog, _ := pass(t, task, 2); backlog != 0 {
		t.Fatalf("an enabled webhook at the pruned edge left a backlog of %d, want 0", backlog)
	}
	if _, err := db.Exec("UPDATE `fx_event_relay` SET `position` = ? WHERE `name` = 'webhook:1'", ids[9]); err != nil {
		t.Fatal(err)
	}

	// Relayed past everything, but an open dead letter names ids[6]: it stays, ids[5] goes; the
	// new ones stay whatever the cursors say.
	if _, err := db.Exec("INSERT INTO `fx_webhook_dead` (`webhookId`, `eventId`, `attempts`, `lastError`) VALUES (1, ?, 1, 'x')", ids[6]); err != nil {
		t.Fatal(err)
	}
	if backlog, _ := pass(t, task, 100); backlog != 1 || !kept(t, db, ids)[6] || kept(t, db, ids)[5] {
		t.Fatalf("with a dead letter on event %d: backlog %d, kept %v", ids[6], backlog, kept(t, db, ids))
	}
	// Replayed, it may go; the new ones stay.
	if _, err := db.Exec("UPDATE `fx_webhook_dead` SET `replayedAt` = NOW(3)"); err != nil {
		t.Fatal(err)
	}
	if backlog, _ := pass(t, task, 100); backlog != 1 {
		t.Fatalf("after the replay: backlog %d, want 1", backlog)
	}
	want = []bool{false, false, false, false, false, false, false, true, true, true}
	if got := kept(t, db, ids); !slices.Equal(got, want) {
		t.Fatalf("at the end kept %v, want %v", got, want)
	}
}

// The pass's end is found by bisecting the primary key, across gaps in the ids (events pruned
// or written before ids were dense), and an event younger than the retention is never deleted
// even inside the range.
func TestPruneFindsTheRetentionEdgeAcrossGaps(t *testing.T) {
	t.Parallel()
	db, ids := pruneDB(t, 40)
	if _, err := db.Exec("UPDATE `fx_event` SET `createdAt` = NOW(3) - INTERVAL 2 HOUR WHERE `id` <= ?", ids[24]); err != nil {
		t.Fatal(err)
	}
	// A gap: ids[9]..ids[19] are gone; and ids[3], inside the old range, is young.
	if _, err := db.Exec("DELETE FROM `fx_event` WHERE `id` >= ? AND `id` <= ?", ids[9], ids[19]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE `fx_event` SET `createdAt` = NOW(3) WHERE `id` = ?", ids[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE `fx_event_relay` SET `position` = ? WHERE `name` = 'stream'", ids[39]); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		upTo    int64 // a webhook's position: the prune's upper bound
		through int64
	}{{ids[39], ids[24]}, {ids[24], ids[24]}, {ids[15], ids[8]}, {ids[0], ids[0]}} {
		from, through, err := events.OldThrough(context.Background(), db, c.upTo, time.Hour)
		if err != nil || from != ids[0]-1 || through != c.through {
			t.Errorf("up to %d: range (%d, %d] (%v), want (%d, %d]", c.upTo, from, through, err, ids[0]-1, c.through)
		}
	}
	task, err := relay.NewPruneTask(db, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	backlog, steps := pass(t, task, 7)
	var deleted int64
	for _, s := range steps {
		deleted += s[0]
	}
	// 25 ids wide, 11 of them gone, one young: 13 deleted.
	if backlog != 25 || deleted != 13 {
		t.Fatalf("backlog %d, deleted %d in %v; want 25 and 13", backlog, deleted, steps)
	}
	var left int
	if err := db.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `id` <= ?", ids[24]).Scan(&left); err != nil || left != 1 || !kept(t, db, ids)[3] {
		t.Fatalf("%d events left up to the edge (%v), want the young one alone", left, err)
	}
}
