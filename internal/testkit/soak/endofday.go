package soak

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"sync"
	"time"

	"fxdesk/internal/eod"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/soak/invariant"
)

// The end of day under the soak (docs/soak.md, «The end of day»). The rollover runs walk the
// calendar: each rollover fault takes the next weekday rollover after the soak began, and its
// runs are on time for it (--at a few minutes after it, inside eod.DefaultOnTimeFor), so each
// captures the quote mirror's prices as that day's close and freezes the day — ahead of the wall
// clock, which is how the soak gets several days frozen in a minute. Freezes are interrupted where
// the soak chooses, not only where a random kill lands: a run killed once its day's account rows
// are in (its rerun must add only the desk's rows and the day's), and, once per soak, a run killed
// once it captured its day's prices and left to the next rollover's run, which must catch the day
// up.

// rolloverWalk hands the rollover runs their days, in order.
type rolloverWalk struct {
	mu      sync.Mutex
	next    fx.Rollover
	skipped bool // the day left to the next rollover's run was played
}

// newRolloverWalk starts the walk at the first weekday rollover after now.
func newRolloverWalk(now time.Time) (*rolloverWalk, error) {
	r, err := fx.NextRollover(now)
	if err != nil {
		return nil, err
	}
	return &rolloverWalk{next: weekday(r)}, nil
}

// weekday is r, or the first weekday rollover after it: a weekend rollover closes no day.
func weekday(r fx.Rollover) fx.Rollover {
	for r.Weekday() == time.Saturday || r.Weekday() == time.Sunday {
		r = r.Next()
	}
	return r
}

// step is the next day of the walk.
func (w *rolloverWalk) step() fx.Rollover {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.next
	w.next = weekday(r.Next())
	return r
}

// skipDue is true until a day was left to the next rollover's run (skipDone).
func (w *rolloverWalk) skipDue() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.skipped
}

// skipDone says a day was left to the next rollover's run: one is enough.
func (w *rolloverWalk) skipDone() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.skipped = true
}

// eodWatch keeps every end-of-day row as the soak first read it: after each rollover run and at
// each check. Invariant eodUnchanged holds the rows to it.
type eodWatch struct {
	mu   sync.Mutex
	seen map[string]invariant.EODRow
}

func newEODWatch() *eodWatch { return &eodWatch{seen: map[string]invariant.EODRow{}} }

// note records the rows not seen before.
func (w *eodWatch) note(rows []invariant.EODRow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		if _, ok := w.seen[r.ID()]; !ok {
			w.seen[r.ID()] = r
		}
	}
}

// read reads the end of day's rows now and notes them, as seen when the read had ended: a
// snapshot taken after that holds everything the read saw.
func (w *eodWatch) read(ctx context.Context, db *sql.DB, scope invariant.Scope) error {
	e, err := invariant.ReadEOD(ctx, db, scope)
	if err != nil {
		return err
	}
	w.note(e.Rows(time.Now()))
	return nil
}

// rows is every row seen so far.
func (w *eodWatch) rows() map[string]invariant.EODRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.seen)
}

// reconcileEOD asks eod.Reconcile of every frozen day, as the desk asks it after each freeze: its
// mismatches, or why it could not say.
func reconcileEOD(ctx context.Context, db *sql.DB) ([]eod.Mismatch, string) {
	bad, err := eod.Reconcile(ctx, db, "1000-01-01", "9999-12-31")
	if err != nil {
		return nil, err.Error()
	}
	return bad, ""
}

// A stalled freeze: where the soak holds a run's freeze, and how it knows the run got there.
type stall struct {
	why string
	// lock is held locked from the first day the run will freeze (a locking read of its empty
	// range): the freeze's first insert into it waits. A run freezes the days it has due oldest
	// first, so that is the earliest day priced and not frozen yet — the day an earlier run left,
	// or the run's own — and whatever the lock holds, the run waits at its first write there.
	lock string
	// count counts what the run has written when it waits there, from first (that earliest day)
	// to day (its own); it is killed once the count is above what it was before it started (zero
	// when fresh: any row will do).
	count func(first, day string) (string, []any)
	fresh bool
}

var (
	// stallAfterCapture: the run captured its day's closing prices; the accounts wait.
	stallAfterCapture = stall{why: "killed once it captured its day's prices; the day is left to the next rollover's run", lock: "fx_eod_account",
		count: func(_, day string) (string, []any) {
			return "SELECT COUNT(*) FROM `fx_eod_price` WHERE `tradingDay` = ?", []any{day}
		}, fresh: true}
	// stallAfterAccounts: the run wrote the account snapshots of the first day it freezes; the
	// desk's rows wait.
	stallAfterAccounts = stall{why: "killed once its day's account snapshots were in", lock: "fx_eod_symbol",
		count: func(first, day string) (string, []any) {
			return "SELECT COUNT(*) FROM `fx_eod_account` WHERE `tradingDay` >= ? AND `tradingDay` <= ?", []any{first, day}
		}}
)

// stallFor bounds how long the soak waits for a stalled run to get where it is held: past it the
// run is killed wherever it is (a freeze that did not go as expected must not hold the fault lane,
// nor wait out the database's lock timeout).
const stallFor = 5 * time.Second

// rolloverStalled runs processFxSwaps as of at, on time for day, with the freeze held at st's
// point, and SIGKILLs it there: the soak holds st.lock locked from the first day the run will
// freeze, waits until the run has written what st.count counts, kills the run and lets go.
// Whoever writes the day next — a rerun, the next rollover's run — must complete it from what the
// dead run left. The soak writes nothing: its locking read only makes the freeze wait where a slow
// database could. It returns whether the day was left priced and not frozen: an earlier run may
// have frozen it already, or the quote mirror may have had no prices to capture.
func (in *injector) rolloverStalled(ctx context.Context, day fx.Rollover, at time.Time, st stall) (left bool) {
	db := in.c.direct
	var pending sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT DATE_FORMAT(MIN(p.`tradingDay`), '%Y-%m-%d') FROM `fx_eod_price` p WHERE p.`tradingDay` <= ? "+
		"AND NOT EXISTS (SELECT 1 FROM `fx_eod_day` d WHERE d.`tradingDay` = p.`tradingDay`)", day.Date).Scan(&pending); err != nil {
		in.fail("stalled freeze of %s: the first day to freeze: %v", day.Date, err)
		return false
	}
	first := day.Date
	if pending.Valid {
		first = pending.String
	}
	q, args := st.count(first, day.Date)
	base := 0
	if !st.fresh {
		if err := db.QueryRowContext(ctx, q, args...).Scan(&base); err != nil {
			in.fail("stalled freeze of %s: %v", day.Date, err)
			return false
		}
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		in.fail("stalled freeze of %s: %v", day.Date, err)
		return false
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT `tradingDay` FROM `"+st.lock+"` WHERE `tradingDay` >= ? FOR UPDATE", first)
	if err != nil {
		in.fail("stalled freeze of %s: lock %s: %v", day.Date, st.lock, err)
		return false
	}
	rows.Close()
	kill, done := make(chan struct{}), make(chan struct{})
	reached := "not reached"
	var watching sync.WaitGroup
	watching.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		deadline := time.After(stallFor)
		for {
			var n int
			if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err == nil && n > base {
				reached = "reached"
				close(kill)
				return
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-deadline:
				reached = fmt.Sprintf("not reached in %s", stallFor)
				close(kill)
				return
			case <-t.C:
			}
		}
	})
	r := in.runRollover(ctx, at, st.why, kill)
	close(done)
	watching.Wait()
	tx.Rollback()
	var frozen, accounts, prices int
	err = db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM `fx_eod_day` WHERE `tradingDay` = ? LIMIT 1), "+
		"(SELECT COUNT(*) FROM `fx_eod_account` WHERE `tradingDay` = ? LIMIT 1), (SELECT COUNT(*) FROM `fx_eod_price` WHERE `tradingDay` = ? LIMIT 1)",
		day.Date, day.Date, day.Date).Scan(&frozen, &accounts, &prices)
	state := fmt.Sprintf("day %s left with %d prices, %d account snapshots, frozen %v", day.Date, prices, accounts, frozen > 0)
	if err != nil {
		state = fmt.Sprintf("day %s: %v", day.Date, err)
	}
	in.log.Printf("soak: stalled freeze (%s; held from %s, point %s): killed=%v; %s", st.why, first, reached, r.Killed, state)
	return err == nil && prices > 0 && frozen == 0
}
