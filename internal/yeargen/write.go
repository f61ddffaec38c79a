package yeargen

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxPlaceholders is the server's limit per prepared statement.
const maxPlaceholders = 65535

// rowsPerStatement is how many rows one INSERT carries: thousands, as many as the placeholder
// limit allows up to 4,000 (bigger statements gain little and hold more memory per worker).
func rowsPerStatement(cols int) int { return min(4000, maxPlaceholders/cols) }

// writer runs INSERT statements on several connections at once. The first error stops it.
type writer struct {
	db     *sql.DB
	jobs   chan func(context.Context) error
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	ctx    context.Context
	stop   context.CancelFunc
	parent context.Context
}

func newWriter(ctx context.Context, db *sql.DB, workers int) *writer {
	w := &writer{db: db, jobs: make(chan func(context.Context) error, workers), parent: ctx}
	w.ctx, w.stop = context.WithCancel(ctx)
	for range workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for job := range w.jobs {
				if w.ctx.Err() != nil {
					continue
				}
				if err := job(w.ctx); err != nil {
					w.fail(err)
				}
			}
		}()
	}
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

// submit queues job; it blocks while every worker is busy, which bounds the rows in memory.
func (w *writer) submit(job func(context.Context) error) bool {
	select {
	case w.jobs <- job:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// wait waits for every queued job and returns the first error.
func (w *writer) wait() error {
	close(w.jobs)
	w.wg.Wait()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return w.parent.Err()
	}
	return w.err
}

// table is one table's bulk INSERT: its name and columns.
type table struct {
	name string
	cols []string
}

// statement is t's INSERT of n rows.
func (t table) statement(n int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO `" + t.name + "` (`" + strings.Join(t.cols, "`, `") + "`) VALUES ")
	tuple := "(" + strings.Repeat("?, ", len(t.cols)-1) + "?)"
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(tuple)
	}
	return sb.String()
}

// insert writes n rows of t, row(i, args) appending row i's values, in statements of
// rowsPerStatement rows run by the writer's workers. It returns once the last is queued.
func (w *writer) insert(t table, n int, row func(i int, args []any) []any) {
	per := rowsPerStatement(len(t.cols))
	full := ""
	for from := 0; from < n; from += per {
		to := min(n, from+per)
		var text string
		if to-from == per {
			if full == "" {
				full = t.statement(per)
			}
			text = full
		} else {
			text = t.statement(to - from)
		}
		from := from
		ok := w.submit(func(ctx context.Context) error {
			args := make([]any, 0, (to-from)*len(t.cols))
			for i := from; i < to; i++ {
				args = row(i, args)
			}
			if _, err := w.db.ExecContext(ctx, text, args...); err != nil {
				return fmt.Errorf("yeargen: insert %s rows %d-%d: %w", t.name, from, to, err)
			}
			return nil
		})
		if !ok {
			return
		}
	}
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
