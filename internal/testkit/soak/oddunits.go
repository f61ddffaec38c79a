package soak

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/fixvenue"
)

// Odd units (FIX lane, seeds whose venue knobs say OddUnits; docs/soak.md, «The FIX lane»): now
// and then the venue can fill only odd units (12,345) of the next orders, the bundled venue's
// "partial" fault. The desk sends fill-or-kill, so such an order is cancelled with nothing
// executed: the desk must book none of it (no position, deal or journal execution of odd units;
// venueFillsBooked, venueExecutionsBooked and venueNetMatches hold it to that) and must not
// round what a venue did fill to lots.

// faultVenueOddUnits is the fault's kind, as the schedule and the summary name it. It is a venue
// fault (the venue's control plays it, its window is a venue window) on a lane of its own.
const faultVenueOddUnits = "venueOddUnits"

// oddUnitsSchedule draws the odd-unit faults of a FIX soak of d from seed, from a generator of
// their own (so every other lane's schedule is what it was): from 12 s in, 6–12 s apart, each for
// the next 1–3 orders, of 1,345 … 12,345 units (below most of the load's orders, 5,000 to
// 100,000 units: a FOK order of more is cancelled whole).
func oddUnitsSchedule(seed uint64, d time.Duration) []fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x0dd5))
	return drawLane(rng, []string{faultVenueOddUnits}, 12*time.Second, 6000*time.Millisecond, 6000, d, func(f *fault) {
		f.Count = 1 + rng.IntN(3)
		f.Units = int64(345 + 1000*(1+rng.IntN(12)))
	})
}

// injectOddUnits has the venue fill only f.Units of the next f.Count orders.
func (v *fixLane) injectOddUnits(f fault) (string, error) {
	units := decimal.NewFromInt(f.Units)
	if err := controlPost(v.control, "/control/fault", map[string]any{"kind": fixvenue.FaultPartial, "count": f.Count, "units": units}, nil); err != nil {
		return "", err
	}
	v.used(fixPartial)
	return fmt.Sprintf("fix partial: the venue can fill only %s units of the next %d orders (a FOK order of more is cancelled)", units, f.Count), nil
}
