package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/lease"
	"fxdesk/internal/testkit/poll"
)

// A standby follower (FXDESK_TAKEOVER=standby) wins only a row that has expired, on another host
// (no dead-pid shortcut): the term moves on by one, TookOver is announced before the lease is
// trusted, Redis is made to agree, and the old holder, when it renews, finds itself lost and fenced.
func TestStandbyTakesOverOnlyAnExpiredRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.keeper(keeperOpts{host: "a", pid: 1})
	mustClaim(t, a, true)

	var mu sync.Mutex
	var events []lease.Event
	trustedAtNotify := true
	var b *lease.Keeper
	b = lease.New(e.db, e.rdb, lease.Config{
		Key: e.key, TTL: 3 * time.Second, Fence: time.Second, Hostname: "b", PID: 7, Standby: true,
		PIDAlive: func(int) bool { return false }, // dead everywhere: only the host name keeps the shortcut away
		Notify: func(ev lease.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
			trustedAtNotify = b.HoldsLease() || b.Serving()
		},
	}, discardLog())
	mustClaim(t, b, false)

	if b.Contend(ctx) {
		t.Fatal("standby won a live row held by another host")
	}
	if !a.Renew(ctx) {
		t.Fatal("the holder's renew failed while the standby contended")
	}
	e.expireRow()
	if !b.Contend(ctx) {
		t.Fatal("standby did not win an expired row")
	}
	if b.Contend(ctx) {
		t.Error("a second contend on a held lease reported another win")
	}
	if !b.HoldsLease() || !b.Serving() || b.Term() != 2 {
		t.Fatalf("after takeover HoldsLease=%v Serving=%v term=%d, want true true 2", b.HoldsLease(), b.Serving(), b.Term())
	}
	mu.Lock()
	if len(events) != 1 || events[0].Kind != lease.TookOver || events[0].Term != 2 {
		t.Errorf("events = %+v, want one took_over for term 2", events)
	}
	if trustedAtNotify {
		t.Error("TookOver was delivered after the lease was already trusted")
	}
	mu.Unlock()
	if h, _, _ := e.row(); h.Hostname != "b" || h.Term != 2 || !h.Live {
		t.Fatalf("row = %+v, want b term 2 live", h)
	}
	if v := e.redisValue(); v != "b:7" {
		t.Errorf("redis key = %q, want b:7 (host b, pid 7)", v)
	}
	if !b.Renew(ctx) {
		t.Error("the new holder cannot renew")
	}

	// The old holder comes back: lost, gate shut, its fenced write refused.
	if a.Renew(ctx) || !a.State().Lost || a.HoldsLease() || a.Serving() {
		t.Fatalf("old holder after takeover: state %+v", a.State())
	}
	tx := e.begin()
	if err := a.Fence(ctx, tx); !errors.Is(err, lease.ErrFenced) {
		t.Errorf("old holder's fence = %v, want ErrFenced", err)
	}
	tx.Rollback()
	if h, _, _ := e.row(); h.Hostname != "b" || h.Term != 2 {
		t.Errorf("row after the old holder's renew = %+v, want b term 2", h)
	}
}

// Run is where the standby loop lives: without Standby a follower's Run never touches the row,
// however long it has been expired; with it, Run takes the expired row at a re-contend and goes
// on renewing it.
func TestRunContendsOnlyOnAStandby(t *testing.T) {
	t.Parallel()
	for _, standby := range []bool{false, true} {
		t.Run("standby="+strconv.FormatBool(standby), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a := e.keeper(keeperOpts{host: "a", pid: 1})
			mustClaim(t, a, true)
			// Notify runs on the keeper's goroutine: it must never block it. Under load the
			// keeper may lapse and restore after the takeover, and a blocked send there would
			// stop Run for good (its deferred stop below would then wait forever). Only the
			// first event matters here; later ones are dropped.
			took := make(chan lease.Event, 1)
			b := lease.New(e.db, e.rdb, lease.Config{
				Key: e.key, TTL: 3 * time.Second, Fence: time.Second, Hostname: "b", PID: 7, Standby: standby,
				Notify: func(ev lease.Event) {
					select {
					case took <- ev:
					default:
					}
				},
			}, discardLog())
			mustClaim(t, b, false)
			e.expireRow()

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- b.Run(ctx) }()
			defer func() {
				cancel()
				if err, ok := poll.Receive(t, done, 10*time.Second, "Run returning after its context ended"); ok && err != nil {
					t.Errorf("Run = %v", err)
				}
			}()
			if !standby {
				// Nothing announces a contend that never happens: watch the row for two renew
				// periods, two ticks at which a standby's Run would have contended.
				select {
				case ev := <-took:
					t.Fatalf("a follower without standby took over: %+v", ev)
				case <-time.After(2 * b.RenewEvery()):
				}
				if h, _, _ := e.row(); h.Hostname != "a" || h.Term != 1 {
					t.Fatalf("row = %+v, want a's expired term 1 untouched", h)
				}
				return
			}
			select {
			case ev := <-took:
				if ev.Kind != lease.TookOver || ev.Term != 2 {
					t.Fatalf("event = %+v, want took_over term 2", ev)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the standby's Run never took the expired row")
			}
			// Taken over: Run now renews, which moves the row's expiry (database clock) past the
			// one the takeover wrote.
			taken := e.expiresAt()
			poll.Until(t, 30*time.Second, 50*time.Millisecond, "the new holder's Run renewing the row (expiry past "+taken.Format(time.StampMilli)+")",
				func() bool { return e.expiresAt().After(taken) })
		})
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// expiresAt is the lease row's expiry on the database clock.
func (e *env) expiresAt() time.Time {
	e.t.Helper()
	var s string
	if err := e.db.QueryRow("SELECT DATE_FORMAT(`expiresAt`, '%Y-%m-%d %H:%i:%s.%f') FROM `engine_lease` WHERE `id` = ?", e.key).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	at, err := time.Parse("2006-01-02 15:04:05.000000", s)
	if err != nil {
		e.t.Fatal(err)
	}
	return at
}
