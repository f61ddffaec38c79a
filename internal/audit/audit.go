package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"fxdesk/internal/store"
)

// Actor is who made a change: an API token and its user, or the command line.
type Actor struct {
	TokenID   int64  // 0: none (the command line)
	UserID    int64  // 0: none
	Via       string // "api" or "cli"
	RequestID string // the request's id, "" where there is none
}

type actorKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// ErrNoActor refuses a change whose context names nobody: an admin write must say who made it.
var ErrNoActor = errors.New("audit: the change has no actor (audit.WithActor)")

// Change is one admin write: an action on one entity, and the entity before and after it (any
// value encoding/json takes; nil for none — a creation has no before, a deletion no after).
type Change struct {
	Action     string // "account_group.create", "instrument.update", "account.deposit", …
	EntityType string // "account_group", "instrument", "account", "setting", "token", …
	EntityID   string
	Before     any
	After      any
}

// insertSQL is the one statement that writes the log.
const insertSQL = "INSERT INTO `fx_audit` (`actorTokenId`, `actorUserId`, `actorVia`, `action`, `entityType`, `entityId`, `before`, `after`, `requestId`) " +
	"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

// Row returns the INSERT that records c by ctx's actor, for the caller to run in the change's own
// transaction.
func Row(ctx context.Context, c Change) (string, []any, error) {
	a, ok := ActorFrom(ctx)
	if !ok {
		return "", nil, ErrNoActor
	}
	if c.Action == "" || c.EntityType == "" || c.EntityID == "" {
		return "", nil, fmt.Errorf("audit: action, entity type and entity id are required (%+v)", c)
	}
	before, err := encode(c.Before)
	if err != nil {
		return "", nil, err
	}
	after, err := encode(c.After)
	if err != nil {
		return "", nil, err
	}
	return insertSQL, []any{nullID(a.TokenID), nullID(a.UserID), a.Via, c.Action, c.EntityType, c.EntityID, before, after, nullString(a.RequestID)}, nil
}

// Execer runs a statement: *sql.Tx, *sql.Conn (inside a transaction the caller began).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Record writes c's row through tx, the change's own transaction.
func Record(ctx context.Context, tx Execer, c Change) error {
	stmt, args, err := Row(ctx, c)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
		return fmt.Errorf("audit %s %s %s: %w", c.Action, c.EntityType, c.EntityID, err)
	}
	return nil
}

func encode(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("audit: encode: %w", err)
	}
	return string(b), nil
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Entry is one row of the log as read back.
type Entry struct {
	ID           int64           `json:"id"`
	At           time.Time       `json:"at"`
	ActorTokenID *int64          `json:"actorTokenId"`
	ActorUserID  *int64          `json:"actorUserId"`
	ActorVia     string          `json:"actorVia"`
	Action       string          `json:"action"`
	EntityType   string          `json:"entityType"`
	EntityID     string          `json:"entityId"`
	Before       json.RawMessage `json:"before"`
	After        json.RawMessage `json:"after"`
	RequestID    *string         `json:"requestId"`
}

// Filter narrows List; zero fields do not filter. Entries come newest first, Before (an id)
// pages back.
type Filter struct {
	EntityType string
	EntityID   string
	ActorUser  int64
	From, To   time.Time // [From, To)
	Before     int64     // only ids below it
	Limit      int       // 1..500, default 100
}

// List reads the log, newest first.
func List(ctx context.Context, db store.Queryer, f Filter) ([]Entry, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) { where = append(where, cond); args = append(args, arg) }
	if f.EntityType != "" {
		add("`entityType` = ?", f.EntityType)
	}
	if f.EntityID != "" {
		add("`entityId` = ?", f.EntityID)
	}
	if f.ActorUser != 0 {
		add("`actorUserId` = ?", f.ActorUser)
	}
	if !f.From.IsZero() {
		add("`at` >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		add("`at` < ?", f.To.UTC())
	}
	if f.Before > 0 {
		add("`id` < ?", f.Before)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	q := "SELECT `id`, `at`, `actorTokenId`, `actorUserId`, `actorVia`, `action`, `entityType`, `entityId`, `before`, `after`, `requestId` FROM `fx_audit`"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY `id` DESC LIMIT ?"
	args = append(args, f.Limit)
	return store.QueryAll(ctx, db, "audit log", scanEntry, q, args...)
}

// After reads up to limit rows with an id above after, oldest first, for a reader that follows
// the log (catalog.TermsFollower). Ids are taken at INSERT, not at COMMIT: a row may become
// visible after a higher one, so the follower reads again from below a gap until it closes
// or has stayed open past any transaction's life.
func After(ctx context.Context, db store.Queryer, after int64, limit int) ([]Entry, error) {
	return store.QueryAll(ctx, db, "audit log after "+fmt.Sprint(after), scanEntry,
		"SELECT `id`, `at`, `actorTokenId`, `actorUserId`, `actorVia`, `action`, `entityType`, `entityId`, `before`, `after`, `requestId` "+
			"FROM `fx_audit` WHERE `id` > ? ORDER BY `id` LIMIT ?", after, limit)
}

// Settled is the highest id of a row written at least age ago by the database's clock (0 for
// none): a follower starting there reads again what was written since, which is harmless for a
// reader that derives from the database, and misses only a transaction open longer than age.
// It walks the log from its newest row back to the first old enough — the rows of the last age,
// not the whole log: as MAX(`id`) over `at` < …, it read every entry of idx_fx_audit_at, a second
// on a year's 500,000 rows at every holder's boot, beside the risk view's load.
func Settled(ctx context.Context, db store.Queryer, age time.Duration) (int64, error) {
	ids, err := store.QueryAll(ctx, db, "audit log: settled id", store.ScanInt64,
		"SELECT `id` FROM `fx_audit` WHERE `at` < NOW(3) - INTERVAL ? MICROSECOND ORDER BY `id` DESC LIMIT 1", age.Microseconds())
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return ids[0], nil
}

func scanEntry(sc store.Scanner) (Entry, error) {
	var e Entry
	var before, after sql.NullString
	if err := sc.Scan(&e.ID, &e.At, &e.ActorTokenID, &e.ActorUserID, &e.ActorVia, &e.Action, &e.EntityType, &e.EntityID, &before, &after, &e.RequestID); err != nil {
		return Entry{}, err
	}
	if before.Valid {
		e.Before = json.RawMessage(before.String)
	}
	if after.Valid {
		e.After = json.RawMessage(after.String)
	}
	return e, nil
}
