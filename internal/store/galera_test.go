package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// sessionSyncWait is the wsrep_sync_wait a desk session on server dsn runs with, or -1 where the
// server has no such variable (MySQL).
func sessionSyncWait(t *testing.T, dsn string) int {
	t.Helper()
	db, err := store.Connect(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var name string
	var v int
	switch err := db.QueryRowContext(ctx, "SHOW SESSION VARIABLES LIKE 'wsrep_sync_wait'").Scan(&name, &v); {
	case errors.Is(err, sql.ErrNoRows):
		return -1
	case err != nil:
		t.Fatal(err)
	}
	return v
}

// A server without wsrep (MySQL, or MariaDB as the tests run it) gets its sessions untouched: the
// desk sends it nothing Galera's.
func TestSessionsOnOneServerSetNoCausalReads(t *testing.T) {
	t.Parallel()
	if v := sessionSyncWait(t, dbtest.ServerDSN()); v > 0 {
		t.Fatalf("wsrep_sync_wait = %d on a server without wsrep, want it left alone", v)
	}
}

// On a Galera node every desk session reads causally (needs scripts/cluster.sh and FXDESK_GALERA).
func TestSessionsOnGaleraReadCausally(t *testing.T) {
	t.Parallel()
	nodes := os.Getenv("FXDESK_GALERA")
	if nodes == "" {
		t.Skip("needs a Galera cluster: scripts/cluster.sh up DIR, then FXDESK_GALERA=127.0.0.1:23061,127.0.0.1:23062,127.0.0.1:23063")
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", strings.Split(nodes, ",")[0]
	if v := sessionSyncWait(t, cfg.FormatDSN()); v != store.GaleraSyncWait {
		t.Fatalf("wsrep_sync_wait = %d on a Galera node, want %d", v, store.GaleraSyncWait)
	}
}
