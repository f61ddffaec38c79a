package events

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"fxdesk/internal/book"
	"fxdesk/internal/testkit/dbtest"
)

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "events", &testDB)) }

// Ids follow commit order and have no gaps: a writer that takes the next id holds the sequence
// until it commits, so a second writer waits, gets the id after it and cannot commit first; a
// writer that rolls back gives its id to the next one. A reader never sees a later id without
// every earlier one.
func TestIdsFollowCommitOrder(t *testing.T) {
	ctx := context.Background()
	base := lastID(t)
	e := func(account int64) Event {
		return Event{AccountID: account, UserID: 7, Type: Deposit, Payload: Balance{AccountID: account}}
	}

	first, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback()
	if err := Record(ctx, first, e(1)); err != nil {
		t.Fatal(err)
	}

	// The second writer, on its own connection, queues on the sequence behind the first.
	started, done := make(chan int64, 1), make(chan error, 1)
	go func() {
		tx, err := testDB.BeginTx(ctx, nil)
		if err != nil {
			started <- 0
			done <- err
			return
		}
		defer tx.Rollback()
		var conn int64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&conn); err != nil {
			started <- 0
			done <- err
			return
		}
		started <- conn
		if err := Record(ctx, tx, e(2)); err != nil {
			done <- err
			return
		}
		done <- tx.Commit()
	}()
	conn := <-started
	if conn == 0 {
		t.Fatal(<-done)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		// Polling the server's view of the wait, not waiting for it: InnoDB refreshes the rows of
		// innodb_trx only once they have gone unread for 0.1 s, so a faster poll reads one stale
		// picture for ever.
		time.Sleep(150 * time.Millisecond)
		var waits int
		if err := testDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", conn).Scan(&waits); err != nil {
			t.Fatal(err)
		}
		if waits == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the second writer finished (%v) while the first held its id uncommitted", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the second writer never queued on the sequence")
		}
	}
	if got := list(t, base); len(got) != 0 {
		t.Fatalf("a reader saw %+v before either writer committed", got)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A writer that rolls back gives its id back.
	undone, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, undone, e(3)); err != nil {
		t.Fatal(err)
	}
	if err := undone.Rollback(); err != nil {
		t.Fatal(err)
	}
	last, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Rollback()
	if err := Record(ctx, last, e(4)); err != nil {
		t.Fatal(err)
	}
	if err := last.Commit(); err != nil {
		t.Fatal(err)
	}

	got := list(t, base)
	if len(got) != 3 {
		t.Fatalf("read %+v, want the three committed events", got)
	}
	for i, account := range []int64{1, 2, 4} {
		if got[i].ID != base+int64(i)+1 || got[i].AccountID != account {
			t.Fatalf("event %d: id %d of account %d, want id %d of account %d (all: %+v)", i, got[i].ID, got[i].AccountID, base+int64(i)+1, account, got)
		}
	}
}

// A batch's events are written together, last, with one id each in the order they were added,
// whatever was appended to the batch after them; a batch appended to another brings its own.
func TestBatchEventsTakeConsecutiveIds(t *testing.T) {
	ctx := context.Background()
	base := lastID(t)
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	b, other := &book.Batch{}, &book.Batch{}
	for _, account := range []int64{11, 12} {
		if err := Add(b, Event{AccountID: account, UserID: 7, Type: Deposit, Payload: Balance{AccountID: account}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := Add(other, Event{AccountID: 13, UserID: 7, Type: Deposit, Payload: Balance{AccountID: 13}}); err != nil {
		t.Fatal(err)
	}
	b.Append(other)
	b.Exec("SELECT 1")
	if err := b.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := list(t, base)
	if len(got) != 3 {
		t.Fatalf("read %+v, want three events", got)
	}
	for i, account := range []int64{11, 12, 13} {
		if got[i].ID != base+int64(i)+1 || got[i].AccountID != account {
			t.Fatalf("event %d: id %d of account %d, want id %d of account %d", i, got[i].ID, got[i].AccountID, base+int64(i)+1, account)
		}
	}
	if last := lastID(t); last != base+3 {
		t.Fatalf("the sequence stands at %d, want %d", last, base+3)
	}
}

func lastID(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := testDB.QueryRow("SELECT `last` FROM `fx_event_seq` WHERE `one` = 1").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func list(t *testing.T, after int64) []Entry {
	t.Helper()
	es, err := List(context.Background(), testDB, Filter{After: after, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return es
}
