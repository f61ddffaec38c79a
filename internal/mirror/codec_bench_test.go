package mirror

import (
	"testing"
	"time"

	"fxdesk/internal/tick"
)

func benchQuotes() ([]string, []*tick.Quote) {
	var syms []string
	var qs []*tick.Quote
	now := time.Now()
	for i := range 5000 {
		b := []byte("AAAAAA")
		for j, v := 5, i; j >= 0 && v > 0; j, v = j-1, v/26 {
			b[j] = byte('A' + v%26)
		}
		syms = append(syms, string(b))
		qs = append(qs, &tick.Quote{Bid: 1.23456, Ask: 1.23467, ReceivedAt: now, ProviderTime: now})
	}
	return syms, qs
}

func BenchmarkEncode5000(b *testing.B) {
	syms, qs := benchQuotes()
	e := newEncoder(5000, func(string) int { return 5 })
	for b.Loop() {
		e.start()
		for i, s := range syms {
			e.add(s, qs[i])
		}
		e.finish(time.Now(), 3)
	}
	b.SetBytes(int64(len(e.buf)))
}

func BenchmarkDecode5000(b *testing.B) {
	syms, qs := benchQuotes()
	e := newEncoder(5000, func(string) int { return 5 })
	e.start()
	for i, s := range syms {
		e.add(s, qs[i])
	}
	e.finish(time.Now(), 3)
	raw := string(e.buf)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseSnapshot(raw); err != nil {
			b.Fatal(err)
		}
	}
}
