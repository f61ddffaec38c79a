package pnl

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/tick"
)

// A report that ends now costs two things that grow with the desk rather than with its range:
// marking the open B-book (every open position's group — tens of thousands on a year of a
// broker: ~40 ms of SQL and ~120 ms of decimal arithmetic) and the ledger the summaries have not
// reached yet (up to an hour and a quarter; right after a rollover, its tens of thousands of
// swap deals). A dealer's screens ask for both every few seconds: the P&L of the day, the status
// page. Marks keeps one process's last reading of each and lets every read within MarkFresh of
// it share it; a read after that is answered from the last one (up to MarkStale old) while a
// new one runs beside it, so a poll never waits except the first, or after a long quiet spell.
// docs/pnl.md «One reading of the open book and the recent ledger, shared» says what a dealer
// sees.
const (
	// MarkFresh is how long a reading is served as the current one: the quote mirror's cadence.
	MarkFresh = 5 * time.Second
	// MarkStale is how long a reading is served while a new one runs; an older one is waited for.
	MarkStale = 30 * time.Second
	// markTimeout bounds one reading, which no single request's cancellation stops: the readers
	// waiting for it share it.
	markTimeout = 30 * time.Second
)

// marked is one marking of the open B-book: its floating P&L per currency and symbol (from the
// desk's side), the symbols it could not price, and when it was taken.
type marked struct {
	sums     map[key]decimal.Decimal
	unpriced []string
	at       time.Time
}

// recent is one reading of the ledger and the openings from from (a clock hour: where the
// summaries end) to at, grouped by hour since from.
type recent struct {
	from  time.Time
	rows  []ledgerRow
	until time.Time // the read's end: when it began, as a column time
}

// Marks is a process's shared reading of the open book and of the recent ledger for its P&L
// reads. The zero value is not usable: NewMarks.
type Marks struct {
	db  *sql.DB
	now func() time.Time

	marks  shared[marked]
	recent shared[recent]
}

// NewMarks is an empty shared reading over db.
func NewMarks(db *sql.DB) *Marks { return &Marks{db: db, now: time.Now} }

// Read is Read with the open book and the recent ledger read through the shared readings.
func (c *Marks) Read(ctx context.Context, cat *catalog.Catalog, prices tick.Prices, from, to time.Time, floating bool) (Report, error) {
	return read(ctx, c.db, cat, prices, from, to, floating, c)
}

// get is a marking of the open book (see shared.get). m prices a marking this call starts.
func (c *Marks) get(ctx context.Context, m *book.Market) (*marked, error) {
	return c.marks.get(ctx, c.now, time.Time{}, func(ctx context.Context, began time.Time) (*marked, error) {
		mk, err := markOpen(ctx, c.db, m)
		if err == nil {
			mk.at = began
		}
		return mk, err
	})
}

// recentFrom is a reading of the ledger and the openings from from (a clock hour) to about
// now, shared as the marking is.
func (c *Marks) recentFrom(ctx context.Context, from time.Time) (*recent, error) {
	return c.recent.get(ctx, c.now, from, func(ctx context.Context, began time.Time) (*recent, error) {
		until := columnTime(began)
		rows, err := readLedger(ctx, c.db, from, [2]span{{}, {from, until}})
		if err != nil {
			return nil, err
		}
		return &recent{from: from, rows: rows, until: until}, nil
	})
}

// shared is one value computed for many readers: the last one computed for a key, and the
// computation under way.
type shared[T any] struct {
	mu      sync.Mutex
	last    *T
	lastKey time.Time
	lastAt  time.Time
	flight  *flight[T]
}

// flight is one computation under way; done closes when v and err are set.
type flight[T any] struct {
	key  time.Time
	done chan struct{}
	v    *T
	err  error
}

// get is the value for key computed at most MarkFresh ago, or at most MarkStale ago while a new
// one is computed beside it, or a new one waited for (as long as ctx allows). A computation for
// another key under way is not waited for: this call then computes its own, unshared.
func (s *shared[T]) get(ctx context.Context, now func() time.Time, key time.Time, compute func(ctx context.Context, began time.Time) (*T, error)) (*T, error) {
	s.mu.Lock()
	last, age := s.last, now().Sub(s.lastAt)
	if last == nil || !s.lastKey.Equal(key) {
		last = nil
	}
	if last != nil && age <= MarkFresh {
		s.mu.Unlock()
		return last, nil
	}
	f := s.flight
	if f == nil {
		f = &flight[T]{key: key, done: make(chan struct{})}
		s.flight = f
		go s.run(f, now, compute)
	}
	s.mu.Unlock()
	if last != nil && age <= MarkStale {
		return last, nil
	}
	if !f.key.Equal(key) {
		return compute(ctx, now())
	}
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run computes f and keeps its value as the last one when it succeeds.
func (s *shared[T]) run(f *flight[T], now func() time.Time, compute func(ctx context.Context, began time.Time) (*T, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	began := now()
	v, err := compute(ctx, began)
	s.mu.Lock()
	if err == nil {
		s.last, s.lastKey, s.lastAt = v, f.key, began
	}
	s.flight = nil
	f.v, f.err = v, err
	s.mu.Unlock()
	close(f.done)
}
