package main

import (
	"context"
	"time"

	"fxdesk/internal/mirror"
	"fxdesk/internal/reconcile"
	"fxdesk/internal/schedule"
	"fxdesk/internal/swaps"
	"fxdesk/internal/tick"
)

// venueJobs are registered in the scheduler so that the decision about them is visible: they
// drive an execution provider's broker connection, and two desks over one broker account replay
// the same fills, so they run on the lease holder every 60 s and the scheduler declines them once
// an execution provider is enabled or external in-flight state exists. On a pure B-book desk
// they are silent no-ops here and there.
func venueJobs(externalExecution func(context.Context) (bool, error)) []schedule.Job {
	decline := func(name string) func(context.Context, time.Time) (schedule.Result, error) {
		return func(ctx context.Context, _ time.Time) (schedule.Result, error) {
			external, err := externalExecution(ctx)
			if err != nil {
				return nil, err
			}
			if external {
				return nil, declinedVenue
			}
			return nil, nil
		}
	}
	return []schedule.Job{
		{
			Name: "runFxExecutionReconciler", Spec: "@every 60s",
			// Every minute: declined here, runs on the lease holder (broker fills must not be replayed twice).
			Comment: "every 60 s: declined here; the lease holder reconciles venue orders",
			Run:     decline("runFxExecutionReconciler"),
		},
		{
			Name: "runFxHedgeMonitor", Spec: "@every 60s",
			// Every minute: declined here, runs on the lease holder (one broker connection per account).
			Comment: "every 60 s: declined here; the lease holder monitors venue hedges",
			Run:     decline("runFxHedgeMonitor"),
		},
	}
}

var declinedVenue = declineError("two desks over one broker account replay the same fills and lose sync cursors; the lease holder runs this job every 60 s")

type declineError string

func (d declineError) Error() string { return "declined: " + string(d) }
func (d declineError) Unwrap() error { return schedule.ErrDeclined }

// deskJobs are the money jobs, run here with the quote mirror's prices (and inline in
// fxdesk-web with the engine's). Both are idempotent by construction: a second run, a second
// process or a crash half-way never charges or marks twice.
func deskJobs(swapJob *swaps.Job, reconcileJob *reconcile.Job) []schedule.Job {
	return []schedule.Job{
		{
			// Hourly: charges the 17:00 New York rollover once per position and date, retries pending charges.
			Name: swaps.JobName, Spec: swaps.Spec,
			Comment: swaps.Comment, Run: swapJob.Run,
		},
		{
			// Every 5 minutes: marks equity and used margin, expires GTD/DAY orders, checks Σ deals = balance.
			Name: reconcile.JobName, Spec: reconcile.Spec,
			Comment: reconcile.Comment, Run: reconcileJob.Run,
		},
	}
}

// mirrorPrices is the follower seen as the desk's price view: a mid it serves is quoting, and a
// symbol it refuses (absent, or too old while its session is open) has no price here.
type mirrorPrices struct{ f *mirror.Follower }

func (m mirrorPrices) LastTick(symbol string) (tick.Quote, bool) { return m.f.LastTick(symbol) }

func (m mirrorPrices) SymbolState(symbol string) tick.State {
	if _, ok := m.f.LastTick(symbol); ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}
