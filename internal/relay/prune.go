package relay

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"fxdesk/internal/events"
	"fxdesk/internal/store"
)

// consumersHaveSQL is the newest event id every consumer of the outbox already has: the lowest
// position of the stream's cursor and every enabled webhook's, and below the first event an
// open dead letter names (a replay reads its event from the outbox).
const consumersHaveSQL = "SELECT LEAST(" +
	"COALESCE((SELECT MIN(`c`.`position`) FROM `fx_event_relay` AS `c` LEFT JOIN `fx_webhook` AS `w` ON CONCAT('webhook:', `w`.`id`) = `c`.`name` " +
	"WHERE `c`.`name` = 'stream' OR `w`.`enabled` = 1 LIMIT 1), 0), " +
	"COALESCE((SELECT MIN(`eventId`) - 1 FROM `fx_webhook_dead` WHERE `replayedAt` IS NULL LIMIT 1), 9223372036854775807))"

// PruneTask is the events outbox's retention as a retention.Task: it deletes the events older
// than Retention that nobody still needs — every enabled consumer's cursor (the stream's and
// each enabled webhook's) is past them and no open dead letter names them — a range of the
// primary key at a time (events.Prune). It runs beside the relay, never inside its loop: a
// pass over millions of events once held the host's feed still for as long as it took.
type PruneTask struct {
	DB        *sql.DB
	Retention time.Duration

	from, through int64 // the pass: events in (from, through] go
}

// NewPruneTask returns the outbox's pruning; retention must be positive.
func NewPruneTask(db *sql.DB, retention time.Duration) (*PruneTask, error) {
	if db == nil || retention <= 0 {
		return nil, errors.New("events prune: a database and a positive retention are required")
	}
	return &PruneTask{DB: db, Retention: retention}, nil
}

// Name is "events".
func (p *PruneTask) Name() string { return "events" }

// Plan reads what every consumer has and bisects the outbox for the newest event past the
// retention below it. Ids are dense, so the backlog is exact.
func (p *PruneTask) Plan(ctx context.Context) (int64, error) {
	bounds, err := store.QueryAll(ctx, p.DB, "events prune: what every consumer has", func(sc store.Scanner) (int64, error) {
		var n *int64
		err := sc.Scan(&n)
		if n == nil {
			return 0, err
		}
		return *n, err
	}, consumersHaveSQL)
	if err != nil {
		return 0, err
	}
	p.from, p.through, err = events.OldThrough(ctx, p.DB, bounds[0], p.Retention)
	if err != nil || p.through <= p.from {
		p.through = p.from
		return 0, err
	}
	return p.through - p.from, nil
}

// Step deletes the pass's next batch ids.
func (p *PruneTask) Step(ctx context.Context, batch int) (int64, int64, error) {
	if p.through <= p.from {
		return 0, 0, nil
	}
	to := min(p.from+int64(batch), p.through)
	n, err := events.Prune(ctx, p.DB, p.from, to, p.Retention)
	if err != nil {
		return n, p.through - p.from, err
	}
	p.from = to
	return n, p.through - p.from, nil
}
