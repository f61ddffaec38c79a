package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/candles"
)

// WatchCandles adds the price history's counters (docs/candles.md), read from the holder's candle
// writer and archive at scrape time.
func (m *Metrics) WatchCandles(stats func() candles.WriterStats, archived func() int64) {
	m.reg.MustRegister(&candlesCollector{stats: stats, archived: archived})
}

var (
	candleTicksDesc = prometheus.NewDesc("fxdesk_candle_ticks_total",
		"Published ticks the candle writer read (outcome=read), and those the engine dropped for it (outcome=dropped: each missing from its candles).", []string{"outcome"}, nil)
	candleWritesDesc = prometheus.NewDesc("fxdesk_candle_writes_total",
		"The candle writer's work by kind: flush (flushes that wrote), row (candle rows upserted), statement (INSERTs sent), failed (flushes that failed; their candles stay pending), skipped (flushes while the lease was not held), lost (completed candles discarded unwritten).", []string{"kind"}, nil)
	candleArchivedDesc = prometheus.NewDesc("fxdesk_candles_archived_total", "Candles moved to fx_candle_archive past their granularity's retention.", nil, nil)
)

type candlesCollector struct {
	stats    func() candles.WriterStats
	archived func() int64
}

func (c *candlesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- candleTicksDesc
	ch <- candleWritesDesc
	ch <- candleArchivedDesc
}

func (c *candlesCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(candleTicksDesc, prometheus.CounterValue, float64(s.Ticks), "read")
	ch <- prometheus.MustNewConstMetric(candleTicksDesc, prometheus.CounterValue, float64(s.Dropped), "dropped")
	for kind, n := range map[string]uint64{"flush": s.Flushes, "row": s.Rows, "statement": s.Statements, "failed": s.Failures, "skipped": s.Skipped, "lost": s.Lost} {
		ch <- prometheus.MustNewConstMetric(candleWritesDesc, prometheus.CounterValue, float64(n), kind)
	}
	ch <- prometheus.MustNewConstMetric(candleArchivedDesc, prometheus.CounterValue, float64(c.archived()))
}
