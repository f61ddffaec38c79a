// Package desk owns what the engine lease owns: it decides this process's role at boot, wakes the
// holder's risk engine and venue jobs for their lease_restored run after a gap (the gate,
// internal/gate, admits or drops every lease-guarded unit of work) and reports the role for
// operators. A follower becomes the holder only when its
// keeper reports TookOver (FXDESK_TAKEOVER=standby); the desk never queues dropped work for replay.
package desk

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/mirror"
	"fxdesk/internal/redisname"
)

// Role is what this process is: fixed at boot, except that a standby follower becomes the holder
// when it takes the lease over.
type Role string

const (
	Holder   Role = "holder"   // won the engine lease at boot, or took it over as a standby
	Follower Role = "follower" // lost it at boot: serves from the database, cannot quote
	Cron     Role = "cron"     // fxdesk-cron: never contends
)

// Desk is one process's place in the desk.
type Desk struct {
	db     *sql.DB
	rdb    redis.UniversalClient
	keeper *lease.Keeper // nil on the cron process
	gate   *gate.Gate    // nil on the cron process
	log    *slog.Logger

	process  string
	cronMode string
	takeover string
	tag      string
	names    redisname.Names

	mu     sync.Mutex
	role   Role
	reason string
	// riskWake and venueWake ask the risk engine's part and the venue jobs for a lease_restored
	// run (one pending at most each).
	riskWake, venueWake chan struct{}
	mirror              func() mirror.Status
}

// SetMirror attaches the quote mirror's status (publisher or follower) to the desk's status.
func (d *Desk) SetMirror(status func() mirror.Status) {
	d.mu.Lock()
	d.mirror = status
	d.mu.Unlock()
}

// Config describes the process.
type Config struct {
	Process  string // "web" or "cron"
	CronMode string // inline, off or only
	Takeover string // FXDESK_TAKEOVER on a web process: never or standby
	Tag      string // hostname:pid
	// RedisNames is the install's Redis names (config.Config.RedisNames): the status reads the
	// lease key under them. The zero value is the default install.
	RedisNames redisname.Names
}

// NewCron returns the desk of fxdesk-cron. It has no lease keeper: the cron process is refused
// the lease by construction, before any store is consulted.
func NewCron(db *sql.DB, rdb redis.UniversalClient, cfg Config, log *slog.Logger) *Desk {
	return &Desk{db: db, rdb: rdb, log: log, process: cfg.Process, cronMode: cfg.CronMode, tag: cfg.Tag, names: cfg.RedisNames,
		role: Cron, reason: "fxdesk-cron never contends for the engine lease; orders arrive at the web process, so the desk stays there"}
}

// NewWeb returns the desk of a web process that contends through keeper. It still asks for the
// process's gate g, though the desk itself runs no guarded work since the venue jobs moved to
// execution.Jobs.
func NewWeb(db *sql.DB, rdb redis.UniversalClient, keeper *lease.Keeper, g *gate.Gate, cfg Config, log *slog.Logger) (*Desk, error) {
	if keeper == nil || g == nil {
		return nil, errors.New("desk: a web process needs its lease keeper and its gate")
	}
	return &Desk{db: db, rdb: rdb, keeper: keeper, gate: g, log: log, process: cfg.Process, cronMode: cfg.CronMode, takeover: cfg.Takeover, tag: cfg.Tag, names: cfg.RedisNames,
		venueWake: make(chan struct{}, 1), riskWake: make(chan struct{}, 1)}, nil
}

// Claim contends for the lease once and fixes the role for the life of the process.
func (d *Desk) Claim(ctx context.Context) (Role, error) {
	if d.keeper == nil {
		return d.role, nil
	}
	won, err := d.keeper.Claim(ctx)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if won {
		d.role, d.reason = Holder, "won the engine lease at boot"
		d.log.InfoContext(ctx, "role: holder — this process owns the price stream, the risk engine and the venue jobs",
			slog.String("lease", lease.Key), slog.Int64("term", d.keeper.State().Term), slog.String("arbiter", string(d.keeper.State().Arbiter)))
	} else {
		h := d.keeper.State().Observed
		d.role = Follower
		if d.standby() {
			d.reason = "lost the engine lease at boot to " + h.String() + "; forwards desk-priced work to the holder and takes the lease over if it expires (FXDESK_TAKEOVER=standby)"
			d.log.WarnContext(ctx, "role: follower — standby: forwarding desk-priced work to the holder and re-contending every renew period; takes over if the holder's lease expires",
				slog.String("holder", h.String()), slog.String("takeover", d.takeover))
		} else {
			d.reason = "lost the engine lease at boot to " + h.String() + "; serves from the database only and never promotes (restart it to contend again)"
			d.log.WarnContext(ctx, "role: follower — serving HTTP from the database only; this process cannot quote and will not promote",
				slog.String("holder", h.String()))
		}
	}
	return d.role, nil
}

func (d *Desk) standby() bool { return d.takeover == "standby" }

// Role is the role fixed by Claim, or Holder once a standby took the lease over.
func (d *Desk) Role() Role {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.role
}

// Keeper is the lease keeper, nil on the cron process.
func (d *Desk) Keeper() *lease.Keeper { return d.keeper }

// RiskRestored receives once per first confirmed cycle after the gate was shut: the risk
// engine's part runs its lease_restored sweep then, in its own context. One reader.
func (d *Desk) RiskRestored() <-chan struct{} { return d.riskWake }

// Notify is the keeper's event hook. It must not block the keeper. TookOver makes this process
// the holder at once (the caller starts the holder's parts); Restored runs the OnRestored hooks.
func (d *Desk) Notify(ev lease.Event) {
	if ev.Kind == lease.TookOver {
		d.mu.Lock()
		d.role = Holder
		d.reason = "took the engine lease over as a standby (FXDESK_TAKEOVER=standby) after the holder's lease expired; term " + strconv.FormatInt(ev.Term, 10)
		d.mu.Unlock()
		d.log.Warn("role: holder — took over the engine lease after the holder's lease expired; starting the price stream, the risk engine and the holder's jobs",
			slog.String("lease", lease.Key), slog.Int64("term", ev.Term), slog.String("takeover", d.takeover))
		return
	}
	if ev.Kind != lease.Restored {
		return
	}
	for _, wake := range []chan struct{}{d.venueWake, d.riskWake} {
		select {
		case wake <- struct{}{}:
		default: // one is pending already
		}
	}
}

// VenueRestored receives once per first confirmed cycle after the gate was shut: the venue
// jobs run their lease_restored run then. One reader (execution.Jobs); a desk without a venue
// has none, and the one pending wake waits there harmlessly.
func (d *Desk) VenueRestored() <-chan struct{} { return d.venueWake }
