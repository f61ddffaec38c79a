package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/fx"
)

// Server error numbers the desk acts on. They are the same on MySQL 8 and MariaDB; this file is
// the only place that reads a driver error's number, so a new server or driver changes one file.
const (
	erNodeNotReady    = 1047 // ER_UNKNOWN_COM_ERROR, which a Galera node answers to every statement while it is not in the primary component (see NodeNotReady)
	erDupEntry        = 1062 // ER_DUP_ENTRY: a unique key already holds the value
	erLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: innodb_lock_wait_timeout passed
	erLockDeadlock    = 1213 // ER_LOCK_DEADLOCK: InnoDB (or Galera certification) chose this transaction as the victim
	erSubqueryNo1Row  = 1242 // ER_SUBQUERY_NO_1_ROW: the lease fence's refusal (see IsFenceRefusal)
	erDataOutOfRange  = 1690 // ER_DATA_OUT_OF_RANGE: the group commit's staleness check (see IsStale)
	erRowIsReferenced = 1451 // ER_ROW_IS_REFERENCED_2: a foreign key still points at the row being deleted
)

func serverError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}

// IsDuplicateKey reports whether err is a unique-key violation (1062).
func IsDuplicateKey(err error) bool { return serverError(err, erDupEntry) }

// IsReferenced reports whether a DELETE was refused because rows of another table still point
// at the row (1451).
func IsReferenced(err error) bool { return serverError(err, erRowIsReferenced) }

// IsDeadlock reports whether the server rolled the transaction back as a deadlock victim, or a
// Galera cluster refused it at certification (both 1213). The whole transaction was undone.
func IsDeadlock(err error) bool { return serverError(err, erLockDeadlock) }

// IsLockWaitTimeout reports whether a statement gave up waiting for a row lock (1205). Only the
// statement is undone (innodb_rollback_on_timeout is off by default); callers roll back the rest.
func IsLockWaitTimeout(err error) bool { return serverError(err, erLockWaitTimeout) }

// IsFenceRefusal reports whether err is the error the lease fence raises when it refuses a
// write: a scalar subquery that returned more than one row (1242). The fence (lease.FenceSQL) is
// the only statement the desk sends whose scalar subquery can return more than one row — every
// other scalar subquery selects by a unique key or with LIMIT 1 — so in a batch that carries the
// fence, 1242 is the fence. lease.IsFenced is the API callers use; this is its server half.
func IsFenceRefusal(err error) bool { return serverError(err, erSubqueryNo1Row) }

// IsStale reports whether err is the error the group commit's one-round-trip check raises when a
// row it remembered has changed: an unsigned integer overflow (1690), which the check computes
// only then. It is a different error from the fence's, so a batch that carries both tells which
// refused.
func IsStale(err error) bool { return serverError(err, erDataOutOfRange) }

// NodeNotReady reports whether err is a Galera node refusing a statement because it is not in
// the cluster's primary component ("WSREP has not yet prepared node for application use", 1047):
// cut off from the others, or still joining. Nothing was written, and the node answers no
// statement until it rejoins; a load balancer in front of the cluster (docs/cluster.md) moves
// new connections to a node that serves. The desk never sends the unknown protocol command 1047
// means on one server. The server answered, so it is not Unreachable: the lease keeper treats
// it as a refused renew, never as a reason to let Redis decide.
func NodeNotReady(err error) bool { return serverError(err, erNodeNotReady) }

// Unreachable reports whether err means the MySQL server could not be reached at all, as opposed
// to a server that answered with an error, or a migration that failed (ErrMigrate).
func Unreachable(err error) bool {
	return err != nil && !ServerRefused(err) && !errors.Is(err, ErrMigrate)
}

// ServerRefused reports whether err is a statement the server refused (any server error). In a
// batch of statements sent in one round trip, the server runs nothing after the statement it
// refused, COMMIT included, so such a batch committed nothing; an error of any other kind (the
// connection, the driver reading the answers) leaves that unknown.
func ServerRefused(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me)
}

// rolledBackAttempts is how many times RetryRolledBack runs a transaction in all. A deadlock
// between two requests resolves on the first retry almost always; five attempts with the backoff
// below ride out a burst on one row without holding a request for long (under 60 ms of pauses
// in all).
const rolledBackAttempts = 5

// RolledBack reports whether the server rolled err's transaction back as a deadlock victim, or
// one of its statements gave up waiting for a lock: a transaction that, rolled back whole,
// may simply be run again.
func RolledBack(err error) bool { return IsDeadlock(err) || IsLockWaitTimeout(err) }

// RetryRolledBack runs txn, and runs it again (at most five times in all) while it fails because
// the server rolled it back as a deadlock victim or a lock wait timed out, after a short random
// pause that grows with each attempt (so two writers that collided do not collide again in step).
// txn must begin and end its own transaction and roll back on any error — the whole transaction,
// never a statement of it — so a retry is exactly one more attempt at a transaction that
// committed nothing. It stops early when ctx ends.
//
// Past the retries, the error it returns is still the server's (IsDeadlock, IsLockWaitTimeout),
// wrapped in an fx.EUNAVAILABLE with fx.MsgContended: nothing was written and the client may
// retry, which the API answers 503 with Retry-After — a refusal, not an internal error.
//
// Never use it for the lease claim, where a deadlock is a lost claim.
func RetryRolledBack(ctx context.Context, txn func() error) error {
	for attempt := 1; ; attempt++ {
		err := txn()
		if err == nil || !RolledBack(err) {
			return err
		}
		if attempt == rolledBackAttempts || ctx.Err() != nil {
			return contended(err)
		}
		// Full jitter: a pause drawn from [0, 4 ms), then [0, 8 ms), [0, 16 ms), [0, 32 ms).
		pause := time.Duration(rand.Int64N(int64(4*time.Millisecond) << (attempt - 1)))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return contended(err)
		case <-t.C:
		}
	}
}

// contended is the answer of a transaction rolled back more often than RetryRolledBack retries.
// Both the refusal and the server's error stay in the chain: fx.ErrorCode finds the first, the
// logs and IsDeadlock the second.
func contended(err error) error {
	return fmt.Errorf("%w (%w)", &fx.Error{Code: fx.EUNAVAILABLE, Message: fx.MsgContended}, err)
}

// Commit commits tx. A connection lost under the COMMIT leaves its outcome unknown — the server
// may have committed before the connection died — so it is answered as EUNKNOWN (a 504 saying
// the change may have been made), never as an outage in which nothing was written.
func Commit(tx *sql.Tx) error {
	err := tx.Commit()
	if ConnectionLost(err) {
		return fmt.Errorf("%w: %w", &fx.Error{Code: fx.EUNKNOWN, Message: fx.MsgChangeUnknown}, err)
	}
	return err
}

// ConnectionLost reports whether err is the connection to MySQL failing — refused, reset, cut,
// timed out on the network, or closed under a statement — rather than the server answering with
// an error. Whatever the statement was, the server may never have seen it; if it was a COMMIT,
// it may have committed.
func ConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne)
}
