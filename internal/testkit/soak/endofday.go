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
func (w *eodWatch) read(ctx context.Context, db *sql.DB) error {
	e, err := invariant.ReadEOD(ctx, db)
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

// A stalled freeze: the end-of-day table the freeze writes after the point the soak kills it at.
type stall struct {
	why string
	// lock is held locked from the day's key on (a locking read of its empty range: the freeze's
	// insert waits for it); until is a count of the day's rows that is above zero once the run
	// has passed the point.
	lock, until string
}

var (
	// stallAfterCapture: the run captured its day's closing prices; the accounts wait.
	stallAfterCapture = stall{why: "killed once it captured its day's prices; the day is left to the next rollover's run",
		lock: "fx_eod_account", until: "fx_eod_price"}
	// stallAfterAccounts: the run wrote its day's account snapshots; the desk's rows wait.
	stallAfterAccounts = stall{why: "killed once its day's account snapshots were in",
		lock: "fx_eod_symbol", until: "fx_eod_account"}
)

// rolloverStalled runs processFxSwaps as of at, on time for day, with the freeze held at st's
// point, and SIGKILLs it there: the soak holds st.lock locked from day on, waits until the day
// has rows in st.until, kills the run and lets go. Whoever writes the day next — a rerun, the
// next rollover's run — must complete it from what the dead run left. The soak writes nothing:
// its locking read only makes the freeze wait where a slow database could. It returns whether the
// day was left priced and not frozen: an earlier run may have frozen it already, or the quote
// mirror may have had no prices to capture.
func (in *injector) rolloverStalled(ctx context.Context, day fx.Rollover, at time.Time, st stall) (left bool) {
	tx, err := in.c.direct.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		in.fail("stalled freeze of %s: %v", day.Date, err)
		return false
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT `tradingDay` FROM `"+st.lock+"` WHERE `tradingDay` >= ? FOR UPDATE", day.Date)
	if err != nil {
		in.fail("stalled freeze of %s: lock %s: %v", day.Date, st.lock, err)
		return false
	}
	rows.Close()
	kill, done := make(chan struct{}), make(chan struct{})
	var watching sync.WaitGroup
	watching.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var n int
			if err := in.c.direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+st.until+"` WHERE `tradingDay` = ?", day.Date).Scan(&n); err == nil && n > 0 {
				close(kill)
				return
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
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
	err = in.c.direct.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM `fx_eod_day` WHERE `tradingDay` = ?), "+
		"(SELECT COUNT(*) FROM `fx_eod_account` WHERE `tradingDay` = ?), (SELECT COUNT(*) FROM `fx_eod_price` WHERE `tradingDay` = ?)",
		day.Date, day.Date, day.Date).Scan(&frozen, &accounts, &prices)
	state := fmt.Sprintf("day %s left with %d prices, %d account snapshots, frozen %v", day.Date, prices, accounts, frozen > 0)
	if err != nil {
		state = fmt.Sprintf("day %s: %v", day.Date, err)
	}
	in.log.Printf("soak: stalled freeze (%s): killed=%v; %s", st.why, r.Killed, state)
	return err == nil && prices > 0 && frozen == 0
}
