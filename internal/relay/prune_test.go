package relay_test

import (
	"context"
	"testing"
	"time"

	"fxdesk/internal/relay"
)

// Prune deletes only events past the retention that every enabled consumer has relayed and no
// open dead letter names; it runs alone (it reads every cursor).
func TestPruneKeepsWhatAConsumerStillNeeds(t *testing.T) {
	// The other tests' endpoints and dead letters are out of the way: disabled, replayed.
	if _, err := testDB.Exec("UPDATE `fx_webhook` SET `enabled` = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_webhook_dead` SET `replayedAt` = NOW(3) WHERE `replayedAt` IS NULL"); err != nil {
		t.Fatal(err)
	}
	ids := addEvents(t, 4)
	// The first three were written two hours ago.
	if _, err := testDB.Exec("UPDATE `fx_event` SET `createdAt` = NOW(3) - INTERVAL 2 HOUR WHERE `id` IN (?, ?, ?)", ids[0], ids[1], ids[2]); err != nil {
		t.Fatal(err)
	}
	exists := func(id int64) bool {
		var n int
		if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `id` = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	ctx := context.Background()

	// The stream has relayed up to ids[1]: those two go; ids[2] is old but not relayed.
	setStreamCursor(t, ids[1])
	if _, err := relay.Prune(ctx, testDB, time.Hour); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, false, true, true} {
		if exists(ids[i]) != want {
			t.Errorf("after the first prune, event %d exists = %v, want %v", ids[i], !want, want)
		}
	}

	// Relayed past everything, but an open dead letter names ids[2]: it stays; ids[3] is new.
	setStreamCursor(t, ids[3])
	if _, err := testDB.Exec("INSERT INTO `fx_webhook_dead` (`webhookId`, `eventId`, `attempts`, `lastError`) VALUES (999, ?, 1, 'x')", ids[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Prune(ctx, testDB, time.Hour); err != nil {
		t.Fatal(err)
	}
	if !exists(ids[2]) || !exists(ids[3]) {
		t.Errorf("prune deleted an event a dead letter names (%v) or a new one (%v)", !exists(ids[2]), !exists(ids[3]))
	}
	// Replayed, it may go.
	if _, err := testDB.Exec("UPDATE `fx_webhook_dead` SET `replayedAt` = NOW(3) WHERE `webhookId` = 999"); err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Prune(ctx, testDB, time.Hour); err != nil || n != 1 || exists(ids[2]) {
		t.Errorf("prune after the replay deleted %d (%v), want event %d alone", n, err, ids[2])
	}
}
