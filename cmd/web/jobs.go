package main

import (
	"context"
	"database/sql"
	"log/slog"

	"fxdesk/internal/alert"
	"fxdesk/internal/desk"
	"fxdesk/internal/metrics"
	"fxdesk/internal/schedule"
	"fxdesk/internal/swaps"
	"fxdesk/internal/tick"
)

// inlineScheduler is CRON_MODE=inline: the scheduled money jobs run inside the web process that
// holds the lease, with the engine's own prices, and a pin goes straight to the engine (there is
// no follower to relay it). It is made on the holder only. The jobs are idempotent, so running
// them on a follower web as well would be safe, but useless: a follower has no prices, so every
// rollover would park as pending and its pins would reach no engine.
func inlineScheduler(db *sql.DB, quotes *desk.Quotes, engine *tick.Engine, inbox *alert.Inbox, m *metrics.Metrics, tag string, log *slog.Logger) (*schedule.Scheduler, error) {
	prices := func() tick.Prices { return quotes }
	return schedule.New(log, schedule.NewYork(),
		swaps.MoneyJobs(swaps.MoneyJobsConfig{DB: db, Prices: prices, Pins: enginePins{engine}, Alerts: inbox, Metrics: m, By: tag}, log)...)
}

// enginePins hands the legs the swap job lacks to the tick engine as the "pinned" source; each
// run passes the whole set its pending charges still need, so a settled leg is let go.
type enginePins struct{ engine *tick.Engine }

func (p enginePins) Pin(_ context.Context, legs ...string) error {
	return p.engine.SetSource("pinned", legs)
}
