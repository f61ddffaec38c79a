package yeargen

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fxdesk/internal/store"
)

// maxPlaceholders is the server's limit per prepared statement.
const maxPlaceholders = 65535

// rowsPerStatement is how many rows one INSERT carries: thousands, as many as the placeholder
// limit allows up to 4,000 (bigger statements gain little and hold more memory per worker).
func rowsPerStatement(cols int) int { return min(4000, maxPlaceholders/cols) }

// writer loads tables, each in one transaction on a connection of its own, several tables at
// once. A transaction that begins by inserting into an empty table, in a session that skips the
// unique and foreign key checks, is a bulk load to MariaDB (10.7 and later): one undo record for
// the table, and each index's entries of a statement sorted and written at the statement's end,
// instead of row by row into every index. So a whole writer loads each table in one statement
// (LOAD DATA), and the indexes are built once; otherwise in INSERTs of thousands of rows. MySQL
// writes either row by row (docs/operations.md, «A year of data»). The first error stops every
// table.
type writer struct {
	db      *sql.DB
	workers int
	whole   bool // each table in one LOAD DATA statement (job.all), not statements of rows
	queue   []job
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	ctx     context.Context
	stop    context.CancelFunc
	parent  context.Context
	log     *slog.Logger
}

func newWriter(ctx context.Context, db *sql.DB, workers int, whole bool, log *slog.Logger) *writer {
	w := &writer{db: db, workers: workers, whole: whole, parent: ctx, log: log}
	w.ctx, w.stop = context.WithCancel(ctx)
	return w
}

func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		w.stop()
	}
}

// wait waits for the workers and returns the first error.
func (w *writer) wait() error {
	w.wg.Wait()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return w.parent.Err()
	}
	return w.err
}

// chunk is one statement, its arguments built, to run in the table's transaction.
type chunk func(ctx context.Context, tx *sql.Tx) error

// load queues n rows of table name, to be written in statements of per rows, prepare(from,
// to) building the statement of rows [from, to) (the next statement is built while the last one
// runs), or, when the writer is whole, by all in one statement.
func (w *writer) load(name string, n, per int, prepare func(from, to int) chunk, all chunk) {
	if n > 0 {
		w.queue = append(w.queue, job{name, n, per, prepare, all})
	}
}

type job struct {
	name    string
	n, per  int
	prepare func(from, to int) chunk
	all     chunk
}

// run writes the queued tables, the biggest first so that the last to finish is a small one.
// Each empty one is rebuilt first (rebuild), one after another, before any is written.
func (w *writer) run() error {
	slices.SortStableFunc(w.queue, func(a, b job) int { return cmp.Compare(b.n, a.n) })
	began, rebuilt := time.Now(), 0
	for _, j := range w.queue {
		did, err := w.rebuild(j.name)
		if err != nil {
			w.fail(fmt.Errorf("yeargen: rebuild %s: %w", j.name, err))
			w.queue = nil
			return w.wait()
		}
		if did {
			rebuilt++
		}
	}
	w.log.Info("yeargen: empty tables rebuilt", slog.Int("tables", rebuilt), slog.Duration("took", time.Since(began)))
	next := make(chan job)
	for range w.workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for j := range next {
				if err := w.loadTable(j); err != nil {
					w.fail(fmt.Errorf("yeargen: load %d rows into %s: %w", j.n, j.name, err))
				}
			}
		}()
	}
	for _, j := range w.queue {
		select {
		case next <- j:
		case <-w.ctx.Done():
		}
	}
	close(next)
	w.queue = nil
	return w.wait()
}

// rebuild rebuilds table name if it is empty, so that its load can be a bulk load
// (docs/operations.md, «A year of data»). MariaDB bulk-loads only into a table whose clustered
// index is empty, and an empty table that an instant ALTER TABLE reordered or dropped columns of
// (ADD COLUMN ... AFTER: fx_order's migrations) keeps a hidden metadata record there: every
// insert into it then goes row by row. Rebuilding the empty table (ALTER TABLE ... FORCE: the same
// definition, written anew) drops that record; on an empty table it takes moments, and on MySQL
// it is as harmless. A table holding rows is left as it is: its load is row by row anyway.
func (w *writer) rebuild(name string) (bool, error) {
	var one int
	err := w.db.QueryRowContext(w.ctx, "SELECT 1 FROM `"+name+"` LIMIT 1").Scan(&one)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	if _, err := w.db.ExecContext(w.ctx, "ALTER TABLE `"+name+"` FORCE"); err != nil {
		return false, err
	}
	return true, nil
}

// rowsModified is how many rows the server counts as modified by the transaction on this
// connection, and whether it could tell: a bulk load into an empty table counts one for the
// whole table, a row-by-row load counts every row. The count is a snapshot at most a tenth of a
// second old (both servers cache information_schema.innodb_trx that long); reading it needs the
// PROCESS privilege.
func rowsModified(ctx context.Context, tx *sql.Tx) (int64, bool) {
	var n int64
	err := tx.QueryRowContext(ctx, "SELECT `trx_rows_modified` FROM `information_schema`.`innodb_trx` WHERE `trx_mysql_thread_id` = CONNECTION_ID()").Scan(&n)
	return n, err == nil
}

func (w *writer) loadTable(j job) error {
	name, n, per, prepare := j.name, j.n, j.per, j.prepare
	if w.whole {
		// One statement: prepare's chunks are not built.
		prepare = func(from, to int) chunk { return j.all }
		per = n
	}
	began := time.Now()
	tx, err := w.db.BeginTx(w.ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	chunks := make(chan chunk, 2)
	go func() {
		defer close(chunks)
		for from := 0; from < n; from += per {
			select {
			case chunks <- prepare(from, min(n, from+per)):
			case <-ctx.Done():
				return
			}
		}
	}()
	var execs time.Duration
	for c := range chunks {
		t := time.Now()
		if err := c(ctx, tx); err != nil {
			return err
		}
		execs += time.Since(t)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Which way the server took, read before the commit: the last statement ran moments ago, so
	// a row-by-row load of more than one statement shows thousands of rows even in a stale count.
	modified, known := rowsModified(ctx, tx)
	if err := tx.Commit(); err != nil {
		return err
	}
	took := time.Since(began)
	attrs := []any{slog.String("table", name), slog.Int("rows", n), slog.Duration("took", took),
		slog.Duration("inStatements", execs), slog.Int("rowsPerSecond", int(float64(n)/took.Seconds()))}
	if known && n > j.per {
		attrs = append(attrs, slog.Bool("bulk", modified <= 1))
	}
	w.log.Info("yeargen: table written", attrs...)
	return nil
}

// table is one table's bulk INSERT: its name and columns.
type table struct {
	name string
	cols []string
}

// statement is t's INSERT of n rows.
func (t table) statement(n int) string {
	return "INSERT INTO `" + t.name + "` (`" + strings.Join(t.cols, "`, `") + "`) VALUES " + store.ValuesRows(n, len(t.cols))
}

// insert writes n rows of t, row(i, args) appending row i's values.
func (w *writer) insert(t table, n int, row func(i int, args []any) []any) {
	per := rowsPerStatement(len(t.cols))
	full := t.statement(min(per, n))
	load := func(file string) string {
		return "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE `" + t.name + "` " + store.LoadDataFormat + " (`" + strings.Join(t.cols, "`, `") + "`)"
	}
	all := func(ctx context.Context, tx *sql.Tx) error { return store.LoadData(ctx, tx, load, n, row) }
	w.load(t.name, n, per, func(from, to int) chunk {
		text := full
		if to-from != per {
			text = t.statement(to - from)
		}
		args := make([]any, 0, (to-from)*len(t.cols))
		for i := from; i < to; i++ {
			args = row(i, args)
		}
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, text, args...)
			return err
		}
	}, all)
}

// Formatting of the integers the plan keeps as the decimal text the columns take.

// money formats cents.
func money(c int64) string {
	neg := c < 0
	if neg {
		c = -c
	}
	s := strconv.FormatInt(c/100, 10) + "." + pad2(c%100)
	if neg {
		return "-" + s
	}
	return s
}

func pad2(x int64) string {
	if x < 10 {
		return "0" + strconv.FormatInt(x, 10)
	}
	return strconv.FormatInt(x, 10)
}

// fixed formats v × 10^-places with trailing zeros trimmed, as decimal.Decimal's String does.
func fixed(v int64, places int) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := strconv.FormatInt(v, 10)
	if places > 0 {
		for len(s) <= places {
			s = "0" + s
		}
		s = s[:len(s)-places] + "." + s[len(s)-places:]
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if neg && s != "0" {
		return "-" + s
	}
	return s
}

// volume formats hundredths of a lot.
func volume(l int32) string { return fixed(int64(l), 2) }

// sqlTime formats ms as the DATETIME(3) columns take it (UTC sessions).
func sqlTime(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") }

func utc(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
