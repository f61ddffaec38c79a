package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/retention"
)

// WatchRetention adds the retention runner's progress (docs/operations.md, «Retention»), read
// from the holder's runner at scrape time: no database read.
func (m *Metrics) WatchRetention(progress func() []retention.Progress) {
	m.reg.MustRegister(&retentionCollector{progress: progress})
}

var (
	retentionRowsDesc = prometheus.NewDesc("fxdesk_retention_rows_total",
		"Rows the retention runner pruned (events) or moved to their archive table (audit, candles) since the process started, by task.", []string{"task"}, nil)
	retentionBacklogDesc = prometheus.NewDesc("fxdesk_retention_backlog_rows",
		"Rows the task's current or last pass has left past its retention (0 once a pass finished; an upper bound where keys have gaps), by task.", []string{"task"}, nil)
	retentionBatchRowsDesc    = prometheus.NewDesc("fxdesk_retention_last_batch_rows", "Rows the task's last batch handled, by task.", []string{"task"}, nil)
	retentionBatchSecondsDesc = prometheus.NewDesc("fxdesk_retention_last_batch_seconds",
		"How long the task's last batch (one statement, or one copy and delete transaction) took, by task.", []string{"task"}, nil)
	retentionBatchAtDesc = prometheus.NewDesc("fxdesk_retention_last_batch_timestamp_seconds",
		"When the task's last batch ended (Unix seconds; absent before its first), by task.", []string{"task"}, nil)
	retentionPassesDesc = prometheus.NewDesc("fxdesk_retention_passes_total",
		"The task's passes, by task and outcome (done, failed: made again at the next pass).", []string{"task", "outcome"}, nil)
)

type retentionCollector struct {
	progress func() []retention.Progress
}

func (c *retentionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- retentionRowsDesc
	ch <- retentionBacklogDesc
	ch <- retentionBatchRowsDesc
	ch <- retentionBatchSecondsDesc
	ch <- retentionBatchAtDesc
	ch <- retentionPassesDesc
}

func (c *retentionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.progress() {
		ch <- prometheus.MustNewConstMetric(retentionRowsDesc, prometheus.CounterValue, float64(p.Handled), p.Task)
		ch <- prometheus.MustNewConstMetric(retentionBacklogDesc, prometheus.GaugeValue, float64(p.Backlog), p.Task)
		ch <- prometheus.MustNewConstMetric(retentionBatchRowsDesc, prometheus.GaugeValue, float64(p.LastBatchRows), p.Task)
		ch <- prometheus.MustNewConstMetric(retentionBatchSecondsDesc, prometheus.GaugeValue, p.LastBatchDuration.Seconds(), p.Task)
		if !p.LastBatchAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(retentionBatchAtDesc, prometheus.GaugeValue, float64(p.LastBatchAt.UnixMilli())/1000, p.Task)
		}
		ch <- prometheus.MustNewConstMetric(retentionPassesDesc, prometheus.CounterValue, float64(p.Passes), p.Task, "done")
		ch <- prometheus.MustNewConstMetric(retentionPassesDesc, prometheus.CounterValue, float64(p.Failures), p.Task, "failed")
	}
}
