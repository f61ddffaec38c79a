package store

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// LoadData writes n rows into table, in one LOAD DATA LOCAL INFILE statement streamed from row
// (row(i, args) appends row i's values: nil, string, []byte, the integer types and pointers to
// them). It is for a history written whole (internal/yeargen), where one statement for a whole
// table is what lets MariaDB build the table's indexes by sorting, once (docs/operations.md,
// «A year of data»): a bulk load into an empty table sorts only what one statement brought.
//
// The server must take local files (local_infile: MariaDB's default, not MySQL's); LocalInfile
// says whether it does. A local load turns what an INSERT would refuse (a duplicate key, a value
// that does not fit) into a warning and goes on, so LoadData fails when the server counted a
// warning or wrote another number of rows than n.
//
// statement(file) is the statement, naming its table and columns, reading file:
//
//	"LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE `fx_event` " + store.LoadDataFormat + " (`id`, ...)"
//
// with the table named literally where the table has one writer, so that the one-writer tests see
// it (internal/testkit/sqlsource).
func LoadData(ctx context.Context, tx *sql.Tx, statement func(file string) string, n int, row func(i int, args []any) []any) error {
	name := "fxdesk-load-" + strconv.FormatInt(loadSeq.Add(1), 10)
	pr, pw := io.Pipe()
	mysql.RegisterReaderHandler(name, func() io.Reader { return pr })
	defer mysql.DeregisterReaderHandler(name)
	done := make(chan error, 1)
	go func() {
		done <- writeRows(pw, n, row)
	}()
	text := statement("Reader::" + name)
	table := text
	if i := strings.Index(text, " INTO TABLE "); i >= 0 {
		table, _, _ = strings.Cut(text[i+len(" INTO TABLE "):], " ")
	}
	res, err := tx.ExecContext(ctx, text)
	pr.CloseWithError(io.ErrClosedPipe) // a writer the server stopped reading from stops
	werr := <-done
	if err != nil {
		return fmt.Errorf("load data into %s: %w", table, err)
	}
	if werr != nil {
		return fmt.Errorf("load data into %s: %w", table, werr)
	}
	rows, err := tx.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return fmt.Errorf("load data into %s: %w", table, err)
	}
	var warnings []string
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			rows.Close()
			return fmt.Errorf("load data into %s: %w", table, err)
		}
		if len(warnings) < 3 {
			warnings = append(warnings, level+" "+strconv.Itoa(code)+": "+msg)
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("load data into %s: %w", table, err)
	}
	if len(warnings) > 0 {
		return fmt.Errorf("load data into %s: the server warned: %s", table, strings.Join(warnings, "; "))
	}
	if got, err := res.RowsAffected(); err != nil || got != int64(n) {
		return fmt.Errorf("load data into %s: %d rows written of %d (%v)", table, got, n, err)
	}
	return nil
}

// LoadDataFormat is how LoadData writes the rows: a LOAD DATA statement's clauses after its table.
const LoadDataFormat = "CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'"

// LocalInfile is whether the server takes LOAD DATA LOCAL INFILE.
func LocalInfile(ctx context.Context, db *sql.DB) (bool, error) {
	var on bool
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.local_infile").Scan(&on); err != nil {
		return false, err
	}
	return on, nil
}

var loadSeq atomic.Int64

// writeRows writes the rows as LOAD DATA reads them: fields split by tabs, lines by newlines,
// NULL as \N, and a backslash, tab, newline, carriage return or NUL in a value escaped.
func writeRows(pw *io.PipeWriter, n int, row func(i int, args []any) []any) (err error) {
	defer func() { pw.CloseWithError(err) }()
	w := bufio.NewWriterSize(pw, 64<<10)
	var args []any
	var num []byte
	for i := range n {
		args = row(i, args[:0])
		for j, a := range args {
			if j > 0 {
				w.WriteByte('\t')
			}
			num = num[:0]
			switch v := a.(type) {
			case nil:
				w.WriteString(`\N`)
			case string:
				writeEscaped(w, v)
			case *string:
				if v == nil {
					w.WriteString(`\N`)
				} else {
					writeEscaped(w, *v)
				}
			case []byte:
				writeEscaped(w, string(v))
			case int, int8, int16, int32, int64:
				num = strconv.AppendInt(num[:0], reflect.ValueOf(v).Int(), 10)
			case *int64:
				if v == nil {
					num = append(num[:0], `\N`...)
				} else {
					num = strconv.AppendInt(num[:0], *v, 10)
				}
			case uint8, uint16, uint32, uint64:
				num = strconv.AppendUint(num[:0], reflect.ValueOf(v).Uint(), 10)
			case bool:
				if v {
					w.WriteByte('1')
				} else {
					w.WriteByte('0')
				}
			default:
				return fmt.Errorf("row %d, column %d: a %T cannot be loaded", i, j, a)
			}
			w.Write(num) // a number's digits (or \N), empty after the other cases
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
	}
	return w.Flush()
}

func writeEscaped(w *bufio.Writer, s string) {
	from := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '\\':
			esc = `\\`
		case '\t':
			esc = `\t`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case 0:
			esc = `\0`
		default:
			continue
		}
		w.WriteString(s[from:i])
		w.WriteString(esc)
		from = i + 1
	}
	w.WriteString(s[from:])
}
