package candles

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// PrunerConfig builds a Pruner.
type PrunerConfig struct {
	DB *sql.DB
	// Retention is how long each granularity's candles are kept, by open; 0 or absent: for ever.
	Retention map[Granularity]time.Duration
	// Holding reports whether this process may prune (the lease is trusted); nil: always.
	Holding func() bool
	// Every is the time between passes (DefaultPruneEvery when 0).
	Every time.Duration
	// Batch is the most rows one DELETE removes (DefaultPruneBatch when 0); Pause the wait
	// between two full batches (DefaultPrunePause when 0), so a first pass over a large backlog
	// does not hold the table or the replication stream for long.
	Batch int
	Pause time.Duration
	Now   func() time.Time // default time.Now
	Log   *slog.Logger
}

const (
	DefaultPruneEvery = time.Hour
	DefaultPruneBatch = 5000
	DefaultPrunePause = 200 * time.Millisecond
)

// Pruner deletes candles past their granularity's retention, a batch at a time.
type Pruner struct {
	cfg     PrunerConfig
	deleted atomic.Int64
}

// NewPruner validates cfg.
func NewPruner(cfg PrunerConfig) (*Pruner, error) {
	if cfg.DB == nil || cfg.Log == nil {
		return nil, errors.New("candles: a pruner needs DB and Log")
	}
	for g, d := range cfg.Retention {
		if g >= numGranularities || d < 0 {
			return nil, fmt.Errorf("candles: retention %s=%s is not a granularity and a duration of 0 or more", g, d)
		}
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultPruneEvery
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultPruneBatch
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPrunePause
	}
	if cfg.Holding == nil {
		cfg.Holding = func() bool { return true }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pruner{cfg: cfg}, nil
}

// Run prunes at once and then every Every until ctx ends. A failed pass is logged and tried
// again at the next.
func (p *Pruner) Run(ctx context.Context) error {
	if !p.any() {
		<-ctx.Done() // every granularity is kept: nothing to do, but a part returns only when asked
		return nil
	}
	t := time.NewTicker(p.cfg.Every)
	defer t.Stop()
	for {
		if p.cfg.Holding() {
			if _, err := p.Prune(ctx); err != nil && ctx.Err() == nil {
				p.cfg.Log.WarnContext(ctx, "candles: prune failed; trying again at the next pass", slog.Any("err", err))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Pruner) any() bool {
	for _, d := range p.cfg.Retention {
		if d > 0 {
			return true
		}
	}
	return false
}

// Deleted is how many candles this pruner has deleted since it was built.
func (p *Pruner) Deleted() int64 { return p.deleted.Load() }

// Prune makes one pass: for every granularity with a retention and every symbol, it deletes the
// candles that opened before now minus the retention, Batch rows per statement with Pause
// between full batches, and logs what it deleted. Each DELETE walks the primary key's range of
// one symbol and granularity.
func (p *Pruner) Prune(ctx context.Context) (int64, error) {
	symbols, err := p.symbols(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, g := range Granularities() {
		keep := p.cfg.Retention[g]
		if keep <= 0 {
			continue
		}
		cutoff := p.cfg.Now().Add(-keep).UTC()
		var n int64
		for _, sym := range symbols {
			for {
				res, err := p.cfg.DB.ExecContext(ctx, "DELETE FROM `fx_candle` WHERE `symbol` = ? AND `granularity` = ? AND `openTime` < ? LIMIT ?",
					sym, g.String(), cutoff, p.cfg.Batch)
				if err != nil {
					return total + n, fmt.Errorf("prune %s %s candles before %s: %w", sym, g, cutoff.Format(time.RFC3339), err)
				}
				k, _ := res.RowsAffected()
				n += k
				p.deleted.Add(k)
				if k < int64(p.cfg.Batch) {
					break
				}
				p.cfg.Log.InfoContext(ctx, "candles: pruning", slog.String("granularity", g.String()), slog.String("symbol", sym),
					slog.Int64("deletedSoFar", n), slog.Time("before", cutoff))
				select {
				case <-ctx.Done():
					return total + n, ctx.Err()
				case <-time.After(p.cfg.Pause):
				}
			}
		}
		if n > 0 {
			p.cfg.Log.InfoContext(ctx, "candles: pruned", slog.String("granularity", g.String()), slog.Int64("deleted", n),
				slog.Time("before", cutoff), slog.Duration("retention", keep))
		}
		total += n
	}
	return total, nil
}

// symbols lists the symbols with candles, read from the primary key's first column.
func (p *Pruner) symbols(ctx context.Context) ([]string, error) {
	rows, err := p.cfg.DB.QueryContext(ctx, "SELECT DISTINCT `symbol` FROM `fx_candle`")
	if err != nil {
		return nil, fmt.Errorf("list the symbols with candles: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("list the symbols with candles: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
