package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"syscall"

	"fxdesk/internal/store"
)

// pidAlive is kill(pid, 0): only ESRCH proves the process is gone. EPERM means it exists under
// another user.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// Holder is what an arbiter says about who holds the lease.
type Holder struct {
	InstanceID string `json:"instanceId,omitempty"`
	Hostname   string `json:"hostname"`
	PID        int    `json:"pid"`
	Term       int64  `json:"term"`
	Live       bool   `json:"live"` // unexpired by the database clock
	// AdvertiseURL is where the holder answers HTTP (FXDESK_ADVERTISE_URL): follower web processes
	// forward desk-priced requests there. Empty on a row written before the column existed.
	AdvertiseURL string `json:"advertiseUrl,omitempty"`
}

func (h Holder) String() string { return h.Hostname + ":" + strconv.Itoa(h.PID) }

// lostClaim reports errors that mean another contender won a race for the row: a deadlock or a
// Galera certification failure and a lock wait timeout. They are lost claims, never retried,
// because a retry could make two owners.
func lostClaim(err error) bool { return store.IsDeadlock(err) || store.IsLockWaitTimeout(err) }

// claimRow contends for the row. It returns (won, holder seen, err); err is non-nil only when the
// row could not be consulted at all. An attempt that ran out of its deadline is made once more
// (askTwice): the retry is the same conditional claim, so it wins only what the first could have.
func (k *Keeper) claimRow(ctx context.Context) (bool, Holder, error) {
	var won bool
	var h Holder
	err := k.askTwice(ctx, "claim", func(ctx context.Context) (err error) {
		won, h, err = k.claimRowOnce(ctx)
		return err
	})
	return won, h, err
}

// claimRowOnce is one attempt at the claim, within one statement deadline.
//
// An attempt whose deadline passed may still be committed by the server after the driver gave up
// on it (the connection is closed; the statement is not withdrawn). So every claim is scoped to
// the term it observed, and a claim that finds the row naming this instance takes that row's
// term (lostTo): one of our own earlier attempts won it. Together they keep the term this keeper
// believes equal to the row's, whichever of its attempts the server runs last.
func (k *Keeper) claimRowOnce(ctx context.Context) (bool, Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, k.dbTimeout())
	defer cancel()

	// Observe the current holder only to learn whether it is a dead process on this host, and if so
	// under which term. The decision itself is the conditional UPDATE below.
	h, err := k.selectHolder(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		_, err := k.db.ExecContext(ctx,
			"INSERT INTO `engine_lease` (`id`, `instanceId`, `hostname`, `pid`, `advertiseUrl`, `term`, `acquiredAt`, `expiresAt`, `updatedAt`) "+
				"VALUES (?, ?, ?, ?, ?, 1, NOW(3), NOW(3) + INTERVAL ? MICROSECOND, NOW(3))",
			k.cfg.Key, k.cfg.InstanceID, k.cfg.Hostname, k.cfg.PID, k.advertise(), k.cfg.TTL.Microseconds())
		switch {
		case err == nil:
			k.term.Store(1)
			return true, Holder{}, nil
		case store.IsDuplicateKey(err) || lostClaim(err):
			return k.lostTo(ctx)
		}
		return false, Holder{}, fmt.Errorf("claim lease %q: insert: %w", k.cfg.Key, err)
	}
	if err != nil {
		return false, Holder{}, fmt.Errorf("claim lease %q: read: %w", k.cfg.Key, err)
	}

	deadTerm := int64(-1)
	if h.Live && h.Hostname == k.cfg.Hostname && h.PID != k.cfg.PID && !k.cfg.PIDAlive(h.PID) {
		deadTerm = h.Term
		k.log.InfoContext(ctx, "engine lease holder on this host is dead; reclaiming", slog.String("holder", h.String()), slog.Int64("term", h.Term))
	} else if h.Live && h.InstanceID != k.cfg.InstanceID {
		k.sibling = true
	}

	// LAST_INSERT_ID(expr) hands the new term back in the same statement. `term` is assigned first:
	// MySQL evaluates single-table assignments left to right. The claim is scoped to the term just
	// read: it changes nothing the read did not see, so a late attempt of ours cannot move the term
	// past one we already took.
	res, err := k.db.ExecContext(ctx,
		"UPDATE `engine_lease` SET `term` = LAST_INSERT_ID(`term` + 1), `instanceId` = ?, `hostname` = ?, `pid` = ?, `advertiseUrl` = ?, "+
			"`acquiredAt` = NOW(3), `expiresAt` = NOW(3) + INTERVAL ? MICROSECOND, `updatedAt` = NOW(3) "+
			"WHERE `id` = ? AND `term` = ? AND (`expiresAt` <= NOW(3) OR `instanceId` = ? OR (`hostname` = ? AND `pid` = ? AND `term` = ?))",
		k.cfg.InstanceID, k.cfg.Hostname, k.cfg.PID, k.advertise(), k.cfg.TTL.Microseconds(),
		k.cfg.Key, h.Term, k.cfg.InstanceID, k.cfg.Hostname, h.PID, deadTerm)
	if lostClaim(err) {
		return k.lostTo(ctx)
	}
	if err != nil {
		return false, Holder{}, fmt.Errorf("claim lease %q: update: %w", k.cfg.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, Holder{}, fmt.Errorf("claim lease %q: rows affected: %w", k.cfg.Key, err)
	}
	if n != 1 {
		return k.lostTo(ctx)
	}
	term, err := res.LastInsertId()
	if err != nil {
		return false, Holder{}, fmt.Errorf("claim lease %q: new term: %w", k.cfg.Key, err)
	}
	k.term.Store(term)
	return true, Holder{}, nil
}

// lostTo ends a claim whose own statement did not win: the holder the row names now, unless it
// names this instance — then an earlier attempt of ours, whose answer never came back, won the
// row, and its term is ours. That attempt may have started before this claim did (a statement
// left over from an earlier cycle), and its expiry counts from its start, so the row is extended
// for that term, as a renew would, before the claim is won: the trust window, counted from the
// claim's start, then never outlives the row. (A failed read is a loss, as it always was: never a
// second owner.)
func (k *Keeper) lostTo(ctx context.Context) (bool, Holder, error) {
	for {
		h := k.readHolder(ctx)
		if h.InstanceID != k.cfg.InstanceID {
			return false, h, nil
		}
		ok, err := k.extendRow(ctx, h.Term)
		if err != nil {
			return false, Holder{}, fmt.Errorf("claim lease %q: extend our own row: %w", k.cfg.Key, err)
		}
		if ok {
			k.term.Store(h.Term)
			return true, Holder{}, nil
		}
		// Moved on again between the read and the renew (another late attempt): read it again.
	}
}

func (k *Keeper) readHolder(ctx context.Context) Holder {
	h, _ := k.selectHolder(ctx)
	return h
}

// selectHolder is the row's holder; sql.ErrNoRows when there is no row.
func (k *Keeper) selectHolder(ctx context.Context) (Holder, error) {
	h, _, ok, err := ReadRow(ctx, k.db, k.cfg.Key)
	if err == nil && !ok {
		err = sql.ErrNoRows
	}
	return h, err
}

// advertise is the advertised URL as written to the row: NULL when this process has none.
func (k *Keeper) advertise() sql.NullString {
	return sql.NullString{String: k.cfg.AdvertiseURL, Valid: k.cfg.AdvertiseURL != ""}
}

// renewRow extends the row for our instance and term. (false, nil) means the row names someone else.
// An attempt that ran out of its deadline is made once more (askTwice); the renew changes only the
// expiry of our own term, so a late first attempt and its retry may land in either order.
func (k *Keeper) renewRow(ctx context.Context) (bool, error) {
	var ok bool
	err := k.askTwice(ctx, "renew", func(ctx context.Context) (err error) {
		ok, err = k.renewRowOnce(ctx)
		return err
	})
	return ok, err
}

func (k *Keeper) renewRowOnce(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, k.dbTimeout())
	defer cancel()
	return k.extendRow(ctx, k.term.Load())
}

// extendRow is the renew statement for our instance and term.
func (k *Keeper) extendRow(ctx context.Context, term int64) (bool, error) {
	res, err := k.db.ExecContext(ctx,
		"UPDATE `engine_lease` SET `expiresAt` = NOW(3) + INTERVAL ? MICROSECOND, `advertiseUrl` = ?, `updatedAt` = NOW(3) "+
			"WHERE `id` = ? AND `instanceId` = ? AND `term` = ?",
		k.cfg.TTL.Microseconds(), k.advertise(), k.cfg.Key, k.cfg.InstanceID, term)
	if err != nil {
		return false, fmt.Errorf("renew lease %q: %w", k.cfg.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("renew lease %q: rows affected: %w", k.cfg.Key, err)
	}
	return n == 1, nil
}

// ReadRow reads the lease row as operators see it. ok is false when there is no row.
func ReadRow(ctx context.Context, db *sql.DB, key string) (h Holder, expiresInMs int64, ok bool, err error) {
	var url sql.NullString
	err = db.QueryRowContext(ctx,
		"SELECT `instanceId`, `hostname`, `pid`, `advertiseUrl`, `term`, `expiresAt` > NOW(3), TIMESTAMPDIFF(MICROSECOND, NOW(3), `expiresAt`) DIV 1000 "+
			"FROM `engine_lease` WHERE `id` = ?", key).Scan(&h.InstanceID, &h.Hostname, &h.PID, &url, &h.Term, &h.Live, &expiresInMs)
	h.AdvertiseURL = url.String
	if errors.Is(err, sql.ErrNoRows) {
		return Holder{}, 0, false, nil
	}
	if err != nil {
		return Holder{}, 0, false, fmt.Errorf("read lease row %q: %w", key, err)
	}
	return h, expiresInMs, true, nil
}
