package lease

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/redisname"
	"fxdesk/internal/store"
)

// Key is the desk's engine lease.
const Key = "forex-trading"

// Arbiter names what granted the current lease.
type Arbiter string

const (
	ArbiterNone  Arbiter = ""          // not held
	ArbiterRow   Arbiter = "mysql"     // the engine_lease row
	ArbiterRedis Arbiter = "redis"     // the Redis key, while MySQL was unreachable
	ArbiterOpen  Arbiter = "fail-open" // neither arbiter answered; the desk runs anyway
)

// EventKind is a change in this process's hold on the lease.
type EventKind string

const (
	Acquired EventKind = "acquired" // won at boot
	// TookOver: a standby follower won the lease after the boot claim was lost (Config.Standby).
	// It is delivered before the lease is trusted, so the handler can stop showing a follower's
	// prices before the first desk-priced request is served here.
	TookOver EventKind = "took_over"
	Lapsed   EventKind = "lapsed"   // trust window passed; the gate is shut
	Restored EventKind = "restored" // a renew succeeded after a lapse: run a lease_restored sweep
	Lost     EventKind = "lost"     // another instance holds it; the gate stays shut for life
	Released EventKind = "released" // handed back on graceful stop
)

// Event is delivered to Config.Notify from the keeper's goroutine; handlers must not block.
type Event struct {
	Kind EventKind
	Term int64
}

// Config is what a Keeper needs to know about this process.
type Config struct {
	Key string // lease key, normally Key
	// Names gives the Redis key that mirrors the row (Names.EngineLease(Key)); the zero value is
	// the default install's engine:lease:forex-trading.
	Names    redisname.Names
	TTL      time.Duration // lease length; renew every TTL/3
	Fence    time.Duration // trust ends this long before the lease would
	Hostname string
	PID      int
	// AdvertiseURL is written to the row beside hostname and pid on every claim and renew: the
	// base URL where follower web processes forward desk-priced requests.
	AdvertiseURL string
	InstanceID   string // random per process start when empty
	// Instances is the configured number of web processes; above one, a sibling is provable.
	Instances int
	// Standby makes a process that lost the boot claim re-contend every TTL/3 in Run
	// (FXDESK_TAKEOVER=standby). Off, a follower never polls and never promotes
	// (docs/architecture.md, «Processes and roles»).
	Standby bool
	// Now is the clock for the trust window; it must carry a monotonic reading (time.Now does).
	Now func() time.Time
	// PIDAlive reports whether a process with this pid exists on this host; kill(pid, 0) by
	// default.
	PIDAlive func(pid int) bool
	// Notify, when set, receives every Event.
	Notify func(Event)
	// ObserveRenew, when set, receives each renew cycle's duration and outcome (ok, failed, lost).
	ObserveRenew func(took time.Duration, outcome string)
}

// Keeper claims, renews, fences and releases the lease for one process. A Keeper is made only by
// processes that may hold the desk; fxdesk-cron never makes one.
type Keeper struct {
	db  *sql.DB
	rdb redis.UniversalClient
	cfg Config
	log *slog.Logger
	tag string // hostname:pid, the Redis value

	epoch        time.Time
	trustedUntil atomic.Int64 // nanoseconds since epoch on the monotonic clock; 0 = never
	lost         atomic.Bool
	term         atomic.Int64 // fencing token of the current hold

	mu            sync.Mutex
	arbiter       Arbiter
	lapsed        bool
	claimed       bool
	released      bool
	lastRenew     time.Time
	lastRenewTook time.Duration
	lastErr       string
	sibling       bool   // another holder observed in this process's life
	observed      Holder // the holder seen when the boot claim was lost
	redisWarned   bool
	bannerShown   bool
	failOpenNoted bool
}

// New returns a Keeper. It touches no store until Claim.
func New(db *sql.DB, rdb redis.UniversalClient, cfg Config, log *slog.Logger) *Keeper {
	if cfg.Key == "" {
		cfg.Key = Key
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PIDAlive == nil {
		cfg.PIDAlive = pidAlive
	}
	if cfg.InstanceID == "" {
		b := make([]byte, 12)
		rand.Read(b)
		cfg.InstanceID = hex.EncodeToString(b)
	}
	return &Keeper{
		db:    db,
		rdb:   rdb,
		cfg:   cfg,
		log:   log,
		tag:   cfg.Hostname + ":" + strconv.Itoa(cfg.PID),
		epoch: cfg.Now(),
	}
}

// InstanceID is this process's random identity in the lease row.
func (k *Keeper) InstanceID() string { return k.cfg.InstanceID }

// Tag is this process's Redis value, hostname:pid.
func (k *Keeper) Tag() string { return k.tag }

// Term is the fencing token of the current hold, 0 before a row numbered one (Redis or fail-open
// grants carry none). It reads an atomic, so it never waits behind a renew.
func (k *Keeper) Term() int64 { return k.term.Load() }

// RenewEvery is the renew period, a third of the TTL.
func (k *Keeper) RenewEvery() time.Duration { return k.cfg.TTL / 3 }

func (k *Keeper) sinceEpoch() int64 { return int64(k.cfg.Now().Sub(k.epoch)) }

// HoldsLease reports whether this process may start lease-guarded work now: it won the lease, has
// not lost it, and its last successful renew started less than TTL − fence ago.
func (k *Keeper) HoldsLease() bool {
	until := k.trustedUntil.Load()
	return until != 0 && !k.lost.Load() && k.sinceEpoch() < until
}

// Serving reports whether this process won the lease and has neither lost nor released it: the
// process that desk-priced requests belong to. Unlike HoldsLease it stays true through a lapse of
// trust (the row may still name us, and the gate answers for the gap); it reads atomics only.
func (k *Keeper) Serving() bool { return k.trustedUntil.Load() != 0 && !k.lost.Load() }

// TrustLeft is how long HoldsLease stays true without another successful renew.
func (k *Keeper) TrustLeft() time.Duration {
	until := k.trustedUntil.Load()
	if until == 0 || k.lost.Load() {
		return 0
	}
	return max(0, time.Duration(until-k.sinceEpoch()))
}

// trust extends the window from the start of a successful attempt.
func (k *Keeper) trust(attemptStart time.Time) {
	k.trustedUntil.Store(int64(attemptStart.Sub(k.epoch) + k.cfg.TTL - k.cfg.Fence))
}

// Claim contends for the lease once, at boot. It returns true when this process now holds it.
// A false answer is final for the life of the process unless Config.Standby is set, in which
// case Run re-contends (contend).
func (k *Keeper) Claim(ctx context.Context) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.claimed {
		return false, errors.New("lease: Claim called twice")
	}
	k.claimed = true
	start := k.cfg.Now()
	won, err := k.claimLocked(ctx, start)
	if won {
		k.lastRenew = start
		k.notify(Event{Kind: Acquired, Term: k.term.Load()})
	}
	return won, err
}

// claimLocked runs the boot claim through the failure directions.
func (k *Keeper) claimLocked(ctx context.Context, start time.Time) (bool, error) {
	won, holder, rowErr := k.claimRow(ctx)
	if rowErr == nil {
		if !won {
			k.observed = holder
			k.sibling = true
			k.log.WarnContext(ctx, "engine lease held by another process; this process is a follower for its whole life and serves from the database only",
				slog.String("holder", holder.String()), slog.Int64("term", holder.Term))
			return false, nil
		}
		k.arbiter = ArbiterRow
		k.trust(start)
		k.log.InfoContext(ctx, "engine lease acquired", slog.String("arbiter", string(ArbiterRow)),
			slog.Int64("term", k.term.Load()), slog.String("holder", k.tag))
		k.agreeRedis(ctx)
		return true, nil
	}

	if !store.Unreachable(rowErr) {
		// MySQL is up and refused the statement: that is a defect to fix, not a reason to let
		// Redis decide behind the row's back.
		return false, rowErr
	}
	k.log.WarnContext(ctx, "engine lease row unreachable; Redis decides the claim", slog.Any("err", rowErr))
	ok, err := k.rdb.SetArgs(ctx, k.redisKey(), k.tag, redis.SetArgs{Mode: "NX", TTL: k.cfg.TTL}).Result()
	switch {
	case err == nil && ok == "OK":
		k.arbiter = ArbiterRedis
		k.trust(start)
		k.log.InfoContext(ctx, "engine lease acquired", slog.String("arbiter", string(ArbiterRedis)), slog.String("holder", k.tag))
		return true, nil
	case errors.Is(err, redis.Nil) || (err == nil && ok != "OK"):
		cur, _ := k.rdb.Get(ctx, k.redisKey()).Result()
		k.sibling = true
		k.observed = parseTag(cur)
		k.log.WarnContext(ctx, "engine lease held by another process (Redis decided while MySQL is down); this process is a follower for its whole life",
			slog.String("holder", cur))
		return false, nil
	}
	k.arbiter = ArbiterOpen
	k.trust(start)
	k.failOpenLocked(ctx, rowErr, err)
	return true, nil
}

// failOpenLocked records that neither arbiter answered and the desk runs anyway.
func (k *Keeper) failOpenLocked(ctx context.Context, rowErr, redisErr error) {
	if !k.failOpenNoted {
		k.failOpenNoted = true
		k.log.WarnContext(ctx, "engine lease: neither MySQL nor Redis answers; running the desk without an arbiter (fail-open)",
			slog.Any("mysqlErr", rowErr), slog.Any("redisErr", redisErr))
	}
	if k.bannerShown || !(k.cfg.Instances > 1 || k.sibling) {
		return
	}
	k.bannerShown = true
	reason := "another holder was observed earlier in this process's life"
	if k.cfg.Instances > 1 {
		reason = fmt.Sprintf("this install is configured for %d web processes", k.cfg.Instances)
	}
	k.log.ErrorContext(ctx, banner(reason), slog.String("holder", k.tag))
}

func banner(reason string) string {
	lines := []string{
		"MULTI-PROCESS BACKEND WITH NO WORKING ARBITER",
		"Neither MySQL nor Redis answers, and " + reason + ".",
		"More than one process may now run the price stream and close positions.",
		"Restore MySQL or Redis, or stop every web process but one.",
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l))
	}
	var b strings.Builder
	b.WriteString("\n+" + strings.Repeat("-", width+2) + "+\n")
	for _, l := range lines {
		b.WriteString("| " + l + strings.Repeat(" ", width-len(l)) + " |\n")
	}
	b.WriteString("+" + strings.Repeat("-", width+2) + "+")
	return b.String()
}

func (k *Keeper) notify(e Event) {
	if k.cfg.Notify != nil {
		k.cfg.Notify(e)
	}
}

// dbTimeout bounds every statement the keeper sends, so a hung connection costs at most part of
// one renew period.
func (k *Keeper) dbTimeout() time.Duration { return max(k.cfg.TTL/6, 500*time.Millisecond) }

// askTwice runs one attempt at a row statement (a claim or a renew) and, when the attempt only ran
// out of its own deadline, runs it once more before the error counts. A server that answers
// slowly under load is not a server that is down: Redis decides only when MySQL refused the
// connection, or did not answer within two deadlines — together at most a third of the TTL, the
// renew period. A connection error is taken at its word at once (docs/architecture.md, «The
// engine lease»).
func (k *Keeper) askTwice(ctx context.Context, what string, attempt func(context.Context) error) error {
	start := k.cfg.Now()
	err := attempt(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return err
	}
	k.log.WarnContext(ctx, "engine lease row did not answer within its deadline; asking once more before MySQL counts as unreachable",
		slog.String("statement", what), slog.Duration("deadline", k.dbTimeout()), slog.Duration("took", k.cfg.Now().Sub(start)), slog.Any("err", err))
	return attempt(ctx)
}

// Run renews the lease every TTL/3 until ctx ends. It does not release: the owner stops guarded
// work first and then calls Release. On a process that did not win the claim it only waits for
// ctx — a follower never polls and never promotes — unless Config.Standby is set: then it
// re-contends every TTL/3 and, once it wins, renews like any holder.
func (k *Keeper) Run(ctx context.Context) error {
	renew := k.RenewEvery()
	if k.trustedUntil.Load() == 0 {
		if !k.cfg.Standby {
			<-ctx.Done()
			return nil
		}
		if !k.standBy(ctx, renew) {
			return nil
		}
	}
	retry := min(renew, 2*time.Second)
	timer := time.NewTimer(renew)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if k.lost.Load() {
			// Lost for good: keep nothing running that could write on our behalf.
			timer.Reset(renew)
			continue
		}
		if k.Renew(ctx) {
			timer.Reset(renew)
		} else {
			timer.Reset(retry)
		}
	}
}

// standBy re-contends every period until this process wins (true) or ctx ends (false).
func (k *Keeper) standBy(ctx context.Context, every time.Duration) bool {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if k.contend(ctx) {
			return true
		}
	}
}

// contend is one standby claim. It asks the row alone: with MySQL unreachable a standby stays a
// follower rather than let Redis or fail-open crown a second desk beside a holder it cannot see
// (the holder's own keeper keeps its Redis tag while the row is down). The claim is the boot
// claim's conditional UPDATE, so it wins only over an expired row (or a dead pid on this host),
// and the term moves on by one.
func (k *Keeper) contend(ctx context.Context) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released || k.lost.Load() || k.trustedUntil.Load() != 0 {
		return false
	}
	start := k.cfg.Now()
	won, holder, err := k.claimRow(ctx)
	switch {
	case err != nil:
		k.lastErr = err.Error()
		k.log.WarnContext(ctx, "standby: the lease row cannot be read; staying a follower and contending again next period", slog.Any("err", err))
		return false
	case !won:
		k.lastErr = ""
		k.observed = holder
		return false
	}
	previous := k.observed
	k.lastErr = ""
	k.observed = Holder{}
	k.arbiter = ArbiterRow
	k.lastRenew = start
	k.log.InfoContext(ctx, "engine lease acquired by standby takeover", slog.String("arbiter", string(ArbiterRow)),
		slog.Int64("term", k.term.Load()), slog.String("holder", k.tag), slog.String("previousHolder", previous.String()), slog.Int64("previousTerm", previous.Term))
	k.agreeRedis(ctx)
	k.notify(Event{Kind: TookOver, Term: k.term.Load()})
	k.trust(start)
	return true
}

// Renew runs one renew cycle and reports whether the lease is confirmed for another window.
func (k *Keeper) Renew(ctx context.Context) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released || k.lost.Load() {
		return false
	}
	start := k.cfg.Now()
	wasLapsed := k.lapsed || !k.HoldsLease()
	ok, err := k.renewLocked(ctx, start)
	k.lastRenewTook = k.cfg.Now().Sub(start)
	if k.cfg.ObserveRenew != nil {
		outcome := "failed"
		switch {
		case ok:
			outcome = "ok"
		case k.lost.Load():
			outcome = "lost"
		}
		k.cfg.ObserveRenew(k.lastRenewTook, outcome)
	}
	if err != nil {
		k.lastErr = err.Error()
	} else {
		k.lastErr = ""
	}
	switch {
	case ok:
		k.trust(start)
		k.lastRenew = start
		if wasLapsed {
			k.lapsed = false
			k.log.InfoContext(ctx, "engine lease confirmed again after a gap; guarded work resumes with a full sweep",
				slog.Int64("term", k.term.Load()), slog.String("reason", "lease_restored"))
			k.notify(Event{Kind: Restored, Term: k.term.Load()})
		}
	case k.lost.Load():
		// renewLocked logged and notified.
	default:
		if !k.lapsed && !k.HoldsLease() {
			k.lapsed = true
			k.log.WarnContext(ctx, "engine lease not confirmed past its trust window; guarded work is dropped until a renew succeeds",
				slog.Int64("term", k.term.Load()), slog.Any("err", err))
			k.notify(Event{Kind: Lapsed, Term: k.term.Load()})
		} else {
			k.log.WarnContext(ctx, "engine lease renew failed; retrying", slog.Duration("trustLeft", k.TrustLeft()), slog.Any("err", err))
		}
	}
	return ok
}

// renewLocked runs the failure directions for one cycle.
func (k *Keeper) renewLocked(ctx context.Context, start time.Time) (bool, error) {
	var rowErr error
	if k.arbiter == ArbiterRow {
		ok, err := k.renewRow(ctx)
		if err == nil {
			if !ok {
				k.loseLocked(ctx)
				return false, nil
			}
			if k.failOpenNoted {
				k.failOpenNoted = false
				k.log.InfoContext(ctx, "engine lease arbiters answer again; fail-open ended")
			}
			k.agreeRedis(ctx)
			return true, nil
		}
		rowErr = err
	} else {
		// Granted by Redis or fail-open: move back to the row as soon as MySQL answers.
		won, holder, err := k.claimRow(ctx)
		if err == nil {
			if !won {
				k.observed = holder
				k.loseLocked(ctx)
				return false, nil
			}
			k.log.InfoContext(ctx, "engine lease row reachable again; the row decides", slog.Int64("term", k.term.Load()))
			k.arbiter = ArbiterRow
			k.failOpenNoted = false
			k.agreeRedis(ctx)
			return true, nil
		}
		rowErr = err
	}
	if !store.Unreachable(rowErr) {
		// MySQL is up and refused the statement: not a reason to let Redis decide.
		return false, rowErr
	}

	set, prev, redisErr := k.refreshRedis(ctx, "compare")
	if redisErr == nil && !set && prev == "" {
		// The key is free (expired, or Redis restarted empty): take it back while MySQL is down.
		set, prev, redisErr = k.setNX(ctx)
	}
	switch {
	case redisErr != nil:
		k.arbiter = ArbiterOpen
		k.failOpenLocked(ctx, rowErr, redisErr)
		return true, nil
	case k.arbiter == ArbiterRow:
		// Our tag is kept in Redis so no Redis-only contender can take it, but a lease the row
		// granted is neither extended nor lost by Redis alone: only the row can say either.
		return false, rowErr
	case !set:
		k.observed = parseTag(prev)
		k.loseLocked(ctx)
		return false, nil
	default:
		k.arbiter = ArbiterRedis
		return true, nil
	}
}

func (k *Keeper) loseLocked(ctx context.Context) {
	if k.lost.Swap(true) {
		return
	}
	h := k.observed
	if h == (Holder{}) {
		h = k.readHolder(ctx)
		k.observed = h
	}
	k.sibling = true
	k.log.ErrorContext(ctx, "lease lost: another process holds the engine lease; guarded work stays stopped and this process must be restarted by an operator",
		slog.Int64("ourTerm", k.term.Load()), slog.String("holder", h.String()), slog.Int64("holderTerm", h.Term))
	k.notify(Event{Kind: Lost, Term: k.term.Load()})
}

// Release hands the lease back: the row is expired for our term and the Redis key deleted if it
// still holds our tag, so a replacement can take over at once. Guarded work must already be
// stopped. A process that lost the lease has nothing to hand back: it touches neither store, says
// so, and sends no Released event.
func (k *Keeper) Release(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released || k.trustedUntil.Load() == 0 {
		return nil
	}
	k.released = true
	k.trustedUntil.Store(0)
	if k.lost.Load() {
		k.log.InfoContext(ctx, "engine lease not released: this process lost it to another process earlier; nothing was handed back",
			slog.Int64("ourTerm", k.term.Load()), slog.String("holder", k.observed.String()), slog.Int64("holderTerm", k.observed.Term))
		return nil
	}
	var errs []error
	if k.term.Load() > 0 {
		if _, err := k.db.ExecContext(ctx,
			"UPDATE `engine_lease` SET `expiresAt` = NOW(3), `updatedAt` = NOW(3) WHERE `id` = ? AND `instanceId` = ? AND `term` = ?",
			k.cfg.Key, k.cfg.InstanceID, k.term.Load()); err != nil {
			errs = append(errs, fmt.Errorf("release lease row: %w", err))
		}
	}
	if err := releaseScript.Run(ctx, k.rdb, []string{k.redisKey()}, k.tag).Err(); err != nil {
		errs = append(errs, fmt.Errorf("release Redis lease key: %w", err))
	}
	err := errors.Join(errs...)
	if err != nil {
		k.log.WarnContext(ctx, "engine lease release incomplete; a replacement waits for expiry", slog.Any("err", err))
	} else {
		k.log.InfoContext(ctx, "engine lease released", slog.Int64("term", k.term.Load()))
	}
	k.notify(Event{Kind: Released, Term: k.term.Load()})
	return err
}

// State is the keeper's view of itself, for status pages.
type State struct {
	InstanceID    string        `json:"instanceId"`
	Holder        string        `json:"self"`       // hostname:pid
	Held          bool          `json:"held"`       // won at boot and not released
	Trusted       bool          `json:"holdsLease"` // HoldsLease at the time of the snapshot
	Arbiter       Arbiter       `json:"arbiter,omitempty"`
	Term          int64         `json:"term"`
	TrustLeft     time.Duration `json:"-"`
	Lost          bool          `json:"lost"`
	FailOpen      bool          `json:"failOpen"`
	LastRenewAgo  time.Duration `json:"-"`
	LastRenewTook time.Duration `json:"-"`
	LastError     string        `json:"lastError,omitempty"`
	Observed      Holder        `json:"observed"` // the holder seen when this process lost
}

// State returns a snapshot of the keeper.
func (k *Keeper) State() State {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := State{
		InstanceID:    k.cfg.InstanceID,
		Holder:        k.tag,
		Held:          k.arbiter != ArbiterNone && !k.released,
		Trusted:       k.HoldsLease(),
		Arbiter:       k.arbiter,
		Term:          k.term.Load(),
		TrustLeft:     k.TrustLeft(),
		Lost:          k.lost.Load(),
		FailOpen:      k.arbiter == ArbiterOpen,
		LastRenewTook: k.lastRenewTook,
		LastError:     k.lastErr,
		Observed:      k.observed,
	}
	if !k.lastRenew.IsZero() {
		s.LastRenewAgo = k.cfg.Now().Sub(k.lastRenew)
	}
	return s
}
