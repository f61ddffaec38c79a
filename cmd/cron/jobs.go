package main

import (
	"context"
	"time"

	"fxdesk/internal/schedule"
)

// venueJobs are registered in the scheduler so that the decision about them is visible: they
// drive an execution provider's broker connection, and two desks over one broker account replay
// the same fills, so they run on the lease holder every 60 s and the scheduler declines them once
// an execution provider is enabled or external in-flight state exists. On a pure B-book desk
// they are silent no-ops here and there.
func venueJobs(externalExecution func(context.Context) (bool, error)) []schedule.Job {
	decline := func() func(context.Context, time.Time) (schedule.Result, error) {
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
			Comment: "every 60 s: declined here; the lease holder reconciles venue orders every FXDESK_VENUE_INTERVAL",
			Run:     decline(),
		},
		{
			Name: "runFxHedgeMonitor", Spec: "@every 60s",
			// Every minute: declined here, runs on the lease holder (one broker connection per account).
			Comment: "every 60 s: declined here; the lease holder checks the venue's margin and exposure every FXDESK_VENUE_INTERVAL",
			Run:     decline(),
		},
	}
}

var declinedVenue = declineError("two desks over one broker account replay the same fills and lose sync cursors; the lease holder runs this job every FXDESK_VENUE_INTERVAL (60 s by default)")

type declineError string

func (d declineError) Error() string { return "declined: " + string(d) }
func (d declineError) Unwrap() error { return schedule.ErrDeclined }
