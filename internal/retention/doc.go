// Package retention runs what keeps the desk's growing tables in bounds — the events outbox's
// pruning, the audit log's and the candles' archival — beside the work, never inside it
// (docs/operations.md, «Retention»).
//
// A Runner makes a pass over its Tasks at start and every Every: each Task plans its pass (how
// far the horizon allows, how many rows that leaves) and then handles one batch at a time, at
// most Batch rows per statement, with Pause between batches, so no statement holds locks, the
// undo log or the replication stream for long, and purge keeps up. Progress (rows handled, the
// backlog left, the last batch's size, duration and time) is kept per task for the metrics.
//
// What each task deletes is its owner's: events.Prune (relay decides up to where), the audit
// package's move into fx_audit_archive, the candles package's into fx_candle_archive. This
// package holds no SQL of its own.
//
// It must never run a pass while the lease is not trusted (Holding), never let one statement
// span more than Batch rows, and never delete a money record: deals, positions, orders, swap
// charges and the end-of-day rows stay hot (docs/operations.md says why and how big they grow).
package retention
