package lease_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"fxdesk/internal/lease"
)

// A MySQL that answers slowly is not a MySQL that is down. The row is held here by another
// transaction (SELECT … FOR UPDATE), so the keeper's statement waits on the server past its
// deadline (500 ms at the tests' 3 s TTL), as it would behind a loaded server. The keeper asks
// once more; the transaction ends once that second attempt is on the server, and the row — not
// Redis — decides.

// lockRow holds e's lease row in a transaction of its own until the returned function (or the
// test's end) commits it.
func (e *env) lockRow() func() {
	e.t.Helper()
	tx := e.begin()
	var term int64
	if err := tx.QueryRow("SELECT `term` FROM `engine_lease` WHERE `id` = ? FOR UPDATE", e.key).Scan(&term); err != nil {
		e.t.Fatal(err)
	}
	return func() {
		if err := tx.Commit(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			e.t.Error(err)
		}
	}
}

// waitingUpdates lists the server's connections running an UPDATE of e's lease row.
func (e *env) waitingUpdates() map[int64]bool {
	e.t.Helper()
	rows, err := e.db.Query("SELECT `ID` FROM `information_schema`.`PROCESSLIST` WHERE `INFO` LIKE 'UPDATE `engine\\_lease`%' AND `INFO` LIKE CONCAT('%', ?, '%')", e.key)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	ids := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// unlockOnSecondAttempt runs act while the row is locked and ends the lock as soon as a second
// UPDATE of the row (on another connection than the first) waits on the server, or when act has
// returned. It reports whether a second attempt was seen.
func (e *env) unlockOnSecondAttempt(act func()) bool {
	e.t.Helper()
	unlock := e.lockRow()
	defer unlock()
	done := make(chan struct{})
	go func() { defer close(done); act() }()
	seen := map[int64]bool{}
	deadline := time.After(10 * time.Second)
	for {
		for id := range e.waitingUpdates() {
			seen[id] = true
		}
		if len(seen) >= 2 {
			unlock()
			<-done
			return true
		}
		select {
		case <-done:
			return false
		case <-deadline:
			e.t.Fatal("the keeper neither returned nor sent a second UPDATE within 10 s")
		case <-time.After(20 * time.Millisecond): // polling the server's process list
		}
	}
}

func TestSlowClaimIsAskedAgainAndTheRowDecides(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.holder(t) // term 1
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := e.keeper(keeperOpts{host: "b", pid: 2})
	var won bool
	var err error
	retried := e.unlockOnSecondAttempt(func() { won, err = b.Claim(context.Background()) })
	if err != nil || !won {
		t.Fatalf("claim = %v, %v; want won", won, err)
	}
	h, _, _ := e.row()
	s := b.State()
	if s.Arbiter != lease.ArbiterRow || s.Term != h.Term || h.InstanceID != b.InstanceID() {
		t.Fatalf("keeper: arbiter %q term %d; row: %s term %d (ours: %v); second attempt sent: %v — want the row's grant, at the row's term",
			s.Arbiter, s.Term, h, h.Term, h.InstanceID == b.InstanceID(), retried)
	}
	// The first attempt, committed after the driver gave up on it, took term 2; the second,
	// scoped to term 1, found the row ours and took that term rather than a third.
	if h.Term != 2 {
		t.Errorf("row term = %d, want 2", h.Term)
	}
	tx := e.begin()
	if err := b.Fence(context.Background(), tx); err != nil {
		t.Errorf("fence after the slow claim = %v", err)
	}
}

func TestSlowRenewIsAskedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := e.holder(t)
	before := e.expiresAt()
	var ok bool
	retried := e.unlockOnSecondAttempt(func() { ok = k.Renew(context.Background()) })
	if !ok {
		t.Fatalf("renew behind a slow row failed (second attempt sent: %v); state %+v", retried, k.State())
	}
	if !e.expiresAt().After(before) {
		t.Error("the row's expiry did not move")
	}
	if s := k.State(); s.Arbiter != lease.ArbiterRow || s.Term != 1 {
		t.Errorf("state = %+v, want the row's term 1", s)
	}
}

// A claim whose every attempt ran out of time falls back to Redis (term 0) — but the server may
// still commit the attempts it was sent, so the row can name this process at a term the keeper
// never heard. The next renew claims the row it already holds and takes the term the row then
// carries, so the fence holds.
func TestClaimCommittedAfterItsDeadlineIsTakenUpByTheNextRenew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.holder(t)
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := e.keeper(keeperOpts{host: "b", pid: 2})
	unlock := e.lockRow()
	mustClaim(t, b, true) // both attempts wait behind the lock past their deadlines
	if s := b.State(); s.Arbiter != lease.ArbiterRedis || s.Term != 0 {
		t.Fatalf("state with the row locked through both attempts = %+v, want Redis at term 0", s)
	}
	unlock()
	eventually(t, 5*time.Second, func() bool { h, _, _ := e.row(); return h.InstanceID == b.InstanceID() })

	if !b.Renew(context.Background()) {
		t.Fatalf("renew failed: %+v", b.State())
	}
	h, _, _ := e.row()
	if s := b.State(); s.Arbiter != lease.ArbiterRow || s.Term != h.Term || h.InstanceID != b.InstanceID() {
		t.Fatalf("after the renew: keeper %+v, row %+v; want the row's grant at the row's term", s, h)
	}
	tx := e.begin()
	if err := b.Fence(context.Background(), tx); err != nil {
		t.Errorf("fence = %v", err)
	}
}

// eventually polls cond every 20 ms until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
