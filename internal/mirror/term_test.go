package mirror_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/mirror"
	"fxdesk/internal/testkit/gatetest"
)

// storedSnapshot reads the snapshot key as redis-cli GET would and returns its term and
// USDJPY bid.
func storedSnapshot(t *testing.T, e *env) (term int64, usdjpyBid string) {
	t.Helper()
	raw, err := e.rdb.Get(context.Background(), e.keys.Snapshot).Result()
	must(t, err)
	var doc struct {
		Term   int64                        `json:"term"`
		Quotes map[string]map[string]string `json:"quotes"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("snapshot is not JSON: %v\n%s", err, raw)
	}
	return doc.Term, doc.Quotes["USDJPY"]["bid"]
}

// A zombie's publish — one that passed its gate before another process took the lease and
// reaches Redis after the new holder's first snapshot — is refused by Redis itself, in the same
// round trip, because the stored snapshot carries a newer term. The new holder's prices stay;
// the refusal answers like a fenced write (gate.ErrNotHolder, counted at="fence") and shows in
// the zombie's status. Both publish paths are fenced: the one that reads the pins alongside (the
// first publish) and the plain one, also after Redis forgot the guard script.
func TestPublishOfAnOlderTermIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	now := e.leader.Now()
	zombieSrc, liveSrc := newSource(), newSource()
	zombieSrc.Set("USDJPY", 61.1, 61.2, now)
	liveSrc.Set("USDJPY", 156, 156.02, now)
	zombieGate, dropped := newGate(e, &gatetest.Lease{}) // its gate admitted: the publish is in flight
	zombie := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.Quotes, c.Gate, c.Term = zombieSrc, zombieGate, func() int64 { return 1 }
	})
	live := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.Quotes, c.Term = liveSrc, func() int64 { return 2 }
	})

	// Term 1 published first; the new holder's term 2 replaces it (an older stored term never
	// blocks a newer publisher).
	must(t, zombie.PublishOnce(ctx))
	must(t, live.PublishOnce(ctx))
	if term, bid := storedSnapshot(t, e); term != 2 || bid != "156" {
		t.Fatalf("after the new holder's publish: term %d USDJPY bid %q, want 2 and 156", term, bid)
	}

	zombie2 := e.publisher(func(c *mirror.SnapshotPublisherConfig) { // a first publish: pins read alongside
		c.Quotes, c.Gate, c.Term = zombieSrc, zombieGate, func() int64 { return 1 }
	})
	for name, pub := range map[string]*mirror.SnapshotPublisher{"plain": zombie, "with pin read": zombie2} {
		err := pub.PublishOnce(ctx)
		if !errors.Is(err, mirror.ErrNewerTerm) || !errors.Is(err, gate.ErrNotHolder) {
			t.Fatalf("%s: zombie publish over term 2 = %v, want ErrNewerTerm and gate.ErrNotHolder", name, err)
		}
		if term, bid := storedSnapshot(t, e); term != 2 || bid != "156" {
			t.Fatalf("%s: zombie overwrote the snapshot: term %d USDJPY bid %q", name, term, bid)
		}
		if st := pub.Status(); st.TermRefused != 1 || !strings.Contains(st.LastError, "newer lease term") {
			t.Fatalf("%s: zombie status %+v, want one refusal named", name, st)
		}
	}
	if n := testutil.ToFloat64(dropped.WithLabelValues("mirror_publish", "fence")); n != 2 {
		t.Fatalf("fxdesk_gate_dropped_total{work=mirror_publish,at=fence} = %v, want 2", n)
	}

	// Redis forgot its scripts (a restart, SCRIPT FLUSH): the publish loads it again and is
	// still fenced, on both paths.
	must(t, e.rdb.ScriptFlush(ctx).Err())
	if err := zombie.PublishOnce(ctx); !errors.Is(err, mirror.ErrNewerTerm) {
		t.Fatalf("plain publish after SCRIPT FLUSH = %v, want ErrNewerTerm", err)
	}
	must(t, e.rdb.ScriptFlush(ctx).Err())
	zombie3 := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.Quotes, c.Gate, c.Term = zombieSrc, zombieGate, func() int64 { return 1 }
	})
	if err := zombie3.PublishOnce(ctx); !errors.Is(err, mirror.ErrNewerTerm) {
		t.Fatalf("publish with a pin read after SCRIPT FLUSH = %v, want ErrNewerTerm", err)
	}
	must(t, e.rdb.ScriptFlush(ctx).Err())
	must(t, live.PublishOnce(ctx)) // the holder itself publishes on, same term
	if term, _ := storedSnapshot(t, e); term != 2 {
		t.Fatalf("term %d after the holder's own publish", term)
	}

	// A publisher with no term (lease granted by Redis or fail-open, no row to number it) is not
	// fenced: refusing it would leave followers without prices until the old snapshot expired.
	unnumbered := e.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Quotes = zombieSrc })
	must(t, unnumbered.PublishOnce(ctx))
	if term, bid := storedSnapshot(t, e); term != 0 || bid != "61.1" {
		t.Fatalf("unnumbered publish: term %d bid %q, want 0 and 61.1", term, bid)
	}
}

// The follower refuses a snapshot whose term is older than one it has already accepted: it
// keeps serving the newer holder's prices, logs the refusal once, counts each refused snapshot
// once and shows both in its status. A missing key forgets the newest term (its holder has not
// published for KeyTTL).
func TestFollowerRefusesAnOlderTerm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	now := e.leader.Now()
	zombieSrc, liveSrc := newSource(), newSource()
	zombieSrc.Set("USDJPY", 61.1, 61.2, now)
	liveSrc.Set("USDJPY", 156, 156.02, now)
	live := e.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Quotes, c.Term = liveSrc, func() int64 { return 2 } })
	fol := e.follower(nil)
	must(t, live.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))

	// The zombie's snapshot reaches the key by a path the publish script does not guard (a
	// plain SET: an operator restoring a copy, a tool): the follower alone must refuse it. It is
	// encoded by a term-1 publisher into a key of its own, then copied over.
	zombieAt := func(at time.Time) string {
		scratch := newEnv(t)
		scratch.leader = &clock{now: at}
		pub := scratch.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Quotes, c.Term = zombieSrc, func() int64 { return 1 } })
		must(t, pub.PublishOnce(ctx))
		return scratch.rdb.Get(ctx, scratch.keys.Snapshot).Val()
	}
	for i := range 3 {
		raw := zombieAt(now.Add(time.Duration(i+1) * time.Second))
		must(t, e.rdb.Set(ctx, e.keys.Snapshot, raw, mirror.KeyTTL).Err())
		must(t, fol.PollOnce(ctx))
		must(t, fol.PollOnce(ctx)) // the same refused snapshot again: counted once
		if q, ok := fol.LastTick("USDJPY"); !ok || q.Bid != 156 {
			t.Fatalf("follower serves USDJPY %+v (ok=%v) after a term-1 snapshot, want the term-2 156", q, ok)
		}
		if st := fol.Status(); st.Term != 2 || st.TermRefused != uint64(i+1) {
			t.Fatalf("follower status term %d termRefused %d, want 2 and %d", st.Term, st.TermRefused, i+1)
		}
	}
	if n := strings.Count(e.logs.String(), "quote mirror snapshot refused"); n != 1 {
		t.Fatalf("refusal logged %d times, want once:\n%s", n, e.logs.String())
	}

	// The newer holder publishes again: served at once, the episode ends.
	e.leader.Advance(time.Second)
	liveSrc.Set("USDJPY", 157, 157.02, e.leader.Now())
	must(t, live.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if q, _ := fol.LastTick("USDJPY"); q.Bid != 157 {
		t.Fatalf("USDJPY bid %v after the holder's next publish, want 157", q.Bid)
	}

	// A holder granted by Redis alone (no row numbered it) publishes term 0: it is served, so
	// fxdesk-cron keeps its prices, and it does not move the newest term — a term-1 snapshot is
	// still refused after it.
	e.leader.Advance(time.Second)
	redisOnly := newSource()
	redisOnly.Set("USDJPY", 158, 158.02, e.leader.Now())
	must(t, e.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Quotes = redisOnly }).PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if q, _ := fol.LastTick("USDJPY"); q.Bid != 158 || fol.Status().Term != 0 {
		t.Fatalf("after a term-0 publish: USDJPY bid %v, status term %d; want 158 and 0", q.Bid, fol.Status().Term)
	}
	must(t, e.rdb.Set(ctx, e.keys.Snapshot, zombieAt(e.leader.Now().Add(30*time.Second)), mirror.KeyTTL).Err())
	must(t, fol.PollOnce(ctx))
	if q, _ := fol.LastTick("USDJPY"); q.Bid != 158 || fol.Status().TermRefused != 4 {
		t.Fatalf("a term-1 snapshot after term 2 and term 0: USDJPY bid %v, refused %d; want 158 and 4", q.Bid, fol.Status().TermRefused)
	}

	// The key expired (nobody published for KeyTTL) or Redis restarted empty: the next snapshot
	// is served whatever its term, a lease row that restarted its count included.
	must(t, e.rdb.Del(ctx, e.keys.Snapshot).Err())
	must(t, fol.PollOnce(ctx))
	must(t, e.rdb.Set(ctx, e.keys.Snapshot, zombieAt(e.leader.Now().Add(time.Minute)), mirror.KeyTTL).Err())
	must(t, fol.PollOnce(ctx))
	if q, _ := fol.LastTick("USDJPY"); q.Bid != 61.1 {
		t.Fatalf("USDJPY bid %v after the key was gone, want the term-1 snapshot's 61.1", q.Bid)
	}
}

// The mirror stops with the lease and resumes with it, through a real keeper: past its trust
// window the holder publishes nothing; a renew that keeps the same term resumes publishing under
// that term; once another process took the lease, it never publishes again.
func TestPublisherFollowsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	key := fmt.Sprintf("mirror-test-%d", keySeq.Add(1))
	keeper := func(host string, c *clock) *lease.Keeper {
		return lease.New(testDB, e.rdb, lease.Config{Key: key, TTL: 3 * time.Second, Fence: time.Second,
			Hostname: host, PID: 1, Now: c.Now, PIDAlive: func(int) bool { return true }}, e.log)
	}
	clk := newClock(0)
	a := keeper("a", clk)
	if won, err := a.Claim(ctx); err != nil || !won {
		t.Fatalf("claim = %v, %v", won, err)
	}
	g, dropped := newGate(e, a)
	e.src.Set("USDJPY", 61.1, 61.2, e.leader.Now())
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Gate, c.Term = g, a.Term })
	must(t, pub.PublishOnce(ctx))
	if term, _ := storedSnapshot(t, e); term != 1 {
		t.Fatalf("term %d, want 1", term)
	}
	published := func() string { return e.rdb.Get(ctx, e.keys.Snapshot).Val() }
	before := published()

	// Trust runs out (TTL − fence = 2 s without a renew): the next cycle publishes nothing.
	clk.Advance(2100 * time.Millisecond)
	e.leader.Advance(time.Second)
	if err := pub.PublishOnce(ctx); !errors.Is(err, gate.ErrNotHolder) {
		t.Fatalf("publish past the trust window = %v, want gate.ErrNotHolder", err)
	}
	if published() != before {
		t.Fatal("snapshot written past the trust window")
	}

	// A renew succeeds (nobody took the row): same term, publishing resumes.
	if !a.Renew(ctx) {
		t.Fatal("renew failed with the row still ours")
	}
	must(t, pub.PublishOnce(ctx))
	if term, _ := storedSnapshot(t, e); term != 1 || published() == before {
		t.Fatalf("after the restored renew: term %d, changed %v; want a new term-1 snapshot", term, published() != before)
	}

	// Another process takes the row: a's renew finds it lost, and it never publishes again.
	if _, err := testDB.ExecContext(ctx, "UPDATE `engine_lease` SET `expiresAt` = NOW(3) - INTERVAL 1 SECOND WHERE `id` = ?", key); err != nil {
		t.Fatal(err)
	}
	b := keeper("b", newClock(0))
	if won, err := b.Claim(ctx); err != nil || !won || b.Term() != 2 {
		t.Fatalf("b claim = %v, %v, term %d", won, err, b.Term())
	}
	if a.Renew(ctx) || !a.State().Lost {
		t.Fatal("a did not find the lease lost")
	}
	last := published()
	for range 3 {
		e.leader.Advance(time.Second)
		if err := pub.PublishOnce(ctx); !errors.Is(err, gate.ErrNotHolder) {
			t.Fatalf("publish after the loss = %v, want gate.ErrNotHolder", err)
		}
	}
	if published() != last {
		t.Fatal("snapshot written after the lease was lost")
	}
	if n := testutil.ToFloat64(dropped.WithLabelValues("mirror_publish", "gate")); n != 4 {
		t.Fatalf("mirror_publish dropped at the gate %v times, want 4", n)
	}
}
