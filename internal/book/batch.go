package book

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/lease"
	"fxdesk/internal/store"
)

// Batch is statements sent to MySQL in one round trip (the driver's multiStatements; see
// store.DSN). A fill or a close is one transaction of about ten statements; sent one by one,
// its round trips, not its work, set how many the desk commits per second. Batched (see txn),
// a close is two round trips: START TRANSACTION and the row locks; then the writes, the lease
// fence and COMMIT.
//
// The server runs the statements in order and stops at the first that fails; the error comes
// back from run and the transaction must be rolled back, as after any failed statement.
// Statements that return rows are read, in order, by the scan given with each; the driver
// skips the results of statements that return none.
type Batch struct {
	text  strings.Builder
	args  []any
	scans []func(*sql.Rows) error
	last  *Batch // statements that run after every other (Last)
	// gathers are rows added one at a time and written together among the Last statements.
	gathers []keyed
}

// Gather is rows a batch's writes add one at a time, written together in the batch's last round
// trip by Flush: one statement (or two) for the whole batch instead of one or two per write. The
// events outbox's are a Last Gather (GatheredLast): one sequence update and one multi-row INSERT
// of every event. The trader profiles' are a plain one (Gathered): one multi-row upsert of every
// account a batch's closes traded on.
type Gather interface {
	// Merge adds o's rows (a Gather of the same key) after this one's.
	Merge(o Gather)
	// Flush adds the statements that write every row to b.
	Flush(b *Batch)
}

type keyed struct {
	key  string
	g    Gather
	last bool // written with the Last statements (GatheredLast)
}

// Gathered returns b's Gather of key, made by make on first use. Its rows are written after
// every statement of the batch (and of any batch appended to it) — in a transaction that Commit
// ends, just before the lease fence — in the order the Gathers were first asked for.
func (b *Batch) Gathered(key string, make func() Gather) Gather {
	return b.gathered(key, false, make)
}

// GatheredLast is Gathered for rows whose statements take a lock every writer of the desk queues
// on, as a Last statement does: they are written after every other statement and every plain
// Gather's, after the lease fence, ahead of the Last statements themselves.
func (b *Batch) GatheredLast(key string, make func() Gather) Gather {
	return b.gathered(key, true, make)
}

func (b *Batch) gathered(key string, last bool, make func() Gather) Gather {
	for _, k := range b.gathers {
		if k.key == key {
			return k.g
		}
	}
	g := make()
	b.gathers = append(b.gathers, keyed{key, g, last})
	return g
}

// Exec adds a statement that returns no rows.
func (b *Batch) Exec(stmt string, args ...any) {
	if b.text.Len() > 0 {
		b.text.WriteString(";\n")
	}
	b.text.WriteString(stmt)
	b.args = append(b.args, args...)
}

// Query adds a statement whose rows scan reads (it calls rows.Next until false).
func (b *Batch) Query(scan func(*sql.Rows) error, stmt string, args ...any) {
	b.Exec(stmt, args...)
	b.scans = append(b.scans, scan)
}

// Last adds a statement that returns no rows to run after every other of the batch, and of any
// batch appended to it later: in a transaction's last round trip, just before COMMIT. It is for a
// statement that takes a lock every writer of the desk queues on (the events outbox's sequence,
// docs/architecture.md «Events»): taken last, it is held for the COMMIT alone.
func (b *Batch) Last(stmt string, args ...any) {
	if b.last == nil {
		b.last = &Batch{}
	}
	b.last.Exec(stmt, args...)
}

// flushGathered moves the plain Gathers' statements to the end of the batch's text.
func (b *Batch) flushGathered() {
	var keep []keyed
	var flush []Gather
	for _, k := range b.gathers {
		if k.last {
			keep = append(keep, k)
		} else {
			flush = append(flush, k.g)
		}
	}
	b.gathers = keep
	for _, g := range flush {
		g.Flush(b)
	}
}

// flushLast moves the plain Gathers' statements, then the Last Gathers', then the Last
// statements, to the end of the batch's text.
func (b *Batch) flushLast() {
	b.flushGathered()
	gathers, last := b.gathers, b.last
	b.gathers, b.last = nil, nil
	for _, k := range gathers {
		k.g.Flush(b)
	}
	if last != nil {
		b.Append(last)
	}
}

// Append adds o's statements, in order, after b's; o's Last statements and gathered rows stay
// last.
func (b *Batch) Append(o *Batch) {
	for _, k := range o.gathers {
		if g := b.gathered(k.key, k.last, func() Gather { return k.g }); g != k.g {
			g.Merge(k.g)
		}
	}
	if o.last != nil {
		if b.last == nil {
			b.last = &Batch{}
		}
		b.last.Append(o.last)
	}
	if o.text.Len() == 0 {
		return
	}
	if b.text.Len() > 0 {
		b.text.WriteString(";\n")
	}
	b.text.WriteString(o.text.String())
	b.args = append(b.args, o.args...)
	b.scans = append(b.scans, o.scans...)
}

// Run sends the batch inside tx and reads each result set with its scan. A statement that
// fails after the last one returning rows is reported too: the remaining results are read
// before Run returns.
func (b *Batch) Run(ctx context.Context, tx Querier) error {
	b.flushLast()
	if len(b.scans) == 0 {
		_, err := tx.ExecContext(ctx, b.text.String(), b.args...)
		return err
	}
	rows, err := tx.QueryContext(ctx, b.text.String(), b.args...)
	if err != nil {
		return err
	}
	for i, scan := range b.scans {
		if i > 0 && !rows.NextResultSet() {
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			return fmt.Errorf("batch returned %d result sets, want %d", i, len(b.scans))
		}
		if err := scan(rows); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
	}
	for rows.NextResultSet() {
		for rows.Next() {
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}

// SkipRows reads a result set and keeps nothing of it: a statement whose rows only take locks or
// stand for a check, which has a result set all the same (run pairs result sets with scans in
// order).
func skipRows(r *sql.Rows) error {
	for r.Next() {
	}
	return nil
}

// ScanFirst reads at most one row of a result set into dest, reporting whether there was one.
func ScanFirst(found *bool, scan func(*sql.Rows) error) func(*sql.Rows) error {
	return func(r *sql.Rows) error {
		*found = false
		for r.Next() {
			if *found {
				continue
			}
			*found = true
			if err := scan(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// Txn is a write transaction on one pooled connection that starts and ends inside its batches:
// START TRANSACTION leads the first, COMMIT ends the last (commit). database/sql's Tx would send
// each as a round trip of its own — two of a close's four.
//
// A fenced transaction (one with Fence set: trading's begin, or a batch) sends the lease fence just before COMMIT, in the same
// round trip: the fence fails when the term is not held, and the server then runs nothing after
// it, so the transaction never commits without a fence that held at commit time.
//
// Rollback must be deferred right after BeginTxn, as with a Tx: it rolls back unless commit
// succeeded, and a connection whose rollback failed is discarded rather than returned to the
// pool, so no later user can inherit an open transaction.
type Txn struct {
	conn *sql.Conn
	done bool

	Fence     string                  // the lease fence statement, or "" when unfenced
	FenceArgs []any                   // its arguments
	Refused   func(cause error) error // the error commit answers when the fence refused
}

// BeginTxn takes a connection for a transaction; b is its first batch, which begins it.
func BeginTxn(ctx context.Context, db *sql.DB, b *Batch) (*Txn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	b.Exec("START TRANSACTION")
	return &Txn{conn: conn}, nil
}

func (t *Txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, q, args...)
}

func (t *Txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(ctx, q, args...)
}

func (t *Txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, q, args...)
}

// Lock sends b, the transaction's first round trip: its row locks and the reads the rules need.
// what names the write in errors.
func (t *Txn) Lock(ctx context.Context, b *Batch, what string) error {
	if err := b.Run(ctx, t); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Commit sends b and its plain Gathers, then the fence of a fenced transaction, then b's Last
// Gathers and Last statements, then COMMIT. The server runs COMMIT only when every statement
// before it succeeded; when one failed, the error comes back (the fence's as the Service's
// refusal) and Rollback ends the transaction.
func (t *Txn) Commit(ctx context.Context, b *Batch) error {
	b.ending(t.Fence, t.FenceArgs)
	if err := b.Run(ctx, t); err != nil {
		if t.Fence != "" && lease.IsFenced(err) {
			return t.Refused(err)
		}
		if store.ConnectionLost(err) {
			// COMMIT went out in this round trip: it may have committed before the connection
			// died. The client hears that the outcome is unknown, never that nothing happened.
			return fmt.Errorf("%w: %w", errOutcomeUnknown, err)
		}
		return err
	}
	t.done = true
	t.conn.Close()
	return nil
}

// ending adds what ends a transaction to b: its plain Gathers' statements, the lease fence (none
// when fence is ""), its Last Gathers' and Last statements — after the fence, so a fenced-out
// transaction never queues on their locks — and COMMIT.
func (b *Batch) ending(fence string, args []any) {
	b.flushGathered()
	if fence != "" {
		b.Exec(fence, args...)
	}
	b.flushLast()
	b.Exec("COMMIT")
}

// Empty reports whether b holds no statement.
func (b *Batch) Empty() bool { return b.text.Len() == 0 && b.last == nil && len(b.gathers) == 0 }

// Rollback ends the transaction unless commit succeeded or it already ended, and gives the
// connection back.
func (t *Txn) Rollback() {
	if t.done {
		return
	}
	t.done = true
	// The request may be gone; the rollback must still reach the server.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := t.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	t.conn.Close()
}

// ErrOutcomeUnknown answers a write whose connection died in the round trip that carried its
// COMMIT; a replay with the same requestNonce (or deposit nonce) is safe.
var errOutcomeUnknown error = &fx.Error{Code: fx.EUNKNOWN, Message: fx.MsgOutcomeUnknown}

// LastInsertID is the batch scan of SELECT LAST_INSERT_ID().
func LastInsertID(id *int64) func(*sql.Rows) error {
	return ScanFirst(new(bool), func(r *sql.Rows) error { return r.Scan(id) })
}
