package mirror_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"fxdesk/internal/mirror"
	"fxdesk/internal/tick"
)

// frozenSource reads like the tick engine does between ticks: LastTick is a lock-free map read
// (the engine's is an atomic index load, a map read and an atomic quote load) and Wanted clones
// an already sorted list.
type frozenSource struct {
	q      map[string]tick.Quote
	wanted []string
	slots  []*tick.Quote // the wanted quotes in symbol order, as the engine keeps its slots
}

// EachWantedQuote walks the quotes in order without a look-up, as tick.Engine does.
func (s frozenSource) EachWantedQuote(fn func(string, *tick.Quote)) {
	for i, q := range s.slots {
		fn(s.wanted[i], q)
	}
}

func (s frozenSource) LastTick(symbol string) (tick.Quote, bool) {
	q, ok := s.q[symbol]
	return q, ok
}
func (s frozenSource) Wanted() []string { return slices.Clone(s.wanted) }

// BenchmarkMirror5000 measures, interleaved in one run so both sides see the same machine state:
// a publish of 5,000 symbols (walk the quotes in order as the engine offers them, encode, SET;
// the periodic pin read is charged as below) next to a plain SET of the same number of bytes,
// and a follower poll (GET + PTTL, decode, the stale scan, the pin refresh when due) of a new
// snapshot next to a plain GET of the same bytes. Before each iteration, untimed, every quote
// moves (BenchMarket: new prices of varying length, receivedAt spread as a live feed leaves it),
// so no publish encodes what the one before did. Each pair alternates which runs first: the
// operation right after the look-ups measured slower than the same one run second, so a fixed
// order would charge that to one side. Reported per iteration in milliseconds, with the ratios
// a publish's cost is best judged by (publish/SET and poll/GET). read5000-ms is, for
// comparison, what 5,000 LastTick look-ups cost — what a publish would pay without the ordered
// walk.
//
// The desk is as a split install runs it: the follower holds a pin, so the leader reads the pin
// hash once per PinRefresh — one publish in PinRefresh/DefaultInterval; the benchmark's clock
// does not move that far, so every such publish is charged a pin read of its own, a round trip
// dearer than the one that goes alongside a publish — and the desk has exposure, so every
// publish has priority legs to place (in production the holder's risk engine lists them from
// memory).
//
// The machine is shared, so compare medians of several runs:
//
//	go test -run '^$' -bench Mirror5000 -benchtime 2000x -count 5 ./internal/mirror/
func BenchmarkMirror5000(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	// The quotes move before every iteration (untimed), as the engine's do between publishes.
	market := mirror.NewBenchMarket(symbols(mirror.DefaultMaxSymbols))
	src := frozenSource{q: map[string]tick.Quote{}, wanted: market.Symbols, slots: market.Slots}
	for i, s := range src.wanted {
		src.q[s] = *market.Slots[i]
	}
	exposed := []string{src.wanted[17], src.wanted[2500], src.wanted[4999]}
	pub := e.publisher(func(c *mirror.PublisherConfig) {
		c.Now, c.Quotes = time.Now, src
		c.Digits = market.Digits // as cmd/web passes the instruments' digits
		c.Term = func() int64 { return 12 }
		c.Exposed = func(context.Context) ([]string, error) { return slices.Clone(exposed), nil }
	})
	fol := e.follower(func(c *mirror.FollowerConfig) { c.Now = time.Now })
	must(b, fol.Pin(ctx, src.wanted[1234]))
	must(b, pub.PublishOnce(ctx))
	if st := pub.Status(); !slices.Equal(st.Pinned, []string{src.wanted[1234]}) {
		b.Fatalf("publisher pinned %v", st.Pinned)
	}
	raw := make([]byte, pub.Status().Bytes)
	for i := range raw {
		raw[i] = byte(i)
	}
	rawKey := e.keys.Snapshot + ":raw"
	must(b, e.rdb.Set(ctx, rawKey, raw, mirror.KeyTTL).Err())

	var publish, read, set, poll, get time.Duration
	var sink float64
	timed := func(d *time.Duration, op func() error) {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		*d += time.Since(t0)
	}
	pinEvery := int(mirror.PinRefresh / mirror.DefaultInterval)
	var published int
	doPublish := func() error {
		if err := pub.PublishOnce(ctx); err != nil {
			return err
		}
		published++
		if published%pinEvery == 0 {
			return pub.ReadPins(ctx)
		}
		return nil
	}
	doSet := func() error { return e.rdb.Set(ctx, rawKey, raw, mirror.KeyTTL).Err() }
	doPoll := func() error { return fol.PollOnce(ctx) }
	doGet := func() error {
		v, err := e.rdb.Get(ctx, rawKey).Result()
		if err == nil && len(v) != len(raw) {
			err = fmt.Errorf("raw GET returned %d bytes, want %d", len(v), len(raw))
		}
		return err
	}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		market.Move(time.Now())
		b.StartTimer()
		tr := time.Now()
		for _, s := range src.wanted { // what look-ups would cost; the publish walks instead
			q, _ := src.LastTick(s)
			sink += q.Bid
		}
		read += time.Since(tr)
		// Each pair alternates which goes first, so neither always runs right after the other
		// or right after the look-ups above: whatever the machine carries over from one operation
		// to the next falls on both sides alike.
		if i%2 == 0 {
			timed(&publish, doPublish)
			timed(&set, doSet)
			timed(&poll, doPoll)
			timed(&get, doGet)
		} else {
			timed(&set, doSet)
			timed(&publish, doPublish)
			timed(&get, doGet)
			timed(&poll, doPoll)
		}
	}
	if st := fol.Status(); st.Symbols != mirror.DefaultMaxSymbols || !st.Advancing || len(st.Pinned) != 1 {
		b.Fatalf("follower status %+v", st)
	}
	if st := pub.Status(); len(st.Pinned) != 1 || st.LastError != "" {
		b.Fatalf("publisher status %+v", st)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(publish), "publish-ms")
	b.ReportMetric(ms(set), "rawSET-ms")
	b.ReportMetric(ms(poll), "poll-ms")
	b.ReportMetric(ms(get), "rawGET-ms")
	b.ReportMetric(ms(read), "read5000-ms")
	b.ReportMetric(float64(publish)/float64(set), "publish/SET")
	b.ReportMetric(float64(poll)/float64(get), "poll/GET")
	b.ReportMetric(float64(len(raw)), "bytes")
	if sink == 0 {
		b.Fatal("reads were optimised away")
	}
}

// BenchmarkFollowerLastTick is the read under every conversion on fxdesk-cron: a binary search
// over the snapshot as Redis returned it.
func BenchmarkFollowerLastTick(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	all := symbols(mirror.DefaultMaxSymbols)
	for _, s := range all {
		e.src.Set(s, 1.23456, 1.23467, time.Now())
	}
	must(b, e.publisher(nil).PublishOnce(ctx))
	fol := e.follower(func(c *mirror.FollowerConfig) { c.Now = time.Now })
	must(b, fol.PollOnce(ctx))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := fol.LastTick(all[i%len(all)]); !ok {
			b.Fatal("missing")
		}
		i += 7
	}
}
