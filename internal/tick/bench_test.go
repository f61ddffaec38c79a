package tick

import (
	"log/slog"
	"testing"
	"time"

	"fxdesk/internal/sim/feedsim"
)

// BenchmarkLastTick is the read under every conversion: it must take no lock and allocate
// nothing, with the engine holding the full default symbol set.
func BenchmarkLastTick(b *testing.B) {
	e := New(Config{URL: "ws://unused"}, slog.New(slog.DiscardHandler))
	var syms []string
	for _, in := range feedsim.DefaultInstruments() {
		syms = append(syms, in.Symbol)
	}
	if err := e.SetWanted(syms); err != nil {
		b.Fatal(err)
	}
	var d Decoder
	e.ingest(b.Context(), &d, []byte(`[{"ev":"C","p":"EUR/USD","a":1.1002,"b":1.1,"t":1764450000123}]`), time.Now())
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if q, ok := e.LastTick("EURUSD"); !ok || q.Bid != 1.1 {
				b.Fatal("no tick")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := e.LastTick("EURUSD"); !ok {
					b.Fatal("no tick")
				}
			}
		})
	})
}

// BenchmarkIngestFromSimulator measures ticks the engine accepts per second from the simulator
// over a real loopback websocket: the simulator bursts b.N ticks over ten symbols, as fast as the
// socket takes them, and the clock stops when the engine has stored the last one. Run with e.g.
// -benchtime=2000000x so one burst is long enough to measure.
func BenchmarkIngestFromSimulator(b *testing.B) {
	symbols := []string{"EURUSD", "GBPUSD", "USDJPY", "USDCHF", "USDCAD", "AUDUSD", "NZDUSD", "EURGBP", "EURJPY", "XAUUSD"}
	s := startSim(b, feedsim.Config{AlwaysOpen: true, DisableWalk: true, MaxBatch: 1000}, "127.0.0.1:0")
	e := startEngine(b, Config{URL: s.URL()}, symbols...)
	waitFor(b, "subscribed", func() bool { return len(clientSubs(s)) == len(symbols) })

	const rate = 50_000_000 // far above what the socket carries: the burst runs flat out
	before := e.Status().Accepted
	b.ResetTimer()
	start := time.Now()
	n, err := s.Burst(symbols, rate, time.Duration(float64(b.N)/rate*float64(time.Second)))
	if err != nil {
		b.Fatal(err)
	}
	for e.Status().Accepted-before < uint64(n) {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("engine stored %d of %d ticks", e.Status().Accepted-before, n)
		}
		time.Sleep(200 * time.Microsecond) // polling a counter
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "ticks/s")
	if r := e.Status().Rejected; r != (Rejections{}) {
		b.Fatalf("simulator ticks rejected: %+v", r)
	}
}
