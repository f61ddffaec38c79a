package fx

import (
	"testing"
	"time"
)

// The rollover is 17:00 New York on both sides of a DST change; "next" is strictly after and
// "last" is at or before.
func TestRolloverIs1700NewYorkAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := NewYork()
	if err != nil {
		t.Fatal(err)
	}
	parse := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02T15:04:05", s, ny)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct{ at, next, last string }{
		{"2026-03-02T16:59:00", "2026-03-02T17:00:00", "2026-03-01T17:00:00"},
		{"2026-03-02T17:00:00", "2026-03-03T17:00:00", "2026-03-02T17:00:00"},
		{"2026-03-07T23:00:00", "2026-03-08T17:00:00", "2026-03-07T17:00:00"}, // across the DST change
		{"2026-11-01T12:00:00", "2026-11-01T17:00:00", "2026-10-31T17:00:00"}, // and back
	} {
		at := parse(tc.at)
		next, err := NextRollover(at)
		if err != nil || !next.At.Equal(parse(tc.next)) || next.Date != tc.next[:10] {
			t.Errorf("NextRollover(%s) = %s %s (%v), want %s", tc.at, next.Date, next.At.In(ny), err, tc.next)
		}
		last, err := LastRollover(at)
		if err != nil || !last.At.Equal(parse(tc.last)) || last.Date != tc.last[:10] {
			t.Errorf("LastRollover(%s) = %s %s (%v), want %s", tc.at, last.Date, last.At.In(ny), err, tc.last)
		}
		if last.Weekday() != parse(tc.last).Weekday() {
			t.Errorf("LastRollover(%s).Weekday() = %s, want %s", tc.at, last.Weekday(), parse(tc.last).Weekday())
		}
	}
	// Read from UTC, the instant still names the New York date.
	if r, err := LastRollover(time.Date(2026, 7, 1, 21, 0, 0, 0, time.UTC)); err != nil || r.Date != "2026-07-01" {
		t.Errorf("LastRollover(21:00Z, EDT) = %s (%v), want 2026-07-01", r.Date, err)
	}
}
