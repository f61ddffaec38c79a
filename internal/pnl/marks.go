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

// Marking the open B-book costs every open position's group (tens of thousands on a year of a
// broker: ~40 ms of SQL and ~120 ms of decimal arithmetic), and a dealer's screens ask for it
// every few seconds: the P&L of the day, the status page. Marks keeps one process's last
// marking and lets every read within MarkFresh of it share it; a read after that is answered
// from the last marking (up to MarkStale old) while a new one runs beside it, so a poll never
// waits for the marking except the first, or after a long quiet spell. docs/pnl.md «One marking
// of the open book, shared» says what a dealer sees.
const (
	// MarkFresh is how long a marking is served as the current one.
	MarkFresh = 5 * time.Second
	// MarkStale is how long a marking is served while a new one runs; an older one is waited for.
	MarkStale = 30 * time.Second
	// markTimeout bounds one marking, which no single request's cancellation stops: the
	// readers waiting for it share it.
	markTimeout = 30 * time.Second
)

// marked is one marking of the open B-book: its floating P&L per currency and symbol (from the
// desk's side), the symbols it could not price, and when it was taken.
type marked struct {
	sums     map[key]decimal.Decimal
	unpriced []string
	at       time.Time
}

// Marks is a process's shared marking of the open B-book for its P&L reads. The zero value is
// not usable: NewMarks.
type Marks struct {
	db  *sql.DB
	now func() time.Time

	mu     sync.Mutex
	last   *marked
	flight *markFlight // the marking under way; nil when none
}

// markFlight is one marking under way; done closes when mk and err are set.
type markFlight struct {
	done chan struct{}
	mk   *marked
	err  error
}

// NewMarks is an empty shared marking over db.
func NewMarks(db *sql.DB) *Marks { return &Marks{db: db, now: time.Now} }

// Read is Read with the open book marked through the shared marking.
func (c *Marks) Read(ctx context.Context, cat *catalog.Catalog, prices tick.Prices, from, to time.Time, floating bool) (Report, error) {
	return read(ctx, c.db, cat, prices, from, to, floating, c)
}

// get is a marking at most MarkFresh old, or at most MarkStale old while a new one runs, or a
// new one waited for (as long as ctx allows). m prices a marking this call starts.
func (c *Marks) get(ctx context.Context, m *book.Market) (*marked, error) {
	c.mu.Lock()
	last := c.last
	if last != nil && c.now().Sub(last.at) <= MarkFresh {
		c.mu.Unlock()
		return last, nil
	}
	f := c.flight
	if f == nil {
		f = &markFlight{done: make(chan struct{})}
		c.flight = f
		go c.mark(f, m)
	}
	c.mu.Unlock()
	if last != nil && c.now().Sub(last.at) <= MarkStale {
		return last, nil
	}
	select {
	case <-f.done:
		return f.mk, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// mark runs one marking for f and keeps it as the last one when it succeeds.
func (c *Marks) mark(f *markFlight, m *book.Market) {
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	began := c.now()
	mk, err := markOpen(ctx, c.db, m)
	if err == nil {
		mk.at = began
	}
	c.mu.Lock()
	if err == nil {
		c.last = mk
	}
	c.flight = nil
	f.mk, f.err = mk, err
	c.mu.Unlock()
	close(f.done)
}
