package session

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The text forms below are what fx_session_calendar stores, so an operator can read and edit a
// calendar with plain SQL:
//
//	weeklySchedule: [{"open":"Sun 17:00","close":"Fri 17:00"}]
//	holidays:       [{"date":"12-25"},{"date":"2025-12-24","closedFrom":"13:00"}]
//
// A holiday date is "MM-DD" (every year) or "YYYY-MM-DD"; closedFrom defaults to "00:00" and
// closedTo to "24:00".

type windowText struct {
	Open  string `json:"open"`
	Close string `json:"close"`
}

type holidayText struct {
	Date       string `json:"date"`
	ClosedFrom string `json:"closedFrom,omitempty"`
	ClosedTo   string `json:"closedTo,omitempty"`
}

// FromText builds a calendar from its stored form (see the package's text format).
func FromText(name, timezone, weeklySchedule, holidays string) (*Calendar, error) {
	ws, err := ParseSchedule(weeklySchedule)
	if err != nil {
		return nil, fmt.Errorf("calendar %q: %w", name, err)
	}
	hs, err := ParseHolidays(holidays)
	if err != nil {
		return nil, fmt.Errorf("calendar %q: %w", name, err)
	}
	return New(name, timezone, ws, hs)
}

// ParseSchedule reads a weekly schedule such as [{"open":"Sun 17:00","close":"Fri 17:00"}].
func ParseSchedule(text string) ([]Window, error) {
	var raw []windowText
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("parse weekly schedule: %w", err)
	}
	out := make([]Window, 0, len(raw))
	for i, r := range raw {
		o, err := ParseWeekTime(r.Open)
		if err != nil {
			return nil, fmt.Errorf("weekly schedule window %d open: %w", i, err)
		}
		c, err := ParseWeekTime(r.Close)
		if err != nil {
			return nil, fmt.Errorf("weekly schedule window %d close: %w", i, err)
		}
		out = append(out, Window{Open: o, Close: c})
	}
	return out, nil
}

// ParseHolidays reads holidays such as [{"date":"12-25"},{"date":"2025-12-24","closedFrom":"13:00"}].
// Empty text means no holidays.
func ParseHolidays(text string) ([]Holiday, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var raw []holidayText
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("parse holidays: %w", err)
	}
	out := make([]Holiday, 0, len(raw))
	for i, r := range raw {
		h := Holiday{From: 0, To: day}
		parts := strings.Split(r.Date, "-")
		var nums []int
		for _, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, fmt.Errorf("holiday %d: date %q is not YYYY-MM-DD or MM-DD", i, r.Date)
			}
			nums = append(nums, n)
		}
		switch len(nums) {
		case 2:
			h.Month, h.Day = time.Month(nums[0]), nums[1]
		case 3:
			h.Year, h.Month, h.Day = nums[0], time.Month(nums[1]), nums[2]
		default:
			return nil, fmt.Errorf("holiday %d: date %q is not YYYY-MM-DD or MM-DD", i, r.Date)
		}
		var err error
		if r.ClosedFrom != "" {
			if h.From, err = parseClock(r.ClosedFrom); err != nil {
				return nil, fmt.Errorf("holiday %d closedFrom: %w", i, err)
			}
		}
		if r.ClosedTo != "" {
			if h.To, err = parseClock(r.ClosedTo); err != nil {
				return nil, fmt.Errorf("holiday %d closedTo: %w", i, err)
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// ScheduleText renders the calendar's weekly schedule in the stored form.
func (c *Calendar) ScheduleText() string {
	raw := make([]windowText, 0, len(c.windows))
	for _, w := range c.windows {
		raw = append(raw, windowText{Open: w.Open.String(), Close: w.Close.String()})
	}
	b, _ := json.Marshal(raw) // plain strings cannot fail to marshal
	return string(b)
}

// HolidaysText renders the calendar's holidays in the stored form.
func (c *Calendar) HolidaysText() string {
	raw := make([]holidayText, 0, len(c.holidays))
	for _, h := range c.holidays {
		t := holidayText{Date: fmt.Sprintf("%02d-%02d", int(h.Month), h.Day)}
		if h.Year != 0 {
			t.Date = fmt.Sprintf("%04d-%s", h.Year, t.Date)
		}
		if h.From != 0 {
			t.ClosedFrom = formatClock(h.From)
		}
		if h.To != day {
			t.ClosedTo = formatClock(h.To)
		}
		raw = append(raw, t)
	}
	b, _ := json.Marshal(raw)
	return string(b)
}

// parseWeekday reads a three-letter English weekday in any case.
func parseWeekday(s string) (time.Weekday, bool) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(s, d.String()[:3]) {
			return d, true
		}
	}
	return 0, false
}

// ParseWeekTime reads "Sun 17:00" (a three-letter weekday, any case, and a 24-hour clock).
func ParseWeekTime(s string) (WeekTime, error) {
	dayText, clockText, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return WeekTime{}, fmt.Errorf("week time %q: want a weekday and a time, like \"Sun 17:00\"", s)
	}
	d, ok := parseWeekday(dayText)
	if !ok {
		return WeekTime{}, fmt.Errorf("week time %q: unknown weekday %q", s, dayText)
	}
	at, err := parseClock(strings.TrimSpace(clockText))
	if err != nil {
		return WeekTime{}, fmt.Errorf("week time %q: %w", s, err)
	}
	return WeekTime{Day: d, At: at}, nil
}

func parseClock(s string) (time.Duration, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if !ok || err1 != nil || err2 != nil || h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("time of day %q: want HH:MM between 00:00 and 24:00", s)
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, nil
}
