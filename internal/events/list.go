package events

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"fxdesk/internal/store"
)

// Entry is one event as read back.
type Entry struct {
	ID        int64           `json:"id"`
	AccountID int64           `json:"accountId"`
	UserID    int64           `json:"userId"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	Term      int64           `json:"term"`
	CreatedAt time.Time       `json:"createdAt"`
}

// Filter chooses the events List returns: those after After (an id) and up to UpTo (0: no
// bound), in id order, of UserID's accounts (0: every user's) and of AccountID (0: every
// account).
type Filter struct {
	UserID    int64
	AccountID int64
	After     int64
	UpTo      int64
	Limit     int // 1..500, default 100
}

// List reads a page of events in id order. Ids are dense and committed in order (Add), so a
// reader that resumes after the page's last id misses nothing that commits later.
func List(ctx context.Context, db store.Queryer, f Filter) ([]Entry, error) {
	where := []string{"`id` > ?"}
	args := []any{f.After}
	if f.UserID != 0 {
		where, args = append(where, "`userId` = ?"), append(args, f.UserID)
	}
	if f.AccountID != 0 {
		where, args = append(where, "`accountId` = ?"), append(args, f.AccountID)
	}
	if f.UpTo != 0 {
		where, args = append(where, "`id` <= ?"), append(args, f.UpTo)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	args = append(args, f.Limit)
	return store.QueryAll(ctx, db, "events", scanEntry,
		"SELECT `id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt` FROM `fx_event` WHERE "+strings.Join(where, " AND ")+" ORDER BY `id` LIMIT ?", args...)
}

// Newest is the highest event id written (0: none yet).
func Newest(ctx context.Context, db store.Queryer) (int64, error) {
	ids, err := store.QueryAll(ctx, db, "newest event", func(sc store.Scanner) (sql.NullInt64, error) {
		var id sql.NullInt64
		err := sc.Scan(&id)
		return id, err
	}, "SELECT MAX(`id`) FROM `fx_event`")
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return ids[0].Int64, nil
}

func scanEntry(sc store.Scanner) (Entry, error) {
	var e Entry
	var text string
	if err := sc.Scan(&e.ID, &e.AccountID, &e.UserID, &e.Type, &text, &e.Term, &e.CreatedAt); err != nil {
		return Entry{}, fmt.Errorf("scan event: %w", err)
	}
	// Written by rowOf, a payload is already encoding/json's compact bytes, and Compact leaves it
	// as it is. Rows an earlier release wrote through JSON_SET hold the server's spaced JSON:
	// compacted here, where every reader reads them (the page, the streams, webhooks), they are
	// served in one form too.
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return Entry{}, fmt.Errorf("scan event %d: payload: %w", e.ID, err)
	}
	e.Payload = json.RawMessage(buf.Bytes())
	return e, nil
}
