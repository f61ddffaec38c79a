package swaps

import (
	"time"
	_ "time/tzdata" // rollovers are 17:00 New York wherever the desk runs
)

// newYork is where the rollover clock lives.
var newYork = func() *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic("tzdata for America/New_York is embedded; " + err.Error())
	}
	return loc
}()

// Rollover is one daily rollover: the New York calendar date and its 17:00 instant.
type Rollover struct {
	Date string    // 2006-01-02, New York
	At   time.Time // 17:00 New York that day
}

// Weekday is the New York weekday of the rollover.
func (r Rollover) Weekday() time.Weekday { return r.At.In(newYork).Weekday() }

// rolloverOn is 17:00 New York on the given New York date (DST-correct).
func rolloverOn(y int, m time.Month, d int) Rollover {
	at := time.Date(y, m, d, 17, 0, 0, 0, newYork)
	return Rollover{Date: at.Format("2006-01-02"), At: at}
}

// LastRollover is the latest rollover instant at or before t, whatever the weekday.
func LastRollover(t time.Time) Rollover {
	l := t.In(newYork)
	r := rolloverOn(l.Year(), l.Month(), l.Day())
	if r.At.After(t) {
		r = rolloverOn(l.Year(), l.Month(), l.Day()-1)
	}
	return r
}

// DueRollovers lists the rollovers that charge something and whose instant lies in
// (at − window, at], oldest first. Saturday and Sunday rollovers charge nothing for FX and are
// left out.
func DueRollovers(at time.Time, window time.Duration) []Rollover {
	var out []Rollover
	for r := LastRollover(at); r.At.After(at.Add(-window)); {
		if wd := r.Weekday(); wd != time.Saturday && wd != time.Sunday {
			out = append(out, r)
		}
		l := r.At.In(newYork)
		r = rolloverOn(l.Year(), l.Month(), l.Day()-1)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
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
func expiredThrough(at time.Time, window time.Duration) string {
	return LastRollover(at.Add(-window)).Date
}
