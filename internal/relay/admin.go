package relay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Admin is the admin side of the webhooks: endpoints created and changed (each change audited in
// its own transaction), their dead letters listed and replayed. Any process serves it: a replay
// is an operator's explicit request, not lease-guarded work.
type Admin struct {
	db     *sql.DB
	sender Sender
}

// NewAdmin returns the webhooks' admin; sender posts replays (its zero fields take the defaults).
func NewAdmin(db *sql.DB, sender Sender) *Admin {
	return &Admin{db: db, sender: sender.withDefaults()}
}

// Webhook is an endpoint as the admin API shows it: never its secret.
type Webhook struct {
	ID          int64     `json:"id"`
	URL         string    `json:"url"`
	Enabled     bool      `json:"enabled"`
	Position    int64     `json:"position"`    // the last event id delivered or dead-lettered
	DeadLetters int       `json:"deadLetters"` // not yet replayed
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// NewWebhook is what creating an endpoint takes. Secret "" has one generated.
type NewWebhook struct {
	URL     string
	Secret  string
	Enabled bool
}

// WebhookChange is what changing an endpoint takes; nil fields stay as they are.
type WebhookChange struct {
	URL     *string
	Enabled *bool
}

// Secret bounds: long enough to be a key, short enough for the column.
const (
	minSecret = 16
	maxSecret = 128
	maxURL    = 2048
)

// checkURL refuses what the relay should not post to: anything but an absolute http(s) URL, and
// a URL carrying credentials (no secret in a URL: it would be logged and shown).
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "" || len(raw) > maxURL:
		return fx.Errorf(fx.EINVALID, "url must be an http or https URL of at most %d characters.", maxURL)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fx.Errorf(fx.EINVALID, "url must be an absolute http or https URL, such as https://host.example/fxdesk/events.")
	case u.User != nil:
		return fx.Errorf(fx.EINVALID, "url must not carry credentials; the endpoint authenticates the desk by the signature.")
	case u.Fragment != "":
		return fx.Errorf(fx.EINVALID, "url must not have a fragment.")
	}
	return nil
}

// Create adds an endpoint and returns it with its secret, the only time the secret is shown. It
// hears the events committed after it: its cursor starts at the newest event.
func (a *Admin) Create(ctx context.Context, n NewWebhook) (Webhook, string, error) {
	if err := checkURL(n.URL); err != nil {
		return Webhook{}, "", err
	}
	secret := n.Secret
	if secret == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return Webhook{}, "", fmt.Errorf("webhook secret: %w", err)
		}
		secret = "whsec_" + hex.EncodeToString(b)
	} else if len(secret) < minSecret || len(secret) > maxSecret {
		return Webhook{}, "", fx.Errorf(fx.EINVALID, "secret must be %d to %d characters (or left out: one is generated).", minSecret, maxSecret)
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return Webhook{}, "", err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "INSERT INTO `fx_webhook` (`url`, `secret`, `enabled`, `createdAt`, `updatedAt`) VALUES (?, ?, ?, NOW(3), NOW(3))", n.URL, secret, n.Enabled)
	if err != nil {
		return Webhook{}, "", fmt.Errorf("create webhook: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Webhook{}, "", err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_event_relay` (`name`, `position`, `term`, `updatedAt`) SELECT ?, COALESCE(MAX(`id`), 0), 0, NOW(3) FROM `fx_event`", webhookCursor(id)); err != nil {
		return Webhook{}, "", fmt.Errorf("create webhook %d: its cursor: %w", id, err)
	}
	w, err := readWebhook(ctx, tx, id)
	if err != nil {
		return Webhook{}, "", err
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "webhook.create", EntityType: "webhook", EntityID: strconv.FormatInt(id, 10), After: w}); err != nil {
		return Webhook{}, "", err
	}
	if err := store.Commit(tx); err != nil {
		return Webhook{}, "", err
	}
	return w, secret, nil
}

// Update changes an endpoint's URL or whether it is enabled. A disabled endpoint keeps its
// cursor: enabled again, it resumes where it stopped.
func (a *Admin) Update(ctx context.Context, id int64, c WebhookChange) (Webhook, error) {
	if c.URL != nil {
		if err := checkURL(*c.URL); err != nil {
			return Webhook{}, err
		}
	}
	if c.URL == nil && c.Enabled == nil {
		return Webhook{}, fx.Errorf(fx.EINVALID, "Send url, enabled or both.")
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return Webhook{}, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT `id` FROM `fx_webhook` WHERE `id` = ? FOR UPDATE", id); err != nil {
		return Webhook{}, err
	}
	before, err := readWebhook(ctx, tx, id)
	if err != nil {
		return Webhook{}, err
	}
	u, enabled := before.URL, before.Enabled
	if c.URL != nil {
		u = *c.URL
	}
	if c.Enabled != nil {
		enabled = *c.Enabled
	}
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_webhook` SET `url` = ?, `enabled` = ?, `updatedAt` = NOW(3) WHERE `id` = ?", u, enabled, id); err != nil {
		return Webhook{}, fmt.Errorf("update webhook %d: %w", id, err)
	}
	after, err := readWebhook(ctx, tx, id)
	if err != nil {
		return Webhook{}, err
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "webhook.update", EntityType: "webhook", EntityID: strconv.FormatInt(id, 10), Before: before, After: after}); err != nil {
		return Webhook{}, err
	}
	if err := store.Commit(tx); err != nil {
		return Webhook{}, err
	}
	return after, nil
}

const webhookColumns = "SELECT `w`.`id`, `w`.`url`, `w`.`enabled`, COALESCE(`c`.`position`, 0), " +
	"(SELECT COUNT(*) FROM `fx_webhook_dead` AS `d` WHERE `d`.`webhookId` = `w`.`id` AND `d`.`replayedAt` IS NULL LIMIT 1), `w`.`createdAt`, `w`.`updatedAt` " +
	"FROM `fx_webhook` AS `w` LEFT JOIN `fx_event_relay` AS `c` ON `c`.`name` = CONCAT('webhook:', `w`.`id`)"

func scanWebhook(sc store.Scanner) (Webhook, error) {
	var w Webhook
	err := sc.Scan(&w.ID, &w.URL, &w.Enabled, &w.Position, &w.DeadLetters, &w.CreatedAt, &w.UpdatedAt)
	return w, err
}

func readWebhook(ctx context.Context, db store.Queryer, id int64) (Webhook, error) {
	ws, err := store.QueryAll(ctx, db, "webhook", scanWebhook, webhookColumns+" WHERE `w`.`id` = ?", id)
	if err != nil {
		return Webhook{}, err
	}
	if len(ws) == 0 {
		return Webhook{}, fx.Errorf(fx.ENOTFOUND, "Webhook %d not found.", id)
	}
	return ws[0], nil
}

// List returns every endpoint, oldest first.
func (a *Admin) List(ctx context.Context) ([]Webhook, error) {
	return store.QueryAll(ctx, a.db, "webhooks", scanWebhook, webhookColumns+" ORDER BY `w`.`id`")
}

// DeadLetter is an event an endpoint did not accept after every attempt.
type DeadLetter struct {
	ID         int64      `json:"id"`
	WebhookID  int64      `json:"webhookId"`
	EventID    int64      `json:"eventId"`
	Attempts   int        `json:"attempts"`
	LastStatus *int       `json:"lastStatus"` // the endpoint's last HTTP status; null when it never answered
	LastError  string     `json:"lastError"`
	FailedAt   time.Time  `json:"failedAt"`
	ReplayedAt *time.Time `json:"replayedAt"` // set once an admin replay was accepted
}

const deadColumns = "SELECT `id`, `webhookId`, `eventId`, `attempts`, `lastStatus`, `lastError`, `failedAt`, `replayedAt` FROM `fx_webhook_dead`"

func scanDead(sc store.Scanner) (DeadLetter, error) {
	var d DeadLetter
	err := sc.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.Attempts, &d.LastStatus, &d.LastError, &d.FailedAt, &d.ReplayedAt)
	return d, err
}

// maxDead caps a list of dead letters.
const maxDead = 500

// DeadLetters lists an endpoint's dead letters, oldest first: the open ones, or every one with
// all.
func (a *Admin) DeadLetters(ctx context.Context, webhookID int64, all bool) ([]DeadLetter, error) {
	if _, err := readWebhook(ctx, a.db, webhookID); err != nil {
		return nil, err
	}
	q := deadColumns + " WHERE `webhookId` = ?"
	if !all {
		q += " AND `replayedAt` IS NULL"
	}
	return store.QueryAll(ctx, a.db, "dead letters", scanDead, q+" ORDER BY `eventId` LIMIT ?", webhookID, maxDead)
}

// OpenDeadLetters lists the open dead letters of every endpoint, oldest first, at most limit.
func OpenDeadLetters(ctx context.Context, db store.Queryer, limit int) ([]DeadLetter, error) {
	return store.QueryAll(ctx, db, "dead letters", scanDead, deadColumns+" WHERE `replayedAt` IS NULL ORDER BY `failedAt`, `id` LIMIT ?", limit)
}

// Replay posts an open dead letter's event to its endpoint again, once, and marks it replayed
// when the endpoint accepts it; otherwise nothing changes and the error says what the endpoint
// answered.
func (a *Admin) Replay(ctx context.Context, webhookID, eventID int64) (DeadLetter, error) {
	ds, err := store.QueryAll(ctx, a.db, "dead letter", scanDead, deadColumns+" WHERE `webhookId` = ? AND `eventId` = ?", webhookID, eventID)
	if err != nil {
		return DeadLetter{}, err
	}
	if len(ds) == 0 {
		return DeadLetter{}, fx.Errorf(fx.ENOTFOUND, "Webhook %d has no dead letter for event %d.", webhookID, eventID)
	}
	if ds[0].ReplayedAt != nil {
		return DeadLetter{}, fx.Errorf(fx.ECONFLICT, "The dead letter of event %d was already replayed at %s.", eventID, ds[0].ReplayedAt.UTC().Format(time.RFC3339))
	}
	var ep endpoint
	eps, err := store.QueryAll(ctx, a.db, "webhook", func(sc store.Scanner) (endpoint, error) {
		err := sc.Scan(&ep.id, &ep.url, &ep.secret)
		return ep, err
	}, "SELECT `id`, `url`, `secret` FROM `fx_webhook` WHERE `id` = ?", webhookID)
	if err != nil {
		return DeadLetter{}, err
	}
	if len(eps) == 0 {
		return DeadLetter{}, fx.Errorf(fx.ENOTFOUND, "Webhook %d not found.", webhookID)
	}
	es, err := events.List(ctx, a.db, events.Filter{After: eventID - 1, Limit: 1})
	if err != nil {
		return DeadLetter{}, err
	}
	if len(es) == 0 || es[0].ID != eventID {
		return DeadLetter{}, fx.Errorf(fx.ENOTFOUND, "Event %d is no longer in the outbox.", eventID)
	}
	body, err := Body(es[0])
	if err != nil {
		return DeadLetter{}, err
	}
	if err := a.sender.post(ctx, eps[0].url, eps[0].secret, eventID, body); err != nil {
		return DeadLetter{}, fx.Errorf(fx.EUNAVAILABLE, "Webhook %d did not accept event %d (%s); it stays in the dead letters.", webhookID, eventID, err.Error())
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return DeadLetter{}, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "UPDATE `fx_webhook_dead` SET `replayedAt` = NOW(3) WHERE `id` = ? AND `replayedAt` IS NULL", ds[0].ID)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("mark dead letter %d replayed: %w", ds[0].ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return DeadLetter{}, fx.Errorf(fx.ECONFLICT, "The dead letter of event %d was replayed meanwhile.", eventID)
	}
	after, err := store.QueryAll(ctx, tx, "dead letter", scanDead, deadColumns+" WHERE `id` = ?", ds[0].ID)
	if err != nil || len(after) == 0 {
		return DeadLetter{}, errors.Join(err, errors.New("dead letter vanished"))
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "webhook.replay", EntityType: "webhook", EntityID: strconv.FormatInt(webhookID, 10), Before: ds[0], After: after[0]}); err != nil {
		return DeadLetter{}, err
	}
	if err := store.Commit(tx); err != nil {
		return DeadLetter{}, err
	}
	return after[0], nil
}
