package feedsim

import (
	"hash/fnv"
	"math"
	"time"
)

// marketOctaves is how many scales of noise make up a market-seed walk. Octave o moves once every
// 2^o walk steps with a step √(2^o) times the instrument's volatility, so the sum behaves like a
// random walk up to 2^(marketOctaves-1) steps (about 20 minutes at the default 300ms) and stays
// bounded beyond: a simulator left running for days still quotes plausible prices.
const marketOctaves = 12

// marketMidLocked is the market-seed mid of st at now: a deterministic function of (MarketSeed,
// symbol, wall-clock step), constant within a step. Two simulators with the same MarketSeed and
// WalkInterval compute the same value at the same instant, whenever each was started and
// whichever process it runs in; and since both quote at each step's start (walkMarket), their
// last quotes agree at any moment but the few milliseconds after a step begins.
func (s *Server) marketMidLocked(st *symbolState, now time.Time) float64 {
	x := float64(s.marketStep(now))
	dev := 0.0
	for o := range marketOctaves {
		span := float64(uint64(1) << o)
		k := math.Floor(x / span)
		frac := x/span - k
		g0 := s.noise(st.symHash, uint64(o), int64(k))
		g1 := s.noise(st.symHash, uint64(o), int64(k)+1)
		dev += math.Sqrt(span) * (g0 + (g1-g0)*frac)
	}
	return st.inst.Mid * (1 + st.inst.Volatility*dev)
}

// marketSpreadLocked is the spread at now: the instrument's, widened on one step in twenty as a
// real market's occasionally is, drawn from the same seed so two twins widen together.
func (s *Server) marketSpreadLocked(st *symbolState, now time.Time) float64 {
	k := s.marketStep(now)
	h := mix(s.cfg.MarketSeed ^ st.symHash ^ mix(uint64(k)^0xabcdef))
	if h%20 != 0 {
		return st.inst.Spread
	}
	return st.inst.Spread * (1 + 2*unit(mix(h)))
}

// marketStep is the number of the wall-clock step now falls in.
func (s *Server) marketStep(now time.Time) int64 {
	ms := max(1, s.cfg.WalkInterval.Milliseconds())
	t := now.UnixMilli()
	if t < 0 {
		return (t - ms + 1) / ms
	}
	return t / ms
}

// nextStep is when the step after now begins.
func (s *Server) nextStep(now time.Time) time.Time {
	ms := max(1, s.cfg.WalkInterval.Milliseconds())
	return time.UnixMilli((s.marketStep(now) + 1) * ms)
}

// noise is a standard-ish normal number for one knot of one octave: the Irwin–Hall sum of four
// uniforms, centred and scaled. Its tails are bounded (±3.5), which a simulator wants: no step
// ever looks like the spike the desk's filter exists for.
func (s *Server) noise(symHash, octave uint64, knot int64) float64 {
	h := mix(s.cfg.MarketSeed ^ mix(symHash^mix(octave+0x51)^mix(uint64(knot))))
	sum := 0.0
	for range 4 {
		h = mix(h)
		sum += unit(h)
	}
	return (sum - 2) * math.Sqrt(3)
}

// mix is splitmix64's finaliser: a cheap, well-spread 64-bit hash.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

func symbolHash(symbol string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(symbol))
	return h.Sum64()
}

// PipSize is a pip of an instrument quoted with digits decimals: 0.0001 at 5, 0.01 at 3, 0.1 for
// gold's 2. The spike, shift and offset controls count in these pips.
func PipSize(digits int) float64 { return math.Pow10(-(digits - 1)) }
