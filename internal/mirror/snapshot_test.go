package mirror

import (
	"encoding/binary"
	"testing"
	"time"

	"fxdesk/internal/tick"
)

// upperLetters agrees with tick.ValidSymbol on every value of every byte of a symbol.
func TestUpperLettersIsValidSymbol(t *testing.T) {
	for pos := range symbolSize {
		for v := range 256 {
			b := []byte("EURUSD")
			b[pos] = byte(v)
			k := uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
			if got, want := upperLetters(k), tick.ValidSymbol(string(b)); got != want {
				t.Fatalf("byte %d = %#x: upperLetters %v, ValidSymbol %v", pos, v, got, want)
			}
		}
	}
	if upperLetters(1<<48 | 0x414141414141) {
		t.Fatal("a seventh byte must be refused")
	}
}

// FuzzParseSnapshot: whatever Redis hands the follower, parsing never panics, and a snapshot it
// accepts holds strictly ordered desk symbols that find locates and whose records read back.
func FuzzParseSnapshot(f *testing.F) {
	var e encoder
	e.max = 10
	e.start()
	q := tick.Quote{Bid: 1.1, Ask: 1.2, ReceivedAt: time.Unix(1_700_000_000, 5), ProviderTime: time.UnixMilli(1_700_000_000_123)}
	for _, s := range []string{"AUDUSD", "EURUSD", "USDJPY"} {
		e.add(s, &q)
	}
	e.finish(time.Unix(1_700_000_001, 0))
	f.Add(string(e.buf[:e.off]))
	f.Add("")
	f.Add(magic)
	short := append([]byte(nil), e.buf[:headerSize]...)
	binary.LittleEndian.PutUint32(short[16:], 2)
	f.Add(string(short))
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := parseSnapshot(raw)
		if err != nil {
			return
		}
		prev := ""
		for i := range s.n {
			sym := s.symbol(i)
			if !tick.ValidSymbol(sym) || sym <= prev {
				t.Fatalf("accepted record %d %q after %q", i, sym, prev)
			}
			if got := s.find(sym); got != i {
				t.Fatalf("find(%q) = %d, want %d", sym, got, i)
			}
			s.record(i)
			prev = sym
		}
		if s.find("ZZZZZZ") >= 0 && prev != "ZZZZZZ" {
			t.Fatal("found a symbol the snapshot does not hold")
		}
	})
}
