package tick

import (
	"context"
	"fmt"
	"log/slog"
	"math"
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
