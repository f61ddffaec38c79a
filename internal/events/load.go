package events

import (
	"context"
	"database/sql"
	"fmt"

	"fxdesk/internal/store"
)

// Loaded is one event of a history written whole from outside the desk (internal/yeargen): the
// row as Add would have written it, its id from the sequence and its time included.
type Loaded struct {
	ID, AccountID, UserID int64
	Type                  Type
	Payload               []byte // the encoded payload
	Term                  int64
	CreatedAt             string // 2006-01-02 15:04:05.000, UTC
}

// loadCols is how many placeholders one Loaded takes.
const loadCols = 7

// MaxLoadRows is the most events one Load statement carries: the server's limit of 65,535
// placeholders per prepared statement.
const MaxLoadRows = 65535 / loadCols

// Load writes events of a generated history — never the desk's own — in one multi-row INSERT
// with their own ids. It is the outbox's door for the generator, kept here so that fx_event keeps
// one writer; the caller gives ids the sequence then moves past (LoadSequence).
func Load(ctx context.Context, tx Execer, evs []Loaded) error {
	if len(evs) == 0 {
		return nil
	}
	if len(evs) > MaxLoadRows {
		return fmt.Errorf("events: load %d events in one statement (at most %d)", len(evs), MaxLoadRows)
	}
	args := make([]any, 0, len(evs)*loadCols)
	for _, e := range evs {
		args = append(args, e.ID, e.AccountID, e.UserID, string(e.Type), e.Payload, e.Term, e.CreatedAt)
	}
	if _, err := tx.ExecContext(ctx, insertSQL+store.ValuesRows(len(evs), loadCols), args...); err != nil {
		return fmt.Errorf("events: load %d events (id %d first): %w", len(evs), evs[0].ID, err)
	}
	return nil
}

// LoadAll writes n events, event(i) giving the i-th, as Load does but in one statement for them
// all (store.LoadData): how a generated history's outbox is written whole into an empty fx_event,
// so that MariaDB builds its indexes by sorting (docs/operations.md, «A year of data»). The
// server must take local files (store.LocalInfile).
func LoadAll(ctx context.Context, tx *sql.Tx, n int, event func(i int) Loaded) error {
	err := store.LoadData(ctx, tx, loadDataSQL, n, func(i int, args []any) []any {
		e := event(i)
		return append(args, e.ID, e.AccountID, e.UserID, string(e.Type), e.Payload, e.Term, e.CreatedAt)
	})
	if err != nil {
		return fmt.Errorf("events: load %d events: %w", n, err)
	}
	return nil
}

// loadDataSQL is LoadAll's statement, reading file, insertSQL's columns in insertSQL's order.
func loadDataSQL(file string) string {
	return "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE `fx_event` " + store.LoadDataFormat +
		" (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`)"
}

// LoadSequence moves the outbox's sequence to last — the last id a loaded history used — through
// the sequence's own statement, so the desk's next event follows it. It never moves it back.
func LoadSequence(ctx context.Context, db *sql.DB, last int64) error {
	var now int64
	if err := db.QueryRowContext(ctx, "SELECT `last` FROM `fx_event_seq` WHERE `one` = 1").Scan(&now); err != nil {
		return fmt.Errorf("events: read the sequence: %w", err)
	}
	if last <= now {
		return nil
	}
	if _, err := db.ExecContext(ctx, seqSQL, last-now); err != nil {
		return fmt.Errorf("events: move the sequence to %d: %w", last, err)
	}
	return nil
}
