package soak

import (
	"slices"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/testkit/soak/invariant"
)

func TestTallyKeepsOneRowPerViolationKeyWithItsLatestText(t *testing.T) {
	tl := newTally()
	first := invariant.Result{Name: "no5xx", Figures: "1 request"}
	first.Add("5xx from 7", "1 answers 500")
	tl.add([]invariant.Result{first, {Name: "ledger", Figures: "1 account"}})
	later := invariant.Result{Name: "no5xx", Figures: "2 requests"}
	later.Add("5xx from 7", "2 answers 500")
	later.Add("", "another row")
	tl.add([]invariant.Result{later})
	if tl.checks != 2 || tl.violations() != 2 || tl.figures["no5xx"] != "2 requests" {
		t.Fatalf("checks %d, violations %d, figures %q; want 2, 2, the latest", tl.checks, tl.violations(), tl.figures["no5xx"])
	}
	if got := tl.broken["no5xx"]; got[0] != "2 answers 500" || got[1] != "another row" {
		t.Fatalf("rows %q: the episode's row must carry its latest text, the new row follow it", got)
	}
	if strings.Join(tl.order, ",") != "no5xx,ledger" {
		t.Fatalf("order %v: invariants are reported in the order first seen", tl.order)
	}
}

// The rollover runs walk consecutive weekday rollovers from the first after the soak began, a
// weekend's rollovers left out (they close no day), and only one of them is left to the next.
func TestRolloverWalkStepsThroughConsecutiveWeekdayRolloversFromTheNext(t *testing.T) {
	for _, tc := range []struct {
		name string
		now  time.Time
		want []string
	}{
		// Friday 7 March 2025, before and after its rollover (22:00 UTC; New York moves to
		// daylight time on the 9th, so Monday's is at 21:00 UTC).
		{"a Friday morning", time.Date(2025, 3, 7, 12, 0, 0, 0, time.UTC), []string{"2025-03-07", "2025-03-10", "2025-03-11", "2025-03-12"}},
		{"a Friday after its rollover", time.Date(2025, 3, 7, 22, 0, 1, 0, time.UTC), []string{"2025-03-10", "2025-03-11", "2025-03-12", "2025-03-13"}},
		{"a Sunday", time.Date(2025, 3, 9, 12, 0, 0, 0, time.UTC), []string{"2025-03-10", "2025-03-11", "2025-03-12", "2025-03-13"}},
		{"a Thursday evening", time.Date(2025, 3, 13, 23, 0, 0, 0, time.UTC), []string{"2025-03-14", "2025-03-17", "2025-03-18", "2025-03-19"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := newRolloverWalk(tc.now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for range tc.want {
				r := w.step()
				if h, m, _ := r.At.In(newYork(t)).Clock(); h != 17 || m != 0 {
					t.Fatalf("rollover %s at %s New York, not 17:00", r.Date, r.At.In(newYork(t)))
				}
				got = append(got, r.Date)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("walked %v; want %v", got, tc.want)
			}
		})
	}
	w, _ := newRolloverWalk(time.Now())
	for range 2 {
		if !w.skipDue() {
			t.Fatal("a day is to be left to the next rollover until one was")
		}
	}
	w.skipDone()
	if w.skipDue() {
		t.Fatal("one day left to the next rollover is enough")
	}
}

func newYork(t *testing.T) *time.Location {
	t.Helper()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	return ny
}

// The price lane draws from a generator of its own: a seed's other faults stay what they were,
// and a 60 s soak plays every price fault kind once.
func TestPriceLaneKeepsTheOtherLanesAndPlaysEveryKind(t *testing.T) {
	for _, seed := range []uint64{1, 7, 42} {
		all := schedule(seed, time.Minute, clusterChoice{}, invariant.LaneREST)
		var others []fault
		seen := map[string]int{}
		for _, f := range all {
			if isPriceFault(f.Kind) {
				seen[f.Kind]++
				continue
			}
			others = append(others, f)
		}
		want := slices.Concat(processSchedule(seed, time.Minute), venueSchedule(seed, time.Minute), frontDoorSchedule(seed, time.Minute))
		if len(others) != len(want) {
			t.Fatalf("seed %d: %d faults besides the price lane's, want %d", seed, len(others), len(want))
		}
		for _, k := range priceFaultKinds {
			if seen[k] == 0 {
				t.Fatalf("seed %d: no %s in a 60 s soak: %v", seed, k, seen)
			}
		}
	}
}
