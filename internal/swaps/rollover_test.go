package swaps

import (
	"testing"
	"time"
)

// The rollover clock: 17:00 New York across DST, weekends left out, the triple day tripled.
func TestDueRolloversSkipWeekendsAndTripleTheTripleDay(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name string
		at   string
		want []string
	}{
		// Wednesday 2026-11-25 17:30 New York (EST, UTC−5): the week back to Thursday the 19th.
		{"wednesday", "2026-11-25T22:30:00Z", []string{"2026-11-19", "2026-11-20", "2026-11-23", "2026-11-24", "2026-11-25"}},
		// One second before Wednesday's rollover: Wednesday is not yet due, last Wednesday is out of the window.
		{"before-17:00", "2026-11-25T21:59:59Z", []string{"2026-11-18", "2026-11-19", "2026-11-20", "2026-11-23", "2026-11-24"}},
		// Exactly at 17:00 the day is due.
		{"at-17:00", "2026-11-25T22:00:00Z", []string{"2026-11-19", "2026-11-20", "2026-11-23", "2026-11-24", "2026-11-25"}},
		// Summer time (EDT, UTC−4): 17:00 New York is 21:00 UTC.
		{"edt", "2026-07-01T21:00:00Z", []string{"2026-06-25", "2026-06-26", "2026-06-29", "2026-06-30", "2026-07-01"}},
	} {
		got, err := DueRollovers(at(c.at), 7*24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		var dates []string
		for _, r := range got {
			dates = append(dates, r.Date)
		}
		if len(dates) != len(c.want) {
			t.Fatalf("%s: due %v, want %v", c.name, dates, c.want)
		}
		for i := range dates {
			if dates[i] != c.want[i] {
				t.Fatalf("%s: due %v, want %v", c.name, dates, c.want)
			}
		}
	}
	if got, err := expiredThrough(at("2026-12-03T22:30:00Z"), 7*24*time.Hour); err != nil || got != "2026-11-26" {
		t.Fatalf("expired through %s (%v), want 2026-11-26", got, err)
	}
	for _, c := range []struct {
		day  time.Weekday
		want int
	}{{time.Monday, 1}, {time.Wednesday, 3}, {time.Friday, 1}, {time.Saturday, 0}, {time.Sunday, 0}} {
		if got := DayMultiplier(c.day, time.Wednesday); got != c.want {
			t.Errorf("%v: %d days, want %d", c.day, got, c.want)
		}
	}
}
