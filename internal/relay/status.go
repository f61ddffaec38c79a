package relay

import (
	"context"
	"strings"
	"time"

	"fxdesk/internal/store"
)

// Status is how far the host platform's feed got: every cursor's position and lag, and the open
// dead letters. It is read from the database, so every process reports the same.
type Status struct {
	// Newest is the newest event id in the outbox (0: none).
	Newest  int64    `json:"newest"`
	Cursors []Cursor `json:"cursors"`
	// DeadLetters is the number of open dead letters, DeadByEndpoint per endpoint; Dead lists
	// the oldest of them.
	DeadLetters    int            `json:"deadLetters"`
	DeadByEndpoint []EndpointDead `json:"deadByEndpoint"`
	Dead           []DeadLetter   `json:"dead"`
}

// EndpointDead is one endpoint's count of open dead letters.
type EndpointDead struct {
	Endpoint string `json:"endpoint"` // the webhook's id
	Open     int    `json:"open"`
}

// Cursor is one consumer of the outbox: the stream ("stream") or a webhook ("webhook:<id>").
type Cursor struct {
	Name      string    `json:"name"`
	Position  int64     `json:"position"`
	Term      int64     `json:"term"` // the lease term of the relay that last moved it
	UpdatedAt time.Time `json:"updatedAt"`
	// LagEvents is how many events it has not relayed (ids are dense: Newest − Position).
	LagEvents int64 `json:"lagEvents"`
	// LagSeconds is how long ago the oldest event it has not relayed was written, on the
	// database clock (0: none waiting).
	LagSeconds float64 `json:"lagSeconds"`
	// Enabled is false for a disabled webhook, whose lag nobody is working off.
	Enabled bool `json:"enabled"`
}

// oldestUnrelayedSQL is how long ago (µs, the database clock) the first event after a cursor's
// position was written.
const oldestUnrelayedSQL = "SELECT TIMESTAMPDIFF(MICROSECOND, `createdAt`, NOW(3)) FROM `fx_event` WHERE `id` > ? ORDER BY `id` LIMIT 1"

// statusDead caps the dead letters Status lists.
const statusDead = 20

// ReadStatus reads the feed's status.
func ReadStatus(ctx context.Context, db store.Queryer) (Status, error) {
	s := Status{Cursors: []Cursor{}, Dead: []DeadLetter{}}
	cursors, err := store.QueryAll(ctx, db, "relay cursors", func(sc store.Scanner) (Cursor, error) {
		var c Cursor
		err := sc.Scan(&c.Name, &c.Position, &c.Term, &c.UpdatedAt, &c.Enabled, &s.Newest)
		return c, err
	}, "SELECT `c`.`name`, `c`.`position`, `c`.`term`, `c`.`updatedAt`, "+
		"COALESCE((SELECT `w`.`enabled` FROM `fx_webhook` AS `w` WHERE CONCAT('webhook:', `w`.`id`) = `c`.`name` LIMIT 1), `c`.`name` = 'stream'), "+
		"(SELECT COALESCE(MAX(`id`), 0) FROM `fx_event` LIMIT 1) "+
		"FROM `fx_event_relay` AS `c` ORDER BY `c`.`name` = 'stream' DESC, `c`.`name`")
	if err != nil {
		return s, err
	}
	for i := range cursors {
		cursors[i].LagEvents = max(s.Newest-cursors[i].Position, 0)
		if cursors[i].LagEvents == 0 {
			continue
		}
		// The oldest event it has not relayed, sought from its position on the primary key: one
		// statement per cursor, where one statement for all of them made the server look for
		// that event among every event of the outbox (seconds on a year's).
		oldest, err := store.QueryAll(ctx, db, "relay cursor "+cursors[i].Name+": its oldest event", func(sc store.Scanner) (*float64, error) {
			var us *float64
			err := sc.Scan(&us)
			return us, err
		}, oldestUnrelayedSQL, cursors[i].Position)
		if err != nil {
			return s, err
		}
		if len(oldest) > 0 && oldest[0] != nil {
			cursors[i].LagSeconds = max(*oldest[0], 0) / 1e6
		}
	}
	s.Cursors = cursors
	if s.DeadByEndpoint, err = store.QueryAll(ctx, db, "dead letters", func(sc store.Scanner) (EndpointDead, error) {
		var d EndpointDead
		err := sc.Scan(&d.Endpoint, &d.Open)
		return d, err
	}, "SELECT `webhookId`, COUNT(*) FROM `fx_webhook_dead` WHERE `replayedAt` IS NULL GROUP BY `webhookId` ORDER BY `webhookId`"); err != nil {
		return s, err
	}
	for _, d := range s.DeadByEndpoint {
		s.DeadLetters += d.Open
	}
	if s.DeadLetters > 0 {
		if s.Dead, err = OpenDeadLetters(ctx, db, statusDead); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Webhook is the endpoint id of a webhook cursor's name, ok false for the stream's.
func (c Cursor) Webhook() (string, bool) {
	return strings.CutPrefix(c.Name, "webhook:")
}
