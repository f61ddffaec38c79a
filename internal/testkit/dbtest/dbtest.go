// Package dbtest gives each test package its own fresh MariaDB database and Redis database,
// removed afterwards. Tests run against the real servers on 127.0.0.1; there are no stand-ins.
package dbtest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/store"
)

// SQLMode is the sql_mode every test session runs in: MySQL 8's default. MariaDB's default is
// laxer (no ONLY_FULL_GROUP_BY, zero dates allowed), so a query that MySQL 8 refuses would pass
// here and fail on an operator's MySQL; under this mode it fails in the tests first.
const SQLMode = "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

// ServerDSN is the MariaDB server the tests use, with the session's sql_mode set to SQLMode;
// FXDESK_TEST_MYSQL overrides the server (a sql_mode it names is kept). Every test DSN derives
// from it, so every test session (the desk's processes in e2e and the soak included, through
// Database.DSN) runs in SQLMode.
func ServerDSN() string {
	dsn := cmp.Or(os.Getenv("FXDESK_TEST_MYSQL"), "root@tcp(127.0.0.1:3306)/")
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return dsn // the caller's ParseDSN reports it
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["sql_mode"]; !ok {
		cfg.Params["sql_mode"] = "'" + SQLMode + "'"
	}
	return cfg.FormatDSN()
}

// Database is a fresh database that exists until Drop.
type Database struct {
	Name string
	DSN  string // DSN naming the database, with the test sql_mode and no other driver options
}

// NewDatabase creates an empty database named fxdesk_test_<prefix>_<random>.
func NewDatabase(prefix string) (*Database, error) {
	b := make([]byte, 4)
	rand.Read(b)
	name := "fxdesk_test_" + strings.ReplaceAll(prefix, "-", "_") + "_" + hex.EncodeToString(b)
	cfg, err := mysql.ParseDSN(ServerDSN())
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return nil, fmt.Errorf("create test database: %w", err)
	}
	cfg.DBName = name
	return &Database{Name: name, DSN: cfg.FormatDSN()}, nil
}

// Existing is a database that already exists on the test server — a generated year a benchmark
// reuses (FXDESK_YEAR_DB) — named as NewDatabase names its own. It is not the caller's to Drop.
func Existing(name string) (*Database, error) {
	cfg, err := mysql.ParseDSN(ServerDSN())
	if err != nil {
		return nil, err
	}
	cfg.DBName = name
	return &Database{Name: name, DSN: cfg.FormatDSN()}, nil
}

// OpenExisting connects to the existing database name (Existing) for the test's length.
func OpenExisting(tb testing.TB, name string) *sql.DB {
	tb.Helper()
	d, err := Existing(name)
	if err != nil {
		tb.Fatal(err)
	}
	db, err := store.Connect(d.DSN)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Drop removes the database.
func (d *Database) Drop() error {
	cfg, _ := mysql.ParseDSN(ServerDSN())
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+d.Name+"`")
	return err
}

// DSNVia returns the database's DSN reaching the server through addr (a fault-injecting proxy).
func (d *Database) DSNVia(addr string) string {
	cfg, _ := mysql.ParseDSN(d.DSN)
	cfg.Addr = addr
	cfg.Net = "tcp"
	return cfg.FormatDSN()
}

// Redis is a private redis-server process for one test package, so packages running in parallel
// never share the lease key.
type Redis struct {
	Addr string
	proc *os.Process
	dir  string // its working directory, removed by Stop
}

// StartRedis starts redis-server on a free loopback port with persistence off, in a directory of
// its own: a replica's full sync writes an RDB file to the primary's directory, which a later
// server started in the same place would load.
func StartRedis() (*Redis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed (scripts/services.sh installs it): %w", err)
	}
	dir, err := os.MkdirTemp("", "fxdesk-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no")
		// A test binary killed by its timeout must not leave its Redis behind.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
				c.Close()
				return &Redis{Addr: addr, proc: cmd.Process, dir: dir}, nil
			}
			if cmd.ProcessState != nil {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling a port that has no readiness signal
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start")
}

// Stop ends the server.
func (r *Redis) Stop() {
	if r == nil || r.proc == nil {
		return
	}
	r.proc.Kill()
	r.proc.Wait()
	os.RemoveAll(r.dir)
}

// NewMigrated creates a fresh database, applies every migration and returns it with an open
// pool. close drops the database after closing the pool.
func NewMigrated(prefix string) (db *sql.DB, close func(), err error) {
	d, err := NewDatabase(prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("tests need MariaDB on 127.0.0.1:3306: %w", err)
	}
	if db, err = store.OpenMigrated(context.Background(), d.DSN, slog.New(slog.DiscardHandler)); err != nil {
		d.Drop()
		return nil, nil, err
	}
	return db, func() { db.Close(); d.Drop() }, nil
}

// LogBuffer collects log output written from several goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Reset forgets everything written so far.
func (l *LogBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// CPU is the processor time used so far by this process and by the local MySQL server, for
// benchmarks that report what a unit of work costs each side. On a shared machine a rate moves
// with whatever else runs; the time each side spent per unit moves much less. Server is zero
// when no mariadbd or mysqld process can be read (a server on another machine).
type CPU struct{ Self, Server time.Duration }

// ReadCPU reads both clocks.
func ReadCPU() CPU {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	c := CPU{Self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if pid := serverPID(); pid != 0 {
		c.Server, _ = ProcessCPU(pid)
	}
	return c
}

// serverPID is the process id of the local MariaDB (or MySQL) server, 0 when there is none.
func serverPID() int {
	for _, name := range []string{"mariadbd", "mysqld"} {
		out, err := exec.Command("pgrep", "-x", name).Output()
		if err != nil {
			continue
		}
		if f := strings.Fields(string(out)); len(f) > 0 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	return 0
}

// ProcessCPU is the processor time process pid has used, from /proc in clock ticks of 10 ms.
func ProcessCPU(pid int) (time.Duration, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// Sub is the time each side spent since o.
func (c CPU) Sub(o CPU) CPU { return CPU{Self: c.Self - o.Self, Server: c.Server - o.Server} }

// SkipUnlessBench skips tb unless FXDESK_BENCH is set: the benchmarks against the real database
// run for minutes and load the machine, so they run only when asked for. what names the
// benchmark in the skip message.
func SkipUnlessBench(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv("FXDESK_BENCH") == "" {
		tb.Skipf("set FXDESK_BENCH=1 to run the %s benchmark", what)
	}
}

// BenchProcs is the GOMAXPROCS the database benchmarks give the desk's Go process:
// FXDESK_BENCH_GOMAXPROCS, default 1 — what docs/operations.md advises where the process shares
// a small machine with MariaDB. 0 means Go's own default (one per core).
func BenchProcs(tb testing.TB) int {
	tb.Helper()
	v, ok := os.LookupEnv("FXDESK_BENCH_GOMAXPROCS")
	if !ok {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		tb.Fatalf("FXDESK_BENCH_GOMAXPROCS=%q: want a whole number, 0 for Go's default", v)
	}
	return n
}

// Main runs a test package's tests (m.Run) against a fresh database of its own named after name,
// migrated, which *db points at while they run; the database is dropped afterwards. It returns
// m.Run's exit code: func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "pkg", &testDB)) }.
func Main(m *testing.M, name string, db **sql.DB) int { return runMain(m, name, db, nil) }

// MainWithRedis is Main with a private redis-server as well, which *r points at while the tests
// run, and setup run on the migrated database before them (nil: none).
func MainWithRedis(m *testing.M, name string, db **sql.DB, r **Redis, setup func(*sql.DB) error) int {
	redis, err := StartRedis()
	if err != nil {
		panic(err)
	}
	defer redis.Stop()
	*r = redis
	return runMain(m, name, db, setup)
}

func runMain(m *testing.M, name string, db **sql.DB, setup func(*sql.DB) error) int {
	d, err := NewDatabase(name)
	if err != nil {
		panic(err)
	}
	defer d.Drop()
	conn, err := store.Connect(d.DSN)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	if err := store.Migrate(context.Background(), conn, slog.New(slog.DiscardHandler)); err != nil {
		panic(err)
	}
	*db = conn
	if setup != nil {
		if err := setup(conn); err != nil {
			panic(err)
		}
	}
	return m.Run()
}
