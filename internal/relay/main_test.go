package relay_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"fxdesk/internal/events"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/redisname"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

var (
	testDB    *sql.DB
	testRedis *dbtest.Redis
	prefixSeq atomic.Int64
)

func TestMain(m *testing.M) {
	// The lease row the relays' fences check: instance "holder" in term 7, for an hour.
	os.Exit(dbtest.MainWithRedis(m, "relay", &testDB, &testRedis, func(db *sql.DB) error {
		_, err := db.Exec("INSERT INTO `engine_lease` (`id`, `instanceId`, `hostname`, `pid`, `term`, `acquiredAt`, `expiresAt`, `updatedAt`) "+
			"VALUES (?, 'holder', 'test', 1, 7, NOW(3), NOW(3) + INTERVAL 1 HOUR, NOW(3))", lease.Key)
		return err
	}))
}

// fakeLease fences with the real fence statement as instance in term: "holder" in term 7 holds
// (the row TestMain wrote); any other instance is refused by the database.
type fakeLease struct {
	instance string
	term     int64
}

var (
	holder = fakeLease{"holder", 7}
	zombie = fakeLease{"zombie", 6}
)

func (l fakeLease) FenceStatement() (string, []any, error) {
	return lease.FenceSQL, []any{lease.Key, l.instance, l.term}, nil
}
func (l fakeLease) Term() int64 { return l.term }

func newRedis(t testing.TB) redis.UniversalClient {
	c := redis.NewClient(&redis.Options{Addr: testRedis.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// names is a prefix of its own per test, so tests share no stream.
func names(t testing.TB) redisname.Names {
	n, err := redisname.New("t" + strconv.FormatInt(prefixSeq.Add(1), 10))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newGate(t testing.TB) (*gate.Gate, *gatetest.Lease, *prometheus.CounterVec) {
	l := &gatetest.Lease{}
	dropped := gate.NewDropped()
	g, err := gate.New(gate.Config{Lease: l, Log: slog.New(slog.DiscardHandler), Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	return g, l, dropped
}

// addEvents commits n events, one transaction each as the desk's writers do, and returns
// their ids.
func addEvents(t testing.TB, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	ids := make([]int64, 0, n)
	for i := range n {
		tx, err := testDB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := events.Record(ctx, tx, events.Event{AccountID: int64(100 + i%3), UserID: 9, Type: events.Deposit, Term: 7,
			Payload: events.Balance{AccountID: int64(100 + i%3), Type: "DEPOSIT", Amount: strconv.Itoa(i + 1), Currency: "USD", IdempotencyKey: "k" + strconv.Itoa(i)}}); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := testDB.QueryRow("SELECT MAX(`id`) FROM `fx_event`").Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// newestID is the outbox's newest event id.
func newestID(t testing.TB) int64 {
	t.Helper()
	var id sql.NullInt64
	if err := testDB.QueryRow("SELECT MAX(`id`) FROM `fx_event`").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// position reads a cursor.
func position(t testing.TB, name string) (pos, term int64) {
	t.Helper()
	if err := testDB.QueryRow("SELECT `position`, `term` FROM `fx_event_relay` WHERE `name` = ?", name).Scan(&pos, &term); err != nil {
		t.Fatal(err)
	}
	return pos, term
}

// setStreamCursor moves the stream's cursor (tests share the one 'stream' row; each starts it
// at the newest event so it relays only its own).
func setStreamCursor(t testing.TB, pos int64) {
	t.Helper()
	if _, err := testDB.Exec("UPDATE `fx_event_relay` SET `position` = ? WHERE `name` = 'stream'", pos); err != nil {
		t.Fatal(err)
	}
}
