package main

import (
	"context"
	"database/sql"
	"log/slog"

	"fxdesk/internal/alert"
	"fxdesk/internal/desk"
	"fxdesk/internal/reconcile"
	"fxdesk/internal/schedule"
	"fxdesk/internal/swaps"
	"fxdesk/internal/tick"
	"fxdesk/internal/trading"
)

// inlineScheduler is CRON_MODE=inline: the scheduled money jobs run inside the web process that
// holds the lease, with the engine's own prices, and a pin goes straight to the engine (there is
// no follower to relay it). It is started on the holder only. The jobs are idempotent, so
// running them on a follower web as well would be safe, but useless: a follower has no prices,
// so every rollover would park as pending and its pins would reach no engine.
func inlineScheduler(db *sql.DB, quotes *desk.Quotes, engine *tick.Engine, log *slog.Logger) (*schedule.Scheduler, error) {
	log = log.With(slog.String("component", "CRON"))
	inbox := alert.NewInbox(db, log)
	prices := func() trading.Prices { return quotes }
	swapJob := swaps.New(swaps.Config{DB: db, Prices: prices, Pins: enginePins{engine}, Alerts: inbox}, log)
	reconcileJob := reconcile.New(reconcile.Config{DB: db, Prices: prices, Alerts: inbox}, log)
	return schedule.New(log, schedule.NewYork(),
		// Hourly: charges the 17:00 New York rollover once per position and date, retries pending charges.
		schedule.Job{Name: swaps.JobName, Spec: swaps.Spec, Comment: swaps.Comment, Run: swapJob.Run},
		// Every 5 minutes: marks equity and used margin, expires GTD/DAY orders, checks Σ deals = balance.
		schedule.Job{Name: reconcile.JobName, Spec: reconcile.Spec, Comment: reconcile.Comment, Run: reconcileJob.Run},
	)
}

// enginePins hands the legs the swap job lacks to the tick engine as the "pinned" source; each
// run passes the whole set its pending charges still need, so a settled leg is let go.
type enginePins struct{ engine *tick.Engine }

func (p enginePins) Pin(_ context.Context, legs ...string) error {
	return p.engine.SetSource("pinned", legs)
}
