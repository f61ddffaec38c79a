package events

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"fxdesk/internal/store"
)

// Execer runs a statement: *sql.DB, *sql.Tx, *sql.Conn.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// pruneSQL is the one statement that deletes events: a range of the primary key, so each
// batch touches only its own rows and the server never walks the rows an earlier batch left
// delete-marked for purge. The age is checked again row by row: nothing younger than the
// retention goes, whatever the range says.
const pruneSQL = "DELETE FROM `fx_event` WHERE `id` > ? AND `id` <= ? AND `createdAt` < NOW(3) - INTERVAL ? MICROSECOND"

// firstAfterSQL finds, on the primary key, the first event at or after an id and whether it is
// older than an age (on the database clock).
const firstAfterSQL = "SELECT `id`, `createdAt` < NOW(3) - INTERVAL ? MICROSECOND FROM `fx_event` WHERE `id` >= ? ORDER BY `id` LIMIT 1"

// Prune deletes the events with ids in (after, through] written longer than olderThan ago (on
// the database clock) and returns how many it deleted. It is the outbox's one deletion, its
// retention: the caller (relay's pruning task) passes ranges no longer than its batch, below the
// newest id every consumer of the outbox already has. Nothing else ever deletes or changes an
// event.
func Prune(ctx context.Context, db Execer, after, through int64, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 || through <= after {
		return 0, fmt.Errorf("events: prune needs a positive age and a range (%s, ids %d..%d]", olderThan, after, through)
	}
	res, err := db.ExecContext(ctx, pruneSQL, after, through, olderThan.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("prune events (%d, %d] older than %s: %w", after, through, olderThan, err)
	}
	return res.RowsAffected()
}

// OldThrough returns the range a prune may cover: from, the id below the oldest event kept
// (0 when the outbox is empty), and through, the highest id at or below upTo of an event older
// than olderThan. Ids are given in commit order and createdAt is written just before the commit,
// so age falls with the id: through is found by bisecting the primary key (a few dozen point
// reads, whatever the outbox's length), never by scanning it. through ≤ from: nothing to prune.
func OldThrough(ctx context.Context, db store.Queryer, upTo int64, olderThan time.Duration) (from, through int64, err error) {
	type row struct {
		id  int64
		old bool
	}
	first := func(id int64) (int64, bool, error) {
		rows, err := store.QueryAll(ctx, db, fmt.Sprintf("events: the first event from id %d", id), func(sc store.Scanner) (row, error) {
			var r row
			return r, sc.Scan(&r.id, &r.old)
		}, firstAfterSQL, olderThan.Microseconds(), id)
		if err != nil || len(rows) == 0 {
			return 0, false, err
		}
		return rows[0].id, rows[0].old, nil
	}
	oldest, old, err := first(0)
	if err != nil || oldest == 0 || !old || oldest > upTo {
		return oldest - 1, oldest - 1, err
	}
	// Invariant: the event at or after lo is old; every event at or after hi is not (or is past upTo).
	lo, hi := oldest, upTo+1
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		id, old, err := first(mid)
		if err != nil {
			return 0, 0, err
		}
		if id != 0 && id < hi && old {
			lo = id
		} else {
			hi = mid
		}
	}
	return oldest - 1, lo, nil
}
