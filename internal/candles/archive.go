package candles

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	sqlstore "fxdesk/internal/store"
)

// The archive's statements. A batch is one transaction over one symbol's and granularity's
// span of opens: its candles are copied into fx_candle_archive, then exactly the candles the
// archive now holds are deleted (a join on the key), so none leaves fx_candle unarchived. Each
// statement walks the primary key's range of that symbol and granularity.
const (
	archiveColumns = "`symbol`, `granularity`, `openTime`, `bidOpen`, `bidHigh`, `bidLow`, `bidClose`, `askOpen`, `askHigh`, `askLow`, `askClose`, `ticks`"
	archiveCopySQL = "INSERT INTO `fx_candle_archive` (" + archiveColumns + ") SELECT " + archiveColumns +
		" FROM `fx_candle` WHERE `symbol` = ? AND `granularity` = ? AND `openTime` >= ? AND `openTime` < ?"
	archiveRemoveSQL = "DELETE `c` FROM `fx_candle` AS `c` JOIN `fx_candle_archive` AS `a` " +
		"ON `a`.`symbol` = `c`.`symbol` AND `a`.`granularity` = `c`.`granularity` AND `a`.`openTime` = `c`.`openTime` " +
		"WHERE `c`.`symbol` = ? AND `c`.`granularity` = ? AND `c`.`openTime` >= ? AND `c`.`openTime` < ?"
	// archiveNextSQL is a lane's first candle at or after an open: the seek that skips the
	// weekends and closed sessions, where a span of opens would hold no candle.
	archiveNextSQL = "SELECT MIN(`openTime`) FROM `fx_candle` WHERE `symbol` = ? AND `granularity` = ? AND `openTime` >= ?"
	symbolsSQL     = "SELECT DISTINCT `symbol` FROM `fx_candle`"
)

// ArchiveTask moves the candles that opened longer ago than their granularity's retention from
// fx_candle to fx_candle_archive, as a retention.Task: one symbol and granularity (a lane) at a
// time, a batch of at most batch opens per transaction.
type ArchiveTask struct {
	db        *sql.DB
	retention map[Granularity]time.Duration
	now       func() time.Time
	moved     atomic.Int64

	lanes []lane // the pass's lanes still to do, the current first
}

// lane is one symbol's and granularity's candles to move: those that opened in [next, cutoff).
type lane struct {
	symbol       string
	g            Granularity
	next, cutoff time.Time
	sought       bool // next is the lane's first candle, not a lower bound
}

// epoch is where a lane's seek starts: before any candle, and a date both servers compare.
var epoch = time.Unix(0, 0).UTC()

// NewArchiveTask validates the retention (per granularity; 0 or absent: kept for ever); now is
// the clock (time.Now when nil).
func NewArchiveTask(db *sql.DB, retention map[Granularity]time.Duration, now func() time.Time) (*ArchiveTask, error) {
	if db == nil {
		return nil, errors.New("candles: the archive needs a database")
	}
	for g, d := range retention {
		if g >= numGranularities || d < 0 {
			return nil, fmt.Errorf("candles: retention %s=%s is not a granularity and a duration of 0 or more", g, d)
		}
	}
	if now == nil {
		now = time.Now
	}
	return &ArchiveTask{db: db, retention: retention, now: now}, nil
}

// Any reports whether some granularity has a retention (else the task has nothing to do).
func (a *ArchiveTask) Any() bool {
	for _, d := range a.retention {
		if d > 0 {
			return true
		}
	}
	return false
}

// Moved is how many candles this task has moved to the archive since it was built.
func (a *ArchiveTask) Moved() int64 { return a.moved.Load() }

// Name is "candles".
func (a *ArchiveTask) Name() string { return "candles" }

// Plan lists the pass's lanes: every symbol with candles, for every granularity with a
// retention. The backlog is an upper bound: the opens the lanes' spans can hold.
func (a *ArchiveTask) Plan(ctx context.Context) (int64, error) {
	a.lanes = a.lanes[:0]
	if !a.Any() {
		return 0, nil
	}
	symbols, err := sqlstore.QueryAll(ctx, a.db, "candles: the symbols with candles", func(sc sqlstore.Scanner) (string, error) {
		var s string
		return s, sc.Scan(&s)
	}, symbolsSQL)
	if err != nil {
		return 0, err
	}
	now := a.now().UTC()
	for _, g := range Granularities() {
		if keep := a.retention[g]; keep > 0 {
			for _, s := range symbols {
				a.lanes = append(a.lanes, lane{symbol: s, g: g, next: epoch, cutoff: now.Add(-keep)})
			}
		}
	}
	return a.left(ctx)
}

// left seeks the first candle of every lane not sought yet, drops the lanes with none past
// their retention, and returns the backlog's bound: the opens the lanes' spans can hold.
func (a *ArchiveTask) left(ctx context.Context) (int64, error) {
	kept := a.lanes[:0]
	var n int64
	for _, l := range a.lanes {
		if !l.sought {
			first, err := sqlstore.QueryAll(ctx, a.db, "candles: the next to archive", func(sc sqlstore.Scanner) (sql.NullTime, error) {
				var t sql.NullTime
				return t, sc.Scan(&t)
			}, archiveNextSQL, l.symbol, l.g.String(), l.next)
			if err != nil {
				return 0, err
			}
			if !first[0].Valid || !first[0].Time.Before(l.cutoff) {
				continue
			}
			l.next, l.sought = first[0].Time, true
		}
		kept = append(kept, l)
		n += int64(l.cutoff.Sub(l.next)/l.g.ShortestLength()) + 1
	}
	a.lanes = kept
	return n, nil
}

// Step moves the current lane's next span of at most batch opens.
func (a *ArchiveTask) Step(ctx context.Context, batch int) (int64, int64, error) {
	if len(a.lanes) == 0 {
		return 0, 0, nil
	}
	l := &a.lanes[0]
	to := l.next.Add(time.Duration(batch) * l.g.ShortestLength())
	if to.After(l.cutoff) {
		to = l.cutoff
	}
	n, err := a.move(ctx, *l, to)
	if err != nil {
		left, _ := a.left(ctx)
		return 0, max(left, 1), err
	}
	a.moved.Add(n)
	l.next, l.sought = to, false
	left, err := a.left(ctx)
	return n, left, err
}

func (a *ArchiveTask) move(ctx context.Context, l lane, to time.Time) (int64, error) {
	what := fmt.Sprintf("candles archive %s %s [%s, %s)", l.symbol, l.g, l.next.Format(time.RFC3339), to.Format(time.RFC3339))
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, archiveCopySQL, l.symbol, l.g.String(), l.next, to)
	if err != nil {
		return 0, fmt.Errorf("%s: copy: %w", what, err)
	}
	copied, _ := res.RowsAffected()
	res, err = tx.ExecContext(ctx, archiveRemoveSQL, l.symbol, l.g.String(), l.next, to)
	if err != nil {
		return 0, fmt.Errorf("%s: remove: %w", what, err)
	}
	if removed, _ := res.RowsAffected(); removed != copied {
		return 0, fmt.Errorf("%s: copied %d candles but removed %d: nothing moved", what, copied, removed)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%s: commit: %w", what, err)
	}
	return copied, nil
}
