package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Scanner is a row to scan: *sql.Row or *sql.Rows.
type Scanner interface{ Scan(...any) error }

// Queryer runs a query: *sql.DB, *sql.Tx, *sql.Conn.
type Queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// QueryAll runs query in q and returns every row through scan, an empty slice for none; what
// names the read in errors.
func QueryAll[T any](ctx context.Context, q Queryer, what string, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// ScanInt64 reads a row of one integer column, for QueryAll.
func ScanInt64(sc Scanner) (int64, error) {
	var v int64
	err := sc.Scan(&v) // before the return: a return's operands may be read before its calls run
	return v, err
}

// QueryBatches runs query in q and hands its rows through scan to each in batches of up to n as
// they arrive, each batch a slice of its own (each may keep it); what names the read in errors.
// An error from each ends the read with that error.
func QueryBatches[T any](ctx context.Context, q Queryer, what string, scan func(Scanner) (T, error), n int, each func([]T) error, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	batch := make([]T, 0, n)
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if batch = append(batch, v); len(batch) == n {
			if err := each(batch); err != nil {
				return err
			}
			batch = make([]T, 0, n)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(batch) > 0 {
		return each(batch)
	}
	return nil
}
