package mirror

import (
	"testing"
	"time"

	"fxdesk/internal/tick"
)

// benchRounds are successive states of a 5,000-symbol market, so each encode or decode of a
// benchmark sees other prices and times than the one before, as consecutive publishes do.
func benchRounds(rounds int) (*BenchMarket, [][]tick.Quote) {
	syms := make([]string, 5000)
	for i := range syms {
		b := []byte("AAAAAA")
		for j, v := 5, i; j >= 0 && v > 0; j, v = j-1, v/26 {
			b[j] = byte('A' + v%26)
		}
		syms[i] = string(b)
	}
	m := NewBenchMarket(syms)
	out := make([][]tick.Quote, rounds)
	now := time.Now()
	for r := range out {
		now = now.Add(5 * time.Second)
		m.Move(now)
		for _, q := range m.Slots {
			out[r] = append(out[r], *q)
		}
	}
	return m, out
}

// BenchmarkEncode5000 is the publisher's encode of 5,000 changing quotes, without Redis.
//
//	go test -run '^$' -bench 'Encode5000|Decode5000' -count 5 ./internal/mirror/
func BenchmarkEncode5000(b *testing.B) {
	m, rounds := benchRounds(16)
	e := newEncoder(5000, m.Digits)
	n := 0
	for i := 0; b.Loop(); i++ {
		qs := rounds[i%len(rounds)]
		e.start()
		for j, s := range m.Symbols {
			e.add(s, &qs[j])
		}
		e.finish(qs[0].ReceivedAt, 3)
		n += len(e.buf)
	}
	b.SetBytes(int64(n / b.N))
}

// BenchmarkDecode5000 is the follower's decode of 5,000-symbol snapshots of changing quotes,
// without Redis: into its reused buffers, each snapshot becoming the current view as a poll
// makes it.
func BenchmarkDecode5000(b *testing.B) {
	m, rounds := benchRounds(16)
	e := newEncoder(5000, m.Digits)
	raws := make([]string, len(rounds))
	for i, qs := range rounds {
		e.start()
		for j, s := range m.Symbols {
			e.add(s, &qs[j])
		}
		e.finish(qs[0].ReceivedAt, 3)
		raws[i] = string(e.buf)
	}
	b.SetBytes(int64(len(raws[0])))
	b.ReportAllocs()
	var st quoteStore
	var cur *view
	for i := 0; b.Loop(); i++ {
		s, err := st.parse(raws[i%len(raws)], cur)
		if err != nil {
			b.Fatal(err)
		}
		cur = &view{snap: s}
	}
}
