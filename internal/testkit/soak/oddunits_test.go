package soak

import (
	"slices"
	"testing"
	"time"

	"fxdesk/internal/testkit/soak/invariant"
)

// The odd-unit fills come on the FIX lane only, on the seeds whose venue knobs say OddUnits,
// from a generator of their own: every other fault of a seed is where and what it was without
// them, and each is odd units below most of the load's orders.
func TestOddUnitsComeOnlyOnFIXSeedsThatDrawThemAndMoveNoOtherFault(t *testing.T) {
	with, without := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		fix := schedule(seed, 90*time.Second, clusterChoice{}, invariant.LaneFIX)
		odd := 0
		for _, f := range fix {
			if f.Kind != faultVenueOddUnits {
				continue // the other lanes equal the REST lane's (lostreply_test.go)
			}
			odd++
			if f.Units%1000 != 345 || f.Units > 12345 || f.Count < 1 || f.Count > 3 || f.At < 12*time.Second {
				t.Fatalf("seed %d: %s", seed, f)
			}
		}
		if want := fixVenueKnobsOf(seed).OddUnits; want != (odd > 0) {
			t.Fatalf("seed %d: knobs %s, %d odd-unit faults", seed, fixVenueKnobsOf(seed), odd)
		}
		if odd > 0 {
			with++
		} else {
			without++
		}
		rest := schedule(seed, 90*time.Second, clusterChoice{}, invariant.LaneREST)
		if slices.ContainsFunc(rest, func(f fault) bool { return f.Kind == faultVenueOddUnits }) {
			t.Fatalf("seed %d: odd units on the REST lane", seed)
		}
	}
	if with == 0 || without == 0 {
		t.Fatalf("%d seeds with odd units, %d without", with, without)
	}
}

// The knobs become cmd/fixvenue's flags: executions per fill, and how the venue names its own
// orders.
func TestFIXVenueKnobsBecomeTheVenuesFlags(t *testing.T) {
	got := fixVenueKnobs{ExecutionsPerFill: 3, NumericClOrdIDs: true, OddUnits: true}.venueArgs()
	if !slices.Equal(got, []string{"-executions", "3", "-own-clordids", "numeric"}) {
		t.Fatalf("venue args %q", got)
	}
	if got := (fixVenueKnobs{ExecutionsPerFill: 1}).venueArgs(); !slices.Equal(got, []string{"-executions", "1", "-own-clordids", "prefixed"}) {
		t.Fatalf("venue args %q", got)
	}
}
