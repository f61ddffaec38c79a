package lease_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"fxdesk/internal/lease"
	"fxdesk/internal/store"
)

// The lease on a three-node Galera cluster (docs/cluster.md). These tests need the cluster that
// scripts/cluster.sh starts and FXDESK_GALERA naming its three nodes' MySQL addresses, in order;
// without it they skip, as in `make test` and CI.
//
// The trap: Galera certifies a transaction's writes, not its reads. The fence's LOCK IN SHARE
// MODE read takes its lock on the node that runs it and reads that node's newest row, and a node
// applies what other nodes committed a little later than they commit it. A holder writing through
// node 1 can therefore pass its fence on the row that still names it after a new holder's claim
// has committed on node 2, and its write (which touches no row of the claim) passes
// certification: it commits beside the new holder.
//
// The window is as long as node 1's apply lag. On loopback it is well under a millisecond, so
// the tests widen it the way load does in production: node 2 commits one large transaction just
// before the claim, and node 1 applies the claim only after it. The new holder takes the row the
// way a claim over a holder whose pid is dead on the same host does (hostname + dead pid), which
// takes a live row: a claim over an expired row would show nothing on one machine, because both
// nodes share a clock and the fence's own expiry check then refuses anyway (across hosts, clock
// skew reopens that path too).

// galeraFillerRows is the size of the transaction that holds node 1's applier back: large enough
// that applying it takes far longer than the claim and the fenced write together.
const galeraFillerRows = 200000

type galera struct {
	dsn  [3]string // per node, naming the test database
	desk *sql.DB   // a pool on node 1 as the desk opens it (store.ConnectPool)
}

func newGalera(t *testing.T) *galera {
	t.Helper()
	v := os.Getenv("FXDESK_GALERA")
	if v == "" {
		t.Skip("needs a three-node Galera cluster: scripts/cluster.sh up DIR, then FXDESK_GALERA=127.0.0.1:23061,127.0.0.1:23062,127.0.0.1:23063")
	}
	nodes := strings.Split(v, ",")
	if len(nodes) != 3 {
		t.Fatalf("FXDESK_GALERA=%q: want the three nodes' host:port, comma-separated", v)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "fxdesk_test_lease_galera_" + hex.EncodeToString(b)
	g := &galera{}
	for i, n := range nodes {
		g.dsn[i] = fmt.Sprintf("root@tcp(%s)/%s", n, name)
	}
	ctx := context.Background()
	db, err := store.OpenMigrated(ctx, g.dsn[0], slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Exec("DROP DATABASE `" + name + "`")
		db.Close()
	})
	// With more than one applier thread, node 1 may apply the claim beside the large transaction:
	// the claim's row lock, held until its turn to commit, then makes the fence's locking read
	// wait and read the new row — a refusal by chance, which would hide the trap and let the
	// fixed test pass without its fix. One applier (Galera's default, and the script's) queues
	// the claim behind the large transaction.
	var name2 string
	var appliers int
	if err := db.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_slave_threads'").Scan(&name2, &appliers); err != nil {
		t.Fatal(err)
	}
	if appliers != 1 {
		t.Fatalf("node 1 runs %d applier threads (wsrep_slave_threads); these tests need 1, as scripts/cluster.sh starts it", appliers)
	}
	if g.desk, err = store.ConnectPool(g.dsn[0], 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.desk.Close() })
	for _, q := range []string{
		"CREATE TABLE `galera_probe` (`id` INT NOT NULL AUTO_INCREMENT PRIMARY KEY, `writer` VARCHAR(64) NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE `galera_filler` (`id` INT NOT NULL PRIMARY KEY, `n` INT NOT NULL) ENGINE=InnoDB",
		// MariaDB's sequence engine: Galera is MariaDB's, and this is test set-up, not the desk's SQL.
		fmt.Sprintf("INSERT INTO `galera_filler` (`id`, `n`) SELECT `seq`, 0 FROM `seq_1_to_%d`", galeraFillerRows),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// todaysPool is a pool on node i as the desk opened it before causal reads: the desk's driver
// options, and nothing set per session.
func (g *galera) todaysPool(t *testing.T, i int) *sql.DB { return g.pool(t, i, false) }

// refereePool is a pool on node i whose every read waits for the cluster, set here and not by the
// desk's pools: the new holder's claim and the test's checks must not depend on the fix under
// test.
func (g *galera) refereePool(t *testing.T, i int) *sql.DB { return g.pool(t, i, true) }

func (g *galera) pool(t *testing.T, i int, causal bool) *sql.DB {
	t.Helper()
	cfg, err := store.DSN(g.dsn[i])
	if err != nil {
		t.Fatal(err)
	}
	if causal {
		cfg.Params["wsrep_sync_wait"] = "3"
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// staleHolder reads node i's own newest lease row without waiting for the cluster: what a
// locking read on that node sees.
func (g *galera) staleHolder(t *testing.T, db *sql.DB, key string) string {
	t.Helper()
	var inst string
	if err := db.QueryRow("SELECT `instanceId` FROM `engine_lease` WHERE `id` = ?", key).Scan(&inst); err != nil {
		t.Fatal(err)
	}
	return inst
}

// probeRows counts writer's probe rows on node 3 once it has applied everything the cluster
// committed: the test's own causal read, independent of the pools under test.
func (g *galera) probeRows(t *testing.T, writer string) int {
	t.Helper()
	var n int
	if err := g.refereePool(t, 2).QueryRow("SELECT COUNT(*) FROM `galera_probe` WHERE `writer` = ?", writer).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// outcome is what became of the old holder's fenced write.
type outcome struct {
	committed bool
	err       error
	lagged    bool          // node 1 still named the old holder after the claim had committed
	lag       time.Duration // from the claim's commit until node 1 named the new holder
}

// takeoverRace runs the race once: holder A claims through node 1 on aPool, node 2 commits a
// large transaction and then holder B's claim, and A sends a fenced write through node 1 — the
// desk's batch: the write, the fence, COMMIT, in one round trip.
func (g *galera) takeoverRace(t *testing.T, aPool *sql.DB) outcome {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testRedis.Addr})
	t.Cleanup(func() { rdb.Close() })
	e := &env{t: t, db: g.refereePool(t, 0), rdb: rdb, key: fmt.Sprintf("galera-%d", keySeq.Add(1))}
	a := e.keeper(keeperOpts{db: aPool, host: "box", pid: 500})
	mustClaim(t, a, true)
	b := e.keeper(keeperOpts{db: g.refereePool(t, 1), host: "box", pid: 501, alive: func(pid int) bool { return pid != 500 }})

	observer := g.todaysPool(t, 0)
	conn, err := aPool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stmt, args, err := a.FenceStatement()
	if err != nil {
		t.Fatal(err)
	}

	if _, err := g.refereePool(t, 1).ExecContext(ctx, "UPDATE `galera_filler` SET `n` = `n` + 1"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, b, true)
	claimed := time.Now()
	var o outcome
	o.lagged = g.staleHolder(t, observer, e.key) == a.InstanceID()
	_, o.err = conn.ExecContext(ctx, "START TRANSACTION; INSERT INTO `galera_probe` (`writer`) VALUES (?); "+stmt+"; COMMIT",
		append([]any{e.key}, args...)...)
	if o.err != nil {
		conn.ExecContext(ctx, "ROLLBACK")
	}
	for g.staleHolder(t, observer, e.key) != b.InstanceID() {
		if time.Since(claimed) > time.Minute {
			t.Fatal("node 1 did not apply the claim within a minute")
		}
		time.Sleep(5 * time.Millisecond) // no signal for a node's apply: poll its row
	}
	o.lag = time.Since(claimed)
	n := g.probeRows(t, e.key)
	o.committed = n == 1
	if o.committed != (o.err == nil) {
		t.Fatalf("the write answered %v but %d probe rows are in the cluster", o.err, n)
	}
	t.Logf("node 1 lagged behind the claim: %v (%v); old holder's fenced write: committed=%v err=%v", o.lagged, o.lag.Round(time.Millisecond), o.committed, o.err)
	return o
}

// With the fence as it was — no causal reads — the old holder's write commits beside the new
// holder's claim: the trap. Measured here on MariaDB 10.11 with Galera 4 (26.4): the fence passes
// on node 1's stale row, the write certifies (it shares no row with the claim), and it commits.
// This test pins that finding; if a later Galera certified locking reads, it would say so.
func TestGaleraTrapWithoutCausalReads(t *testing.T) {
	g := newGalera(t)
	o := g.takeoverRace(t, g.todaysPool(t, 0))
	if !o.lagged {
		t.Fatalf("node 1 had already applied the claim when the write was sent (lag %v): the race did not open; raise galeraFillerRows", o.lag)
	}
	if !o.committed {
		t.Fatalf("without causal reads the old holder's write was refused (%v); the trap this test documents did not happen", o.err)
	}
}

// With the desk's pools (store.ConnectPool sets wsrep_sync_wait on a Galera node), the same race
// refuses the old holder's write, every time: the fence waits until node 1 has applied the claim
// and reads the new holder's row. The race is the one above, which commits without the wait, so
// this test fails if the wait is removed.
func TestGaleraFenceSeesAClaimFromAnotherNode(t *testing.T) {
	g := newGalera(t)
	for i := range 3 {
		o := g.takeoverRace(t, g.desk)
		if !o.lagged {
			t.Fatalf("round %d: node 1 had already applied the claim when the write was sent (lag %v): the race did not open; raise galeraFillerRows", i, o.lag)
		}
		if o.committed {
			t.Fatalf("round %d: the old holder's fenced write committed through node 1 after a new holder claimed through node 2", i)
		}
		if !lease.IsFenced(o.err) && !store.IsDeadlock(o.err) {
			t.Fatalf("round %d: the write failed with %v, want the fence's refusal (or a certification failure)", i, o.err)
		}
	}
}
