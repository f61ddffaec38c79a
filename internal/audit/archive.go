package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"fxdesk/internal/store"
)

// The archive's statements. A batch is one transaction: the rows of a primary-key range past
// the horizon are copied into fx_audit_archive, then exactly the rows the archive now holds are
// deleted from the log (a join on the id, not the range again), so no row leaves the log
// without being in the archive; a copy that finds a row already archived fails, and the batch
// with it. The horizon is one value for the whole pass, read from the database's clock.
const (
	archiveColumns    = "`id`, `at`, `actorTokenId`, `actorUserId`, `actorVia`, `action`, `entityType`, `entityId`, `before`, `after`, `requestId`"
	archiveCopySQL    = "INSERT INTO `fx_audit_archive` (" + archiveColumns + ") SELECT " + archiveColumns + " FROM `fx_audit` WHERE `id` > ? AND `id` <= ? AND `at` < ?"
	archiveRemoveSQL  = "DELETE `a` FROM `fx_audit` AS `a` JOIN `fx_audit_archive` AS `r` ON `r`.`id` = `a`.`id` WHERE `a`.`id` > ? AND `a`.`id` <= ?"
	archiveHorizonSQL = "SELECT NOW(3) - INTERVAL ? MICROSECOND"
	// archivePlanSQL is the pass's range: below the oldest row, and the newest row past the
	// horizon, found on (`at`, `id`) by one step backwards from the horizon rather than by
	// reading every row past it. Ids and `at` are both taken at INSERT, so they rise together
	// but for rows written the same moment; a row the range misses waits for the next pass.
	archivePlanSQL = "SELECT COALESCE((SELECT MIN(`id`) FROM `fx_audit` LIMIT 1), 0), " +
		"COALESCE((SELECT `id` FROM `fx_audit` WHERE `at` < ? ORDER BY `at` DESC, `id` DESC LIMIT 1), 0)"
)

// ArchiveTask moves the rows older than Retention from the audit log to fx_audit_archive, a
// primary-key range at a time, as a retention.Task. The log stays append-only for everything
// else: this move is the only statement that deletes from it, and only what it archived.
type ArchiveTask struct {
	DB        *sql.DB
	Retention time.Duration

	horizon       time.Time
	from, through int64 // the pass: rows with ids in (from, through] written before horizon
}

// NewArchiveTask returns the audit log's archival; retention must be positive.
func NewArchiveTask(db *sql.DB, retention time.Duration) (*ArchiveTask, error) {
	if db == nil || retention <= 0 {
		return nil, errors.New("audit archive: a database and a positive retention are required")
	}
	return &ArchiveTask{DB: db, Retention: retention}, nil
}

// Name is "audit".
func (a *ArchiveTask) Name() string { return "audit" }

// Plan reads the horizon from the database's clock and the pass's id range; the backlog is the
// range's width (ids may have gaps: an upper bound).
func (a *ArchiveTask) Plan(ctx context.Context) (int64, error) {
	h, err := store.QueryAll(ctx, a.DB, "audit archive: horizon", func(sc store.Scanner) (time.Time, error) {
		var t time.Time
		return t, sc.Scan(&t)
	}, archiveHorizonSQL, a.Retention.Microseconds())
	if err != nil {
		return 0, err
	}
	a.horizon = h[0]
	r, err := store.QueryAll(ctx, a.DB, "audit archive: range", func(sc store.Scanner) ([2]int64, error) {
		var r [2]int64
		return r, sc.Scan(&r[0], &r[1])
	}, archivePlanSQL, a.horizon)
	if err != nil {
		return 0, err
	}
	a.from, a.through = max(r[0][0]-1, 0), r[0][1]
	if a.through <= a.from {
		a.through = a.from
		return 0, nil
	}
	return a.through - a.from, nil
}

// Step moves the next batch ids of the pass in one transaction.
func (a *ArchiveTask) Step(ctx context.Context, batch int) (int64, int64, error) {
	if a.through <= a.from {
		return 0, 0, nil
	}
	to := min(a.from+int64(batch), a.through)
	n, err := a.move(ctx, a.from, to)
	if err != nil {
		return 0, a.through - a.from, err
	}
	a.from = to
	return n, a.through - a.from, nil
}

func (a *ArchiveTask) move(ctx context.Context, from, to int64) (int64, error) {
	tx, err := a.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("audit archive (%d, %d]: begin: %w", from, to, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, archiveCopySQL, from, to, a.horizon)
	if err != nil {
		return 0, fmt.Errorf("audit archive (%d, %d]: copy: %w", from, to, err)
	}
	copied, _ := res.RowsAffected()
	res, err = tx.ExecContext(ctx, archiveRemoveSQL, from, to)
	if err != nil {
		return 0, fmt.Errorf("audit archive (%d, %d]: remove: %w", from, to, err)
	}
	removed, _ := res.RowsAffected()
	if removed != copied {
		return 0, fmt.Errorf("audit archive (%d, %d]: copied %d rows but the log held %d of the archive's: nothing moved", from, to, copied, removed)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("audit archive (%d, %d]: commit: %w", from, to, err)
	}
	return copied, nil
}
