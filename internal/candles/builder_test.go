package candles

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// directOpen is the open of g's candle holding t, computed from the definition rather than by
// Bounds: UTC minutes and hours by truncation, D1 the last 17:00 in New York.
func directOpen(t *testing.T, g Granularity, at time.Time) time.Time {
	switch g {
	case M1:
		return at.UTC().Truncate(time.Minute)
	case M5:
		return at.UTC().Truncate(5 * time.Minute)
	case H1:
		return at.UTC().Truncate(time.Hour)
	}
	ny := newYork(t)
	l := at.In(ny)
	open := time.Date(l.Year(), l.Month(), l.Day(), 17, 0, 0, 0, ny)
	if l.Before(open) {
		open = time.Date(l.Year(), l.Month(), l.Day()-1, 17, 0, 0, 0, ny)
	}
	return open.UTC()
}

var loadNewYork = sync.OnceValues(func() (*time.Location, error) { return time.LoadLocation("America/New_York") })

func newYork(t *testing.T) *time.Location {
	ny, err := loadNewYork()
	if err != nil {
		t.Fatal(err)
	}
	return ny
}

type key struct {
	symbol string
	g      Granularity
	open   int64
}

type tickIn struct {
	symbol   string
	bid, ask float64
	at       time.Time
}

// direct computes every candle of ticks at once: the first and last price, the extremes and the
// count of the ticks whose times fall in each period.
func direct(t *testing.T, ticks []tickIn) map[key]Candle {
	out := map[key]Candle{}
	for _, tk := range ticks {
		for _, g := range Granularities() {
			open := directOpen(t, g, tk.at)
			k := key{tk.symbol, g, open.UnixMilli()}
			c, ok := out[k]
			if !ok {
				c = Candle{Symbol: tk.symbol, Granularity: g, OpenTime: open,
					Bid: OHLC{tk.bid, tk.bid, tk.bid, tk.bid}, Ask: OHLC{tk.ask, tk.ask, tk.ask, tk.ask}}
			}
			c.Bid.High, c.Bid.Low, c.Bid.Close = math.Max(c.Bid.High, tk.bid), math.Min(c.Bid.Low, tk.bid), tk.bid
			c.Ask.High, c.Ask.Low, c.Ask.Close = math.Max(c.Ask.High, tk.ask), math.Min(c.Ask.Low, tk.ask), tk.ask
			c.Ticks++
			out[k] = c
		}
	}
	return out
}

// store applies rows as fx_candle's upsert does: a new candle inserted, a stored one keeping its
// opens, widened to the new extremes, taking the new closes and adding the new ticks.
func store(db map[key]Candle, rows []Row) {
	for _, r := range rows {
		k := key{r.Symbol, r.Granularity, r.OpenTime.UnixMilli()}
		c, ok := db[k]
		if !ok {
			c = r.Candle
			c.Ticks = r.NewTicks
			db[k] = c
			continue
		}
		c.Bid.High, c.Bid.Low, c.Bid.Close = math.Max(c.Bid.High, r.Bid.High), math.Min(c.Bid.Low, r.Bid.Low), r.Bid.Close
		c.Ask.High, c.Ask.Low, c.Ask.Close = math.Max(c.Ask.High, r.Ask.High), math.Min(c.Ask.Low, r.Ask.Low), r.Ask.Close
		c.Ticks += r.NewTicks
		db[k] = c
	}
}

// randomStream is n ticks of a few symbols in time order: mostly sub-second steps, sometimes a
// jump of minutes, hours or a weekend, so streams cross every kind of boundary (DST changes
// included, from the start dates); prices rounded to five decimals as a feed quotes them.
func randomStream(rng *rand.Rand, n int) []tickIn {
	symbols := []string{"EURUSD", "USDJPY", "GBPUSD"}
	starts := []time.Time{
		time.Date(2026, 3, 6, 20, 58, 0, 0, time.UTC),  // the Friday before New York's spring change
		time.Date(2026, 10, 30, 20, 0, 0, 0, time.UTC), // the Friday before its autumn change
		time.Date(2026, 12, 4, 21, 59, 59, 0, time.UTC),
	}
	at := starts[rng.IntN(len(starts))]
	mid := map[string]float64{"EURUSD": 1.08, "USDJPY": 150.0, "GBPUSD": 1.27}
	out := make([]tickIn, 0, n)
	for range n {
		switch r := rng.IntN(100); {
		case r < 80:
			at = at.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		case r < 95:
			at = at.Add(time.Duration(rng.IntN(20)) * time.Minute)
		case r < 99:
			at = at.Add(time.Duration(rng.IntN(30)) * time.Hour)
		default:
			at = at.Add(48 * time.Hour)
		}
		s := symbols[rng.IntN(len(symbols))]
		mid[s] *= 1 + (rng.Float64()-0.5)*0.002
		spread := mid[s] * 0.00005 * float64(1+rng.IntN(3))
		bid := math.Round((mid[s]-spread/2)*1e5) / 1e5
		ask := math.Round((mid[s]+spread/2)*1e5) / 1e5
		out = append(out, tickIn{s, bid, ask, at})
	}
	return out
}

// Random tick streams, built into candles with flushes at random moments and stored as the
// upsert stores them, give exactly the candles computed directly from the whole stream, at
// every granularity.
func TestBuilderMatchesDirectComputation(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 38))
		ticks := randomStream(rng, 1+rng.IntN(3000))
		b, err := NewBuilder(0)
		if err != nil {
			t.Fatal(err)
		}
		db := map[key]Candle{}
		// A flush takes its rows, writes them while ticks keep coming (the Writer's reader
		// does not wait for the database), and then marks them written.
		var inFlight []Row
		for _, tk := range ticks {
			b.Add(tk.symbol, tk.bid, tk.ask, tk.at)
			switch {
			case inFlight == nil && rng.IntN(50) == 0:
				inFlight = b.Pending()
				// Sometimes a flush writes only its first statement's rows before failing.
				if rng.IntN(4) == 0 && len(inFlight) > 1 {
					inFlight = inFlight[:rng.IntN(len(inFlight))]
				}
			case inFlight != nil && rng.IntN(5) == 0:
				store(db, inFlight)
				b.Flushed(inFlight)
				inFlight = nil
			}
		}
		store(db, inFlight)
		b.Flushed(inFlight)
		rows := b.Pending()
		store(db, rows)
		b.Flushed(rows)
		if left := b.Pending(); len(left) != 0 {
			t.Fatalf("seed %d: %d candles still pending after a full flush", seed, len(left))
		}
		want := direct(t, ticks)
		if len(db) != len(want) {
			t.Fatalf("seed %d: %d candles stored, %d computed directly", seed, len(db), len(want))
		}
		for k, w := range want {
			if got := db[k]; got != w {
				t.Fatalf("seed %d: candle %s %s %s:\n got %+v\nwant %+v", seed, k.symbol, k.g, time.UnixMilli(k.open).UTC(), got, w)
			}
		}
	}
}

// Flushes that fail — the statement never reached the table, or it committed and then the
// connection died — never leave a published price out of its candle once a later flush
// succeeds: highs, lows, opens and closes as computed directly, ticks at least the true count
// (a committed-then-failed statement's ticks are counted again, as docs/candles.md says).
func TestFailedFlushesNeverLoseAPrice(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 71))
		ticks := randomStream(rng, 1+rng.IntN(3000))
		b, err := NewBuilder(0)
		if err != nil {
			t.Fatal(err)
		}
		db := map[key]Candle{}
		var inFlight []Row
		for _, tk := range ticks {
			b.Add(tk.symbol, tk.bid, tk.ask, tk.at)
			switch {
			case inFlight == nil && rng.IntN(20) == 0:
				inFlight = b.Pending()
			case inFlight != nil && rng.IntN(5) == 0:
				switch rng.IntN(3) {
				case 0:
					store(db, inFlight)
					b.Flushed(inFlight)
				case 1: // failed: nothing written
				case 2: // committed, then the connection died
					store(db, inFlight)
				}
				inFlight = nil
			}
		}
		rows := b.Pending()
		store(db, rows)
		b.Flushed(rows)
		for k, w := range direct(t, ticks) {
			got := db[k]
			if got.Bid.High != w.Bid.High || got.Bid.Low != w.Bid.Low || got.Ask.High != w.Ask.High || got.Ask.Low != w.Ask.Low ||
				got.Bid.Open != w.Bid.Open || got.Bid.Close != w.Bid.Close || got.Ticks < w.Ticks {
				t.Fatalf("seed %d: %v\n got %+v\nwant %+v", seed, k, got, w)
			}
		}
	}
}

// The periods' edges, ticked exactly on them: a tick at an open starts the new candle, one a
// millisecond before it ends the old one; D1 turns at 17:00 New York in winter (22:00 UTC) and
// in summer (21:00 UTC).
func TestBoundsAtTheEdges(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		g         Granularity
		at        string
		open, end string
	}{
		{M1, "2026-12-07T10:00:00Z", "2026-12-07T10:00:00Z", "2026-12-07T10:01:00Z"},
		{M1, "2026-12-07T09:59:59.999Z", "2026-12-07T09:59:00Z", "2026-12-07T10:00:00Z"},
		{M5, "2026-12-07T10:04:59.999Z", "2026-12-07T10:00:00Z", "2026-12-07T10:05:00Z"},
		{M5, "2026-12-07T10:05:00Z", "2026-12-07T10:05:00Z", "2026-12-07T10:10:00Z"},
		{H1, "2026-12-07T10:59:59.999Z", "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z"},
		{D1, "2026-12-07T21:59:59.999Z", "2026-12-06T22:00:00Z", "2026-12-07T22:00:00Z"}, // winter: EST
		{D1, "2026-12-07T22:00:00Z", "2026-12-07T22:00:00Z", "2026-12-08T22:00:00Z"},
		{D1, "2026-07-07T21:00:00Z", "2026-07-07T21:00:00Z", "2026-07-08T21:00:00Z"}, // summer: EDT
		{D1, "2026-03-08T12:00:00Z", "2026-03-07T22:00:00Z", "2026-03-08T21:00:00Z"}, // the 23-hour day
	} {
		open, end := c.g.Bounds(utc(c.at))
		if !open.Equal(utc(c.open)) || !end.Equal(utc(c.end)) {
			t.Errorf("%s at %s: [%s, %s), want [%s, %s)", c.g, c.at, open, end, c.open, c.end)
		}
	}
}

// A tick stamped before the open candle (the wall clock stepped back) counts in the open candle
// instead of opening an older one the database may already hold.
func TestATickFromThePastCountsInTheOpenCandle(t *testing.T) {
	t.Parallel()
	b, err := NewBuilder(0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 10, 1, 0, 0, time.UTC)
	b.Add("EURUSD", 1.1, 1.2, at)
	b.Add("EURUSD", 1.0, 1.3, at.Add(-30*time.Second))
	c, ok := b.Open("EURUSD", M1)
	if !ok || !c.OpenTime.Equal(at) || c.Ticks != 2 || c.Bid.Low != 1.0 || c.Ask.High != 1.3 {
		t.Fatalf("open M1 candle %+v %v", c, ok)
	}
	if rows := b.Pending(); len(rows) != 4 {
		t.Fatalf("pending %d rows, want one open candle per granularity", len(rows))
	}
}

// Past MaxCompleted the oldest unwritten completed candles go, counted.
func TestBuilderBoundsItsUnwrittenCandles(t *testing.T) {
	t.Parallel()
	b, err := NewBuilder(3)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for i := range 6 {
		b.Add("EURUSD", 1.1, 1.2, at.Add(time.Duration(i)*time.Minute))
	}
	// Five M1 candles completed (the sixth is open), M5 completed one: six completed, three kept.
	if b.Lost() != 3 {
		t.Fatalf("lost %d, want 3", b.Lost())
	}
	if rows := b.Pending(); len(rows) != 3+4 {
		t.Fatalf("pending %d rows, want 3 completed and 4 open", len(rows))
	}
}

// The builder's cost per published tick: four granularities updated, no allocation.
func BenchmarkBuilderAdd(b *testing.B) {
	bl, err := NewBuilder(0)
	if err != nil {
		b.Fatal(err)
	}
	symbols := []string{"EURUSD", "USDJPY", "GBPUSD", "AUDUSD", "USDCHF", "USDCAD", "NZDUSD", "EURJPY"}
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// 20 ms between ticks: a new M1 candle per symbol every 3,000 ticks, as a busy feed opens them.
		bl.Add(symbols[i%len(symbols)], 1.08, 1.0801, at.Add(time.Duration(i)*20*time.Millisecond))
		i++
		if i%100_000 == 0 {
			bl.Flushed(bl.Pending())
		}
	}
}
