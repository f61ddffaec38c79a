package main

import (
	"log/slog"

	"fxdesk/internal/audit"
	"fxdesk/internal/candles"
	"fxdesk/internal/relay"
	"fxdesk/internal/retention"
)

// startRetention starts the retention runner (docs/operations.md, «Retention»): the events
// outbox's pruning, the audit log's and the candles' archival, in batches beside the work — its
// own goroutine and connection, never the relay's loop — on the holder only, a pass only while
// the lease is trusted.
func (h *holderParts) startRetention(candleArchive *candles.ArchiveTask, log *slog.Logger) error {
	r := h.cfg.Retention
	var tasks []retention.Task
	if keep := h.cfg.Events.Retention; keep > 0 {
		t, err := relay.NewPruneTask(h.db, keep)
		if err != nil {
			return err
		}
		tasks = append(tasks, t)
	}
	if r.Audit > 0 {
		t, err := audit.NewArchiveTask(h.db, r.Audit)
		if err != nil {
			return err
		}
		tasks = append(tasks, t)
	}
	if candleArchive.Any() {
		tasks = append(tasks, candleArchive)
	}
	runner, err := retention.New(retention.Config{Tasks: tasks, Every: r.Every, Batch: r.Batch, Pause: r.Pause, Holding: h.keeper.HoldsLease, Log: log})
	if err != nil {
		return err
	}
	h.metrics.WatchRetention(runner.Progress)
	h.guarded.Go("retention", runner.Run)
	return nil
}
