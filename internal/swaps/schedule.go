package swaps

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/eod"
	"fxdesk/internal/marks"
	"fxdesk/internal/metrics"
	"fxdesk/internal/pnl"
	"fxdesk/internal/schedule"
	"fxdesk/internal/tick"
)

// How the scheduler runs the job, in fxdesk-cron and inline in fxdesk-web alike.
const (
	JobName = "processFxSwaps"
	// Spec fires at the top of every hour, New York time: the 17:00 run charges the day's
	// rollover, the others retry pending charges and catch up anything missed.
	Spec    = "0 * * * *"
	Comment = "hourly: charge the 17:00 New York rollover once per position and date; retry, pin or expire pending charges; freeze the end of day"
)

// MoneyJobsConfig is what the money jobs need from the process they run in. Only the prices and
// the way missing conversion legs are pinned differ between fxdesk-cron and an inline fxdesk-web:
// the quote mirror follower in the cron process, the tick engine itself inline.
type MoneyJobsConfig struct {
	DB     *sql.DB
	Prices func() tick.Prices // the price view at the start of a run
	Pins   Pinner             // where missing conversion legs are requested
	Alerts *alert.Inbox
	// Metrics, when set, counts rollover charges by result.
	Metrics *metrics.Metrics
	// By names the process in the end of day it captures and freezes (host:pid).
	By string
}

// chargeResults are the swap job's counts that are outcomes of one charge (the others, such as
// "dates" and "legsPinned", describe the run).
var chargeResults = []string{"charged", "pending", "retried", "stillPending", "expired", "skipped", "swapFree", "zero", "unknownInstrument"}

// MoneyJobs returns the desk's scheduled money jobs, processFxSwaps, reconcileFxAccounts
// (internal/marks) and summariseFxPnl (internal/pnl), so that fxdesk-cron and an inline
// fxdesk-web run exactly the same list with the same specs. processFxSwaps freezes the end of day (internal/eod) once its charges are in.
func MoneyJobs(cfg MoneyJobsConfig, log *slog.Logger) []schedule.Job {
	swapJob := New(Config{DB: cfg.DB, Prices: cfg.Prices, Pins: cfg.Pins, Alerts: cfg.Alerts}, log)
	marksJob := marks.New(marks.Config{DB: cfg.DB, Prices: cfg.Prices, Alerts: cfg.Alerts}, log)
	eodCfg := eod.Config{DB: cfg.DB, Prices: cfg.Prices, By: cfg.By}
	if cfg.Alerts != nil {
		eodCfg.Alerts = cfg.Alerts
	}
	eodJob := eod.New(eodCfg, log)
	runSwaps := func(ctx context.Context, at time.Time) (schedule.Result, error) {
		res, err := swapJob.Run(ctx, at)
		if cfg.Metrics != nil {
			for _, result := range chargeResults {
				if n := res[result]; n > 0 {
					cfg.Metrics.SwapCharges.WithLabelValues(result).Add(float64(n))
				}
			}
		}
		if err != nil {
			return res, err
		}
		// The day is frozen after its charges; a failed charge pass leaves it to the next run.
		due, err := DueRollovers(at, swapJob.cfg.ExpireAfter)
		if err != nil {
			return res, err
		}
		return res, eodJob.Run(ctx, at, due, res)
	}
	return []schedule.Job{
		{
			// Hourly: charges the 17:00 New York rollover once per position and date; retries,
			// pins or expires pending charges; freezes each day once its charges are in.
			Name: JobName, Spec: Spec, Comment: Comment, Run: runSwaps,
		},
		{
			// Every 5 minutes: marks equity and used margin, expires GTD/DAY orders, checks
			// Σ deals = balance.
			Name: marks.JobName, Spec: marks.Spec, Comment: marks.Comment, Run: marksJob.Run,
		},
		// Every 5 minutes: the dealer's P&L summaries of the hours closed since (internal/pnl).
		pnl.Job(cfg.DB),
	}
}
