package pnl

import (
	"testing"
	"time"
)

// A bound with nanoseconds becomes the first millisecond at or after it, which selects the same
// rows of a millisecond column; a whole millisecond stays put, in UTC.
func TestColumnTime(t *testing.T) {
	t.Parallel()
	ny := time.FixedZone("EST", -5*3600)
	for _, c := range []struct{ in, want time.Time }{
		{time.Date(2026, 1, 5, 17, 0, 0, 911692686, ny), time.Date(2026, 1, 5, 22, 0, 0, 912000000, time.UTC)},
		{time.Date(2026, 1, 5, 22, 0, 0, 911000000, time.UTC), time.Date(2026, 1, 5, 22, 0, 0, 911000000, time.UTC)},
		{time.Date(2026, 1, 5, 22, 0, 0, 1, time.UTC), time.Date(2026, 1, 5, 22, 0, 0, 1000000, time.UTC)},
	} {
		if got := columnTime(c.in); !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("columnTime(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
