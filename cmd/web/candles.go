package main

import (
	"log/slog"
	"time"

	"fxdesk/internal/candles"
)

// candleParts are the holder's price history (docs/candles.md): the writer reads the engine's
// published ticks and upserts its candles every FXDESK_CANDLES_FLUSH; the archive moves each
// granularity's candles past its retention to fx_candle_archive, a task of the retention runner.
type candleParts struct {
	start   func()
	archive *candles.ArchiveTask
}

// newCandles builds them, the writer's subscription to the engine included; start runs the
// writer in the guarded stage, which stops before the price stream and the lease's release, so
// the writer's last flush is made while this process still holds the lease; it writes only
// while the lease is trusted.
func (h *holderParts) newCandles(stream *priceStream, log *slog.Logger) (candleParts, error) {
	c := h.cfg.Candles
	w, err := candles.NewWriter(candles.WriterConfig{DB: h.db, Prices: stream.engine, Holding: h.keeper.HoldsLease, FlushEvery: c.FlushEvery, Log: log})
	if err != nil {
		return candleParts{}, err
	}
	a, err := candles.NewArchiveTask(h.db,
		map[candles.Granularity]time.Duration{candles.M1: c.RetentionM1, candles.M5: c.RetentionM5, candles.H1: c.RetentionH1, candles.D1: c.RetentionD1}, nil)
	if err != nil {
		return candleParts{}, err
	}
	h.metrics.WatchCandles(w.Stats, a.Moved)
	return candleParts{archive: a, start: func() { h.guarded.Go("candle writer", w.Run) }}, nil
}
