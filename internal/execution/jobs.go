package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"fxdesk/internal/gate"
)

// Jobs runs the holder's two venue jobs, runFxExecutionReconciler and runFxHedgeMonitor — the one
// home of when they run. They run on the lease holder and nowhere else (two desks over one
// broker account would replay the same fills): each run passes the gate, and only a process with
// a venue starts them. They run once at once (First: boot, or lease_restored after a takeover),
// on the first confirmed cycle after every gap, and every Every — one run at a time, so two runs
// of a job never overlap.
type Jobs struct {
	Reconciler *Reconciler
	Hedge      *HedgeMonitor
	Every      time.Duration
	// First is the reason of the run at once ("" for none).
	First string
	// Restored receives once per first confirmed cycle after a gap (desk.VenueRestored).
	Restored <-chan struct{}
	// Sizing, when set, resizes the venue executor before every scheduled reconciliation (and,
	// paced, once as the jobs start: an unpaced holder sized it before its risk engine started).
	Sizing *Sizing
	Log    *slog.Logger
}

// Run runs the jobs until ctx ends. A run dropped at the gate has been logged and counted there;
// any other failure is logged and the job runs again at the next interval.
func (j *Jobs) Run(ctx context.Context) error {
	if j.Reconciler == nil || j.Hedge == nil || j.Every <= 0 || j.Log == nil {
		return fmt.Errorf("venue jobs: reconciler, hedge monitor, interval and log are required")
	}
	if j.Sizing != nil {
		defer j.Sizing.Wait() // a warm-up ends with the jobs, before the executor is closed
		if j.Sizing.Paced {
			j.Sizing.Resize(ctx)
		}
	}
	run := func(reason string) {
		if reason == "scheduled" && j.Sizing != nil {
			j.Sizing.Resize(ctx)
		}
		_, err := j.Reconciler.Reconcile(ctx, reason)
		j.failed(ctx, "runFxExecutionReconciler", reason, err)
		j.failed(ctx, "runFxHedgeMonitor", reason, j.Hedge.Check(ctx))
	}
	if j.First != "" {
		run(j.First)
	}
	t := time.NewTicker(j.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-j.Restored:
			run("lease_restored")
		case <-t.C:
			run("scheduled")
		}
	}
}

func (j *Jobs) failed(ctx context.Context, job, reason string, err error) {
	if err != nil && !errors.Is(err, gate.ErrNotHolder) && ctx.Err() == nil {
		j.Log.WarnContext(ctx, "venue job failed; it runs again next interval", slog.String("job", job),
			slog.String("reason", reason), slog.Any("err", err))
	}
}
