package events

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Execer runs a statement: *sql.DB, *sql.Tx, *sql.Conn.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// pruneSQL is the one statement that deletes events: the oldest first, a chunk at a time.
const pruneSQL = "DELETE FROM `fx_event` WHERE `id` <= ? AND `createdAt` < NOW(3) - INTERVAL ? MICROSECOND ORDER BY `id` LIMIT ?"

// Prune deletes up to limit events with ids up to upTo written longer than olderThan ago (on the
// database clock), oldest first, and returns how many it deleted. It is the outbox's one
// deletion, its retention: the caller (relay.Prune) passes as upTo the newest id every consumer
// of the outbox already has. Nothing else ever deletes or changes an event.
func Prune(ctx context.Context, db Execer, upTo int64, olderThan time.Duration, limit int) (int64, error) {
	if olderThan <= 0 || limit <= 0 {
		return 0, fmt.Errorf("events: prune needs a positive age and limit (%s, %d)", olderThan, limit)
	}
	res, err := db.ExecContext(ctx, pruneSQL, upTo, olderThan.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune events up to %d older than %s: %w", upTo, olderThan, err)
	}
	return res.RowsAffected()
}
