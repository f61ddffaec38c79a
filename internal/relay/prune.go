package relay

import (
	"context"
	"database/sql"
	"time"

	"fxdesk/internal/events"
	"fxdesk/internal/store"
)

// pruneChunk bounds one DELETE, so pruning a long backlog never holds a long transaction.
const pruneChunk = 10000

// Prune deletes the events older than retention that nobody still needs: every enabled
// consumer's cursor (the stream's and each enabled webhook's) is past them, and no open dead
// letter names them (a replay reads its event from the outbox). It returns how many it deleted.
func Prune(ctx context.Context, db *sql.DB, retention time.Duration) (int64, error) {
	bounds, err := store.QueryAll(ctx, db, "prune bound", func(sc store.Scanner) (int64, error) {
		var n *int64
		err := sc.Scan(&n)
		if n == nil {
			return 0, err
		}
		return *n, err
	}, "SELECT LEAST("+
		"COALESCE((SELECT MIN(`c`.`position`) FROM `fx_event_relay` AS `c` LEFT JOIN `fx_webhook` AS `w` ON CONCAT('webhook:', `w`.`id`) = `c`.`name` "+
		"WHERE `c`.`name` = 'stream' OR `w`.`enabled` = 1 LIMIT 1), 0), "+
		"COALESCE((SELECT MIN(`eventId`) - 1 FROM `fx_webhook_dead` WHERE `replayedAt` IS NULL LIMIT 1), 9223372036854775807))")
	if err != nil {
		return 0, err
	}
	upTo := bounds[0]
	var total int64
	for {
		n, err := events.Prune(ctx, db, upTo, retention, pruneChunk)
		total += n
		if err != nil || n < pruneChunk {
			return total, err
		}
	}
}
