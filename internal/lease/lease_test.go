package lease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/lease"
	"fxdesk/internal/redisname"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/tcpproxy"
)

var (
	keySeq    atomic.Int64
	testDB    *dbtest.Database
	testRedis *dbtest.Redis
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if testDB, err = dbtest.NewDatabase("lease"); err != nil {
		fmt.Fprintln(os.Stderr, "lease tests need MariaDB on 127.0.0.1:3306:", err)
		return 1
	}
	defer testDB.Drop()
	if testRedis, err = dbtest.StartRedis(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testRedis.Stop()
	db, err := store.Open(context.Background(), testDB.DSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	if err := store.Migrate(context.Background(), db, slog.New(slog.DiscardHandler)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// fakeClock moves only when told; it keeps a monotonic reading, as time.Now does.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// syncBuffer collects log output from several goroutines.
type syncBuffer = dbtest.LogBuffer

type env struct {
	t   testing.TB
	db  *sql.DB
	rdb *redis.Client
	key string
}

// newEnv gives each test its own lease key, so tests in this package can run in parallel.
func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, testDB.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: testRedis.Addr})
	t.Cleanup(func() { rdb.Close() })
	return &env{t: t, db: db, rdb: rdb, key: fmt.Sprintf("test-%d-%.40s", keySeq.Add(1), strings.ReplaceAll(t.Name(), "/", "-"))}
}

type keeperOpts struct {
	host     string
	pid      int
	clock    *fakeClock
	db       *sql.DB
	rdb      redis.UniversalClient
	alive    func(int) bool
	inst     int
	url      string
	log      *syncBuffer
	notified *[]lease.Event
	standby  bool
	names    redisname.Names // the install's Redis names; zero: the default install
}

func (e *env) keeper(o keeperOpts) *lease.Keeper {
	if o.host == "" {
		o.host = "host-a"
	}
	if o.pid == 0 {
		o.pid = 1000
	}
	if o.db == nil {
		o.db = e.db
	}
	if o.rdb == nil {
		o.rdb = e.rdb
	}
	if o.alive == nil {
		o.alive = func(int) bool { return true }
	}
	if o.log == nil {
		o.log = &syncBuffer{}
	}
	cfg := lease.Config{
		Key: e.key, TTL: 3 * time.Second, Fence: time.Second,
		Hostname: o.host, PID: o.pid, AdvertiseURL: o.url, Instances: max(o.inst, 1), PIDAlive: o.alive,
		Standby: o.standby, Names: o.names,
	}
	if o.clock != nil {
		cfg.Now = o.clock.Now
	}
	if o.notified != nil {
		var mu sync.Mutex
		cfg.Notify = func(ev lease.Event) {
			mu.Lock()
			*o.notified = append(*o.notified, ev)
			mu.Unlock()
		}
	}
	return lease.New(o.db, o.rdb, cfg, slog.New(slog.NewTextHandler(o.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

func (e *env) row() (lease.Holder, int64, bool) {
	e.t.Helper()
	h, ms, ok, err := lease.ReadRow(context.Background(), e.db, e.key)
	if err != nil {
		e.t.Fatal(err)
	}
	return h, ms, ok
}

// expireRow moves the row's expiry into the past, as the database clock passing it would.
func (e *env) expireRow() {
	e.t.Helper()
	if _, err := e.db.Exec("UPDATE `engine_lease` SET `expiresAt` = NOW(3) - INTERVAL 1 SECOND WHERE `id` = ?", e.key); err != nil {
		e.t.Fatal(err)
	}
}

// redisKey is the Redis lease key of e's lease in the default install.
func (e *env) redisKey() string { return redisname.Names{}.EngineLease(e.key) }

func (e *env) redisValue() string {
	v, err := e.rdb.Get(context.Background(), e.redisKey()).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func mustClaim(t *testing.T, k *lease.Keeper, want bool) {
	t.Helper()
	got, err := k.Claim(context.Background())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if got != want {
		t.Fatalf("claim won = %v, want %v", got, want)
	}
}

// holder returns a keeper with the default options that has claimed e's lease.
func (e *env) holder(t *testing.T) *lease.Keeper {
	t.Helper()
	k := e.keeper(keeperOpts{})
	mustClaim(t, k, true)
	return k
}

// begin opens a transaction on the test database, rolled back when the test ends if the test
// has not ended it.
func (e *env) begin() *sql.Tx {
	e.t.Helper()
	tx, err := e.db.Begin()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { tx.Rollback() })
	return tx
}

// The row carries the holder's advertised URL beside hostname and pid: written by the claim that
// wins (insert and takeover alike), rewritten by every renew (so a row put back by hand, or by a
// binary without the column, regains it), and never by a loser.
func TestRowCarriesTheHoldersAdvertisedURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.keeper(keeperOpts{host: "host-a", pid: 11, url: "http://10.0.0.1:4000"})
	b := e.keeper(keeperOpts{host: "host-b", pid: 22, url: "http://10.0.0.2:4000"})
	mustClaim(t, a, true)
	mustClaim(t, b, false)
	if h, _, _ := e.row(); h.AdvertiseURL != "http://10.0.0.1:4000" {
		t.Fatalf("after the insert the row advertises %q", h.AdvertiseURL)
	}
	if _, err := e.db.Exec("UPDATE `engine_lease` SET `advertiseUrl` = NULL WHERE `id` = ?", e.key); err != nil {
		t.Fatal(err)
	}
	if !a.Renew(context.Background()) {
		t.Fatal("renew failed")
	}
	if h, _, _ := e.row(); h.AdvertiseURL != "http://10.0.0.1:4000" {
		t.Fatalf("after a renew the row advertises %q", h.AdvertiseURL)
	}
	e.expireRow()
	c := e.keeper(keeperOpts{host: "host-c", pid: 33, url: "http://10.0.0.3:4000"})
	mustClaim(t, c, true)
	if h, _, _ := e.row(); h.AdvertiseURL != "http://10.0.0.3:4000" || h.Hostname != "host-c" {
		t.Fatalf("after a takeover the row is %+v", h)
	}
}

func TestClaimDecidedByRowRedisAgrees(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.keeper(keeperOpts{host: "host-a", pid: 11})
	b := e.keeper(keeperOpts{host: "host-b", pid: 22})
	mustClaim(t, a, true)
	mustClaim(t, b, false)

	h, ms, ok := e.row()
	if !ok || h.Hostname != "host-a" || h.PID != 11 || h.Term != 1 || !h.Live {
		t.Fatalf("row = %+v ok=%v, want host-a:11 term 1 live", h, ok)
	}
	if ms <= 0 || ms > 3000 {
		t.Errorf("row expires in %d ms, want within the 3 s TTL", ms)
	}
	if v := e.redisValue(); v != "host-a:11" {
		t.Errorf("redis value = %q, want host-a:11", v)
	}
	ttl := e.rdb.PTTL(context.Background(), e.redisKey()).Val()
	if ttl <= 0 || ttl > 3*time.Second {
		t.Errorf("redis TTL = %v, want (0, 3s]", ttl)
	}
	if !a.HoldsLease() || b.HoldsLease() {
		t.Errorf("HoldsLease a=%v b=%v, want true false", a.HoldsLease(), b.HoldsLease())
	}
	if got := b.State().Observed; got.Hostname != "host-a" || got.PID != 11 {
		t.Errorf("follower observed %+v, want host-a:11", got)
	}
}

func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Intent: racing processes, both on an empty table and on an expired row, produce one owner.
	for round := range 2 {
		if round == 1 {
			e.expireRow()
		}
		const n = 8
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			k := e.keeper(keeperOpts{host: fmt.Sprintf("h%d", i), pid: 100 + i})
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				won, err := k.Claim(context.Background())
				if err != nil {
					t.Error(err)
				}
				if won {
					wins.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, wins.Load())
		}
		if h, _, _ := e.row(); h.Term != int64(round+1) {
			t.Fatalf("round %d: term %d, want %d", round, h.Term, round+1)
		}
	}
}

func TestDeadPidOnSameHostIsReclaimedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.keeper(keeperOpts{host: "box", pid: 500})
	mustClaim(t, old, true)

	dead := func(pid int) bool { return pid != 500 }
	// Another host cannot judge our pids: it waits for expiry.
	mustClaim(t, e.keeper(keeperOpts{host: "elsewhere", pid: 501, alive: dead}), false)
	// A live pid on the same host is not reclaimed.
	mustClaim(t, e.keeper(keeperOpts{host: "box", pid: 502}), false)
	// A dead pid on the same host is, before the row expires, with a new term.
	mustClaim(t, e.keeper(keeperOpts{host: "box", pid: 503, alive: dead}), true)
	h, ms, _ := e.row()
	if h.PID != 503 || h.Term != 2 || ms <= 0 {
		t.Fatalf("row = %+v expires in %d ms, want pid 503 term 2 unexpired", h, ms)
	}
	if v := e.redisValue(); v != "box:503" {
		t.Errorf("redis = %q, want box:503 (rewritten to agree)", v)
	}
}

func TestTrustWindowAndRestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := newFakeClock()
	var events []lease.Event
	k := e.keeper(keeperOpts{clock: clock, notified: &events})
	mustClaim(t, k, true)

	// TTL 3 s, fence 1 s: trusted for 2 s after the start of the last successful attempt.
	clock.Advance(2*time.Second - time.Millisecond)
	if !k.HoldsLease() {
		t.Fatal("HoldsLease false 1 ms before the trust deadline")
	}
	clock.Advance(time.Millisecond)
	if k.HoldsLease() {
		t.Fatal("HoldsLease true at the trust deadline")
	}
	if !k.Renew(context.Background()) {
		t.Fatal("renew failed with nobody else contending")
	}
	if !k.HoldsLease() {
		t.Fatal("HoldsLease false after a successful renew")
	}
	want := []lease.EventKind{lease.Acquired, lease.Restored}
	if len(events) != len(want) {
		t.Fatalf("events = %+v, want kinds %v", events, want)
	}
	for i, ev := range events {
		if ev.Kind != want[i] || ev.Term != 1 {
			t.Errorf("event %d = %+v, want %s term 1", i, ev, want[i])
		}
	}
}

func TestLostLeaseIsFencedAndLoggedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logA := &syncBuffer{}
	a := e.keeper(keeperOpts{host: "a", pid: 1, log: logA})
	mustClaim(t, a, true)
	e.expireRow()
	b := e.keeper(keeperOpts{host: "b", pid: 2})
	mustClaim(t, b, true)

	ctx := context.Background()
	// A's fenced write is refused by the term check.
	tx := e.begin()
	if err := a.Fence(ctx, tx); !errors.Is(err, lease.ErrFenced) {
		t.Errorf("a.Fence = %v, want ErrFenced", err)
	}
	tx.Rollback()
	tx = e.begin()
	if err := b.Fence(ctx, tx); err != nil {
		t.Errorf("b.Fence = %v, want nil", err)
	}
	tx.Rollback()

	//lint:ignore SA4000 Renew acts: a second try after a refused one must be refused too
	if a.Renew(ctx) || a.Renew(ctx) {
		t.Fatal("renew succeeded for a lost lease")
	}
	if a.HoldsLease() || !a.State().Lost {
		t.Errorf("after loss HoldsLease=%v Lost=%v", a.HoldsLease(), a.State().Lost)
	}
	if n := strings.Count(logA.String(), "lease lost"); n != 1 {
		t.Errorf(`"lease lost" logged %d times, want once:\n%s`, n, logA.String())
	}
	if !strings.Contains(logA.String(), "level=ERROR") {
		t.Errorf("lease lost not logged at error:\n%s", logA.String())
	}
	// A's renew must not have disturbed B's row.
	if h, _, _ := e.row(); h.Hostname != "b" || h.Term != 2 {
		t.Errorf("row = %+v, want b term 2", h)
	}
}

// A process that lost the lease releases nothing on a graceful stop, and its log says so rather
// than "engine lease released": the new holder's row and Redis key are untouched and no Released
// event goes out.
func TestReleaseAfterLossReleasesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logA := &syncBuffer{}
	var events []lease.Event
	a := e.keeper(keeperOpts{host: "a", pid: 1, log: logA, notified: &events})
	mustClaim(t, a, true)
	e.expireRow()
	mustClaim(t, e.keeper(keeperOpts{host: "b", pid: 7}), true) // pid 7: a tag b:7 cannot be read as the term
	ctx := context.Background()
	if a.Renew(ctx) {
		t.Fatal("renew succeeded for a lost lease")
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release after loss = %v", err)
	}
	if strings.Contains(logA.String(), "engine lease released") {
		t.Errorf("a lost lease logged %q on release:\n%s", "engine lease released", logA.String())
	}
	if !strings.Contains(logA.String(), "nothing was handed back") || !strings.Contains(logA.String(), "holder=b:7") {
		t.Errorf("release after loss does not say nothing was handed back to b:7:\n%s", logA.String())
	}
	for _, ev := range events {
		if ev.Kind == lease.Released {
			t.Errorf("Released event after loss: %+v", events)
		}
	}
	if h, _, _ := e.row(); h.Hostname != "b" || h.Term != 2 || !h.Live {
		t.Errorf("row = %+v, want b term 2, live", h)
	}
	if v := e.redisValue(); v != "b:7" {
		t.Errorf("redis key = %q, want b:7", v)
	}
}

func TestFenceRefusesExpiredRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.holder(t)
	e.expireRow()
	tx := e.begin()
	if err := a.Fence(context.Background(), tx); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("Fence on a row expired by the database clock = %v, want ErrFenced", err)
	}
}

// The fence share-locks the lease row until the transaction ends: another fence (a concurrent
// commit) passes, but a claim or renew, which writes the row, waits for it.
func TestFenceHoldsASharedLockUntilTheTransactionEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.holder(t)
	ctx := context.Background()
	tx := e.begin()
	if err := a.Fence(ctx, tx); err != nil {
		t.Fatalf("Fence under the held term = %v", err)
	}

	other := e.begin()
	if err := a.Fence(ctx, other); err != nil {
		t.Errorf("a second fence while the first is open = %v, want nil (the lock is shared)", err)
	}
	other.Rollback()

	writer, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if _, err := writer.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	const touch = "UPDATE `engine_lease` SET `updatedAt` = NOW(3) WHERE `id` = ?"
	if _, err := writer.ExecContext(ctx, touch, e.key); !store.IsLockWaitTimeout(err) {
		t.Fatalf("UPDATE of the fenced row while the fence's transaction is open = %v, want a lock wait timeout", err)
	}
	tx.Rollback()
	if _, err := writer.ExecContext(ctx, touch, e.key); err != nil {
		t.Fatalf("UPDATE after the fence's transaction ended = %v", err)
	}
}

// The fence judges the latest committed row, not the transaction's REPEATABLE READ snapshot: a
// takeover committed after the transaction first read the row is refused.
func TestFenceSeesATakeoverCommittedAfterTheSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.holder(t)
	ctx := context.Background()
	tx := e.begin()
	var inst string
	if err := tx.QueryRowContext(ctx, "SELECT `instanceId` FROM `engine_lease` WHERE `id` = ?", e.key).Scan(&inst); err != nil {
		t.Fatal(err)
	}
	if inst != a.InstanceID() {
		t.Fatalf("snapshot holder = %q, want %q", inst, a.InstanceID())
	}
	if _, err := e.db.ExecContext(ctx, "UPDATE `engine_lease` SET `instanceId` = 'another', `term` = `term` + 1 WHERE `id` = ?", e.key); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT `instanceId` FROM `engine_lease` WHERE `id` = ?", e.key).Scan(&inst); err != nil || inst != a.InstanceID() {
		t.Fatalf("snapshot read after the takeover = %q, %v; the test needs REPEATABLE READ", inst, err)
	}
	if err := a.Fence(ctx, tx); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("Fence after a takeover committed behind the snapshot = %v, want ErrFenced", err)
	}
}

// A missing lease row refuses like a row that names someone else.
func TestFenceRefusesMissingRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.holder(t)
	if _, err := e.db.Exec("DELETE FROM `engine_lease` WHERE `id` = ?", e.key); err != nil {
		t.Fatal(err)
	}
	tx := e.begin()
	if err := a.Fence(context.Background(), tx); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("Fence without a lease row = %v, want ErrFenced", err)
	}
}

// IsFenced answers for the fence's refusal only, not for other server errors a batch can end with.
func TestIsFencedIsTheFenceOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.holder(t)
	for _, q := range []string{
		"INSERT INTO `engine_lease` SELECT * FROM `engine_lease` WHERE `id` = ?", // duplicate key
		"SELECT `id` FROM `no_such_table` WHERE `id` = ?",
		"SELEC ?",
	} {
		_, err := e.db.Exec(q, e.key)
		if err == nil || lease.IsFenced(err) {
			t.Errorf("%q: err = %v, IsFenced = %v; want an error that is not the fence", q, err, lease.IsFenced(err))
		}
	}
}

func TestReleaseHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.keeper(keeperOpts{host: "a", pid: 1})
	mustClaim(t, a, true)
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h, ms, _ := e.row(); h.Live || ms > 0 {
		t.Fatalf("row after release = %+v expires in %d ms, want expired", h, ms)
	}
	if v := e.redisValue(); v != "" {
		t.Fatalf("redis key after release = %q, want gone", v)
	}
	mustClaim(t, e.keeper(keeperOpts{host: "b", pid: 2}), true)
	if h, _, _ := e.row(); h.Term != 2 {
		t.Errorf("term = %d, want 2", h.Term)
	}
}

func TestReleaseDoesNotDeleteAnotherHoldersKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.keeper(keeperOpts{host: "a", pid: 1})
	mustClaim(t, a, true)
	e.rdb.Set(context.Background(), e.redisKey(), "other:9", 0)
	a.Release(context.Background())
	if v := e.redisValue(); v != "other:9" {
		t.Fatalf("release deleted a key it did not own: now %q", v)
	}
}

// proxied returns a database and Redis client that reach the servers through cuttable proxies.
func (e *env) proxied() (*sql.DB, *tcpproxy.Proxy, *redis.Client, *tcpproxy.Proxy) {
	e.t.Helper()
	mp, err := tcpproxy.Start("127.0.0.1:3306")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { mp.Close() })
	rp, err := tcpproxy.Start(testRedis.Addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { rp.Close() })
	db, err := store.Open(context.Background(), testDB.DSNVia(mp.Addr()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr(), MaxRetries: -1, DialTimeout: 300 * time.Millisecond})
	e.t.Cleanup(func() { rdb.Close() })
	return db, mp, rdb, rp
}

func TestRedisDecidesWhileMySQLIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	db, mp, rdb, _ := e.proxied()
	mp.Cut()
	a := e.keeper(keeperOpts{host: "a", pid: 1, db: db, rdb: rdb})
	mustClaim(t, a, true)
	if s := a.State(); s.Arbiter != lease.ArbiterRedis {
		t.Fatalf("arbiter = %q, want redis", s.Arbiter)
	}
	db2, mp2, rdb2, _ := e.proxied()
	mp2.Cut()
	mustClaim(t, e.keeper(keeperOpts{host: "b", pid: 2, db: db2, rdb: rdb2}), false)

	// Compare-refresh keeps a Redis-granted lease.
	if !a.Renew(context.Background()) {
		t.Fatal("compare-refresh renew failed")
	}
	// When MySQL answers again the row takes over.
	mp.Restore()
	if !a.Renew(context.Background()) || a.State().Arbiter != lease.ArbiterRow {
		t.Fatalf("after MySQL returned: state %+v, want held by the row", a.State())
	}
	if h, _, ok := e.row(); !ok || h.Hostname != "a" {
		t.Fatalf("row = %+v, want a", h)
	}
}

// Two installs on one Redis database, told apart by their prefix, each keep their own lease key:
// with MySQL down, Redis decides each install's claim alone, so a staging desk can neither block
// production's holder nor be blocked by it, while within one install the key still has one owner.
func TestInstallsWithOtherPrefixesNeverShareTheRedisKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	staging, err := redisname.New("staging")
	if err != nil {
		t.Fatal(err)
	}
	cut := func() (*sql.DB, redis.UniversalClient) {
		db, mp, rdb, _ := e.proxied()
		mp.Cut()
		return db, rdb
	}
	db, rdb := cut()
	prod := e.keeper(keeperOpts{host: "prod", pid: 1, db: db, rdb: rdb})
	mustClaim(t, prod, true)
	db, rdb = cut()
	stage := e.keeper(keeperOpts{host: "stage", pid: 2, db: db, rdb: rdb, names: staging})
	mustClaim(t, stage, true)
	if a, b := prod.State().Arbiter, stage.State().Arbiter; a != lease.ArbiterRedis || b != lease.ArbiterRedis {
		t.Fatalf("arbiters = %q, %q; want both redis", a, b)
	}
	db, rdb = cut()
	mustClaim(t, e.keeper(keeperOpts{host: "stage", pid: 3, db: db, rdb: rdb, names: staging}), false)

	ctx := context.Background()
	stagingKey := staging.EngineLease(e.key)
	if v := e.redisValue(); v != "prod:1" {
		t.Fatalf("%s = %q, want prod:1", e.redisKey(), v)
	}
	if v := e.rdb.Get(ctx, stagingKey).Val(); v != "stage:2" {
		t.Fatalf("%s = %q, want stage:2", stagingKey, v)
	}
	// Each install's renew and release touch its own key only.
	if !prod.Renew(ctx) || !stage.Renew(ctx) {
		t.Fatal("a Redis-granted lease did not renew beside the other install's")
	}
	if err := stage.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.rdb.Exists(ctx, stagingKey).Val(); n != 0 {
		t.Fatalf("%s still exists after staging released", stagingKey)
	}
	if v := e.redisValue(); v != "prod:1" {
		t.Fatalf("after staging released, %s = %q, want prod:1", e.redisKey(), v)
	}
}

func TestRowHolderCutFromMySQLLapsesThenFailsOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		instances  int
		wantBanner bool
	}{
		// Intent: a single-process install hears nothing when it fails open...
		{"single-process", 1, false},
		// ...and a configured sibling makes the banner appear.
		{"sibling-configured", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			db, mp, rdb, rp := e.proxied()
			clock := newFakeClock()
			logs := &syncBuffer{}
			k := e.keeper(keeperOpts{db: db, rdb: rdb, clock: clock, inst: tc.instances, log: logs})
			mustClaim(t, k, true)
			ctx := context.Background()

			mp.Cut()
			// Redis alone does not extend a lease the row granted.
			clock.Advance(time.Second)
			if k.Renew(ctx) {
				t.Fatalf("renew succeeded with MySQL cut:\n%s", logs.String())
			}
			if !k.HoldsLease() {
				t.Fatal("trust ended before its deadline")
			}
			clock.Advance(time.Second)
			k.Renew(ctx)
			if k.HoldsLease() {
				t.Fatal("HoldsLease true past the trust deadline with MySQL cut")
			}
			if v, _ := e.rdb.Get(ctx, e.redisKey()).Result(); v != "host-a:1000" {
				t.Errorf("redis key = %q, want our tag kept", v)
			}

			rp.Cut()
			if !k.Renew(ctx) || !k.HoldsLease() {
				t.Fatal("with both arbiters down the desk did not fail open")
			}
			if got := k.State().Arbiter; got != lease.ArbiterOpen {
				t.Errorf("arbiter = %q, want fail-open", got)
			}
			banner := strings.Contains(logs.String(), "MULTI-PROCESS BACKEND WITH NO WORKING ARBITER")
			if banner != tc.wantBanner {
				t.Errorf("banner printed = %v, want %v:\n%s", banner, tc.wantBanner, logs.String())
			}

			// Both back: the row decides again with a new term.
			mp.Restore()
			rp.Restore()
			if !k.Renew(ctx) || k.State().Arbiter != lease.ArbiterRow {
				t.Fatalf("state after arbiters returned: %+v", k.State())
			}
			if h, _, _ := e.row(); h.Term != 2 {
				t.Errorf("term after fail-open = %d, want 2", h.Term)
			}
		})
	}
}

func TestRowDecidesAloneWhenRedisIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	db, _, rdb, rp := e.proxied()
	rp.Cut()
	logs := &syncBuffer{}
	k := e.keeper(keeperOpts{db: db, rdb: rdb, log: logs})
	mustClaim(t, k, true)
	k.Renew(context.Background())
	if !k.Renew(context.Background()) {
		t.Fatal("renew failed with only Redis down")
	}
	if n := strings.Count(logs.String(), "Redis unreachable"); n != 1 {
		t.Errorf("Redis warning logged %d times, want once:\n%s", n, logs.String())
	}
}

func TestRenewIsOneUpdateAndOneSet(t *testing.T) {
	e := newEnv(t)
	db, mp, rdb, _ := e.proxied()
	var updates, others atomic.Int32
	mp.Tap(tcpproxy.MySQLQueries(func(q string) {
		if strings.HasPrefix(q, "UPDATE") {
			updates.Add(1)
		} else {
			others.Add(1)
		}
	}))
	k := e.keeper(keeperOpts{db: db, rdb: rdb})
	mustClaim(t, k, true)
	ctx := context.Background()
	if err := e.rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	updates.Store(0)
	others.Store(0)
	const cycles = 5
	for range cycles {
		if !k.Renew(ctx) {
			t.Fatal("renew failed")
		}
	}
	if got := updates.Load(); got != cycles {
		t.Errorf("%d UPDATEs for %d renews, want one each", got, cycles)
	}
	if got := others.Load(); got != 0 {
		t.Errorf("%d other statements during renew, want none", got)
	}
	stats := e.rdb.Info(ctx, "commandstats").Val()
	if got := redisCalls(stats, "set"); got != cycles {
		t.Errorf("%d Redis SETs for %d renews, want one each\n%s", got, cycles, stats)
	}
}

// redisCalls reads cmdstat_<cmd>:calls=N from INFO commandstats; SETs run by scripts count too.
func redisCalls(info, cmd string) int {
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			var n int
			fmt.Sscanf(rest, "%d", &n)
			return n
		}
	}
	return 0
}
