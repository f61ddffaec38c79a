package swaps

import (
	"time"

	"fxdesk/internal/fx"
)

// DueRollovers lists the rollovers that charge something and whose instant lies in
// (at − window, at], oldest first. Saturday and Sunday rollovers charge nothing for FX and are
// left out.
func DueRollovers(at time.Time, window time.Duration) ([]fx.Rollover, error) {
	last, err := fx.LastRollover(at)
	if err != nil {
		return nil, err
	}
	var out []fx.Rollover
	for r := last; r.At.After(at.Add(-window)); r = r.Previous() {
		if wd := r.Weekday(); wd != time.Saturday && wd != time.Sunday {
			out = append(out, r)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// DayMultiplier is how many days a rollover on weekday charges for an instrument whose triple
// day is triple: 3 on the triple day (it carries the weekend), 0 on Saturday and Sunday, 1 on
// every other day.
func DayMultiplier(weekday, triple time.Weekday) int {
	switch {
	case weekday == time.Saturday || weekday == time.Sunday:
		return 0
	case weekday == triple:
		return 3
	}
	return 1
}

// expiredThrough is the latest rollover date whose charge has expired at: its instant is at
// least window before at. Pending charges dated on or before it expire.
func expiredThrough(at time.Time, window time.Duration) (string, error) {
	r, err := fx.LastRollover(at.Add(-window))
	return r.Date, err
}
