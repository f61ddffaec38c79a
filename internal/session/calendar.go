package session

import (
	"fmt"
	"slices"
	"time"

	// The zone database travels inside the binary so that a minimal host (a scratch container,
	// a CI runner without zoneinfo) computes the same session edges as a developer laptop.
	_ "time/tzdata"
)

// NewYork is the zone every default calendar is written in.
const NewYork = "America/New_York"

const (
	day  = 24 * time.Hour
	week = 7 * day
)

// WeekTime is a wall-clock point in the week: a weekday and an offset into that day, read in the
// calendar's zone. At runs from 0 to 24h inclusive; 24h is the following midnight.
type WeekTime struct {
	Day time.Weekday
	At  time.Duration
}

func (w WeekTime) offset() time.Duration { return time.Duration(w.Day)*day + w.At }

// String renders the form ParseWeekTime reads, e.g. "Sun 17:00".
func (w WeekTime) String() string {
	return w.Day.String()[:3] + " " + formatClock(w.At)
}

// Window is one open interval of the weekly schedule, [Open, Close). A Close earlier in the week
// than Open wraps over the Saturday→Sunday boundary; Close equal to Open is open all week.
type Window struct {
	Open, Close WeekTime
}

func (w Window) contains(off time.Duration) bool {
	o, c := w.Open.offset(), w.Close.offset()
	switch {
	case o < c:
		return off >= o && off < c
	case o > c:
		return off >= o || off < c
	default:
		return true
	}
}

// Holiday closes the calendar on one local date, from From until To (wall clock). Year 0 repeats
// every year (25 December). A whole-day closure is From 0, To 24h; an early close is From at the
// closing time and To 24h.
type Holiday struct {
	Year  int
	Month time.Month
	Day   int
	From  time.Duration
	To    time.Duration
}

func (h Holiday) on(y int, m time.Month, d int) bool {
	return (h.Year == 0 || h.Year == y) && h.Month == m && h.Day == d
}

// ClosedAllDay is a holiday on which the calendar does not open at all.
func ClosedAllDay(year int, month time.Month, dayOfMonth int) Holiday {
	return Holiday{Year: year, Month: month, Day: dayOfMonth, From: 0, To: day}
}

// ClosesEarly is a holiday on which the calendar closes at the given wall-clock time.
func ClosesEarly(year int, month time.Month, dayOfMonth int, at time.Duration) Holiday {
	return Holiday{Year: year, Month: month, Day: dayOfMonth, From: at, To: day}
}

// Calendar is an immutable trading-session calendar; it is safe for concurrent use.
type Calendar struct {
	name       string
	loc        *time.Location
	windows    []Window
	holidays   []Holiday
	alwaysOpen bool
}

// New builds a calendar in the named IANA zone. Windows must use offsets within a day (0–24h);
// holidays must name a real month and day and close a non-empty part of it.
func New(name, timezone string, windows []Window, holidays []Holiday) (*Calendar, error) {
	if name == "" {
		return nil, fmt.Errorf("calendar: empty name")
	}
	loc, err := time.LoadLocation(timezone)
	if err != nil {
		return nil, fmt.Errorf("calendar %q: load zone %q: %w", name, timezone, err)
	}
	if len(windows) == 0 {
		return nil, fmt.Errorf("calendar %q: no open windows (a calendar that never opens is a configuration error)", name)
	}
	for i, w := range windows {
		for _, wt := range []WeekTime{w.Open, w.Close} {
			if wt.Day < time.Sunday || wt.Day > time.Saturday || wt.At < 0 || wt.At > day {
				return nil, fmt.Errorf("calendar %q: window %d: %v is outside the week", name, i, wt)
			}
		}
	}
	for i, h := range holidays {
		if h.Month < time.January || h.Month > time.December || h.Day < 1 || h.Day > 31 {
			return nil, fmt.Errorf("calendar %q: holiday %d: no such date %d-%02d-%02d", name, i, h.Year, h.Month, h.Day)
		}
		if h.From < 0 || h.To > day || h.From >= h.To {
			return nil, fmt.Errorf("calendar %q: holiday %d: closed span %s–%s is empty or outside the day",
				name, i, formatClock(h.From), formatClock(h.To))
		}
	}
	return &Calendar{
		name:     name,
		loc:      loc,
		windows:  slices.Clone(windows),
		holidays: slices.Clone(holidays),
	}, nil
}

// AlwaysOpen is the calendar used when FXDESK_CALENDAR=always-open: it never closes, so demos and
// tests run on a weekend. NextChange reports the zero time.
func AlwaysOpen() *Calendar {
	loc, err := time.LoadLocation(NewYork)
	if err != nil {
		// Cannot happen: the zone database is embedded in the binary.
		panic(fmt.Sprintf("session: embedded zone %s missing: %v", NewYork, err))
	}
	return &Calendar{name: "always-open", loc: loc, alwaysOpen: true}
}

// Forex is the default FX calendar: Sunday 17:00 to Friday 17:00 New York, closed on 25 December
// and 1 January.
func Forex() *Calendar {
	return mustNew("forex", NewYork,
		[]Window{{Open: WeekTime{time.Sunday, 17 * time.Hour}, Close: WeekTime{time.Friday, 17 * time.Hour}}},
		defaultHolidays())
}

// Metals is the default spot-metals calendar: Sunday 18:00 to Friday 17:00 New York with a daily
// 17:00–18:00 maintenance break Monday to Thursday, closed on 25 December and 1 January.
func Metals() *Calendar {
	var windows []Window
	for d := time.Sunday; d < time.Friday; d++ {
		windows = append(windows, Window{
			Open:  WeekTime{d, 18 * time.Hour},
			Close: WeekTime{d + 1, 17 * time.Hour},
		})
	}
	return mustNew("metals", NewYork, windows, defaultHolidays())
}

func defaultHolidays() []Holiday {
	return []Holiday{ClosedAllDay(0, time.December, 25), ClosedAllDay(0, time.January, 1)}
}

func mustNew(name, tz string, windows []Window, holidays []Holiday) *Calendar {
	c, err := New(name, tz, windows, holidays)
	if err != nil {
		// The defaults are constants of this package; failing here is a programming error.
		panic(err)
	}
	return c
}

// Name is the calendar's registry name ("forex", "metals", "always-open").
func (c *Calendar) Name() string { return c.name }

// Location is the zone the schedule is written in.
func (c *Calendar) Location() *time.Location { return c.loc }

// Windows returns a copy of the weekly schedule.
func (c *Calendar) Windows() []Window { return slices.Clone(c.windows) }

// Holidays returns a copy of the holidays.
func (c *Calendar) Holidays() []Holiday { return slices.Clone(c.holidays) }

// IsOpen reports whether the session is open at t.
func (c *Calendar) IsOpen(t time.Time) bool {
	if c.alwaysOpen {
		return true
	}
	lt := t.In(c.loc)
	tod := clockOf(lt)
	off := time.Duration(lt.Weekday())*day + tod
	open := false
	for _, w := range c.windows {
		if w.contains(off) {
			open = true
			break
		}
	}
	if !open {
		return false
	}
	y, m, d := lt.Date()
	for _, h := range c.holidays {
		if h.on(y, m, d) && tod >= h.From && tod < h.To {
			return false
		}
	}
	return true
}

// searchDays bounds NextChange: a calendar that does not change state within a year (only a
// misconfigured one) reports the zero time rather than looping.
const searchDays = 400

// NextChange returns the first instant after t at which IsOpen gives a different answer than at
// t, or the zero time if it never changes (AlwaysOpen).
func (c *Calendar) NextChange(t time.Time) time.Time {
	if c.alwaysOpen {
		return time.Time{}
	}
	state := c.IsOpen(t)
	lt := t.In(c.loc)
	y, m, d := lt.Date()
	var cands []time.Time
	for i := range searchDays {
		date := time.Date(y, m, d+i, 0, 0, 0, 0, c.loc)
		dy, dm, dd := date.Date()
		at := func(off time.Duration) time.Time {
			// time.Date normalises wall-clock fields before applying the zone, so 17:00 lands on
			// 17:00 local even on a 23- or 25-hour day.
			return time.Date(dy, dm, dd, 0, 0, 0, int(off), c.loc)
		}
		cands = cands[:0]
		for _, w := range c.windows {
			for _, wt := range []WeekTime{w.Open, w.Close} {
				if wt.Day == date.Weekday() {
					cands = append(cands, at(wt.At))
				}
			}
		}
		for _, h := range c.holidays {
			if h.on(dy, dm, dd) {
				cands = append(cands, at(h.From), at(h.To))
			}
		}
		slices.SortFunc(cands, func(a, b time.Time) int { return a.Compare(b) })
		for _, cand := range cands {
			if cand.After(t) && c.IsOpen(cand) != state {
				return cand
			}
		}
	}
	return time.Time{}
}

func clockOf(t time.Time) time.Duration {
	h, m, s := t.Clock()
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second +
		time.Duration(t.Nanosecond())
}

func formatClock(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
