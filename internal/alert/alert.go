// Package alert owns the execution alert inbox, table fx_execution_alert: what the desk tells an
// operator it cannot fix by itself (a quote mirror nobody publishes, a rollover that cannot be
// converted, a ledger that drifted).
//
// An alert is identified by its code and deduplicated while it is unresolved: raising a code
// that already has an OPEN or ACKNOWLEDGED row bumps that row's count and lastSeenAt and refreshes
// its message and details, so a condition checked every few seconds makes one row, not thousands.
// Resolving closes the row; the next raise of the same code opens a new one (a new incident).
// Acknowledging says a person has seen it; it stays deduplicated until resolved.
//
// The package never decides what is alarming — callers do — and never deletes history.
package alert

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Severity says how urgently a person should look.
type Severity string

const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical" // money is at stake now: charges not taken, positions unwatched
)

// Status is where an alert is in its life.
type Status string

const (
	Open         Status = "OPEN"
	Acknowledged Status = "ACKNOWLEDGED" // a person has seen it; still deduplicated
	Resolved     Status = "RESOLVED"     // the condition ended; a new raise opens a new row
)

// ParseStatus reads a status case-insensitively.
func ParseStatus(s string) (Status, error) {
	switch st := Status(strings.ToUpper(strings.TrimSpace(s))); st {
	case Open, Acknowledged, Resolved:
		return st, nil
	}
	return "", fx.Errorf(fx.EINVALID, "Unknown alert status %q: use OPEN, ACKNOWLEDGED or RESOLVED.", s)
}

// Alert is one row of the inbox.
type Alert struct {
	ID             int64           `json:"id"`
	Code           string          `json:"code"`
	Severity       Severity        `json:"severity"`
	Message        string          `json:"message"`
	Details        json.RawMessage `json:"details"`
	Status         Status          `json:"status"`
	FirstSeenAt    time.Time       `json:"firstSeenAt"`
	LastSeenAt     time.Time       `json:"lastSeenAt"`
	Count          int64           `json:"count"`
	AcknowledgedAt *time.Time      `json:"acknowledgedAt"`
	AcknowledgedBy string          `json:"acknowledgedBy,omitempty"`
	ResolvedAt     *time.Time      `json:"resolvedAt"`
}

// Filter narrows List. The zero value lists the most recent alerts of every status.
type Filter struct {
	Statuses []Status // any of these; empty means all
	Code     string   // exactly this code; empty means all
	Limit    int      // default DefaultLimit, at most MaxLimit
}

const (
	DefaultLimit = 100
	MaxLimit     = 1000
	maxCodeLen   = 64
	maxByLen     = 128
)

// Inbox reads and writes fx_execution_alert. It is safe for concurrent use, and for use by
// several processes at once: deduplication is enforced by the table, not by this value.
type Inbox struct {
	db  *sql.DB
	log *slog.Logger
}

// NewInbox returns the inbox over db (migrated to 000004 or later).
func NewInbox(db *sql.DB, log *slog.Logger) *Inbox {
	return &Inbox{db: db, log: log}
}

// Raise records that the condition named by code holds now. If code has an unresolved row, that
// row's count and lastSeenAt are bumped and its severity, message and details replaced by these;
// otherwise a new OPEN row is made. details is marshalled to JSON (nil stores {}). A newly opened
// alert is logged (critical at error, others at warning); repeats are not.
//
// Errors: EINVALID for an empty or over-long code or an unknown severity; otherwise a wrapped
// database or marshalling error.
func (in *Inbox) Raise(ctx context.Context, code string, severity Severity, message string, details any) error {
	if err := checkCode(code); err != nil {
		return err
	}
	switch severity {
	case Info, Warning, Critical:
	default:
		return fx.Errorf(fx.EINVALID, "Unknown alert severity %q: use info, warning or critical.", severity)
	}
	body := []byte("{}")
	if details != nil {
		var err error
		if body, err = json.Marshal(details); err != nil {
			return fmt.Errorf("raise alert %q: marshal details: %w", code, err)
		}
	}
	// One statement, so two processes raising the same code at once still make one row: the
	// loser of the unique-key race becomes the update. count always changes, so rows affected is
	// 1 for an insert and 2 for an update whether or not the driver counts found rows.
	res, err := in.exec(ctx, "INSERT INTO `fx_execution_alert` "+
		"(`code`, `severity`, `message`, `details`, `status`, `openKey`, `firstSeenAt`, `lastSeenAt`, `count`) "+
		"VALUES (?, ?, ?, ?, 'OPEN', ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), 1) "+
		"ON DUPLICATE KEY UPDATE `count` = `count` + 1, `lastSeenAt` = UTC_TIMESTAMP(3), "+
		"`severity` = ?, `message` = ?, `details` = ?",
		code, string(severity), message, string(body), code, string(severity), message, string(body))
	if err != nil {
		return fmt.Errorf("raise alert %q: %w", code, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		level := slog.LevelWarn
		if severity == Critical {
			level = slog.LevelError
		}
		in.log.Log(ctx, level, "alert raised", slog.String("code", code), slog.String("severity", string(severity)),
			slog.String("message", message))
	}
	return nil
}

// Resolve closes code's unresolved row, if there is one; resolving a code with nothing open is
// not an error. The resolution is logged at info.
//
// Errors: EINVALID for an empty or over-long code; otherwise a wrapped database error.
func (in *Inbox) Resolve(ctx context.Context, code string) error {
	if err := checkCode(code); err != nil {
		return err
	}
	res, err := in.exec(ctx, "UPDATE `fx_execution_alert` SET `status` = 'RESOLVED', "+
		"`resolvedAt` = UTC_TIMESTAMP(3), `openKey` = NULL WHERE `openKey` = ?", code)
	if err != nil {
		return fmt.Errorf("resolve alert %q: %w", code, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		in.log.InfoContext(ctx, "alert resolved", slog.String("code", code))
	}
	return nil
}

// Acknowledge records that by has seen alert id and returns the row. Acknowledging an alert
// that is already acknowledged returns it unchanged (the first acknowledgement is kept). It is an
// admin write: one audit row (alert.acknowledge) by ctx's actor, the alert's status before and
// after, in the same transaction.
//
// Errors: EINVALID for an empty or over-long by; ENOTFOUND when there is no such alert;
// ECONFLICT when it is already resolved; audit.ErrNoActor when ctx names nobody; otherwise a
// wrapped database error.
func (in *Inbox) Acknowledge(ctx context.Context, id int64, by string) (Alert, error) {
	by = strings.TrimSpace(by)
	if by == "" || len(by) > maxByLen {
		return Alert{}, fx.Errorf(fx.EINVALID, "Who acknowledges must be named, in at most %d characters.", maxByLen)
	}
	if err := store.RetryRolledBack(ctx, func() error { return in.acknowledge(ctx, id, by) }); err != nil {
		return Alert{}, err
	}
	return in.Get(ctx, id)
}

// ackRecord is what the audit log records of an alert's acknowledgement.
type ackRecord struct {
	Code           string `json:"code"`
	Status         Status `json:"status"`
	AcknowledgedBy string `json:"acknowledgedBy,omitempty"`
}

// acknowledge is Acknowledge's transaction.
func (in *Inbox) acknowledge(ctx context.Context, id int64, by string) error {
	tx, err := in.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	defer tx.Rollback()
	var before ackRecord
	var ackBy sql.NullString
	err = tx.QueryRowContext(ctx, "SELECT `code`, `status`, `acknowledgedBy` FROM `fx_execution_alert` WHERE `id` = ? FOR UPDATE", id).Scan(&before.Code, &before.Status, &ackBy)
	if errors.Is(err, sql.ErrNoRows) {
		return fx.Errorf(fx.ENOTFOUND, "No alert %d.", id)
	}
	if err != nil {
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	before.AcknowledgedBy = ackBy.String
	if before.Status == Resolved {
		return fx.Errorf(fx.ECONFLICT, "Alert %d is already resolved.", id)
	}
	after := before
	if before.Status == Open {
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_execution_alert` SET `status` = 'ACKNOWLEDGED', "+
			"`acknowledgedAt` = UTC_TIMESTAMP(3), `acknowledgedBy` = ? WHERE `id` = ? AND `status` = 'OPEN'", by, id); err != nil {
			return fmt.Errorf("acknowledge alert %d: %w", id, err)
		}
		after.Status, after.AcknowledgedBy = Acknowledged, by
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "alert.acknowledge", EntityType: "alert", EntityID: strconv.FormatInt(id, 10), Before: before, After: after}); err != nil {
		return err
	}
	if err := store.Commit(tx); err != nil {
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	return nil
}

// Get returns alert id.
//
// Errors: ENOTFOUND when there is no such alert; otherwise a wrapped database error.
func (in *Inbox) Get(ctx context.Context, id int64) (Alert, error) {
	rows, err := in.db.QueryContext(ctx, selectAlert+" WHERE `id` = ?", id)
	if err != nil {
		return Alert{}, fmt.Errorf("read alert %d: %w", id, err)
	}
	all, err := scanAlerts(rows)
	if err != nil {
		return Alert{}, fmt.Errorf("read alert %d: %w", id, err)
	}
	if len(all) == 0 {
		return Alert{}, fx.Errorf(fx.ENOTFOUND, "No alert %d.", id)
	}
	return all[0], nil
}

// List returns alerts matching f, most recently seen first.
//
// Errors: EINVALID for an unknown status or a negative limit; otherwise a wrapped database error.
func (in *Inbox) List(ctx context.Context, f Filter) ([]Alert, error) {
	var where []string
	var args []any
	if len(f.Statuses) > 0 {
		marks := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			if _, err := ParseStatus(string(st)); err != nil {
				return nil, err
			}
			marks[i] = "?"
			args = append(args, string(st))
		}
		where = append(where, "`status` IN ("+strings.Join(marks, ", ")+")")
	}
	if f.Code != "" {
		where = append(where, "`code` = ?")
		args = append(args, f.Code)
	}
	switch {
	case f.Limit < 0:
		return nil, fx.Errorf(fx.EINVALID, "The limit must not be negative.")
	case f.Limit == 0:
		f.Limit = DefaultLimit
	case f.Limit > MaxLimit:
		f.Limit = MaxLimit
	}
	q := selectAlert
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY `lastSeenAt` DESC, `id` DESC LIMIT ?"
	args = append(args, f.Limit)
	rows, err := in.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	out, err := scanAlerts(rows)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return out, nil
}

// exec runs one autocommit statement, again if InnoDB chose it as a deadlock victim. Raises and
// resolves of different codes take gap locks on the unique openKey index and can deadlock each
// other; the victim was rolled back whole, so running it again is exactly running it once. (This
// is not the lease claim, where a deadlock is a lost claim and must never be retried.)
func (in *Inbox) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := store.RetryRolledBack(ctx, func() (err error) {
		res, err = in.db.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

const selectAlert = "SELECT `id`, `code`, `severity`, `message`, `details`, `status`, `firstSeenAt`, " +
	"`lastSeenAt`, `count`, `acknowledgedAt`, `acknowledgedBy`, `resolvedAt` FROM `fx_execution_alert`"

func scanAlerts(rows *sql.Rows) ([]Alert, error) {
	defer rows.Close()
	out := []Alert{}
	for rows.Next() {
		var a Alert
		var sev, status, details string
		var ackAt, resAt sql.NullTime
		var ackBy sql.NullString
		if err := rows.Scan(&a.ID, &a.Code, &sev, &a.Message, &details, &status, &a.FirstSeenAt,
			&a.LastSeenAt, &a.Count, &ackAt, &ackBy, &resAt); err != nil {
			return nil, err
		}
		a.Severity, a.Status, a.AcknowledgedBy = Severity(sev), Status(status), ackBy.String
		a.FirstSeenAt, a.LastSeenAt = a.FirstSeenAt.UTC(), a.LastSeenAt.UTC()
		if json.Valid([]byte(details)) {
			a.Details = json.RawMessage(details)
		} else { // written by hand in the table: still show it rather than fail the page
			a.Details, _ = json.Marshal(details)
		}
		if ackAt.Valid {
			t := ackAt.Time.UTC()
			a.AcknowledgedAt = &t
		}
		if resAt.Valid {
			t := resAt.Time.UTC()
			a.ResolvedAt = &t
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func checkCode(code string) error {
	if code == "" || len(code) > maxCodeLen {
		return fx.Errorf(fx.EINVALID, "An alert code must be 1 to %d characters.", maxCodeLen)
	}
	return nil
}
