package feedsim

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// nextQuote reads frames until a quote of pair arrives and returns it.
func (c *wsClient) nextQuote(pair string) event {
	c.t.Helper()
	return c.until(pair+" quote", func(e event) bool { return e.Ev == "C" && e.Pair == pair })
}

func subscribed(t *testing.T, s *Server, pairs string) *wsClient {
	t.Helper()
	c := dial(t, s.URL())
	c.send("auth", "k")
	c.send("subscribe", pairs)
	c.until("subscribe ack", status("success", ""))
	return c
}

func TestSpikeSendsOneOffTickThenThePriceItLeft(t *testing.T) {
	t.Parallel()
	s, _ := startSim(t, Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	c := subscribed(t, s, "C.EUR/USD")
	if _, err := s.SetQuote("EURUSD", 1.1, 1.1002); err != nil {
		t.Fatal(err)
	}
	c.nextQuote("EUR/USD")
	code, out := post(t, s, "/control/spike", map[string]any{"symbol": "EURUSD", "pips": 300, "ms": 20})
	if code != http.StatusOK || out["pushedTo"] != 1.0 {
		t.Fatalf("spike: %d %v", code, out)
	}
	if q := c.nextQuote("EUR/USD"); q.Bid != 1.13 || q.Ask != 1.1302 {
		t.Fatalf("spike quote = %v/%v, want 1.13/1.1302", q.Bid, q.Ask)
	}
	if q := c.nextQuote("EUR/USD"); q.Bid != 1.1 || q.Ask != 1.1002 {
		t.Fatalf("after the spike = %v/%v, want the price it left 1.1/1.1002", q.Bid, q.Ask)
	}
}

// While a spike is out the walk leaves the symbol alone, so a desk sees exactly one off-market
// tick even from a simulator that quotes every few milliseconds.
func TestSpikeOnAWalkingMarketIsExactlyOneTick(t *testing.T) {
	t.Parallel()
	s, _ := startSim(t, Config{AlwaysOpen: true, MarketSeed: 42, WalkInterval: 5 * time.Millisecond}, "127.0.0.1:0")
	c := subscribed(t, s, "C.EUR/USD")
	before := c.nextQuote("EUR/USD")
	if _, err := s.Spike("EURUSD", -300, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Spike("EURUSD", 300, 0); err == nil {
		t.Fatal("a second spike while one is out was accepted")
	}
	// Read well past the spike's end; every quote but the spike stays near the market.
	off, after := 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	for {
		_, msg, err := c.conn.Read(ctx)
		if err != nil {
			break
		}
		var evs []event
		if err := json.Unmarshal(msg, &evs); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Ev != "C" {
				continue
			}
			if math.Abs(e.Bid-before.Bid) > 0.0100 {
				off++
			} else if off > 0 {
				after++
			}
		}
	}
	if off != 1 || after == 0 {
		t.Fatalf("saw %d off-market ticks and %d market ticks after, want exactly 1 and some", off, after)
	}
}

// A shift is a real gap: the walk continues from the moved price, in both walk modes.
func TestShiftPersists(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{0, 7} {
		s, _ := startSim(t, Config{AlwaysOpen: true, MarketSeed: seed, WalkInterval: 10 * time.Millisecond}, "127.0.0.1:0")
		c := subscribed(t, s, "C.EUR/USD")
		if _, err := s.SetQuote("EURUSD", 1.1, 1.1002); err != nil {
			t.Fatal(err)
		}
		if code, out := post(t, s, "/control/shift", map[string]any{"symbol": "EURUSD", "pips": 300}); code != http.StatusOK {
			t.Fatalf("shift: %d %v", code, out)
		}
		c.until("the shifted quote", func(e event) bool { return e.Ev == "C" && math.Abs(e.Bid-1.13) < 0.0005 })
		for i := range 20 {
			if q := c.nextQuote("EUR/USD"); math.Abs(q.Bid-1.13) > 0.0030 {
				t.Fatalf("seed %d: walk quote %d after the shift is %v, want near 1.13", seed, i, q.Bid)
			}
		}
	}
}

func TestOffsetQuotesOffTheMarketUntilZero(t *testing.T) {
	t.Parallel()
	s, _ := startSim(t, Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	c := subscribed(t, s, "C.EUR/USD")
	if _, err := s.SetQuote("EURUSD", 1.1, 1.1002); err != nil {
		t.Fatal(err)
	}
	c.nextQuote("EUR/USD")
	if code, out := post(t, s, "/control/offset", map[string]any{"symbol": "*", "pips": 50}); code != http.StatusOK {
		t.Fatalf("offset: %d %v", code, out)
	}
	if q := c.nextQuote("EUR/USD"); q.Bid != 1.105 || q.Ask != 1.1052 {
		t.Fatalf("offset quote = %v/%v, want 1.105/1.1052", q.Bid, q.Ask)
	}
	if bid, _, _ := s.Quote("EURUSD"); bid != 1.105 {
		t.Fatalf("Quote while offset = %v, want 1.105", bid)
	}
	// A set price is the market's: the offset still applies on top of it.
	if _, err := s.SetQuote("EURUSD", 1.2, 1.2002); err != nil {
		t.Fatal(err)
	}
	if q := c.nextQuote("EUR/USD"); q.Bid != 1.205 {
		t.Fatalf("set quote while offset = %v, want 1.205", q.Bid)
	}
	if _, err := s.Offset("EURUSD", 0); err != nil {
		t.Fatal(err)
	}
	if q := c.nextQuote("EUR/USD"); q.Bid != 1.2 || q.Ask != 1.2002 {
		t.Fatalf("offset 0 quote = %v/%v, want the market 1.2/1.2002", q.Bid, q.Ask)
	}
	for _, sym := range s.State().Symbols {
		if sym.OffsetPips != 0 && sym.Symbol != "EURUSD" && sym.OffsetPips != 50 {
			t.Fatalf("%s offset %v", sym.Symbol, sym.OffsetPips)
		}
	}
}

// Two simulators with one market seed quote the same prices at the same instant, whenever each
// started; another seed is another market; the market stays near the instrument's level.
func TestTwinsWithOneSeedAgree(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	cfg := Config{AlwaysOpen: true, DisableWalk: true, MarketSeed: 99, Now: now}
	a := New(cfg, slog.New(slog.DiscardHandler))
	clock = clock.Add(37 * time.Minute) // b starts later
	b := New(cfg, slog.New(slog.DiscardHandler))
	cfg.MarketSeed = 100
	other := New(cfg, slog.New(slog.DiscardHandler))

	rng := rand.New(rand.NewPCG(1, 2))
	differs := 0
	for range 300 {
		clock = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(7 * 24 * time.Hour))))
		for _, st := range a.order {
			sym := st.inst.Symbol
			ab, aa := step(a, sym, clock)
			bb, ba := step(b, sym, clock)
			if ab != bb || aa != ba {
				t.Fatalf("%s at %s: %v/%v and %v/%v", sym, clock, ab, aa, bb, ba)
			}
			if ob, _ := step(other, sym, clock); ob != ab {
				differs++
			}
			if mid := (ab + aa) / 2; math.Abs(mid/st.inst.Mid-1) > 0.1 {
				t.Fatalf("%s wandered to %v from %v", sym, mid, st.inst.Mid)
			}
		}
	}
	if differs == 0 {
		t.Fatal("another seed quotes the same market")
	}
}

// Two running simulators with one seed send, for every wall-clock step, the same prices: the
// desk's primary and backup agree to the pip whenever both have quoted the same step.
func TestRunningTwinsQuoteTheSameSteps(t *testing.T) {
	t.Parallel()
	cfg := Config{AlwaysOpen: true, MarketSeed: 5, WalkInterval: 20 * time.Millisecond}
	a, _ := startSim(t, cfg, "127.0.0.1:0")
	b, _ := startSim(t, cfg, "127.0.0.1:0")
	ca, cb := subscribed(t, a, "C.EUR/USD"), subscribed(t, b, "C.EUR/USD")
	byStep := map[int64]event{}
	for range 10 {
		q := ca.nextQuote("EUR/USD")
		byStep[q.T/20] = q
	}
	matched := 0
	for range 30 {
		q := cb.nextQuote("EUR/USD")
		if p, ok := byStep[q.T/20]; ok {
			matched++
			if math.Abs(p.Bid-q.Bid) >= 0.0001 || math.Abs(p.Ask-q.Ask) >= 0.0001 {
				t.Fatalf("step %d: %v/%v and %v/%v differ by a pip or more", q.T/20, p.Bid, p.Ask, q.Bid, q.Ask)
			}
		}
	}
	if matched == 0 {
		t.Fatal("the twins never quoted the same step")
	}
}

func step(s *Server, symbol string, at time.Time) (bid, ask float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.symbols[symbol]
	s.stepLocked(st, at)
	return st.bid, st.ask
}
