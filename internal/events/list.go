package events

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"fxdesk/internal/store"
)

// SettleAfter is how long after an event's INSERT its id may still be overtaken: the longest a
// transaction that writes events stays open after its INSERT (a group commit's batch is bounded
// at 30 s; a deposit or a withdrawal runs a few statements after it). An id is assigned at
// INSERT, not at COMMIT, so a transaction holding id 10 may commit after one holding id 11; a
// missing id is settled — committed by now, or never to be (rolled back) — once the row after
// it is older than this.
const SettleAfter = time.Minute

// tailCap bounds how many of the newest rows Settled reads: a longer run of unsettled rows is
// trusted only up to where the read ends.
const tailCap = 10000

// tailChunk is how many rows Settled reads at a time.
const tailChunk = 256

// Entry is one event as read back.
type Entry struct {
	ID        int64           `json:"id"`
	AccountID int64           `json:"accountId"`
	UserID    int64           `json:"userId"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	Term      int64           `json:"term"`
	CreatedAt time.Time       `json:"createdAt"`
}

// Filter chooses the events List returns: those after After (an id) and up to UpTo (0: no
// bound), in id order, of UserID's accounts (0: every user's) and of AccountID (0: every
// account).
type Filter struct {
	UserID    int64
	AccountID int64
	After     int64
	UpTo      int64
	Limit     int // 1..500, default 100
	// Settle is how long a gap in the ids may still fill (0: SettleAfter); tests shorten it.
	Settle time.Duration
}

// List reads a page of events in id order, only up to Settled: a reader that resumes after the
// page's last id misses nothing that commits later.
func List(ctx context.Context, db store.Queryer, f Filter) ([]Entry, error) {
	settle := f.Settle
	if settle <= 0 {
		settle = SettleAfter
	}
	upTo, err := Settled(ctx, db, settle)
	if err != nil {
		return nil, err
	}
	where := []string{"`id` > ?", "`id` <= ?"}
	args := []any{f.After, upTo}
	if f.UserID != 0 {
		where, args = append(where, "`userId` = ?"), append(args, f.UserID)
	}
	if f.AccountID != 0 {
		where, args = append(where, "`accountId` = ?"), append(args, f.AccountID)
	}
	if f.UpTo != 0 {
		where, args = append(where, "`id` <= ?"), append(args, f.UpTo)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	args = append(args, f.Limit)
	return store.QueryAll(ctx, db, "events", scanEntry,
		"SELECT `id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt` FROM `fx_event` WHERE "+strings.Join(where, " AND ")+" ORDER BY `id` LIMIT ?", args...)
}

// Settled is the highest id below which no event can still appear: every id up to it is
// committed or will never be. It walks the newest rows up from the newest one older than
// settle (on the database's clock, which wrote createdAt) and stops before the first gap
// in the ids (the session's auto_increment_increment apart, as on Galera).
func Settled(ctx context.Context, db store.Queryer, settle time.Duration) (int64, error) {
	type row struct {
		id      int64
		settled bool
		step    int64
	}
	// Read newest first, a chunk at a time, until a settled row or tailCap rows: on a quiet desk
	// the first chunk holds one.
	var tail []row
	for below := int64(math.MaxInt64); len(tail) < tailCap; {
		chunk, err := store.QueryAll(ctx, db, "events tail", func(sc store.Scanner) (row, error) {
			var r row
			return r, sc.Scan(&r.id, &r.settled, &r.step)
		}, "SELECT `id`, `createdAt` < NOW(3) - INTERVAL ? MICROSECOND, @@auto_increment_increment FROM `fx_event` WHERE `id` < ? ORDER BY `id` DESC LIMIT ?",
			settle.Microseconds(), below, tailChunk)
		if err != nil {
			return 0, err
		}
		tail = append(tail, chunk...)
		if len(chunk) < tailChunk || chunk[len(chunk)-1].settled {
			break
		}
		below = chunk[len(chunk)-1].id
	}
	if len(tail) == 0 {
		return 0, nil
	}
	// tail is newest first. The walk starts at the newest settled row (every gap below it has
	// settled), or, where none was read, just below the oldest row read.
	i, upTo := len(tail)-1, tail[len(tail)-1].id-tail[len(tail)-1].step
	for j, r := range tail {
		if r.settled {
			i, upTo = j-1, r.id
			break
		}
	}
	for ; i >= 0 && tail[i].id == upTo+tail[i].step; i-- {
		upTo = tail[i].id
	}
	return upTo, nil
}

// Newest is the highest event id written (0: none yet).
func Newest(ctx context.Context, db store.Queryer) (int64, error) {
	ids, err := store.QueryAll(ctx, db, "newest event", func(sc store.Scanner) (sql.NullInt64, error) {
		var id sql.NullInt64
		return id, sc.Scan(&id)
	}, "SELECT MAX(`id`) FROM `fx_event`")
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return ids[0].Int64, nil
}

func scanEntry(sc store.Scanner) (Entry, error) {
	var e Entry
	var text string
	if err := sc.Scan(&e.ID, &e.AccountID, &e.UserID, &e.Type, &text, &e.Term, &e.CreatedAt); err != nil {
		return Entry{}, fmt.Errorf("scan event: %w", err)
	}
	e.Payload = json.RawMessage(text)
	return e, nil
}
