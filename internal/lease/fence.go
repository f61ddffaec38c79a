package lease

import (
	"errors"

	"fxdesk/internal/store"
)

// ErrFenced is returned by FenceStatement once the lease is known lost: there is no statement to
// send, and the write must not happen. IsFenced recognises it with the fence's own refusal.
var ErrFenced = errors.New("lease fence: this process no longer holds the engine lease")

// FenceStatement is the term fence of every write the lease authorises: a statement that checks,
// inside the write's transaction, that the row still names this instance and term and has not
// expired by the database clock. A caller sends it in one round trip with its own statements (a
// multi-statement batch), typically as the last statement before COMMIT: it returns an empty
// result set, share-locks the lease row until the transaction ends (so a claim by another process
// waits for it), and fails — so the server runs nothing after it, COMMIT included — when the
// write must not happen. IsFenced tells that failure from others. It returns ErrFenced, without a
// statement, once the lease is known lost.
//
// Placed just before COMMIT, the shared lock is held only while the transaction commits, so a
// renew (which must take the row exclusively) waits for commits in flight, not for whole
// transactions, and the writes queued behind the renew wait only for its UPDATE.
func (k *Keeper) FenceStatement() (string, []any, error) {
	if k.lost.Load() {
		return "", nil, ErrFenced
	}
	return FenceSQL, []any{k.cfg.Key, k.cfg.InstanceID, k.term.Load()}, nil
}

// FenceSQL is the fence statement; its arguments are the lease id, the instance id and the term.
//
// It is one ordinary SELECT, valid on MySQL 8.0+ and MariaDB 10.6+ (a compound statement with
// SIGNAL is allowed only inside stored programs on MySQL). It fails by making a scalar subquery
// return two rows, error 1242 (store.IsFenceRefusal):
//
//   - the outer query reads the lease row with LOCK IN SHARE MODE (FOR SHARE is MySQL-only). A
//     locking read takes the shared lock and reads the latest committed row, not the
//     transaction's REPEATABLE READ snapshot, so a takeover committed after the transaction began
//     is seen. The lease row is LEFT JOINed to a one-row derived table, `one`, so there is a row
//     to judge when the lease row is missing, which then refuses too. The key is compared with
//     the column itself (not with a derived column), so the column's collation decides, whatever
//     the connection's;
//   - the subquery is correlated with that row: it returns one row (`n` = 1) while the row names
//     this instance and term and expiresAt > NOW(3), and both rows of its two-row table otherwise.
//     Whenever the server evaluates it, it judges the row the locking read returned;
//   - the WHERE compares the subquery's value to NULL, which one row never is, so a fence that
//     holds returns no rows.
const FenceSQL = "SELECT 1 FROM (SELECT 1 AS `n`) AS `one` " +
	"LEFT JOIN `engine_lease` AS `l` ON `l`.`id` = ? " +
	"WHERE (SELECT `two`.`n` FROM (SELECT 1 AS `n` UNION ALL SELECT 2) AS `two` " +
	"WHERE `two`.`n` = 1 OR NOT COALESCE(`l`.`instanceId` = ? AND `l`.`term` = ? AND `l`.`expiresAt` > NOW(3), FALSE)) IS NULL " +
	"LOCK IN SHARE MODE"

// IsFenced reports whether err is the fence refusing a write: ErrFenced, or the error the fence
// statement raises. The server's error (1242) names no statement; it is the fence's because the
// fence is the only statement the desk sends whose scalar subquery can return two rows (see
// store.IsFenceRefusal), so callers ask only of a batch that carried the fence.
func IsFenced(err error) bool {
	return errors.Is(err, ErrFenced) || store.IsFenceRefusal(err)
}
