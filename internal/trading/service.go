package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// Lease is the term fence that ends a fenced write's own transaction (*lease.Keeper). The fence
// statement must fail, so that the COMMIT after it does not run, when the term is not held;
// lease.IsFenced recognises that error.
type Lease interface {
	FenceStatement() (string, []any, error)
}

// Gate admits or drops lease-guarded work (*gate.Gate). Both methods return an error matching
// gate.ErrNotHolder when the work is not executed.
type Gate interface {
	Admit(ctx context.Context, w gate.Work, attrs ...slog.Attr) error
	Fenced(ctx context.Context, w gate.Work, cause error, attrs ...slog.Attr) error
}

// Service applies the trading rules. Its methods return *fx.Error values a client may see
// (EINVALID, ENOTFOUND, ECONFLICT, EUNAVAILABLE) and wrapped internal errors otherwise.
type Service struct {
	db       *sql.DB
	commitDB *sql.DB // the committer's connections (Config.CommitDB)
	prices   tick.Prices
	lease    Lease // nil where the gate never admits (the cron process)
	gate     Gate
	log      *slog.Logger
	catalog  *catalog.Cache
	settings *catalog.Settings // the caps (pending orders per account, accounts per user)
	now      func() time.Time
	onChange func(context.Context, ...risk.Change)
	alerts   AlertInbox  // nil: negative balance protection's resets raise no alert
	nbpObs   NBPObserver // nil: not counted

	commits   *book.Committer     // the group commit of desk-priced fills and closes
	commitObs book.CommitObserver // nil: not observed

	venue      Venue         // nil: no execution venue (EXTERNAL groups cannot trade)
	venueBound time.Duration // a venue send's whole life: the queue, the call, the booking
	links      links         // open EXTERNAL positions → venue trades (the holder's)
	busy       busy          // EXTERNAL orders and positions being sent or booked now
	profiles   profiles      // the trader profiles routing has read (the holder's)

	// rolledBack counts transactions outside the group commit that the server rolled back (a
	// deadlock, a lock wait timeout) and retry ran again.
	rolledBack atomic.Uint64
}

// Config builds a Service.
type Config struct {
	DB *sql.DB
	// CommitDB is the group commit's own pool (default DB): the holder's fills and risk closes
	// must not wait for a connection behind trader reads.
	CommitDB *sql.DB
	Prices   tick.Prices
	Lease    Lease // the fence; nil only where Gate never admits (fxdesk-cron)
	Gate     Gate  // required
	Log      *slog.Logger
	Now      func() time.Time // default time.Now
	// OnChange, when set, receives every change this service commits, after the commit and
	// only then, with the changes of one transaction in one call (the risk engine's Apply). It
	// must not block: it runs on the committer's goroutine for group-committed writes (one
	// call per batch, in commit order) and on the request's goroutine otherwise.
	OnChange func(context.Context, ...risk.Change)
	// Commits, when set, observes the group commit (batch sizes, commit latency, refused rows).
	Commits book.CommitObserver
	// Venue, when set, is the execution venue EXTERNAL account groups trade through (A-book).
	Venue Venue
	// Settings, when set, is the process's desk settings (the caps are read from it); default:
	// settings of its own over DB, which see a change within seconds.
	Settings *catalog.Settings
	// Catalog, when set, is the process's catalog cache, shared with its catalog.Admin so that an
	// admin change applies to the next order at once; default: a cache of its own over DB.
	Catalog *catalog.Cache
	// Alerts, when set, receives negative-balance-reset for every reset of negative balance
	// protection (nbp.go); NBP, when set, counts them.
	Alerts AlertInbox
	NBP    NBPObserver
	// VenueBound bounds what the desk does for one venue send — waiting for a worker, the
	// venue's answer, booking it — which belongs to no single request (the trader may have
	// gone), so it runs detached from the request's context. Set it above the venue call's own
	// timeout; default 30 s.
	VenueBound time.Duration
}

// New returns a service; it refuses a missing dependency.
func New(c Config) (*Service, error) {
	switch {
	case c.DB == nil:
		return nil, errors.New("trading service: DB is required")
	case c.Prices == nil:
		return nil, errors.New("trading service: Prices is required")
	case c.Gate == nil:
		return nil, errors.New("trading service: Gate is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.CommitDB == nil {
		c.CommitDB = c.DB
	}
	if c.Catalog == nil {
		c.Catalog = catalog.NewCache(c.DB, 5*time.Second)
	}
	if c.Settings == nil {
		c.Settings = catalog.NewSettings(c.DB, c.Log)
	}
	s := &Service{db: c.DB, commitDB: c.CommitDB, prices: c.Prices, lease: c.Lease, gate: c.Gate, log: c.Log, now: c.Now, onChange: c.OnChange,
		catalog: c.Catalog, settings: c.Settings, commitObs: c.Commits, venue: c.Venue, venueBound: c.VenueBound, alerts: c.Alerts, nbpObs: c.NBP}
	if s.venueBound <= 0 {
		s.venueBound = defaultVenueBound
	}
	s.commits = book.NewCommitter(book.CommitterConfig{DB: s.commitDB, Fence: s.fence, Catalog: s.catalog, Prices: s.prices, Now: s.now,
		Fenced: s.gate.Fenced, Notify: s.notify, Log: s.log, Observer: s.commitObs})
	return s, nil
}

// Accounts is the accounts' side of the desk: opening them, their balance changes (deposits and
// withdrawals, posted through the ledger), and reading them with their deals.
type Accounts struct{ s *Service }

// Accounts returns the service's accounts side.
func (s *Service) Accounts() *Accounts { return &Accounts{s} }

// ABook is the A-book desk side as the venue reconciler and the dealer's view use it: the
// external book as the desk holds it, and the bookings of what the venue did that no request
// of this process booked (an adoption, a close at the venue, an order that never left).
type ABook struct{ s *Service }

// ABook returns the service's A-book side.
func (s *Service) ABook() *ABook { return &ABook{s} }

// CommitStats returns the group commit's counters (the status page shows them).
func (s *Service) CommitStats() book.CommitStats { return s.commits.Stats() }

// admit lets a group-committed write of work join the queue: the gate admits it now, and this
// process has a lease to fence its batch with.
func (s *Service) admit(ctx context.Context, work gate.Work, what string, attrs ...slog.Attr) error {
	attrs = append([]slog.Attr{slog.String("op", what)}, attrs...)
	if err := s.gate.Admit(ctx, work, attrs...); err != nil {
		return err
	}
	if s.lease == nil {
		return s.gate.Fenced(ctx, work, errNoLease, attrs...)
	}
	return nil
}

// errNoLease: a process without a lease (fxdesk-cron, a test) has nothing to fence a write with.
var errNoLease = errors.New("this process has no lease to fence with")

// fence is the one way a fenced write gets its fence: the statement that checks, in the write's
// own transaction, that this process still holds the lease in its term (sent just before
// COMMIT). An error means the write must not be made.
func (s *Service) fence() (string, []any, error) {
	if s.lease == nil {
		return "", nil, errNoLease
	}
	stmt, args, err := s.lease.FenceStatement()
	if err == nil && stmt == "" {
		err = errors.New("the lease gave no fence statement") // "" would make the write unfenced
	}
	return stmt, args, err
}

// retry runs txn — one whole transaction of a request outside the group commit (which retries
// its own batches), or one autocommit statement — through store.RetryRolledBack: run again while
// the server rolls it back as a deadlock victim or a lock wait times out, and past the retries
// answered EUNAVAILABLE (fx.MsgContended) instead of an internal error. txn must begin, and roll
// back on error, its own transaction, so each attempt starts from nothing.
func (s *Service) retry(ctx context.Context, txn func() error) error {
	attempts := 0
	return store.RetryRolledBack(ctx, func() error {
		if attempts++; attempts > 1 {
			s.rolledBack.Add(1)
		}
		return txn()
	})
}

// maxList caps every list answer.
const maxList = 500

// DefaultListLimit is the page of a trader's list (and the dealer's account list) asked for
// without a limit: the newest 100, the rest a cursor away. A trader's app polls its lists every
// few seconds; a default of maxList made the trader with the longest history read and encode
// five times the rows of one with a short history on every poll (docs/architecture.md,
// «Reading a trader's history»).
const DefaultListLimit = 100

func clampLimit(n int) int { return ListLimit(n) }

// ListLimit is the size of a list's page asked for with limit n: n, or maxList when n is 0 or
// more than that.
func ListLimit(n int) int {
	if n <= 0 || n > maxList {
		return maxList
	}
	return n
}

// begin opens a fenced write's transaction, after the gate, and returns its first batch: add
// the row locks and reads, then send it with tx.Lock. The fence itself is sent by tx.Commit, as
// the statement just before COMMIT (see txn), so it costs no round trip of its own and holds
// its shared lock on the lease row only while the transaction commits.
func (s *Service) begin(ctx context.Context, work gate.Work, what string) (*book.Txn, *book.Batch, error) {
	if err := s.gate.Admit(ctx, work, slog.String("op", what)); err != nil {
		return nil, nil, err
	}
	return s.beginFenced(ctx, work, what)
}

// beginFenced is begin for work its caller already passed through the gate (one gate per unit
// of work): the fence alone.
func (s *Service) beginFenced(ctx context.Context, work gate.Work, what string) (*book.Txn, *book.Batch, error) {
	stmt, args, err := s.fence()
	if err != nil {
		return nil, nil, s.gate.Fenced(ctx, work, err, slog.String("op", what))
	}
	b := &book.Batch{}
	t, err := book.BeginTxn(ctx, s.db, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: begin: %w", what, err)
	}
	t.Fence, t.FenceArgs = stmt, args
	t.Refused = func(cause error) error {
		return s.gate.Fenced(ctx, work, cause, slog.String("op", what), slog.Bool("rolled_back", true))
	}
	return t, b, nil
}

// beginUnfenced is begin for a balance change that does not depend on this process's prices:
// no gate, no fence.
func (s *Service) beginUnfenced(ctx context.Context, what string) (*book.Txn, *book.Batch, error) {
	b := &book.Batch{}
	t, err := book.BeginTxn(ctx, s.db, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: begin: %w", what, err)
	}
	return t, b, nil
}

// Run runs the group commit of desk-priced fills and closes until ctx ends; then it commits
// what was already queued and returns. Every fill and close waits for it: a process that fills
// runs it for its whole life, stopped after the work that submits (HTTP, the risk engine).
func (s *Service) Run(ctx context.Context) error { return s.commits.Run(ctx) }

// term is the engine lease term this process holds, recorded on the events it writes: 0 where
// it holds none (the cron process, a follower's deposit) or its lease carries no term.
func (s *Service) term() int64 {
	if t, ok := s.lease.(interface{ Term() int64 }); ok {
		return t.Term()
	}
	return 0
}
