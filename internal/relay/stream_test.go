package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"fxdesk/internal/events"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/redisname"
	"fxdesk/internal/relay"
	"fxdesk/internal/testkit/dbtest"
)

// The stream tests share the one 'stream' cursor row, so they do not run in parallel.

func newStream(t testing.TB, n redisname.Names, rdb redis.UniversalClient, g *gate.Gate, l relay.Lease, batch int) *relay.Stream {
	t.Helper()
	s, err := relay.NewStream(relay.StreamConfig{DB: testDB, Redis: rdb, Names: n, Gate: g, Lease: l, Interval: 10 * time.Millisecond,
		Batch: batch, MaxLen: 1 << 20, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drain runs cycles until one reads nothing.
func drain(t testing.TB, s *relay.Stream) {
	t.Helper()
	for {
		n, err := s.Cycle(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// streamIDs reads every entry of the stream and checks each entry's fields name its id.
func streamIDs(t testing.TB, rdb redis.UniversalClient, key string) []int64 {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 0, len(msgs))
	for _, m := range msgs {
		id, err := strconv.ParseInt(m.Values["id"].(string), 10, 64)
		if err != nil || relay.EntryID(id) != m.ID {
			t.Fatalf("entry %s carries id %v", m.ID, m.Values["id"])
		}
		ids = append(ids, id)
	}
	return ids
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every committed event reaches the stream once, in id order, with the documented fields, in
// batches; the cursor ends at the last id, recorded with the relay's term.
func TestStreamRelaysEveryEventOnceInOrder(t *testing.T) {
	setStreamCursor(t, newestID(t))
	want := addEvents(t, 130)
	n, rdb := names(t), newRedis(t)
	g, _, _ := newGate(t)
	s := newStream(t, n, rdb, g, holder, 50)
	drain(t, s)

	if got := streamIDs(t, rdb, n.Events()); !equalIDs(got, want) {
		t.Fatalf("stream holds %d ids %v…, want %d ids %v…", len(got), got[:min(3, len(got))], len(want), want[:3])
	}
	if pos, term := position(t, relay.StreamCursor); pos != want[len(want)-1] || term != 7 {
		t.Errorf("cursor = %d (term %d), want %d (term 7)", pos, term, want[len(want)-1])
	}
	if st := s.Stats(); st.Relayed != 130 || st.Duplicates != 0 {
		t.Errorf("stats = %+v, want 130 relayed, no duplicates", st)
	}
	// The fields of one entry, against the table.
	es, err := events.List(context.Background(), testDB, events.Filter{After: want[0] - 1, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := rdb.XRange(context.Background(), n.Events(), relay.EntryID(want[0]), relay.EntryID(want[0])).Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("entry %d: %v %v", want[0], msgs, err)
	}
	e, v := es[0], msgs[0].Values
	for field, w := range map[string]string{"id": strconv.FormatInt(e.ID, 10), "accountId": strconv.FormatInt(e.AccountID, 10), "userId": "9",
		"type": "balance.deposit", "term": "7", "createdAt": e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), "payload": string(e.Payload)} {
		if v[field] != w {
			t.Errorf("entry field %s = %v, want %q", field, v[field], w)
		}
	}
	if len(v) != 7 {
		t.Errorf("entry has %d fields, want 7: %v", len(v), v)
	}
}

// A relay stopped between its XADDs and the position's write (here: its fence refused, as for a
// holder that lost the lease, so the transaction rolls back after the XADDs) leaves the
// position where it was; the next relay sends the same events again, Redis keeps one entry per
// id, and nothing is skipped.
func TestStreamResendsFromTheStoredPositionAfterAStop(t *testing.T) {
	start := newestID(t)
	setStreamCursor(t, start)
	want := addEvents(t, 40)
	n, rdb := names(t), newRedis(t)
	g, _, dropped := newGate(t)

	stopped := newStream(t, n, rdb, g, zombie, 500)
	if _, err := stopped.Cycle(context.Background()); !errors.Is(err, gate.ErrNotHolder) || !lease.IsFenced(err) {
		t.Fatalf("cycle under a refused fence = %v, want the fence's refusal", err)
	}
	if got := testutil.ToFloat64(dropped.WithLabelValues("event_relay", "fence")); got != 1 {
		t.Errorf("fence refusals counted = %v, want 1", got)
	}
	if got := streamIDs(t, rdb, n.Events()); !equalIDs(got, want) {
		t.Fatalf("the stopped relay's XADDs: %d entries, want %d", len(got), len(want))
	}
	if pos, _ := position(t, relay.StreamCursor); pos != start {
		t.Fatalf("cursor moved to %d by a refused relay, want %d", pos, start)
	}

	more := addEvents(t, 5)
	next := newStream(t, n, rdb, g, holder, 500)
	drain(t, next)
	if got, want := streamIDs(t, rdb, n.Events()), append(want, more...); !equalIDs(got, want) {
		t.Fatalf("stream after the resend holds %v, want %v", got, want)
	}
	if st := next.Stats(); st.Duplicates != 40 || st.Relayed != 5 {
		t.Errorf("stats = %+v, want 40 duplicates (sent again) and 5 relayed", st)
	}
	if pos, _ := position(t, relay.StreamCursor); pos != more[len(more)-1] {
		t.Errorf("cursor = %d, want %d", pos, more[len(more)-1])
	}
}

// A process whose gate is shut (a follower, a holder past its trust window) sends nothing and
// writes nothing.
func TestStreamSendsNothingWithoutTheLease(t *testing.T) {
	start := newestID(t)
	setStreamCursor(t, start)
	addEvents(t, 3)
	n, rdb := names(t), newRedis(t)
	g, l, _ := newGate(t)
	l.Lose()
	s := newStream(t, n, rdb, g, holder, 500)
	if _, err := s.Cycle(context.Background()); !errors.Is(err, gate.ErrNotHolder) {
		t.Fatalf("cycle without the lease = %v, want ErrNotHolder", err)
	}
	if exists, err := rdb.Exists(context.Background(), n.Events()).Result(); err != nil || exists != 0 {
		t.Errorf("stream exists = %d (%v), want none", exists, err)
	}
	if pos, _ := position(t, relay.StreamCursor); pos != start {
		t.Errorf("cursor = %d, want %d", pos, start)
	}
}

// A cycle holds the cursor row's lock from its read to its commit, so a relay whose row is
// locked (by a second relay, or an operator) waits and sends nothing meanwhile.
func TestStreamWaitsForTheCursorLock(t *testing.T) {
	setStreamCursor(t, newestID(t))
	want := addEvents(t, 2)
	n, rdb := names(t), newRedis(t)
	g, _, _ := newGate(t)
	s := newStream(t, n, rdb, g, holder, 500)

	tx, err := testDB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT `position` FROM `fx_event_relay` WHERE `name` = 'stream' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Cycle(context.Background()); done <- err }()
	waitLockWait(t)
	if got := streamIDs(t, rdb, n.Events()); len(got) != 0 {
		t.Fatalf("a relay waiting for the cursor lock sent %v", got)
	}
	tx.Rollback()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := streamIDs(t, rdb, n.Events()); !equalIDs(got, want) {
		t.Fatalf("stream = %v, want %v", got, want)
	}
}

// waitLockWait returns once some transaction waits for a row lock: the relay is blocked.
func waitLockWait(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The relay's locking read, running: a lookup by primary key waits for the row lock in
		// the optimizer's "Statistics" state, which INNODB_TRX does not always list.
		var n int
		if err := testDB.QueryRow("SELECT COUNT(*) FROM `information_schema`.`PROCESSLIST` WHERE `DB` = DATABASE() AND `ID` <> CONNECTION_ID() " +
			"AND `COMMAND` = 'Query' AND `INFO` LIKE '%fx_event_relay%FOR UPDATE%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay does not wait for the cursor lock")
		}
		time.Sleep(5 * time.Millisecond) // polling the server's transaction list, which has no signal
	}
}

// Run drains a burst of 5,000 events (the burst of closes) and reports how long it took from
// the last commit until the stream's cursor reached it. Run it with -bench=StreamDrain.
func BenchmarkStreamDrain(b *testing.B) {
	n, rdb := names(b), newRedis(b)
	g, _, _ := newGate(b)
	for b.Loop() {
		b.StopTimer()
		setStreamCursor(b, newestID(b))
		ids := addEvents(b, 5000)
		s, err := relay.NewStream(relay.StreamConfig{DB: testDB, Redis: rdb, Names: n, Gate: g, Lease: holder, Interval: 100 * time.Millisecond,
			Batch: 500, MaxLen: 1 << 20, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		for {
			if pos, _ := position(b, relay.StreamCursor); pos == ids[len(ids)-1] {
				break
			}
			time.Sleep(time.Millisecond) // polling the cursor row
		}
		cancel()
		<-done
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/5000-events")
}

// With Replicas set, the position moves past a batch only once that many Redis replicas hold it
// (WAIT): without a replica the batch stays unrecorded and goes again; with one attached, it is
// recorded.
func TestStreamWaitsForItsReplicas(t *testing.T) {
	start := newestID(t)
	setStreamCursor(t, start)
	want := addEvents(t, 3)
	n, rdb := names(t), newRedis(t)
	g, _, _ := newGate(t)
	s, err := relay.NewStream(relay.StreamConfig{DB: testDB, Redis: rdb, Names: n, Gate: g, Lease: holder, Interval: 10 * time.Millisecond,
		Batch: 500, MaxLen: 1 << 20, Replicas: 1, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cycle(context.Background()); err == nil || !strings.Contains(err.Error(), "0 of 1 Redis replicas") {
		t.Fatalf("cycle with no replica = %v, want the replicas' refusal", err)
	}
	if pos, _ := position(t, relay.StreamCursor); pos != start {
		t.Fatalf("cursor moved to %d with no replica holding the batch, want %d", pos, start)
	}

	replica, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rc.Close()
	host, port, _ := strings.Cut(testRedis.Addr, ":")
	if err := rc.Do(context.Background(), "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(context.Background(), "REPLICAOF", "NO", "ONE")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // polling the link's state
		info, err := rc.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica never linked up: %v %s", err, info)
		}
	}
	drain(t, s)
	if pos, _ := position(t, relay.StreamCursor); pos != want[len(want)-1] {
		t.Fatalf("cursor = %d once a replica holds the batch, want %d", pos, want[len(want)-1])
	}
	if got := streamIDs(t, rc, n.Events()); !equalIDs(got, want) {
		t.Fatalf("the replica holds %v, want %v", got, want)
	}
}
