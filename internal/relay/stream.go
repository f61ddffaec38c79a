package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/gate"
	"fxdesk/internal/redisname"
)

// StreamConfig builds a Stream. Every field but Names and Replicas is required.
type StreamConfig struct {
	DB    *sql.DB
	Redis redis.UniversalClient
	// Names gives the stream's key (Names.Events: fx:events under the default prefix).
	Names redisname.Names
	Gate  *gate.Gate
	Lease Lease
	// Interval is how long the relay waits after a look that found less than a batch.
	Interval time.Duration
	// Batch is how many events one cycle reads and sends in one pipelined round trip (1..500).
	Batch int
	// MaxLen trims the stream to about this many entries (XADD MAXLEN ~).
	MaxLen int64
	// Replicas, when above zero, is how many Redis replicas must acknowledge a batch (WAIT)
	// before the position moves past it: Redis replicates asynchronously, and a Sentinel
	// failover to a replica that missed the batch would otherwise lose it for good.
	Replicas int
	Log      *slog.Logger
}

// Stream relays the events outbox to the install's Redis Stream on the lease holder.
type Stream struct {
	cfg StreamConfig

	relayed, duplicates atomic.Uint64
}

// NewStream returns a relay; it refuses a missing dependency.
func NewStream(cfg StreamConfig) (*Stream, error) {
	if cfg.DB == nil || cfg.Redis == nil || cfg.Gate == nil || cfg.Lease == nil || cfg.Log == nil {
		return nil, errors.New("events stream relay: DB, Redis, Gate, Lease and Log are required")
	}
	if cfg.Interval <= 0 || cfg.Batch < 1 || cfg.Batch > 500 || cfg.MaxLen < 1 {
		return nil, fmt.Errorf("events stream relay: interval %s, batch %d (1..500) and max length %d must be positive", cfg.Interval, cfg.Batch, cfg.MaxLen)
	}
	return &Stream{cfg: cfg}, nil
}

// StreamStats counts what this process's relay did.
type StreamStats struct {
	Relayed    uint64 // entries Redis took
	Duplicates uint64 // entries Redis already held (sent again after a relay stopped mid-way)
}

// Stats returns the relay's counters.
func (s *Stream) Stats() StreamStats {
	return StreamStats{Relayed: s.relayed.Load(), Duplicates: s.duplicates.Load()}
}

// Run relays until ctx ends: a full batch is followed at once, anything less waits Interval.
// A failure (Redis or MySQL unreachable) is logged once per run of failures and retried; it
// never stops the process, and nothing is lost: the position did not move.
func (s *Stream) Run(ctx context.Context) error {
	s.cfg.Log.InfoContext(ctx, "events relayed to the Redis Stream", slog.String("stream", s.cfg.Names.Events()),
		slog.Int64("maxLen", s.cfg.MaxLen), slog.Duration("interval", s.cfg.Interval))
	failing := false
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := s.Cycle(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !errors.Is(err, gate.ErrNotHolder) && !failing:
			failing = true
			s.cfg.Log.WarnContext(ctx, "events not relayed to the Redis Stream; retrying from the stored position", slog.Any("err", err))
		case err == nil && failing:
			failing = false
			s.cfg.Log.InfoContext(ctx, "events relayed to the Redis Stream again")
		}
		wait := s.cfg.Interval
		if err == nil && n == s.cfg.Batch {
			wait = 0
		}
		t.Reset(wait)
	}
}

// Cycle relays one batch: it locks the stream's cursor row, reads the events after it, appends
// them to the stream in one pipelined round trip, and moves the cursor in the same fenced
// transaction. It returns how many events it read. The row lock orders relays of two processes
// (a holder and a zombie past its fence) and lets an operator, or a test, hold the relay still.
func (s *Stream) Cycle(ctx context.Context) (int, error) {
	if err := s.cfg.Gate.Admit(ctx, gate.EventRelay); err != nil {
		return 0, err
	}
	fence, fenceArgs, err := s.cfg.Lease.FenceStatement()
	if err == nil && fence == "" {
		err = errors.New("the lease gave no fence statement")
	}
	if err != nil {
		return 0, s.cfg.Gate.Fenced(ctx, gate.EventRelay, err)
	}
	b := &book.Batch{}
	tx, err := book.BeginTxn(ctx, s.cfg.DB, b)
	if err != nil {
		return 0, fmt.Errorf("relay: begin: %w", err)
	}
	defer tx.Rollback()
	var pos int64
	found := false
	b.Query(book.ScanFirst(&found, func(r *sql.Rows) error { return r.Scan(&pos) }), lockCursorSQL, StreamCursor)
	if err := tx.Lock(ctx, b, "relay: lock the stream cursor"); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%w: %s", errNoCursor, StreamCursor)
	}
	batch, err := events.List(ctx, tx, events.Filter{After: pos, Limit: s.cfg.Batch})
	if err != nil {
		return 0, err
	}
	if len(batch) == 0 {
		return 0, nil
	}
	added, dup, err := s.append(ctx, batch)
	if err != nil {
		return 0, err
	}
	last := batch[len(batch)-1].ID
	w := &book.Batch{}
	w.Exec(updateCursorSQL, last, s.cfg.Lease.Term(), StreamCursor)
	if err := commitFenced(ctx, tx, fence, fenceArgs, s.cfg.Gate, gate.EventRelay, w, slog.Int64("position", last)); err != nil {
		return 0, fmt.Errorf("relay: record position %d: %w", last, err)
	}
	s.relayed.Add(uint64(added))
	s.duplicates.Add(uint64(dup))
	return len(batch), nil
}

// append XADDs batch in one pipelined round trip. An entry Redis refuses because its id is not
// above the stream's newest was added before (by a relay that stopped before recording its
// position) and is counted as a duplicate.
func (s *Stream) append(ctx context.Context, batch []events.Entry) (added, dup int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key := s.cfg.Names.Events()
	pipe := s.cfg.Redis.Pipeline()
	cmds := make([]*redis.StringCmd, len(batch))
	for i, e := range batch {
		cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: s.cfg.MaxLen, Approx: true, ID: EntryID(e.ID), Values: Fields(e)})
	}
	var wait *redis.Cmd
	if s.cfg.Replicas > 0 {
		wait = pipe.Do(ctx, "WAIT", s.cfg.Replicas, replicaWait.Milliseconds())
	}
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	for i, c := range cmds {
		switch err := c.Err(); {
		case err == nil:
			added++
		case isNotAboveTop(err):
			dup++
		default:
			return added, dup, fmt.Errorf("relay: XADD event %d to %s: %w", batch[i].ID, key, err)
		}
	}
	if wait != nil {
		if n, err := wait.Int64(); err != nil || n < int64(s.cfg.Replicas) {
			return added, dup, fmt.Errorf("relay: %d of %d Redis replicas hold events %d..%d (%v): the position stays, the batch goes again",
				n, s.cfg.Replicas, batch[0].ID, batch[len(batch)-1].ID, err)
		}
	}
	return added, dup, nil
}

// replicaWait bounds a batch's WAIT for its replicas.
const replicaWait = time.Second

// EntryID is the stream entry id of event id.
func EntryID(id int64) string { return strconv.FormatInt(id, 10) + "-0" }

// Fields are an event's stream entry fields, in this order: id, accountId, userId, type, term,
// createdAt (RFC 3339, milliseconds, UTC) and payload (the JSON the events page serves).
func Fields(e events.Entry) []any {
	return []any{
		"id", strconv.FormatInt(e.ID, 10),
		"accountId", strconv.FormatInt(e.AccountID, 10),
		"userId", strconv.FormatInt(e.UserID, 10),
		"type", e.Type,
		"term", strconv.FormatInt(e.Term, 10),
		"createdAt", e.CreatedAt.UTC().Format(createdAtLayout),
		"payload", string(e.Payload),
	}
}

const createdAtLayout = "2006-01-02T15:04:05.000Z07:00"

func isNotAboveTop(err error) bool {
	return strings.Contains(err.Error(), "equal or smaller than the target stream top item")
}
