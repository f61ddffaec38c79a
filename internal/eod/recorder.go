package eod

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// RecordEvery is how often the lease holder's recorder looks for a rollover that has just passed:
// the closing prices it captures are at most this much later than the rollover.
const RecordEvery = 10 * time.Second

// Recorder captures each rollover's closing prices on the lease holder, from the holder's own
// engine, so that a day is frozen at its own prices even when the cron process was down at its
// rollover. The cron process's on-time run captures them too; the first capture wins.
type Recorder struct {
	DB     *sql.DB
	Prices tick.Prices
	By     string
	Log    *slog.Logger
	// OnTimeFor bounds how late after a rollover a capture is still its close (DefaultOnTimeFor).
	OnTimeFor time.Duration
	done      string // the last day this recorder captured
}

// Run captures each weekday rollover as it passes, until ctx ends. A failed capture is logged and
// tried again on the next look.
func (r *Recorder) Run(ctx context.Context) error {
	t := time.NewTicker(RecordEvery)
	defer t.Stop()
	for {
		if _, err := r.CaptureDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			r.Log.WarnContext(ctx, "end of day: cannot capture the closing prices; trying again", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// CaptureDue captures the closing prices of the last rollover at or before now when it closed a
// weekday, is less than OnTimeFor old and this recorder has not captured it yet. It returns how
// many prices it offered.
func (r *Recorder) CaptureDue(ctx context.Context, now time.Time) (int, error) {
	onTime := r.OnTimeFor
	if onTime <= 0 {
		onTime = DefaultOnTimeFor
	}
	day, err := fx.LastRollover(now)
	if err != nil {
		return 0, err
	}
	if wd := day.Weekday(); wd == time.Saturday || wd == time.Sunday || day.Date == r.done || now.Sub(day.At) >= onTime {
		return 0, nil
	}
	n, err := Capture(ctx, r.DB, day, r.Prices, r.By)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		r.done = day.Date
		r.Log.InfoContext(ctx, "end of day: closing prices captured", slog.String("tradingDay", day.Date), slog.Int("prices", n))
	}
	return n, nil
}
