package config

import (
	"fmt"
	"strconv"
	"time"
)

// RetentionConfig is how the holder keeps the growing tables in bounds beside the work
// (docs/operations.md, «Retention»): the events outbox's pruning (FXDESK_EVENTS_RETENTION), the
// audit log's and the candles' archival, each a pass every Every in batches of Batch rows with
// Pause between them. Money records (deals, positions, orders, swap charges, end of day) are
// kept hot: nothing here deletes or moves them.
type RetentionConfig struct {
	// Every is FXDESK_RETENTION_EVERY (default 1h, 1m..24h): the time between two passes.
	Every time.Duration
	// Batch is FXDESK_RETENTION_BATCH (default 1000, 100..5000): the most rows one statement
	// deletes or moves.
	Batch int
	// Pause is FXDESK_RETENTION_PAUSE (default 100ms, 0..10s): the least wait after each batch of
	// a pass that has more (never less than the batch took), so the desk's writes, InnoDB's purge
	// and the replicas keep up.
	Pause time.Duration
	// Audit is FXDESK_AUDIT_RETENTION (default 0: every row stays in fx_audit): audit rows
	// older than this are moved to fx_audit_archive, never deleted. 0 or at least 720h (30 days).
	Audit time.Duration
}

func loadRetention(env func(key, def string) string, duration func(key, def string) time.Duration) (RetentionConfig, []error) {
	var errs []error
	r := RetentionConfig{
		Every: duration("FXDESK_RETENTION_EVERY", "1h"),
		Pause: duration("FXDESK_RETENTION_PAUSE", "100ms"),
		Audit: duration("FXDESK_AUDIT_RETENTION", "0s"),
	}
	n, err := strconv.Atoi(env("FXDESK_RETENTION_BATCH", "1000"))
	if err != nil || n < 100 || n > 5000 {
		errs = append(errs, fmt.Errorf("FXDESK_RETENTION_BATCH=%q must be a whole number from 100 to 5000 (rows per statement)", env("FXDESK_RETENTION_BATCH", "1000")))
	}
	r.Batch = n
	if r.Every < time.Minute || r.Every > 24*time.Hour {
		errs = append(errs, fmt.Errorf("FXDESK_RETENTION_EVERY=%s must be from 1m to 24h", r.Every))
	}
	if r.Pause < 0 || r.Pause > 10*time.Second {
		errs = append(errs, fmt.Errorf("FXDESK_RETENTION_PAUSE=%s must be from 0 to 10s", r.Pause))
	}
	if r.Audit != 0 && r.Audit < 720*time.Hour {
		errs = append(errs, fmt.Errorf("FXDESK_AUDIT_RETENTION=%s must be 0 (keep every row in fx_audit) or at least 720h (30 days; 8760h is a year)", r.Audit))
	}
	return r, errs
}
