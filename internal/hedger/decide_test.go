package hedger

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shopspring/decimal"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func decPtr(s string) *decimal.Decimal {
	d := dec(s)
	return &d
}

// eurusd is EURUSD with a B-book of deskLots and a hedge book of the hedger's positions (units).
func eurusd(deskLots string, positions ...HedgePosition) State {
	s := State{Symbol: "EURUSD", DeskLots: dec(deskLots), ContractSize: dec("100000"), Positions: positions}
	for _, p := range positions {
		s.HedgeUnits = s.HedgeUnits.Add(p.Units)
	}
	return s
}

func pos(id int64, units string) HedgePosition { return HedgePosition{ID: id, Units: dec(units)} }

// tenLots is a limit of 10 lots with a band of 2 and a minimum hedge of 0.5 lots.
var tenLots = Limit{Max: decPtr("10"), Band: dec("2"), Min: dec("0.5")}

// describe renders a decision with its decimals by value, so that 1.50 and 1.5 compare equal.
func describe(d Decision) string {
	return fmt.Sprintf("%s %s units=%s position=%d net=%s after=%s limit=%s breached=%t",
		d.Symbol, d.Kind, d.Units, d.PositionID, d.Net, d.NetAfter, d.LimitUnits, d.Breached)
}

func requireDecision(t *testing.T, got Decision, want string) {
	t.Helper()
	if g := describe(got); g != want {
		t.Fatalf("decision:\n\t%s (%s)\nwant:\n\t%s", g, got.Reason, want)
	}
}

func TestInsideTheLimitNothingIsSent(t *testing.T) {
	t.Parallel()
	// Traders net long 10 lots, the desk short 10: exactly at the limit is inside it.
	for _, lots := range []string{"0", "-3", "7.5", "-10", "10"} {
		requireDecision(t, Decide(eurusd(lots), tenLots),
			fmt.Sprintf("EURUSD nothing units=0 position=0 net=%s after=%s limit=1000000 breached=false",
				dec(lots).Mul(dec("100000")), dec(lots).Mul(dec("100000"))))
	}
}

func TestPastTheLimitOneOrderBringsTheNetToTheLimitLessTheBand(t *testing.T) {
	t.Parallel()
	// Traders net long 12 lots: the desk is short 12, 2 past its limit; it buys 4 lots at the
	// venue and is left short 8 (the limit less the band).
	requireDecision(t, Decide(eurusd("-12"), tenLots),
		"EURUSD open units=400000 position=0 net=-1200000 after=-800000 limit=1000000 breached=false")
	// Traders net short 15 lots: the desk sells 7 at the venue and is left long 8.
	requireDecision(t, Decide(eurusd("15"), tenLots),
		"EURUSD open units=-700000 position=0 net=1500000 after=800000 limit=1000000 breached=false")
	// With a hedge already held, only what is past the limit again is added.
	requireDecision(t, Decide(eurusd("-14.5", pos(1, "400000")), tenLots),
		"EURUSD open units=250000 position=0 net=-1050000 after=-800000 limit=1000000 breached=false")
}

func TestAfterAHedgeTheBandKeepsTheNextTickFromTrading(t *testing.T) {
	t.Parallel()
	// Hedged to −8 lots; the traders' exposure moves a little either way inside the band and the
	// limit: nothing, and closing the hedge would carry the net past the target.
	for _, lots := range []string{"-12", "-12.0001", "-11.9999", "-13.9", "-10.5"} {
		d := Decide(eurusd(lots, pos(1, "400000")), tenLots)
		if d.Kind != Nothing {
			t.Fatalf("desk %s lots hedged by 4: %s (%s), want nothing", lots, describe(d), d.Reason)
		}
	}
	// Without the band the same exposure past the limit by a hair trades again at once; with
	// it, only once the net is past the limit itself.
	requireDecision(t, Decide(eurusd("-14.0001", pos(1, "400000")), tenLots),
		"EURUSD open units=200010 position=0 net=-1000010 after=-800000 limit=1000000 breached=false")
}

func TestAnOrderUnderTheMinimumSizeIsRaisedToItOrNotSent(t *testing.T) {
	t.Parallel()
	// A band smaller than the minimum: 0.1 lot past a limit with no band would be a 0.1-lot
	// order; it is raised to the 1-lot minimum, which lands deeper inside the limit.
	small := Limit{Max: decPtr("10"), Band: dec("0"), Min: dec("1")}
	requireDecision(t, Decide(eurusd("-10.1"), small),
		"EURUSD open units=100000 position=0 net=-1010000 after=-910000 limit=1000000 breached=false")
	// A minimum bigger than the limit's whole width cannot land inside it: nothing is sent and
	// the breach is reported.
	wide := Limit{Max: decPtr("1"), Band: dec("0.5"), Min: dec("5")}
	requireDecision(t, Decide(eurusd("-1.2"), wide),
		"EURUSD nothing units=0 position=0 net=-120000 after=-120000 limit=100000 breached=true")
}

func TestAnUnknownOutcomeBlocksTheSymbolUntilResolved(t *testing.T) {
	t.Parallel()
	// A hedge order SENDING (its answer never came, or it is in flight): nothing is sent, even
	// far past the limit — it may have filled. The breach is reported.
	s := eurusd("-30")
	s.Unresolved = 1
	requireDecision(t, Decide(s, tenLots),
		"EURUSD nothing units=0 position=0 net=-3000000 after=-3000000 limit=1000000 breached=true")
	// Inside the limit it is no breach, and still nothing moves.
	s = eurusd("-2", pos(1, "400000"))
	s.Unresolved = 2
	requireDecision(t, Decide(s, tenLots),
		"EURUSD nothing units=0 position=0 net=200000 after=200000 limit=1000000 breached=false")
}

func TestWhenTheExposureFallsTheHedgeUnwinds(t *testing.T) {
	t.Parallel()
	// Hedged 4 lots against a desk short 12; traders close 5 lots: the desk is short 7, the
	// hedge no longer needed — without it the net is −7, inside the target of 8. Closed whole.
	requireDecision(t, Decide(eurusd("-7", pos(1, "400000")), tenLots),
		"EURUSD close units=-400000 position=1 net=-300000 after=-700000 limit=1000000 breached=false")
	// Two hedges: the largest whose close stays within the target goes (3 lots would leave
	// −8.5, past 8; 2 lots leaves −7.5)...
	requireDecision(t, Decide(eurusd("-10.5", pos(1, "300000"), pos(2, "200000")), tenLots),
		"EURUSD close units=-200000 position=2 net=-550000 after=-750000 limit=1000000 breached=false")
	// ...and of two that fit, the larger.
	requireDecision(t, Decide(eurusd("-9", pos(1, "300000"), pos(2, "200000")), tenLots),
		"EURUSD close units=-300000 position=1 net=-400000 after=-700000 limit=1000000 breached=false")
	// Traders now short on balance: the desk long 9 with a 4-lot buy hedge from before is long
	// 13, past the limit; the hedge adds to it and closing it lands at 9... past the target,
	// so a sell is sent instead — and the buy hedge is closed once that lands within the target.
	requireDecision(t, Decide(eurusd("9", pos(1, "400000")), tenLots),
		"EURUSD open units=-500000 position=0 net=1300000 after=800000 limit=1000000 breached=false")
	requireDecision(t, Decide(eurusd("4", pos(1, "400000")), tenLots),
		"EURUSD close units=-400000 position=1 net=800000 after=400000 limit=1000000 breached=false")
	// A hedge a routing rule opened (HEDGE n%) counts in the net but is never the hedger's to
	// close.
	s := eurusd("-1")
	s.HedgeUnits = dec("50000")
	requireDecision(t, Decide(s, tenLots),
		"EURUSD nothing units=0 position=0 net=-50000 after=-50000 limit=1000000 breached=false")
}

func TestOrdersAreWholeVenueUnits(t *testing.T) {
	t.Parallel()
	// A contract of 1 unit per lot (lots of 4 decimals are fractions of a unit): the order is
	// rounded up to whole units, landing just inside the target.
	s := State{Symbol: "BTCUSD", DeskLots: dec("-12.3456"), ContractSize: dec("1")}
	requireDecision(t, Decide(s, Limit{Max: decPtr("10"), Band: dec("1"), Min: dec("0.01")}),
		"BTCUSD open units=4 position=0 net=-12.3456 after=-8.3456 limit=10 breached=false")
	// A minimum of a fraction of a unit is one whole unit.
	requireDecision(t, Decide(State{Symbol: "BTCUSD", DeskLots: dec("10.2"), ContractSize: dec("1")},
		Limit{Max: decPtr("10"), Band: dec("0"), Min: dec("0.01")}),
		"BTCUSD open units=-1 position=0 net=10.2 after=9.2 limit=10 breached=false")
}

func TestASymbolWithoutALimitIsNeverHedged(t *testing.T) {
	t.Parallel()
	noLimit := Limit{Band: dec("2"), Min: dec("0.5")}
	requireDecision(t, Decide(eurusd("-500", pos(1, "400000")), noLimit),
		"EURUSD nothing units=0 position=0 net=0 after=0 limit=0 breached=false")
}

func TestALimitOfZeroHedgesEverythingPastTheMinimum(t *testing.T) {
	t.Parallel()
	zero := Limit{Max: decPtr("0"), Band: dec("0"), Min: dec("0.01")}
	requireDecision(t, Decide(eurusd("-3.25"), zero),
		"EURUSD open units=325000 position=0 net=-325000 after=0 limit=0 breached=false")
}

// TestDecisionsAlwaysLandInsideTheLimit draws random books and terms: every order lands inside
// the limit (an Open at or inside the target), a decision applied and asked again never opens a
// second hedge, and applying decisions until there is nothing to do ends inside the limit unless
// a breach was reported.
func TestDecisionsAlwaysLandInsideTheLimit(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 7))
	lots := func(max int) decimal.Decimal { return decimal.New(int64(r.IntN(2*max*100+1)-max*100), -2) }
	for i := range 20000 {
		l := Limit{Max: decPtr(decimal.New(int64(r.IntN(3000)), -2).String()), Band: decimal.New(int64(r.IntN(500)), -2), Min: decimal.New(int64(r.IntN(300)), -2)}
		s := State{Symbol: "EURUSD", DeskLots: lots(50), ContractSize: dec([]string{"100000", "100", "1000", "1"}[r.IntN(4)])}
		var next int64 = 1
		for range r.IntN(4) {
			p := HedgePosition{ID: next, Units: lots(20).Mul(s.ContractSize).Round(0)}
			next++
			s.Positions = append(s.Positions, p)
			s.HedgeUnits = s.HedgeUnits.Add(p.Units)
		}
		limit := l.Max.Mul(s.ContractSize)
		target := decimal.Max(l.Max.Sub(l.Band), decimal.Zero).Mul(s.ContractSize)
		opens := 0
		for step := 0; ; step++ {
			d := Decide(s, l)
			if step > 20 {
				t.Fatalf("seed %d case %d: no end after 20 orders: %+v %+v", seed, i, s, l)
			}
			if d.Kind == Nothing {
				if !d.Breached && d.Net.Abs().GreaterThan(limit) {
					t.Fatalf("seed %d case %d: nothing done past the limit and no breach reported: %s", seed, i, describe(d))
				}
				break
			}
			if d.NetAfter.Abs().GreaterThan(limit) {
				t.Fatalf("seed %d case %d: the order lands outside the limit: %s", seed, i, describe(d))
			}
			switch d.Kind {
			case Open:
				opens++
				if opens > 1 {
					t.Fatalf("seed %d case %d: a second hedge opened after the first: %s", seed, i, describe(d))
				}
				// At or inside the target on the net's own side; past zero only when raised to the
				// minimum, and then inside the limit (checked above).
				if !d.Units.Equal(d.Units.Round(0)) || d.NetAfter.Abs().GreaterThan(target) && d.NetAfter.Sign() == d.Net.Sign() {
					t.Fatalf("seed %d case %d: the open is not whole units to the target: %s", seed, i, describe(d))
				}
				s.Positions = append(s.Positions, HedgePosition{ID: next, Units: d.Units})
				next++
			case Close:
				if d.NetAfter.Abs().GreaterThan(target) {
					t.Fatalf("seed %d case %d: the close lands outside the target: %s", seed, i, describe(d))
				}
				s.Positions = slices.DeleteFunc(s.Positions, func(p HedgePosition) bool { return p.ID == d.PositionID })
			}
			s.HedgeUnits = s.HedgeUnits.Add(d.Units)
		}
	}
}

// TestTheWorkedExample is docs/routing.md's worked example, step by step.
func TestTheWorkedExample(t *testing.T) {
	t.Parallel()
	steps := []struct {
		clientsLong string
		want        string
	}{
		{"12", "EURUSD open units=400000 position=0 net=-1200000 after=-800000 limit=1000000 breached=false"},
		{"13.5", "EURUSD nothing units=0 position=0 net=-950000 after=-950000 limit=1000000 breached=false"},
		{"14.5", "EURUSD open units=250000 position=0 net=-1050000 after=-800000 limit=1000000 breached=false"},
		{"7.5", "EURUSD close units=-400000 position=1 net=-100000 after=-500000 limit=1000000 breached=false"},
		{"7.5", "EURUSD close units=-250000 position=2 net=-500000 after=-750000 limit=1000000 breached=false"},
		{"7.5", "EURUSD nothing units=0 position=0 net=-750000 after=-750000 limit=1000000 breached=false"},
	}
	var book []HedgePosition
	var next int64 = 1
	for i, step := range steps {
		d := Decide(eurusd(dec(step.clientsLong).Neg().String(), book...), tenLots)
		if got := describe(d); got != step.want {
			t.Fatalf("step %d: %s (%s)\nwant %s", i+1, got, d.Reason, step.want)
		}
		switch d.Kind {
		case Open:
			book = append(book, HedgePosition{ID: next, Units: d.Units})
			next++
		case Close:
			book = slices.DeleteFunc(book, func(p HedgePosition) bool { return p.ID == d.PositionID })
		}
	}
}
