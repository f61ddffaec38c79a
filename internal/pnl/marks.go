package pnl

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/reading"
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
// A new reading of the recent ledger reads only what the last one could not settle and what was
// written since (readRecent).
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
// summaries end) to until, grouped by hour since from. Its first settled groups are every row of
// [from, settledTo), which was committed before the reading began (committedBefore): the next
// reading keeps them and reads from settledTo on, so a reading costs what was written since the
// last one (and what the last could not settle), not the whole span.
type recent struct {
	from      time.Time
	rows      []ledgerRow
	until     time.Time // the read's end: when it began, as a column time
	settled   int       // rows[:settled] are [from, settledTo), one row per group
	settledTo time.Time
	read      span // what this reading read of the ledger: [the last one's settledTo, until)
}

// Marks is a process's shared reading of the open book and of the recent ledger for its P&L
// reads. The zero value is not usable: NewMarks.
type Marks struct {
	db  *sql.DB
	now func() time.Time

	// margin is committedBefore's, as the summaries': SummaryMargin.
	margin time.Duration

	marks  reading.Shared[marked]
	recent reading.Shared[recent]
}

// NewMarks is an empty shared reading over db.
func NewMarks(db *sql.DB) *Marks {
	c := &Marks{db: db, now: time.Now, margin: SummaryMargin}
	c.marks.Fresh, c.marks.Stale, c.marks.Timeout = MarkFresh, MarkStale, markTimeout
	c.recent.Fresh, c.recent.Stale, c.recent.Timeout = MarkFresh, MarkStale, markTimeout
	return c
}

// Read is Read with the open book and the recent ledger read through the shared readings.
func (c *Marks) Read(ctx context.Context, cat *catalog.Catalog, prices tick.Prices, from, to time.Time, floating bool) (Report, error) {
	return read(ctx, c.db, cat, prices, from, to, floating, c)
}

// get is a marking of the open book (see shared.get). m prices a marking this call starts.
func (c *Marks) get(ctx context.Context, m *book.Market) (*marked, error) {
	return c.marks.Get(ctx, c.now, time.Time{}, func(ctx context.Context, began time.Time, _ *marked) (*marked, error) {
		mk, err := markOpen(ctx, c.db, m)
		if err == nil {
			mk.at = began
		}
		return mk, err
	})
}

// recentFrom is a reading of the ledger and the openings from from (a clock hour) to about
// now, shared as the marking is and read from where the last reading settled (readRecent).
func (c *Marks) recentFrom(ctx context.Context, from time.Time) (*recent, error) {
	return c.recent.Get(ctx, c.now, from, func(ctx context.Context, began time.Time, last *recent) (*recent, error) {
		return readRecent(ctx, c.db, from, columnTime(began), c.margin, last)
	})
}

// readRecent reads the ledger and the openings of [from, until), keeping the groups last (nil:
// none) settled that the summaries do not cover now, and settles what was committed before it
// began (committedBefore, with margin): it reads [last's settledTo, until) — [from, until) when
// there is nothing to keep — and the rows below the new settledTo join the settled groups.
// Memory is the groups', as a whole reading's: currencies × symbols × kinds × books × hours.
func readRecent(ctx context.Context, db *sql.DB, from, until time.Time, margin time.Duration, last *recent) (*recent, error) {
	// Before the reads: a row committed after this bound is dated after it.
	bound, err := committedBefore(ctx, db, margin)
	if err != nil {
		return nil, fmt.Errorf("dealer's P&L: recent ledger: %w", err)
	}
	r := &recent{from: from, until: until}
	lo := from
	// The summaries moved on to from (or stayed) within what last settled, and the clock did
	// not go back past it: keep the hours they do not cover, counted from from.
	if last != nil && !from.Before(last.from) && !last.settledTo.Before(from) && !until.Before(last.settledTo) {
		shift := int(from.Sub(last.from) / time.Hour)
		for _, g := range last.rows[:last.settled] {
			if g.hr >= shift {
				g.hr -= shift
				r.rows = append(r.rows, g)
			}
		}
		lo = last.settledTo
	}
	mid := bound
	if mid.Before(lo) {
		mid = lo
	}
	if until.Before(mid) {
		mid = until
	}
	settled, err := readLedger(ctx, db, from, [2]span{{lo, mid}})
	if err != nil {
		return nil, err
	}
	tail, err := readLedger(ctx, db, from, [2]span{{mid, until}})
	if err != nil {
		return nil, err
	}
	r.rows = mergeGroups(r.rows, settled)
	r.settled, r.settledTo, r.read = len(r.rows), mid, span{lo, until}
	r.rows = append(r.rows, tail...)
	return r, nil
}

// mergeGroups adds more to rows, one row per group (currency, symbol, kind, book, hour).
func mergeGroups(rows, more []ledgerRow) []ledgerRow {
	type group struct {
		ccy, sym, kind string
		abook          bool
		hr             int
	}
	at := make(map[group]int, len(rows))
	for i, r := range rows {
		at[group{r.ccy, r.sym, r.kind, r.abook, r.hr}] = i
	}
	for _, m := range more {
		g := group{m.ccy, m.sym, m.kind, m.abook, m.hr}
		i, ok := at[g]
		if !ok {
			at[g] = len(rows)
			rows = append(rows, m)
			continue
		}
		r := &rows[i]
		r.amount, r.markup, r.missing = r.amount.Add(m.amount), r.markup.Add(m.markup), r.missing+m.missing
	}
	return rows
}
