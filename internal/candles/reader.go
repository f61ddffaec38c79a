package candles

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// MaxCandles is the most candles one read returns: a count's bound, and the most a from/to range
// may span (Reader.Range refuses a wider one before it queries).
const MaxCandles = 5000

// Reader reads stored candles; any process serves it (it reads MySQL only, so the candle in
// progress is as of the holder's last flush).
type Reader struct{ db *sql.DB }

// NewReader returns a reader over db.
func NewReader(db *sql.DB) (*Reader, error) {
	if err := checkZone(); err != nil {
		return nil, fmt.Errorf("candles: %w", err)
	}
	return &Reader{db: db}, nil
}

// MaxSpan is the widest from/to range of g that Range serves: MaxCandles opens at the least.
func MaxSpan(g Granularity) time.Duration { return MaxCandles * g.ShortestLength() }

// Range returns symbol's candles of g that opened in [from, to), oldest first. The span must be
// at most MaxSpan(g), so the answer holds at most MaxCandles candles.
func (r *Reader) Range(ctx context.Context, symbol string, g Granularity, from, to time.Time) ([]Candle, error) {
	if span := to.Sub(from); span <= 0 || span > MaxSpan(g) {
		return nil, fmt.Errorf("candles: range %s..%s is not within (0, %s]", from, to, MaxSpan(g))
	}
	return r.query(ctx, symbol, g, "SELECT `openTime`, `bidOpen`, `bidHigh`, `bidLow`, `bidClose`, `askOpen`, `askHigh`, `askLow`, `askClose`, `ticks` "+
		"FROM `fx_candle` WHERE `symbol` = ? AND `granularity` = ? AND `openTime` >= ? AND `openTime` < ? ORDER BY `openTime` LIMIT ?",
		symbol, g.String(), from.UTC(), to.UTC(), MaxCandles)
}

// Latest returns symbol's newest count candles of g that opened before before (zero: any),
// oldest first; count is at most MaxCandles.
func (r *Reader) Latest(ctx context.Context, symbol string, g Granularity, before time.Time, count int) ([]Candle, error) {
	if count < 1 || count > MaxCandles {
		return nil, fmt.Errorf("candles: count %d is not from 1 to %d", count, MaxCandles)
	}
	if before.IsZero() {
		before = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	out, err := r.query(ctx, symbol, g, "SELECT `openTime`, `bidOpen`, `bidHigh`, `bidLow`, `bidClose`, `askOpen`, `askHigh`, `askLow`, `askClose`, `ticks` "+
		"FROM `fx_candle` WHERE `symbol` = ? AND `granularity` = ? AND `openTime` < ? ORDER BY `openTime` DESC LIMIT ?",
		symbol, g.String(), before.UTC(), count)
	slices.Reverse(out)
	return out, err
}

func (r *Reader) query(ctx context.Context, symbol string, g Granularity, query string, args ...any) ([]Candle, error) {
	rows, err := r.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s %s candles: %w", symbol, g, err)
	}
	defer rows.Close()
	out := []Candle{}
	for rows.Next() {
		c := Candle{Symbol: symbol, Granularity: g}
		if err := rows.Scan(&c.OpenTime, &c.Bid.Open, &c.Bid.High, &c.Bid.Low, &c.Bid.Close,
			&c.Ask.Open, &c.Ask.High, &c.Ask.Low, &c.Ask.Close, &c.Ticks); err != nil {
			return nil, fmt.Errorf("read %s %s candles: %w", symbol, g, err)
		}
		c.OpenTime = c.OpenTime.UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s %s candles: %w", symbol, g, err)
	}
	return out, nil
}
