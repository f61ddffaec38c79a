package sqlrec

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Tables counts the rows of every table of db's current database (ANALYZE TABLE first, so the
// optimiser plans on statistics that match): Check calls a table large by it.
func Tables(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SELECT `TABLE_NAME` FROM `information_schema`.`TABLES` WHERE `TABLE_SCHEMA` = DATABASE() AND `TABLE_TYPE` = 'BASE TABLE'")
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	out := make(map[string]int64, len(names))
	for _, n := range names {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE `"+n+"`"); err != nil {
			return nil, fmt.Errorf("analyze %s: %w", n, err)
		}
		var c int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+n+"`").Scan(&c); err != nil {
			return nil, fmt.Errorf("count %s: %w", n, err)
		}
		out[n] = c
	}
	return out, nil
}

// PlanRow is one row of EXPLAIN, in the columns both MariaDB and MySQL 8 have.
type PlanRow struct {
	ID, SelectType, Table, Type, Key, Extra string
	Rows                                    int64
}

func (p PlanRow) String() string {
	return fmt.Sprintf("id=%s %s table=%s type=%s key=%s rows=%d extra=%q", p.ID, p.SelectType, p.Table, p.Type, p.Key, p.Rows, p.Extra)
}

// Explain is the plan of s, asked with its own arguments.
func Explain(ctx context.Context, db *sql.DB, s Statement) ([]PlanRow, error) {
	rows, err := db.QueryContext(ctx, "explain "+s.Text, s.Args...) // lower case: see Reads
	if err != nil {
		return nil, fmt.Errorf("explain %q: %w", s.Text, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []PlanRow
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var p PlanRow
		for i, c := range cols {
			v := vals[i].String
			switch strings.ToLower(c) {
			case "id":
				p.ID = v
			case "select_type":
				p.SelectType = v
			case "table":
				p.Table = v
			case "type":
				p.Type = v
			case "key":
				p.Key = v
			case "rows":
				p.Rows, _ = strconv.ParseInt(v, 10, 64)
			case "extra":
				p.Extra = v
			}
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Problem is a read whose plan grows with a large table.
type Problem struct {
	Statement Statement
	Row       PlanRow
	Table     string // the table the row reads (the alias resolved)
	TableRows int64
	Why       string
}

func (p Problem) String() string {
	return fmt.Sprintf("[%s] %s over %s (%d rows): %s\n    %s\n    args %v", p.Statement.Tag, p.Why, p.Table, p.TableRows, p.Row, p.Statement.Text, p.Statement.Args)
}

// Check explains s and reports each plan row that reads a table of more than large rows (counts
// from Tables) as a full scan (type ALL, or index over more than large entries: a scan that no
// LIMIT stops early), or that sorts or builds a temporary table (Using filesort, Using
// temporary) in a select that reads such a table and joins more than large rows by the plan's
// estimate (the product of its rows): work that grows with the table, not with the answer. A
// sort of an account's few open positions passes; a sort of a user's history or of a time
// window's rows does not. Derived tables and union results are not tables: what fills them is checked in its
// own rows.
func Check(ctx context.Context, db *sql.DB, s Statement, tables map[string]int64, large int64) ([]Problem, error) {
	plan, err := Explain(ctx, db, s)
	if err != nil {
		return nil, err
	}
	aliases := tableAliases(s.Text)
	// resolve is the table a plan row names (an alias, or the table itself) and its rows: the
	// largest table the alias stands for somewhere in the statement.
	resolve := func(name string) (string, int64) {
		if n, ok := tables[name]; ok {
			if _, alias := aliases[name]; !alias {
				return name, n
			}
		}
		best, rows := "", int64(-1)
		for _, t := range aliases[name] {
			if n, ok := tables[t]; ok && n > rows {
				best, rows = t, n
			}
		}
		return best, rows
	}
	largest := map[string]struct {
		table string
		rows  int64
	}{}
	joined := map[string]int64{} // per select: the product of its rows' estimates, capped
	for _, r := range plan {
		if _, ok := joined[r.ID]; !ok {
			joined[r.ID] = 1
		}
		joined[r.ID] = min(joined[r.ID]*max(r.Rows, 1), 1<<40)
		if t, n := resolve(r.Table); n > largest[r.ID].rows {
			largest[r.ID] = struct {
				table string
				rows  int64
			}{t, n}
		}
	}
	var out []Problem
	for _, r := range plan {
		t, n := resolve(r.Table)
		switch {
		case n > large && (r.Type == "ALL" || (r.Type == "index" && r.Rows > large)):
			out = append(out, Problem{Statement: s, Row: r, Table: t, TableRows: n, Why: "full scan"})
		case strings.Contains(r.Extra, "Using filesort") || strings.Contains(r.Extra, "Using temporary"):
			if l := largest[r.ID]; l.rows > large && joined[r.ID] > large {
				out = append(out, Problem{Statement: s, Row: r, Table: l.table, TableRows: l.rows, Why: "sort or temporary table"})
			}
		}
	}
	return out, nil
}

// tableRef is a table named after FROM or JOIN, with its alias when it has one.
var tableRef = regexp.MustCompile("(?i)\\b(?:FROM|JOIN)\\s+`?([A-Za-z0-9_]+)`?(?:\\s+(?:AS\\s+)?`?([A-Za-z_][A-Za-z0-9_]*)`?)?")

// notAlias are the words that may follow a table name and are not its alias (lower case: see
// Reads).
var notAlias = map[string]bool{"where": true, "join": true, "on": true, "order": true, "group": true, "left": true, "right": true, "inner": true, "straight_join": true, "use": true, "force": true, "ignore": true, "limit": true, "union": true, "for": true, "lock": true, "cross": true, "having": true, "natural": true, "using": true, "set": true, "window": true, "partition": true}

// tableAliases maps each name a plan row may carry — an alias or a table — to the tables it
// stands for in text.
func tableAliases(text string) map[string][]string {
	out := map[string][]string{}
	for _, m := range tableRef.FindAllStringSubmatch(text, -1) {
		table, alias := m[1], m[2]
		if alias == "" || notAlias[strings.ToLower(alias)] {
			alias = table
		}
		out[alias] = append(out[alias], table)
	}
	return out
}
