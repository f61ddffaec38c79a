package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/migrations"
)

// DSN returns dsn with the driver options the desk relies on:
//   - clientFoundRows: rows affected counts matched rows, so a conditional UPDATE that matches
//     our own row reports 1 even when nothing changed;
//   - interpolateParams: one round trip per statement instead of prepare/execute/close;
//   - multiStatements: a fill or a close sends its statements in a few batches, one round trip
//     each, instead of one round trip per statement (internal/trading's batch). Every statement
//     the desk sends takes its values as ? arguments, escaped by the driver, so a value can
//     never end one statement and start another;
//   - parseTime: DATETIME columns scan into time.Time;
//   - every time in UTC: the session's time_zone is '+00:00' (SessionTimeZone), whatever the
//     server's or the DSN's, and the driver reads and writes DATETIMEs as UTC (loc). A DATETIME
//     holds no zone, and NOW(3), CURRENT_TIMESTAMP(3) defaults and ON UPDATE are in the
//     session's zone, so without the pin a position opened on a server in +09:00 was stored
//     nine hours ahead and compared with UTC rollover instants; two processes in different
//     zones would also disagree on the lease's expiry, which is compared with NOW(3).
func DSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %w", err)
	}
	cfg.ClientFoundRows = true
	cfg.InterpolateParams = true
	cfg.MultiStatements = true
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// System variables are names, case-insensitive to the server; a second spelling would be
	// set too, in map order, so every spelling goes.
	for k := range cfg.Params {
		if strings.EqualFold(k, "time_zone") {
			delete(cfg.Params, k)
		}
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'" + SessionTimeZone + "'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg, nil
}

// SessionTimeZone is the time_zone every desk session runs in: UTC as an offset, which needs
// no time zone tables on the server.
const SessionTimeZone = "+00:00"

// Connect returns a pool for dsn without touching the server: connections are made on demand.
// A process that boots while MySQL is down uses it and reaches the server when it returns.
func Connect(dsn string) (*sql.DB, error) { return ConnectPool(dsn, 32) }

// ConnectPool is Connect with a pool of at most size connections: a part that must never wait
// behind others (the holder's lease and commits) gets its own small pool. On a Galera node every
// connection reads causally (GaleraSyncWait).
func ConnectPool(dsn string, size int) (*sql.DB, error) {
	cfg, err := DSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open database %q: %w", cfg.DBName, err)
	}
	db := sql.OpenDB(causalConnector{conn})
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(max(1, size/2))
	db.SetConnMaxLifetime(30 * time.Minute)
	return db, nil
}

// ErrMigrate marks an OpenMigrated error that came from migrating a server that was reached: the
// migrations could not be read or applied, or another process held the migration lock. It is
// never Unreachable, so a process does not go on without its schema.
var ErrMigrate = errors.New("migrate")

// Open connects to the database named by dsn, creating it first if it does not exist. It does not
// migrate; call Migrate for that.
func Open(ctx context.Context, dsn string) (*sql.DB, error) {
	cfg, err := DSN(dsn)
	if err != nil {
		return nil, err
	}
	if err := createDatabase(ctx, cfg); err != nil {
		return nil, err
	}
	db, err := Connect(dsn)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("reach database %q: %w", cfg.DBName, err)
	}
	return db, nil
}

func createDatabase(ctx context.Context, cfg *mysql.Config) error {
	if cfg.DBName == "" {
		return errors.New("the MySQL DSN names no database")
	}
	server := cfg.Clone()
	server.DBName = ""
	conn, err := mysql.NewConnector(server)
	if err != nil {
		return fmt.Errorf("connect to MySQL server: %w", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	q := "CREATE DATABASE IF NOT EXISTS `" + strings.ReplaceAll(cfg.DBName, "`", "``") +
		"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("create database %q: %w", cfg.DBName, err)
	}
	return nil
}

type migration struct {
	version int64
	name    string
	up      string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, file := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(file, ".up.sql"), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q is not named NNNNNN_name.up.sql", file)
		}
		body, err := fs.ReadFile(migrations.FS, file)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, up: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("two migrations share version %d", ms[i].version)
		}
	}
	return ms, nil
}

// statements splits a migration into statements: each ends with ";" at the end of a line.
// Comment lines are dropped.
func statements(body string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.SplitSeq(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// Migrate applies every migration not yet recorded in `schema_migrations`, in order. Processes
// booting together serialise on a named lock, so each migration runs once.
func Migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()

	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('fxdesk.migrate', 60)").Scan(&got); err != nil {
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return errors.New("migrate: another process held the migration lock for 60s")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK('fxdesk.migrate')")

	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS `schema_migrations` ("+
		"`version` BIGINT NOT NULL PRIMARY KEY, `name` VARCHAR(255) NOT NULL, "+
		"`appliedAt` DATETIME(3) NOT NULL) ENGINE=InnoDB"); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied := map[int64]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT `version` FROM `schema_migrations`")
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}

	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		// MySQL commits DDL implicitly, so a migration is not atomic; each statement is written to
		// be safe to run again (IF NOT EXISTS, INSERT IGNORE) and the version is recorded last.
		for i, stmt := range statements(m.up) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %06d_%s statement %d: %w", m.version, m.name, i+1, err)
			}
		}
		if _, err := conn.ExecContext(ctx,
			"INSERT INTO `schema_migrations` (`version`, `name`, `appliedAt`) VALUES (?, ?, NOW(3))",
			m.version, m.name); err != nil {
			return fmt.Errorf("migration %06d_%s: record: %w", m.version, m.name, err)
		}
		log.InfoContext(ctx, "migration applied", slog.Int64("version", m.version), slog.String("name", m.name))
	}
	return nil
}

// RouteDriverLogs sends the MySQL driver's own messages (such as "unexpected EOF" when a
// connection is cut) to log at debug level: the desk reports the failures that matter itself.
func RouteDriverLogs(log *slog.Logger) {
	mysql.SetLogger(mysql.Logger(driverLogger{log}))
}

type driverLogger struct{ log *slog.Logger }

func (d driverLogger) Print(v ...any) {
	d.log.Debug("mysql driver", slog.String("msg", strings.TrimSpace(fmt.Sprint(v...))))
}

// OpenMigrated opens the database (creating it if missing) and applies every migration, each
// step bounded so a dead server costs seconds, not a hang. On a migration failure the pool is
// closed. An error from opening keeps its cause, so Unreachable tells a down server apart; an
// error from migrating is ErrMigrate.
func OpenMigrated(ctx context.Context, dsn string, log *slog.Logger) (*sql.DB, error) {
	openCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	db, err := Open(openCtx, dsn)
	cancel()
	if err != nil {
		return nil, err
	}
	migrateCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := Migrate(migrateCtx, db, log); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	return db, nil
}

// Placeholders is n comma-separated parameter markers for an IN list or a VALUES row; for n = 0
// it is NULL, so `IN (NULL)` matches nothing instead of being a syntax error.
func Placeholders(n int) string {
	if n <= 0 {
		return "NULL"
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// ValuesRows is n rows of cols parameter markers each, for a multi-row INSERT's VALUES:
// "(?, ?), (?, ?)" for n = 2, cols = 2.
func ValuesRows(n, cols int) string {
	if n <= 0 {
		return ""
	}
	row := "(" + Placeholders(cols) + ")"
	return strings.Repeat(row+", ", n-1) + row
}

// Int64Args is ids as statement arguments, for the markers Placeholders writes.
func Int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
