package soak

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/soak/invariant"
	"fxdesk/internal/testkit/tcpproxy"
)

// The lost journal replies come on the FIX lane only, from a generator of their own: every
// other fault of a seed is where and what it was without them.
func TestLostJournalRepliesComeOnlyOnTheFIXLaneAndMoveNoOtherFault(t *testing.T) {
	for _, seed := range []uint64{3, 42, 160524270648490} {
		rest := schedule(seed, 90*time.Second, clusterChoice{}, invariant.LaneREST)
		fix := schedule(seed, 90*time.Second, clusterChoice{}, invariant.LaneFIX)
		var others []fault
		lost := 0
		for _, f := range fix {
			if f.Kind == faultLostJournalReply {
				lost++
				if f.LoseFor < 200*time.Millisecond || f.LoseFor >= 1500*time.Millisecond || f.At < 14*time.Second {
					t.Fatalf("seed %d: %s", seed, f)
				}
				continue
			}
			if f.Kind != faultVenueOddUnits { // oddunits_test.go's
				others = append(others, f)
			}
		}
		if lost < 4 || !slices.Equal(others, rest) {
			t.Fatalf("seed %d: %d lost replies on FIX; the other faults equal the REST lane's: %v", seed, lost, slices.Equal(others, rest))
		}
		if slices.ContainsFunc(rest, func(f fault) bool { return f.Kind == faultLostJournalReply }) {
			t.Fatalf("seed %d: a lost journal reply on the REST lane", seed)
		}
	}
}

// Against the real server, through the soak's proxy and the desk's own pool settings: the armed
// loser lets a transaction that journaled an execution commit, and its client gets an error; a
// transaction that journaled none before it is left alone.
func TestReplyLoserLosesTheReplyToACommitThatJournaledAnExecution(t *testing.T) {
	d, err := dbtest.NewDatabase("lostreply")
	if err != nil {
		t.Skipf("needs MariaDB: %v", err)
	}
	t.Cleanup(func() { d.Drop() })
	direct, err := sql.Open("mysql", d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ctx := context.Background()
	for _, q := range []string{"CREATE TABLE `fx_fix_execution` (`execId` VARCHAR(64) PRIMARY KEY)", "CREATE TABLE `other` (`id` INT PRIMARY KEY)"} {
		if _, err := direct.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := mysql.ParseDSN(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tcpproxy.Start(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	desk, err := store.Connect(d.DSNVia(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer desk.Close()
	l := newReplyLoser(p)
	fired := l.arm(300 * time.Millisecond)
	commit := func(q string) error {
		tx, err := desk.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := commit("INSERT INTO `other` (`id`) VALUES (1)"); err != nil {
		t.Fatalf("a commit that journaled no execution: %v", err)
	}
	start := time.Now()
	err = commit("INSERT INTO `fx_fix_execution` (`execId`) VALUES ('E1')")
	if err == nil {
		t.Fatal("the commit journaling an execution answered: its reply was not lost")
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the commit failed after %s, before the reply was lost for 300ms: %v", took, err)
	}
	if _, ok := l.await(ctx, fired, 10*time.Second); !ok {
		t.Fatal("the loser says it lost nothing")
	}
	var n int
	if err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_fix_execution` WHERE `execId` = 'E1'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the execution is in the table %d times (%v): the commit must have taken effect", n, err)
	}
	if err := commit("INSERT INTO `fx_fix_execution` (`execId`) VALUES ('E2')"); err != nil {
		t.Fatalf("a commit after the fault: %v", err)
	}
}
