package trading

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

// batch is statements sent to MySQL in one round trip (the driver's multiStatements; see
// store.DSN). A fill or a close is one transaction of about ten statements; sent one by one,
// its round trips, not its work, set how many the desk commits per second. Batched (see txn),
// a close is two round trips: START TRANSACTION and the row locks; then the writes, the lease
// fence and COMMIT.
//
// The server runs the statements in order and stops at the first that fails; the error comes
// back from run and the transaction must be rolled back, as after any failed statement.
// Statements that return rows are read, in order, by the scan given with each; the driver
// skips the results of statements that return none.
type batch struct {
	text  strings.Builder
	args  []any
	scans []func(*sql.Rows) error
}

// exec adds a statement that returns no rows.
func (b *batch) exec(stmt string, args ...any) {
	if b.text.Len() > 0 {
		b.text.WriteString(";\n")
	}
	b.text.WriteString(stmt)
	b.args = append(b.args, args...)
}

// query adds a statement whose rows scan reads (it calls rows.Next until false).
func (b *batch) query(scan func(*sql.Rows) error, stmt string, args ...any) {
	b.exec(stmt, args...)
	b.scans = append(b.scans, scan)
}

// append adds o's statements, in order, after b's.
func (b *batch) append(o *batch) {
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

// run sends the batch inside tx and reads each result set with its scan. A statement that
// fails after the last one returning rows is reported too: the remaining results are read
// before run returns.
func (b *batch) run(ctx context.Context, tx querier) error {
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

// skipRows reads a result set and keeps nothing of it: a statement whose rows only take locks or
// stand for a check, which has a result set all the same (run pairs result sets with scans in
// order).
func skipRows(r *sql.Rows) error {
	for r.Next() {
	}
	return nil
}

// scanFirst reads at most one row of a result set into dest, reporting whether there was one.
func scanFirst(found *bool, scan func(*sql.Rows) error) func(*sql.Rows) error {
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

// txn is a write transaction on one pooled connection that starts and ends inside its batches:
// START TRANSACTION leads the first, COMMIT ends the last (commit). database/sql's Tx would send
// each as a round trip of its own — two of a close's four.
//
// A fenced transaction (Service.begin) sends the lease fence just before COMMIT, in the same
// round trip: the fence fails when the term is not held, and the server then runs nothing after
// it, so the transaction never commits without a fence that held at commit time.
//
// Rollback must be deferred right after beginTxn, as with a Tx: it rolls back unless commit
// succeeded, and a connection whose rollback failed is discarded rather than returned to the
// pool, so no later user can inherit an open transaction.
type txn struct {
	conn *sql.Conn
	done bool

	fence     string                  // the lease fence statement, or "" when unfenced
	fenceArgs []any                   // its arguments
	refused   func(cause error) error // the error commit answers when the fence refused
}

// beginTxn takes a connection for a transaction; b is its first batch, which begins it.
func beginTxn(ctx context.Context, db *sql.DB, b *batch) (*txn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	b.exec("START TRANSACTION")
	return &txn{conn: conn}, nil
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, q, args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(ctx, q, args...)
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, q, args...)
}

// lock sends b, the transaction's first round trip: its row locks and the reads the rules need.
// what names the write in errors.
func (t *txn) lock(ctx context.Context, b *batch, what string) error {
	if err := b.run(ctx, t); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// commit sends b, then the fence of a fenced transaction, then COMMIT. The server runs COMMIT
// only when every statement before it succeeded; when one failed, the error comes back (the
// fence's as the Service's refusal) and Rollback ends the transaction.
func (t *txn) commit(ctx context.Context, b *batch) error {
	if t.fence != "" {
		b.exec(t.fence, t.fenceArgs...)
	}
	b.exec("COMMIT")
	if err := b.run(ctx, t); err != nil {
		if t.fence != "" && lease.IsFenced(err) {
			return t.refused(err)
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

// Rollback ends the transaction unless commit succeeded or it already ended, and gives the
// connection back.
func (t *txn) Rollback() {
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

// errOutcomeUnknown answers a write whose connection died in the round trip that carried its
// COMMIT; a replay with the same requestNonce (or deposit nonce) is safe.
var errOutcomeUnknown error = &fx.Error{Code: fx.EUNKNOWN, Message: fx.MsgOutcomeUnknown}

// lastInsertID is the batch scan of SELECT LAST_INSERT_ID().
func lastInsertID(id *int64) func(*sql.Rows) error {
	return scanFirst(new(bool), func(r *sql.Rows) error { return r.Scan(id) })
}
