package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"fxdesk/internal/book"
	"fxdesk/internal/gate"
	"fxdesk/internal/store"
)

// StreamCursor is the Redis Stream relay's row of fx_event_relay.
const StreamCursor = "stream"

// webhookCursor is endpoint id's row of fx_event_relay.
func webhookCursor(id int64) string { return "webhook:" + strconv.FormatInt(id, 10) }

// Lease is what a relay needs of the engine lease (*lease.Keeper): the fence of its writes and
// the term they record.
type Lease interface {
	FenceStatement() (string, []any, error)
	Term() int64
}

const (
	readCursorSQL   = "SELECT `position` FROM `fx_event_relay` WHERE `name` = ?"
	lockCursorSQL   = readCursorSQL + " FOR UPDATE"
	updateCursorSQL = "UPDATE `fx_event_relay` SET `position` = ?, `term` = ?, `updatedAt` = NOW(3) WHERE `name` = ?"
)

// errNoCursor: the cursor's row is missing (the endpoint was created without one, or the
// migration did not run).
var errNoCursor = errors.New("relay cursor row missing")

// readCursor reads a cursor's position without a lock.
func readCursor(ctx context.Context, db store.Queryer, name string) (int64, error) {
	var pos int64
	rows, err := store.QueryAll(ctx, db, "relay cursor", func(sc store.Scanner) (int64, error) {
		err := sc.Scan(&pos)
		return pos, err
	}, readCursorSQL, name)
	if err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, fmt.Errorf("%w: %s", errNoCursor, name)
	}
	return rows[0], nil
}

// fenced commits b — statements that move a cursor, and what goes with it — as one transaction
// ending with the lease fence, in one round trip. A refused fence is reported at the gate as w.
func fenced(ctx context.Context, db *sql.DB, l Lease, g *gate.Gate, w gate.Work, b *book.Batch, attrs ...slog.Attr) error {
	stmt, args, err := l.FenceStatement()
	if err == nil && stmt == "" {
		err = errors.New("the lease gave no fence statement")
	}
	if err != nil {
		return g.Fenced(ctx, w, err, attrs...)
	}
	first := &book.Batch{}
	tx, err := book.BeginTxn(ctx, db, first)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	first.Append(b)
	return commitFenced(ctx, tx, stmt, args, g, w, first, attrs...)
}

// commitFenced sends b with the fence and COMMIT in tx.
func commitFenced(ctx context.Context, tx *book.Txn, stmt string, args []any, g *gate.Gate, w gate.Work, b *book.Batch, attrs ...slog.Attr) error {
	tx.Fence, tx.FenceArgs = stmt, args
	tx.Refused = func(cause error) error {
		return g.Fenced(ctx, w, cause, append(attrs, slog.Bool("rolled_back", true))...)
	}
	return tx.Commit(ctx, b)
}

// SkipHistory moves every cursor to position (the last event of a history loaded from outside
// the desk, internal/yeargen) under term, as though each consumer had already taken it: nothing
// generated is relayed. updatedAt is the history's end.
func SkipHistory(ctx context.Context, db *sql.DB, position, term int64, at time.Time) error {
	if _, err := db.ExecContext(ctx, "UPDATE `fx_event_relay` SET `position` = ?, `term` = ?, `updatedAt` = ?", position, term, at.UTC().Format("2006-01-02 15:04:05.000")); err != nil {
		return fmt.Errorf("relay: skip the loaded history: %w", err)
	}
	return nil
}
