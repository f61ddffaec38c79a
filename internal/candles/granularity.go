package candles

import (
	"time"

	"fxdesk/internal/fx"
)

// Granularity is a candle's length.
type Granularity uint8

const (
	M1 Granularity = iota // one minute, aligned to UTC minutes
	M5                    // five minutes, aligned to UTC multiples of five minutes
	H1                    // one hour, aligned to UTC hours (New York's offset is whole hours)
	D1                    // one trading day: 17:00 New York to 17:00 New York
	numGranularities
)

var granularityNames = [numGranularities]string{M1: "M1", M5: "M5", H1: "H1", D1: "D1"}

// fixedLength is the length of the granularities aligned to multiples of it since the epoch.
var fixedLength = [numGranularities]time.Duration{M1: time.Minute, M5: 5 * time.Minute, H1: time.Hour}

// Granularities lists every granularity, shortest first.
func Granularities() []Granularity { return []Granularity{M1, M5, H1, D1} }

func (g Granularity) String() string {
	if g < numGranularities {
		return granularityNames[g]
	}
	return "?"
}

// ParseGranularity reads M1, M5, H1 or D1.
func ParseGranularity(s string) (Granularity, bool) {
	for g, name := range granularityNames {
		if name == s {
			return Granularity(g), true
		}
	}
	return 0, false
}

// ShortestLength is the least time between two opens of g: its length, or 23 hours for D1 (the
// day the clocks go forward in New York). A span of n × ShortestLength holds at most n opens.
func (g Granularity) ShortestLength() time.Duration {
	if g == D1 {
		return 23 * time.Hour
	}
	return fixedLength[g]
}

// Bounds returns the open and the end (excluded) of g's candle that holds t.
func (g Granularity) Bounds(t time.Time) (open, end time.Time) {
	if g == D1 {
		// LastRollover fails only when the embedded zone database is missing, which NewBuilder
		// and NewReader refuse at construction.
		r, _ := fx.LastRollover(t)
		return r.At.UTC(), r.Next().At.UTC()
	}
	n := fixedLength[g].Milliseconds()
	ms := t.UnixMilli()
	o := ms - ms%n
	if ms < 0 && ms%n != 0 {
		o -= n
	}
	return time.UnixMilli(o).UTC(), time.UnixMilli(o + n).UTC()
}

// checkZone reports whether D1's zone is usable.
func checkZone() error {
	_, err := fx.NewYork()
	return err
}
