package fx

import (
	"fmt"
	"sync"
	"time"
	_ "time/tzdata" // the rollover is 17:00 New York wherever the desk runs
)

// RolloverZone is where the trading day ends: every rollover (swaps, DAY orders, the scheduler's
// clock) is 17:00 in this zone.
const RolloverZone = "America/New_York"

// rolloverHour is the local hour of the rollover in RolloverZone.
const rolloverHour = 17

var loadNewYork = sync.OnceValues(func() (*time.Location, error) {
	loc, err := time.LoadLocation(RolloverZone)
	if err != nil {
		return nil, fmt.Errorf("load rollover zone %s: %w", RolloverZone, err)
	}
	return loc, nil
})

// NewYork is the rollover zone. The zone database is embedded, so an error means a broken
// build; it is returned rather than replaced by a guess such as UTC.
func NewYork() (*time.Location, error) { return loadNewYork() }

// Rollover is one daily rollover: the New York calendar date and its 17:00 instant
// (DST-correct).
type Rollover struct {
	Date string    // 2006-01-02, New York
	At   time.Time // 17:00 New York that day
}

// Weekday is the New York weekday of the rollover.
func (r Rollover) Weekday() time.Weekday { return r.At.Weekday() }

// Previous is the rollover of the New York day before r, whatever its weekday.
func (r Rollover) Previous() Rollover {
	return rolloverOn(r.At.Year(), r.At.Month(), r.At.Day()-1, r.At.Location())
}

// Next is the rollover of the New York day after r, whatever its weekday.
func (r Rollover) Next() Rollover {
	return rolloverOn(r.At.Year(), r.At.Month(), r.At.Day()+1, r.At.Location())
}

func rolloverOn(y int, m time.Month, d int, ny *time.Location) Rollover {
	at := time.Date(y, m, d, rolloverHour, 0, 0, 0, ny)
	return Rollover{Date: at.Format("2006-01-02"), At: at}
}

// LastRollover is the latest rollover at or before t, whatever the weekday.
func LastRollover(t time.Time) (Rollover, error) {
	ny, err := NewYork()
	if err != nil {
		return Rollover{}, err
	}
	l := t.In(ny)
	r := rolloverOn(l.Year(), l.Month(), l.Day(), ny)
	if r.At.After(t) {
		r = r.Previous()
	}
	return r, nil
}

// NextRollover is the first rollover strictly after t, whatever the weekday.
func NextRollover(t time.Time) (Rollover, error) {
	r, err := LastRollover(t)
	if err != nil {
		return Rollover{}, err
	}
	return r.Next(), nil
}
