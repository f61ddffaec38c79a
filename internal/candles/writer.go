package candles

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/tick"
)

// Prices is the engine's side the Writer reads: *tick.Engine.
type Prices interface {
	// Updates subscribes to published quotes (none: every symbol).
	Updates(symbols []string) (<-chan tick.Update, func())
	// DroppedFor is how many updates the subscription has lost to a full buffer.
	DroppedFor(ch <-chan tick.Update) uint64
}

// WriterConfig builds a Writer.
type WriterConfig struct {
	DB     *sql.DB
	Prices Prices
	// Holding reports whether this process may write (the lease is trusted): a flush while it
	// is false is skipped and its candles stay pending, so a process that lost the lease does
	// not overwrite its successor's closes. Nil: always.
	Holding func() bool
	// FlushEvery is how often pending candles are written (DefaultFlushEvery when 0): the most
	// history a crash or a takeover can lose.
	FlushEvery time.Duration
	// RowsPerStatement bounds one INSERT (DefaultRowsPerStatement when 0).
	RowsPerStatement int
	// MaxCompleted bounds the completed candles kept unwritten (NewBuilder).
	MaxCompleted int
	Log          *slog.Logger
}

const (
	DefaultFlushEvery       = 2 * time.Second
	DefaultRowsPerStatement = 500
	// flushTimeout bounds one flush, the last one at shutdown included.
	flushTimeout = 10 * time.Second
)

// Writer runs the builder on the holder: it reads every published tick into the builder and
// writes the pending candles every FlushEvery in multi-row upserts, and once more when it stops.
type Writer struct {
	cfg WriterConfig
	log *slog.Logger

	mu sync.Mutex // guards b; held per tick and while Pending/Flushed copy, never across I/O
	b  *Builder

	// The subscription is taken when the writer is built, so a holder that builds it before its
	// engine runs misses none of the engine's first ticks.
	ch    <-chan tick.Update
	unsub func()

	flushMu sync.Mutex // one flush at a time (the loop's and a caller's)

	ticks, flushes, rows, statements, failures, skipped atomic.Uint64
	dropped                                             atomic.Uint64
}

// WriterStats are the Writer's counters since it was built.
type WriterStats struct {
	Ticks      uint64 // published ticks read
	Dropped    uint64 // updates the engine dropped for this subscriber: each a tick missing from its candles
	Flushes    uint64 // flushes that wrote at least one row
	Rows       uint64 // candle rows written (a candle written twice counts twice)
	Statements uint64 // INSERT statements sent
	Failures   uint64 // flushes that failed (their candles stay pending)
	Skipped    uint64 // flushes skipped while the lease was not held
	Lost       uint64 // completed candles discarded unwritten (MaxCompleted)
}

// NewWriter validates cfg.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.DB == nil || cfg.Prices == nil || cfg.Log == nil {
		return nil, errors.New("candles: a writer needs DB, Prices and Log")
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	if cfg.RowsPerStatement <= 0 {
		cfg.RowsPerStatement = DefaultRowsPerStatement
	}
	if cfg.Holding == nil {
		cfg.Holding = func() bool { return true }
	}
	b, err := NewBuilder(cfg.MaxCompleted)
	if err != nil {
		return nil, fmt.Errorf("candles: %w", err)
	}
	w := &Writer{cfg: cfg, log: cfg.Log, b: b}
	w.ch, w.unsub = cfg.Prices.Updates(nil)
	return w, nil
}

// Run reads published ticks (since NewWriter) and flushes until ctx ends, then reads what the
// subscription still buffers and flushes once more. A failed flush is logged and retried at the
// next period. Run once.
func (w *Writer) Run(ctx context.Context) error {
	ch, cancel := w.ch, w.unsub
	defer cancel()
	read := make(chan struct{})
	go func() {
		defer close(read)
		for u := range ch {
			w.add(u)
		}
	}()
	t := time.NewTicker(w.cfg.FlushEvery)
	defer t.Stop()
	var seenDropped uint64
	for {
		select {
		case <-ctx.Done():
			w.noteDropped(ctx, w.cfg.Prices.DroppedFor(ch), &seenDropped)
			cancel() // closes ch once no send is in flight; the reader drains its buffer
			<-read
			fctx, stop := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
			defer stop()
			if _, _, err := w.Flush(fctx); err != nil {
				w.log.WarnContext(ctx, "candles: the last flush failed; the candles since the previous one are not written", slog.Any("err", err))
			}
			return nil
		case <-t.C:
			w.noteDropped(ctx, w.cfg.Prices.DroppedFor(ch), &seenDropped)
			fctx, stop := context.WithTimeout(ctx, flushTimeout)
			if _, _, err := w.Flush(fctx); err != nil && ctx.Err() == nil {
				w.log.WarnContext(ctx, "candles: flush failed; the candles stay pending and are written at the next flush", slog.Any("err", err))
			}
			stop()
		}
	}
}

func (w *Writer) add(u tick.Update) {
	w.mu.Lock()
	w.b.Add(u.Symbol, u.Quote.Bid, u.Quote.Ask, u.Quote.ReceivedAt)
	w.mu.Unlock()
	w.ticks.Add(1)
}

// noteDropped warns when the engine dropped updates for the writer since the last look: each is
// a published tick missing from its candles (one tick fewer, and its price absent from the high
// and low).
func (w *Writer) noteDropped(ctx context.Context, total uint64, seen *uint64) {
	if total <= *seen {
		return
	}
	w.dropped.Store(total)
	w.log.WarnContext(ctx, "candles: the engine dropped published ticks for the candle writer; those ticks are missing from their candles",
		slog.Uint64("droppedSinceLastLook", total-*seen), slog.Uint64("droppedTotal", total))
	*seen = total
}

// Flush writes every pending candle now, in statements of at most RowsPerStatement rows, and
// returns how many rows and statements it sent. Skipped (0, 0, nil) while the lease is not held.
// Rows of a statement that failed stay pending, as do all after it.
func (w *Writer) Flush(ctx context.Context) (rows, statements int, err error) {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	if !w.cfg.Holding() {
		w.skipped.Add(1)
		return 0, 0, nil
	}
	w.mu.Lock()
	pending := w.b.Pending()
	w.mu.Unlock()
	if len(pending) == 0 {
		return 0, 0, nil
	}
	for len(pending) > 0 {
		n := min(len(pending), w.cfg.RowsPerStatement)
		batch := pending[:n]
		if err := upsert(ctx, w.cfg.DB, batch); err != nil {
			w.failures.Add(1)
			return rows, statements, err
		}
		w.mu.Lock()
		w.b.Flushed(batch)
		w.mu.Unlock()
		rows += n
		statements++
		w.rows.Add(uint64(n))
		w.statements.Add(1)
		pending = pending[n:]
	}
	w.flushes.Add(1)
	return rows, statements, nil
}

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	lost := w.b.Lost()
	w.mu.Unlock()
	return WriterStats{Ticks: w.ticks.Load(), Dropped: w.dropped.Load(), Flushes: w.flushes.Load(), Rows: w.rows.Load(),
		Statements: w.statements.Load(), Failures: w.failures.Load(), Skipped: w.skipped.Load(), Lost: lost}
}

// candleRow is one row's placeholders in upsert's statement.
const candleRow = "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"

// candleRows is n rows' placeholders, without the outer parentheses.
func candleRows(n int) string { return candleRow + strings.Repeat("), ("+candleRow, n-1) }

// upsert writes rows in one statement. A candle already stored (an earlier flush, or the
// previous holder's part of the period) keeps its opens, widens to the new highs and lows, takes
// the new closes and adds the new ticks.
func upsert(ctx context.Context, db *sql.DB, rows []Row) error {
	args := make([]any, 0, len(rows)*12)
	for _, r := range rows {
		args = append(args, r.Symbol, r.Granularity.String(), r.OpenTime,
			price(r.Bid.Open), price(r.Bid.High), price(r.Bid.Low), price(r.Bid.Close),
			price(r.Ask.Open), price(r.Ask.High), price(r.Ask.Low), price(r.Ask.Close), r.NewTicks)
	}
	_, err := db.ExecContext(ctx, "INSERT INTO `fx_candle` (`symbol`, `granularity`, `openTime`, `bidOpen`, `bidHigh`, `bidLow`, `bidClose`, "+
		"`askOpen`, `askHigh`, `askLow`, `askClose`, `ticks`) VALUES ("+candleRows(len(rows))+") ON DUPLICATE KEY UPDATE "+
		"`bidHigh` = GREATEST(`bidHigh`, VALUES(`bidHigh`)), `bidLow` = LEAST(`bidLow`, VALUES(`bidLow`)), `bidClose` = VALUES(`bidClose`), "+
		"`askHigh` = GREATEST(`askHigh`, VALUES(`askHigh`)), `askLow` = LEAST(`askLow`, VALUES(`askLow`)), `askClose` = VALUES(`askClose`), "+
		"`ticks` = `ticks` + VALUES(`ticks`)", args...)
	if err != nil {
		return fmt.Errorf("write %d candles: %w", len(rows), err)
	}
	return nil
}

// price is p as DECIMAL(20,10) text: the quote's own digits, which have fewer than ten.
func price(p float64) string { return strconv.FormatFloat(p, 'f', 10, 64) }
