package tick

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDecodeReadsProviderFramesAndRejectsMalformedOnes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		frame   string
		wantErr bool
		want    []Event // compared on Kind, Pair, Bid/Ask/Has*, TimeMs, Status, Message
		reject  []Reject
	}{
		// The provider's documented quote shape.
		{name: "quote", frame: `[{"ev":"C","p":"EUR/USD","x":48,"a":1.08412,"b":1.08410,"t":1764450000123}]`,
			want:   []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Ask: 1.08412, Bid: 1.08410, HasAsk: true, HasBid: true, TimeMs: 1764450000123}},
			reject: []Reject{RejectNone}},
		// Field order, whitespace and unknown nested fields must not matter.
		{name: "reordered with extras", frame: " [ { \"t\" : 5 , \"x\":\"44\", \"extra\":{\"k\":[1,{\"z\":null}]}, \"b\":1, \"p\":\"USD/JPY\", \"a\":2, \"ev\":\"C\" } ] ",
			want:   []Event{{Kind: EventQuote, Pair: []byte("USD/JPY"), Ask: 2, Bid: 1, HasAsk: true, HasBid: true, TimeMs: 5}},
			reject: []Reject{RejectNone}},
		// A single object (not an array) is accepted too.
		{name: "bare object status", frame: `{"ev":"status","status":"market_closed","message":"EUR/USD"}`,
			want:   []Event{{Kind: EventStatus, Status: []byte("market_closed"), Message: []byte("EUR/USD")}},
			reject: []Reject{RejectUndated}},
		// Escaped strings are decoded exactly.
		{name: "escaped pair", frame: `[{"ev":"C","p":"EUR\/USD","a":1,"b":1,"t":1}]`,
			want:   []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Ask: 1, Bid: 1, HasAsk: true, HasBid: true, TimeMs: 1}},
			reject: []Reject{RejectNone}},
		// Each rejection reason.
		{name: "undated missing t", frame: `[{"ev":"C","p":"EUR/USD","a":1.1,"b":1.0}]`,
			want: []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Ask: 1.1, Bid: 1.0, HasAsk: true, HasBid: true}}, reject: []Reject{RejectUndated}},
		{name: "undated null t", frame: `[{"ev":"C","p":"EUR/USD","a":1.1,"b":1.0,"t":null}]`,
			want: []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Ask: 1.1, Bid: 1.0, HasAsk: true, HasBid: true}}, reject: []Reject{RejectUndated}},
		{name: "undated negative t", frame: `[{"ev":"C","p":"EUR/USD","a":1.1,"b":1.0,"t":-1}]`,
			want: []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Ask: 1.1, Bid: 1.0, HasAsk: true, HasBid: true, TimeMs: -1}}, reject: []Reject{RejectUndated}},
		{name: "zero bid", frame: `[{"ev":"C","p":"EUR/USD","a":1.1,"b":0,"t":1}]`,
			want: []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Ask: 1.1, HasAsk: true, HasBid: true, TimeMs: 1}}, reject: []Reject{RejectNonPositive}},
		{name: "missing ask", frame: `[{"ev":"C","p":"EUR/USD","b":1.1,"t":1}]`,
			want: []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Bid: 1.1, HasBid: true, TimeMs: 1}}, reject: []Reject{RejectNonPositive}},
		{name: "overflowing ask", frame: `[{"ev":"C","p":"EUR/USD","a":1e999,"b":1.1,"t":1}]`,
			want: []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Bid: 1.1, HasBid: true, TimeMs: 1}}, reject: []Reject{RejectNonPositive}},
		{name: "crossed", frame: `[{"ev":"C","p":"EUR/USD","a":1.0,"b":1.1,"t":1}]`,
			want: []Event{{Kind: EventQuote, Pair: []byte("EUR/USD"), Ask: 1.0, Bid: 1.1, HasAsk: true, HasBid: true, TimeMs: 1}}, reject: []Reject{RejectCrossed}},
		// Malformed frames are rejected whole, never half-applied.
		{name: "truncated", frame: `[{"ev":"C","p":"EUR/USD","a":1.1,"b":1.0,"t":1},{"ev":"C"`, wantErr: true},
		{name: "string price", frame: `[{"ev":"C","p":"EUR/USD","a":"1.1","b":1.0,"t":1}]`, wantErr: true},
		{name: "trailing garbage", frame: `[]x`, wantErr: true},
		{name: "bad number", frame: `[{"ev":"C","a":01}]`, wantErr: true},
		{name: "array element not an object", frame: `[1]`, wantErr: true},
		{name: "raw control char", frame: "[{\"p\":\"EU\x01\"}]", wantErr: true},
		{name: "too deep", frame: `[{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}]`, wantErr: true},
		{name: "empty", frame: ``, wantErr: true},
		{name: "empty array", frame: `[]`, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var d Decoder
			got, err := d.Decode([]byte(tt.frame))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if len(got) != 0 {
					t.Fatalf("a rejected frame returned %d events", len(got))
				}
				return
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events, want %d", len(got), len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Kind != w.Kind || string(g.Pair) != string(w.Pair) || g.Bid != w.Bid || g.Ask != w.Ask ||
					g.HasBid != w.HasBid || g.HasAsk != w.HasAsk || g.TimeMs != w.TimeMs ||
					string(g.Status) != string(w.Status) || string(g.Message) != string(w.Message) {
					t.Errorf("event %d = %+v, want %+v", i, g, w)
				}
				if r := Validate(&g); r != tt.reject[i] {
					t.Errorf("Validate(event %d) = %v, want %v", i, r, tt.reject[i])
				}
			}
		})
	}
}

// FuzzDecodeFrame holds the decoder and the ingest path to two promises: never panic, and never
// store a quote that is undated, non-positive, non-finite or crossed.
func FuzzDecodeFrame(f *testing.F) {
	for _, seed := range []string{
		`[{"ev":"C","p":"EUR/USD","x":48,"a":1.08412,"b":1.08410,"t":1764450000123}]`,
		`[{"ev":"C","p":"EUR/USD","a":1.0,"b":1.1,"t":1}]`,
		`[{"ev":"C","p":"USD/JPY","a":0,"b":-1,"t":1}]`,
		`[{"ev":"C","p":"USD/JPY","a":2,"b":1}]`,
		`[{"ev":"C","p":"EUR\/USD","a":1e308,"b":1e-308,"t":1e3}]`,
		`{"ev":"status","status":"market_closed","message":"EUR/USD"}`,
		`[{"ev":"C","p":"EUR/USD","a":NaN,"b":1,"t":1}]`,
		`[{"x":[{"y":[1,2,{"z":"\u0041"}]}],"ev":"C"}]`,
		`[{"ev":"C","p":"EUR/USD","a":1.2,"b":1.1,"t":9.9e15}]`,
	} {
		f.Add([]byte(seed))
	}
	e := New(Config{URL: "ws://unused"}, slog.New(slog.DiscardHandler))
	if err := e.SetWanted([]string{"EURUSD", "USDJPY"}); err != nil {
		f.Fatal(err)
	}
	recv := time.Unix(1_764_450_000, 0)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var d Decoder
		evs, err := d.Decode(frame)
		if err != nil && len(evs) != 0 {
			t.Fatalf("error %v with %d events", err, len(evs))
		}
		for i := range evs {
			if evs[i].Kind == EventQuote && Validate(&evs[i]) == RejectNone {
				checkStorable(t, evs[i].Bid, evs[i].Ask, evs[i].TimeMs)
			}
		}
		e.ingest(context.Background(), &d, frame, recv)
		for _, s := range []string{"EURUSD", "USDJPY"} {
			if q, ok := e.LastTick(s); ok {
				checkStorable(t, q.Bid, q.Ask, q.ProviderTime.UnixMilli())
			}
		}
	})
}

func checkStorable(t *testing.T, bid, ask float64, ms int64) {
	t.Helper()
	if ms <= 0 || !(bid > 0) || !(ask > 0) || math.IsInf(bid, 0) || math.IsInf(ask, 0) || bid > ask {
		t.Fatalf("storable quote bid=%v ask=%v t=%d breaks the rules", bid, ask, ms)
	}
}

func burstFrame(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"ev":"C","p":"EUR/USD","x":48,"a":1.%05d,"b":1.%05d,"t":%d}`, 8412+i%100, 8410+i%100, 1764450000123+int64(i))
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// BenchmarkDecode measures the decoder alone on a 500-event burst frame.
func BenchmarkDecode(b *testing.B) {
	frame := burstFrame(500)
	var d Decoder
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/event")
}

// BenchmarkIngest measures decode + validate + store for a 500-event frame, no socket.
func BenchmarkIngest(b *testing.B) {
	frame := burstFrame(500)
	e := New(Config{URL: "ws://unused"}, slog.New(slog.DiscardHandler))
	if err := e.SetWanted([]string{"EURUSD"}); err != nil {
		b.Fatal(err)
	}
	var d Decoder
	recv := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if n := e.ingest(context.Background(), &d, frame, recv); n != 500 {
			b.Fatalf("stored %d of 500", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/event")
}

// smoothFrame is n EURUSD quotes walking up and down 0.1 pip a tick: a quiet market, so the
// spike filter publishes every one.
func smoothFrame(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		step := i % 200
		if step >= 100 {
			step = 200 - step
		}
		fmt.Fprintf(&b, `{"ev":"C","p":"EUR/USD","x":48,"a":1.%05d,"b":1.%05d,"t":%d}`, 8412+step, 8410+step, 1764450000123+int64(i))
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// legacyIngest is the single-source ingest path as it was before several sources (decode,
// validate, store, fan out), kept here as the baseline BenchmarkIngestSources compares with.
func legacyIngest(e *Engine, dec *Decoder, frame []byte, recv time.Time) int {
	evs, err := dec.Decode(frame)
	if err != nil {
		e.rejected[counterMalformed].Add(1)
		return 0
	}
	idx := e.slots.Load()
	stored := 0
	e.subsMu.RLock()
	publish := len(e.subs) > 0
	for i := range evs {
		ev := &evs[i]
		if ev.Kind != EventQuote {
			continue
		}
		if r := Validate(ev); r != RejectNone {
			e.rejected[r].Add(1)
			continue
		}
		sl := idx.byPair[string(ev.Pair)]
		if sl == nil {
			e.rejected[counterUnknownPair].Add(1)
			continue
		}
		q := &Quote{Bid: ev.Bid, Ask: ev.Ask, ReceivedAt: recv, ProviderTime: time.UnixMilli(ev.TimeMs)}
		sl.q.Store(q)
		stored++
		if publish {
			e.publishLocked(sl.symbol, q)
		}
	}
	e.subsMu.RUnlock()
	if stored > 0 {
		e.accepted.Add(uint64(stored))
		e.lastTickAt.Store(recv.UnixNano())
	}
	return stored
}

// BenchmarkIngestSources measures, in one run, the ingest cost per received tick of today's
// single-source path (before selection and the filter), of one source through selection and
// the filter, and of two sources (primary and backup each delivering every tick) through
// selection and the filter, with one Updates subscriber as the risk engine has. Compare
// ns/event; the two-source path should cost at most 1.3x the single-source one.
func BenchmarkIngestSources(b *testing.B) {
	const events = 500
	frame := smoothFrame(events)
	setup := func(b *testing.B, sources ...string) (*Engine, time.Time) {
		var cfg Config
		for _, n := range sources {
			cfg.Sources = append(cfg.Sources, handSource{n})
		}
		e := New(cfg, slog.New(slog.DiscardHandler))
		if err := e.SetWanted([]string{"EURUSD"}); err != nil {
			b.Fatal(err)
		}
		for _, s := range e.srcs {
			s.SetConnected(true, nil)
		}
		ch, cancel := e.Updates(nil)
		done := make(chan struct{})
		go func() {
			for range ch {
			}
			close(done)
		}()
		b.Cleanup(func() { cancel(); <-done })
		return e, time.Now()
	}
	b.Run("today-single-source", func(b *testing.B) {
		e, recv := setup(b, "primary")
		var d Decoder
		b.ReportAllocs()
		for b.Loop() {
			recv = recv.Add(time.Millisecond)
			if n := legacyIngest(e, &d, frame, recv); n != events {
				b.Fatalf("stored %d of %d", n, events)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
	})
	b.Run("one-source-filtered", func(b *testing.B) {
		e, recv := setup(b, "primary")
		var d Decoder
		b.ReportAllocs()
		for b.Loop() {
			recv = recv.Add(time.Millisecond)
			e.srcs[0].ingest(b.Context(), &d, frame, recv)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		if st := e.SourceStatuses()[0]; st.Held != 0 {
			b.Fatalf("held %d of a quiet market", st.Held)
		}
	})
	b.Run("two-sources-selected-filtered", func(b *testing.B) {
		e, recv := setup(b, "primary", "backup")
		var d0, d1 Decoder
		// Both sources quote once before the timed frames: a desk of several sources holds a
		// source's first ticks until another source has quoted (docs/prices.md, «The spike
		// filter», unreferenced), and the benchmark measures the steady state, not that start.
		first := smoothFrame(1)
		recv = recv.Add(time.Millisecond)
		e.srcs[1].ingest(b.Context(), &d1, first, recv)
		e.srcs[0].ingest(b.Context(), &d0, first, recv)
		start := e.SourceStatuses()
		b.ReportAllocs()
		for b.Loop() {
			recv = recv.Add(time.Millisecond)
			e.srcs[0].ingest(b.Context(), &d0, frame, recv)
			e.srcs[1].ingest(b.Context(), &d1, frame, recv)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*events), "ns/event")
		// The same market from two sources: what one published tick costs.
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/published")
		st := e.SourceStatuses()
		if st[0].Held != start[0].Held || st[1].Published != start[1].Published {
			b.Fatalf("statuses %+v, after the first quotes %+v", st, start)
		}
	})
}

// BenchmarkEngineMemory states what the engine keeps per symbol and per symbol and source:
// it builds engines with 2,000 symbols and one, two and four sources and reports the heap
// each holds.
func BenchmarkEngineMemory(b *testing.B) {
	var syms []string
	for i := range 2000 {
		syms = append(syms, fmt.Sprintf("%c%c%cUSD", 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26))
	}
	syms = slices.Compact(slices.Sorted(slices.Values(syms)))
	heap := func(sources int) uint64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var cfg Config
		for i := range sources {
			cfg.Sources = append(cfg.Sources, handSource{fmt.Sprint("s", i)})
		}
		e := New(cfg, slog.New(slog.DiscardHandler))
		if err := e.SetWanted(syms); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(e)
		return after.HeapAlloc - before.HeapAlloc
	}
	for b.Loop() {
		one, two, four := heap(1), heap(2), heap(4)
		perSource := float64(four-two) / 2 / float64(len(syms))
		b.ReportMetric(float64(one)/float64(len(syms))-perSource, "B/symbol")
		b.ReportMetric(perSource, "B/symbol-source")
	}
}
