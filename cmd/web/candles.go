package main

import (
	"log/slog"
	"time"

	"fxdesk/internal/candles"
)

// candleParts are the holder's price history (docs/candles.md): the writer reads the engine's
// published ticks and upserts its candles every FXDESK_CANDLES_FLUSH, and the pruner keeps each
// granularity for its retention.
type candleParts struct {
	start func()
}

// newCandles builds them, the writer's subscription to the engine included; start runs both in
// the guarded stage, which stops before the price stream and the lease's release, so the
// writer's last flush is made while this process still holds the lease; both write only while
// it is trusted.
func (h *holderParts) newCandles(stream *priceStream, log *slog.Logger) (candleParts, error) {
	c := h.cfg.Candles
	w, err := candles.NewWriter(candles.WriterConfig{DB: h.db, Prices: stream.engine, Holding: h.keeper.HoldsLease, FlushEvery: c.FlushEvery, Log: log})
	if err != nil {
		return candleParts{}, err
	}
	p, err := candles.NewPruner(candles.PrunerConfig{DB: h.db, Holding: h.keeper.HoldsLease, Log: log,
		Retention: map[candles.Granularity]time.Duration{candles.M1: c.RetentionM1, candles.M5: c.RetentionM5, candles.H1: c.RetentionH1, candles.D1: c.RetentionD1}})
	if err != nil {
		return candleParts{}, err
	}
	h.metrics.WatchCandles(w.Stats, p.Deleted)
	return candleParts{start: func() {
		h.guarded.Go("candle writer", w.Run)
		h.guarded.Go("candle prune", p.Run)
	}}, nil
}
