package book

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// MaxBatch caps how many desk writes one group commit carries. A burst larger than this is
// committed as several batches, one after the other.
const MaxBatch = 256

// MaxWaiting is how many writers can usefully wait on the group commit at once: a full batch
// committing and a full one queued behind it. A pool of writers (the risk engine's workers) is
// sized to it: with MaxBatch writers, a full batch in flight leaves one to queue, so a burst
// alternates batches of MaxBatch-1 with batches of one, a transaction and its fsync spent per
// single write.
const MaxWaiting = 2 * MaxBatch

// batchTimeout bounds one batch's transaction, which belongs to no single request: the requests
// wait for it, but none of them may cancel it for the others.
const batchTimeout = 30 * time.Second

// Write is one desk-priced write waiting for its group commit: a close, a market order's
// fill, a resting order's fill. The committer locks what it names, applies its rules to the
// locked rows in arrival order, and answers it once the batch committed (or failed).
type Write interface {
	Base() *Queued
	// Wants adds the rows the write's rules read to the batch's lock plan.
	Wants(l *Plan)
	// LockedAccount is the account the write locks: its own, or for a write that names only
	// a position, the position's account as the plan read it (0 while unknown).
	LockedAccount(l *Plan) int64
	// OneTrip reports whether the write may go in a round trip on remembered rows (a market
	// fill), and the request nonce that round trip must check no order holds yet.
	OneTrip() (nonce string, ok bool)
	// Apply runs the write's rules against the batch's locked rows, as if it were alone on
	// them but after every write before it in the batch, and adds its statements to the batch.
	// An error refuses this write alone: it adds nothing. Apply sets every result field anew,
	// so a retried batch — after a deadlock, or planned again because a rule asked for
	// exposures it did not read (Rows.OpenExposures) — applies it again from scratch.
	Apply(r *Rows) error
	// Committed builds the answer once the batch Committed, from the ids the batch read back,
	// and returns the changes to report to the risk engine.
	Committed(r *Rows, ids *IDs) []risk.Change
	// Failed turns a statement error of this write's own transaction (the batch written row by
	// row) into its answer.
	Failed(err error) error
}

// Queued is what every desk write carries through the committer.
type Queued struct {
	Ctx     context.Context // the requester's: its logs and gate reports
	Work    gate.Work
	Op      string      // names the write in logs and errors: "close position", "fill order"
	Attrs   []slog.Attr // what the write is, for the log line that drops it
	Account int64       // the account to lock; 0 for a close until the batch reads its position
	done    chan struct{}
	Err     error // the answer when it is not a success
}

func NewQueued(ctx context.Context, work gate.Work, op string, account int64, attrs ...slog.Attr) Queued {
	return Queued{Ctx: ctx, Work: work, Op: op, Account: account, Attrs: attrs, done: make(chan struct{})}
}

func (q *Queued) Base() *Queued { return q }

// LockedAccount and OneTrip are the answers of a write that names its account and needs the
// rows locked; a write that differs says so itself.
func (q *Queued) LockedAccount(*Plan) int64 { return q.Account }
func (q *Queued) OneTrip() (string, bool)   { return "", false }

// CommitObserver receives what the committer does (metrics.Metrics on a web process).
type CommitObserver interface {
	// ObserveBatch records one batch: how many writes it carried and how long its transaction
	// took from the first statement to the commit's answer.
	ObserveBatch(size int, took time.Duration)
	// ObserveRefused records one write the database refused when its batch was written row by row.
	ObserveRefused()
	// ObserveOneTrip records one batch sent in one round trip on remembered accounts: committed,
	// or not (stale) and run again on locked rows.
	ObserveOneTrip(committed bool)
}

// CommitStats are the committer's counters since the process started.
type CommitStats struct {
	Batches      uint64  `json:"batches"`      // transactions committed or attempted
	Writes       uint64  `json:"writes"`       // desk writes they carried
	Refused      uint64  `json:"rowsRefused"`  // writes the database refused, dropped alone
	Retried      uint64  `json:"retried"`      // batches retried after a deadlock or lock wait timeout
	Split        uint64  `json:"split"`        // batches written row by row after a statement error
	OneTrip      uint64  `json:"oneTrip"`      // batches committed in one round trip, on remembered accounts
	Stale        uint64  `json:"stale"`        // one-round-trip batches run again on locked rows: a row changed, a nonce retried, a statement refused
	LastSize     int64   `json:"lastSize"`     // writes in the last batch
	MaxSize      int64   `json:"maxSize"`      // the largest batch
	LastCommitMs float64 `json:"lastCommitMs"` // the last batch's transaction time
}

// Committer is the group commit of the holder's desk-priced writes (docs/architecture.md, «Group
// commit»). Writes queue while a batch is in flight; the next batch takes everything queued (up to
// MaxBatch) the moment the previous one has answered. There is no timer: an idle desk commits a
// lone write at once, and a busy one commits as many writes per transaction as arrived during the
// last commit.
//
// It is a part like the others: Run commits until its context ends, then commits what is still
// queued and returns, so a write accepted before the stop gets its answer. A write submitted
// while it is not running is refused at once (ErrNotCommitting), never left waiting.
type Committer struct {
	cfg CommitterConfig

	mu       sync.Mutex
	cond     *sync.Cond // signalled on every submit, and when Run's context ends
	queue    []Write
	running  bool // Run is taking batches
	stopping bool // Run's context ended: it drains the queue and takes nothing new
	// holdUntil, set by tests only, keeps the queue from being taken until it holds this many
	// writes, so a test can put chosen writes in one batch.
	holdUntil int

	// known remembers the accounts batches left, so a batch of fills on them can go in one
	// round trip (oneTrip).
	known memory

	batches, writes, refused, retried, split, oneTrips, stale atomic.Uint64
	lastSize, maxSize, lastNanos                              atomic.Int64
}

// CommitterConfig is what the group commit needs from the process it runs in.
type CommitterConfig struct {
	DB *sql.DB // the group commit's own pool
	// Fence is the statement that checks, in a batch's own transaction, that this process holds
	// the lease in its term; an error means no batch may be written.
	Fence   func() (string, []any, error)
	Catalog *catalog.Cache
	Prices  tick.Prices
	Now     func() time.Time
	// Fenced reports the writes of a batch the fence refused, and returns their answer.
	Fenced func(ctx context.Context, w gate.Work, cause error, attrs ...slog.Attr) error
	// Notify receives every committed batch's changes, in commit order, before anyone is answered.
	Notify   func(context.Context, ...risk.Change)
	Log      *slog.Logger
	Observer CommitObserver // nil: not observed
}

func NewCommitter(cfg CommitterConfig) *Committer {
	c := &Committer{cfg: cfg}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// ErrNotCommitting answers a write submitted while no committer runs: the process is starting
// or stopping (or a test forgot to run it). Nothing was written.
var ErrNotCommitting error = fx.Errorf(fx.EUNAVAILABLE, "The desk is not taking fills or closes right now (it is starting or stopping); nothing was done — please retry shortly.")

// Submit queues w and waits for its answer (w.Base().Err and its result fields).
func (c *Committer) Submit(w Write) {
	c.mu.Lock()
	if !c.running || c.stopping {
		c.mu.Unlock()
		w.Base().Err = fmt.Errorf("%s: %w", w.Base().Op, ErrNotCommitting)
		return
	}
	c.queue = append(c.queue, w)
	c.cond.Broadcast()
	c.mu.Unlock()
	// Answered only after its batch committed or failed, whatever the request's context does:
	// a write in a batch is never reported undone while it may still commit.
	<-w.Base().done
}

// Run takes batches until ctx ends, then commits what is queued and returns. It takes the next
// batch as soon as the last one has been answered, without yielding first: the writers it just
// answered write their responses while the next batch is at the database (on a process with
// GOMAXPROCS=1, only then), and a client answered now cannot submit again before that batch is
// sent anyway, being a network round trip away. Yielding to them first, as the committer once
// did, put their work ahead of the next batch's and lowered the peak order rate
// (TestBenchMarketOrders).
func (c *Committer) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("group commit: already running")
	}
	c.running, c.stopping = true, false
	c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.stopping = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	for {
		c.mu.Lock()
		for !c.stopping && (len(c.queue) == 0 || len(c.queue) < c.holdUntil) {
			c.cond.Wait()
		}
		if len(c.queue) == 0 {
			c.running = false
			c.mu.Unlock()
			return nil
		}
		n := min(len(c.queue), MaxBatch)
		ws := slices.Clone(c.queue[:n])
		c.queue = append(c.queue[:0], c.queue[n:]...)
		c.mu.Unlock()
		c.run(ws)
	}
}

// HoldUntil keeps the queue from being taken until it holds n writes (0: never), so that a test
// can put chosen writes in one batch. Only tests call it.
func (c *Committer) HoldUntil(n int) {
	c.mu.Lock()
	c.holdUntil = n
	c.mu.Unlock()
}

// Remembered is what the committer remembers of account id, if anything: the rows a batch of
// market fills on it would run on in one round trip.
func (c *Committer) Remembered(id int64) (Remembered, bool) { return c.known.get(id) }

// Stats returns the committer's counters.
func (c *Committer) Stats() CommitStats {
	return CommitStats{Batches: c.batches.Load(), Writes: c.writes.Load(), Refused: c.refused.Load(), Retried: c.retried.Load(),
		Split: c.split.Load(), OneTrip: c.oneTrips.Load(), Stale: c.stale.Load(), LastSize: c.lastSize.Load(), MaxSize: c.maxSize.Load(),
		LastCommitMs: float64(c.lastNanos.Load()) / 1e6}
}

// run commits ws as one batch and answers every write in it.
func (c *Committer) run(ws []Write) {
	s := c.cfg
	live := ws[:0:0]
	for _, w := range ws {
		q := w.Base()
		if err := q.Ctx.Err(); err != nil {
			// The requester went away before its batch began: nothing of it is written.
			q.Err = fmt.Errorf("%s: %w", q.Op, err)
			close(q.done)
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	var r *Rows
	attempts := 0
	var exposures []int64 // accounts whose exposures a rule asked for (Rows.OpenExposures)
	var held []HeldKey    // held positions a rule asked for (Rows.HeldPositions)
	err := store.RetryRolledBack(ctx, func() error {
		if attempts++; attempts > 1 {
			c.retried.Add(1)
		}
		for {
			var err error
			r, err = c.attempt(ctx, live, exposures, held)
			var more unreadExposures
			var moreHeld unreadHeld
			switch {
			case errors.As(err, &more):
				// Each pass reads at least one more account than the last, so this ends within
				// as many passes as the batch has accounts.
				exposures = append(exposures, more...)
			case errors.As(err, &moreHeld):
				held = append(held, moreHeld...)
			default:
				return err
			}
		}
	})
	if err != nil {
		c.known.forget(live)
	} else {
		c.known.keep(r)
	}
	switch {
	case err == nil:
		var changes []risk.Change
		for _, w := range live {
			if w.Base().Err == nil && r.committed {
				changes = append(changes, w.Committed(r, &r.IDs)...)
			}
		}
		if len(changes) > 0 {
			// One call per transaction, in commit order, before anyone is answered.
			s.Notify(ctx, changes...)
		}
		for _, w := range live {
			close(w.Base().done)
		}
	case isFenceRefusal(err):
		for _, w := range live {
			q := w.Base()
			q.Err = s.Fenced(q.Ctx, q.Work, fenceCause(err), append([]slog.Attr{slog.String("op", q.Op), slog.Bool("rolled_back", true),
				slog.Int("batch", len(live))}, q.Attrs...)...)
			close(q.done)
		}
	case fx.ErrorCode(err) == fx.EUNKNOWN || store.ConnectionLost(err):
		// The database went away: before COMMIT nothing was written (the API answers 503), in
		// COMMIT's round trip the batch may have committed (504). Either way writing the batch
		// again row by row would answer from a guess; every request hears what happened.
		for _, w := range live {
			q := w.Base()
			q.Err = fmt.Errorf("%s: %w", q.Op, err)
			close(q.done)
		}
	case len(live) > 1:
		// Nothing was committed. Some statement of some write failed — a constraint, a value the
		// column refuses — and the server does not say whose: write them one by one, so only the
		// refused one is dropped (one bad row must not stall every write behind it).
		c.split.Add(1)
		s.Log.WarnContext(ctx, "desk batch refused by the database; writing its requests one by one",
			slog.Int("batch", len(live)), slog.Any("err", err))
		for _, w := range live {
			c.run([]Write{w})
		}
	default:
		w := live[0]
		q := w.Base()
		q.Err = w.Failed(err)
		if !errors.Is(q.Err, ErrReplayed) && !errors.Is(q.Err, ErrAlreadyBooked) && fx.ErrorCode(q.Err) == fx.EINTERNAL {
			c.refused.Add(1)
			if s.Observer != nil {
				s.Observer.ObserveRefused()
			}
			s.Log.LogAttrs(q.Ctx, slog.LevelError, "desk write refused by the database; dropped",
				append([]slog.Attr{slog.String("op", q.Op), slog.Any("err", err)}, q.Attrs...)...)
		}
		close(q.done)
	}
}

// ErrReplayed marks a write whose own transaction failed on its request nonce's unique key:
// the original committed meanwhile, and the write is answered with it.
var ErrReplayed = errors.New("replayed")

// ErrAlreadyBooked answers a booking of what the desk has booked already: an adoption of an order
// that is FILLED (its own send's answer was booked between the reconciler's read and the
// adoption), or a venue close fill the position's ledger already holds. Nothing is left to do.
var ErrAlreadyBooked = errors.New("already booked")

// noFence is the fence that could not be had at all (no lease, or the lease is known lost).
type noFence struct{ cause error }

func (e noFence) Error() string { return "no fence: " + e.cause.Error() }
func (e noFence) Unwrap() error { return e.cause }

func isFenceRefusal(err error) bool {
	var nf noFence
	return errors.As(err, &nf) || lease.IsFenced(err)
}

func fenceCause(err error) error {
	var nf noFence
	if errors.As(err, &nf) {
		return nf.cause
	}
	return err
}

// unreadExposures ends an attempt whose rules asked for the open exposures of accounts the batch
// did not read (Rows.OpenExposures): it was rolled back with nothing written, and runs again
// with them read.
type unreadExposures []int64

func (e unreadExposures) Error() string {
	return fmt.Sprintf("desk batch: the exposures of accounts %v are needed: planned again", []int64(e))
}

// attempt runs ws as one transaction: lock, apply, write, fence, COMMIT, reading the open
// exposures of the accounts in exposures besides those the writes want. It returns the batch's
// rows when the transaction committed or had nothing to write, unreadExposures when a rule asked
// for exposures it did not read, and the statement error otherwise (nothing committed).
func (c *Committer) attempt(ctx context.Context, ws []Write, exposures []int64, held []HeldKey) (*Rows, error) {
	s := c.cfg
	stmt, args, err := s.Fence()
	if err != nil {
		return nil, noFence{err}
	}
	cat, err := s.Catalog.Get(ctx)
	if err != nil {
		return nil, err
	}
	if r, ok, err := c.oneTrip(ctx, ws, cat, stmt, args); ok {
		return r, err
	}
	r := &Rows{Catalog: cat, Market: NewMarket(s.Prices, cat), Now: s.Now().UTC()}
	var plan Plan
	for _, w := range ws {
		w.Wants(&plan)
	}
	for _, id := range exposures {
		plan.ExposuresOf(id)
	}
	for _, k := range held {
		plan.Held(k.Account, k.Symbol)
	}

	start := time.Now()
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("desk batch: connection: %w", err)
	}
	// A close names its position, not its account: read which account each position belongs to
	// (a position never changes account) so every account is locked in id order, before any
	// position, as every writer of the desk locks them.
	if len(plan.positions) > 0 && plan.closesWithoutAccount() {
		if err := plan.readPositionAccounts(ctx, conn); err != nil {
			conn.Close()
			return nil, fmt.Errorf("desk batch: position accounts: %w", err)
		}
	}
	for _, w := range ws {
		q := w.Base()
		if q.Account = w.LockedAccount(&plan); q.Account != 0 {
			plan.Account(q.Account)
		}
	}
	locks := &Batch{}
	tx := &Txn{conn: conn, Fence: stmt, FenceArgs: args, Refused: func(cause error) error { return cause }}
	defer tx.Rollback()
	locks.Exec("START TRANSACTION")
	r.add(locks, &plan)
	if err := tx.Lock(ctx, locks, "desk batch"); err != nil {
		return nil, err
	}
	for _, w := range ws {
		w.Base().Err = w.Apply(r)
	}
	if len(r.unread) > 0 {
		tx.Rollback()
		return nil, unreadExposures(r.unread)
	}
	if len(r.unreadHeld) > 0 {
		tx.Rollback()
		return nil, unreadHeld(r.unreadHeld)
	}
	if r.Writes.Empty() && len(r.Deals) == 0 && len(r.Marks) == 0 && len(r.Closed) == 0 {
		// Every write was refused by its rules or replayed: nothing to commit.
		tx.Rollback()
		c.observe(len(ws), time.Since(start))
		return r, nil
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx, &r.Writes); err != nil {
		return nil, err
	}
	r.committed = true
	c.observe(len(ws), time.Since(start))
	return r, nil
}

func (c *Committer) observe(size int, took time.Duration) {
	c.batches.Add(1)
	c.writes.Add(uint64(size))
	c.lastSize.Store(int64(size))
	c.lastNanos.Store(int64(took))
	for {
		m := c.maxSize.Load()
		if int64(size) <= m || c.maxSize.CompareAndSwap(m, int64(size)) {
			break
		}
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer.ObserveBatch(size, took)
	}
}
