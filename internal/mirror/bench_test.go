package mirror_test

import (
	"context"
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
func (s frozenSource) SymbolState(string) tick.State { return tick.Quoting }
func (s frozenSource) Wanted() []string              { return slices.Clone(s.wanted) }

// BenchmarkSnapshotPublish5000 reports what the snapshot costs through encoding/json at the
// 5,000-symbol cap: a publish (walk the quotes as the engine offers them, encode, the guarded
// SET) and a follower poll (GET + PTTL, decode, the stale scan) of a new snapshot, each in
// milliseconds, and the publish's share of one core at the default interval (publish-core-% —
// the budget is well under 1). Before each iteration, untimed, every quote moves (BenchMarket),
// so no publish encodes what the one before did. The desk is as a split install runs it: the
// follower holds a pin and the desk has exposure, so every publish has priority legs to place.
//
//	go test -run '^$' -bench SnapshotPublish5000 -benchtime 200x -count 5 ./internal/mirror/
func BenchmarkSnapshotPublish5000(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	market := mirror.NewBenchMarket(symbols(mirror.DefaultMaxSymbols))
	src := frozenSource{q: map[string]tick.Quote{}, wanted: market.Symbols, slots: market.Slots}
	for i, s := range src.wanted {
		src.q[s] = *market.Slots[i]
	}
	exposed := []string{src.wanted[17], src.wanted[2500], src.wanted[4999]}
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.Now, c.Quotes = time.Now, src
		c.Digits = market.Digits // as cmd/web passes the instruments' digits
		c.Term = func() int64 { return 12 }
		c.Exposed = func(context.Context) ([]string, error) { return slices.Clone(exposed), nil }
	})
	fol := e.follower(func(c *mirror.SnapshotFollowerConfig) { c.Now = time.Now })
	must(b, fol.Pin(ctx, src.wanted[1234]))
	must(b, pub.PublishOnce(ctx))

	var publish, poll time.Duration
	for b.Loop() {
		b.StopTimer()
		market.Move(time.Now())
		b.StartTimer()
		t0 := time.Now()
		must(b, pub.PublishOnce(ctx))
		t1 := time.Now()
		must(b, fol.PollOnce(ctx))
		publish += t1.Sub(t0)
		poll += time.Since(t1)
	}
	if st := fol.Status(); st.Symbols != mirror.DefaultMaxSymbols || !st.Advancing {
		b.Fatalf("follower status %+v", st)
	}
	n := float64(b.N)
	b.ReportMetric(float64(publish.Microseconds())/1000/n, "publish-ms")
	b.ReportMetric(float64(poll.Microseconds())/1000/n, "poll-ms")
	b.ReportMetric(float64(publish)/n/float64(mirror.DefaultInterval)*100, "publish-core-%")
	b.ReportMetric(float64(pub.Status().Bytes), "bytes")
}

// BenchmarkFollowerLastTick is the read under every conversion on fxdesk-cron: a map read of the
// current snapshot and its age.
func BenchmarkFollowerLastTick(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	all := symbols(mirror.DefaultMaxSymbols)
	for _, s := range all {
		e.src.Set(s, 1.23456, 1.23467, time.Now())
	}
	must(b, e.publisher(nil).PublishOnce(ctx))
	fol := e.follower(func(c *mirror.SnapshotFollowerConfig) { c.Now = time.Now })
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
