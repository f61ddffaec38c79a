package mirror

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// upperLetters agrees with fx.ValidSymbol on every value of every byte of a symbol.
func TestUpperLettersIsValidSymbol(t *testing.T) {
	for pos := range symbolSize {
		for v := range 256 {
			b := []byte("EURUSD")
			b[pos] = byte(v)
			k := uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
			if got, want := upperLetters(k), fx.ValidSymbol(string(b)); got != want {
				t.Fatalf("byte %d = %#x: upperLetters %v, ValidSymbol %v", pos, v, got, want)
			}
		}
	}
	if upperLetters(1<<48 | 0x414141414141) {
		t.Fatal("a seventh byte must be refused")
	}
}

var digitsOf = func(s string) int {
	switch s {
	case "USDJPY":
		return 3
	case "XAUUSD":
		return 2
	case "ODDONE":
		return -1
	}
	return 5
}

func encodeQuotes(t testing.TB, publishedAt time.Time, term int64, digits func(string) int, quotes ...entry) string {
	t.Helper()
	e := newEncoder(10, digits)
	e.start()
	for i := range quotes {
		e.add(quotes[i].symbol, &quotes[i].q)
	}
	e.finish(publishedAt, term)
	return string(e.buf)
}

var (
	at0 = time.Date(2026, 12, 1, 18, 20, 10, 123_456_789, time.UTC)
	at1 = time.Date(2026, 12, 1, 18, 20, 10, 101_000_000, time.UTC)
	at2 = time.Date(2026, 12, 1, 18, 19, 59, 870_999_999, time.UTC)
)

// The snapshot is the JSON an operator reads: one symbol per line, prices in the instrument's
// digits (a trailing zero kept), times RFC 3339 UTC with milliseconds, the term in the header.
func TestSnapshotReadsAsOneSymbolPerLineJSON(t *testing.T) {
	got := encodeQuotes(t, at0.In(time.FixedZone("NY", -5*3600)), 7, digitsOf,
		entry{"EURUSD", tick.Quote{Bid: 1.0850, Ask: 1.08512, ReceivedAt: at1}},
		entry{"ODDONE", tick.Quote{Bid: 0.1, Ask: 0.30000000000000004, ReceivedAt: at2}},
		entry{"USDJPY", tick.Quote{Bid: 151.201, Ask: 151.215, ReceivedAt: at2}},
	)
	want := `{"version":1,"publishedAt":"2026-12-01T18:20:10.123Z","term":7,"symbols":3,"quotes":{
"EURUSD":{"bid":"1.08500","ask":"1.08512","receivedAt":"2026-12-01T18:20:10.101Z"},
"ODDONE":{"bid":"0.1","ask":"0.30000000000000004","receivedAt":"2026-12-01T18:19:59.870Z"},
"USDJPY":{"bid":"151.201","ask":"151.215","receivedAt":"2026-12-01T18:19:59.870Z"}
}}`
	if got != want {
		t.Fatalf("snapshot text:\n%s\nwant:\n%s", got, want)
	}
	var doc struct {
		Version     int       `json:"version"`
		PublishedAt time.Time `json:"publishedAt"`
		Term        int64     `json:"term"`
		Symbols     int       `json:"symbols"`
		Quotes      map[string]struct {
			Bid, Ask   string
			ReceivedAt time.Time `json:"receivedAt"`
		} `json:"quotes"`
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatalf("encoding/json cannot read the snapshot: %v", err)
	}
	if doc.Version != 1 || doc.Term != 7 || doc.Symbols != 3 || !doc.PublishedAt.Equal(at0.Truncate(time.Millisecond)) ||
		doc.Quotes["USDJPY"].Bid != "151.201" || !doc.Quotes["EURUSD"].ReceivedAt.Equal(at1) {
		t.Fatalf("encoding/json reads %+v", doc)
	}
}

// What the encoder writes, the decoder reads back: the same floats, times to the millisecond.
func TestSnapshotRoundTrip(t *testing.T) {
	raw := encodeQuotes(t, at0, 42, digitsOf,
		entry{"EURUSD", tick.Quote{Bid: 1.08501, Ask: 1.08512, ReceivedAt: at1}},
		entry{"ODDONE", tick.Quote{Bid: 1.0 / 3, Ask: 2.0 / 3, ReceivedAt: at2}},
		entry{"USDJPY", tick.Quote{Bid: 151.201, Ask: 151.215, ReceivedAt: at2}},
		entry{"XAUUSD", tick.Quote{Bid: 2300.1, Ask: 2300.45, ReceivedAt: at1}},
	)
	s, err := parseSnapshot(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !s.publishedAt.Equal(at0.Truncate(time.Millisecond)) || s.term != 42 || len(s.quotes) != 4 || len(s.raw) != len(raw) {
		t.Fatalf("header: publishedAt %v term %d quotes %d", s.publishedAt, s.term, len(s.quotes))
	}
	want := []struct {
		symbol     string
		bid, ask   float64
		receivedAt int64
	}{
		{"EURUSD", 1.08501, 1.08512, at1.UnixNano()},
		{"ODDONE", 1.0 / 3, 2.0 / 3, at2.Truncate(time.Millisecond).UnixNano()},
		{"USDJPY", 151.201, 151.215, at2.Truncate(time.Millisecond).UnixNano()},
		{"XAUUSD", 2300.1, 2300.45, at1.UnixNano()},
	}
	for i, w := range want {
		if q := s.quotes[i]; s.symbol(i) != w.symbol || q.bid != w.bid || q.ask != w.ask || q.receivedAt != w.receivedAt {
			t.Errorf("quote %d = %s %+v, want %+v", i, s.symbol(i), q, w)
		}
		if s.find(w.symbol) != i {
			t.Errorf("find(%s) = %d, want %d", w.symbol, s.find(w.symbol), i)
		}
	}
	if s.find("GBPUSD") != -1 {
		t.Error("found a symbol the snapshot does not hold")
	}
}

// Quotes the format cannot carry are left out rather than written as text the follower refuses.
func TestEncoderSkipsUnquotable(t *testing.T) {
	raw := encodeQuotes(t, at0, 0, nil,
		entry{"AAAAAA", tick.Quote{Bid: math.NaN(), Ask: 1, ReceivedAt: at1}},
		entry{"BBBBBB", tick.Quote{Bid: 1, Ask: math.Inf(1), ReceivedAt: at1}},
		entry{"CCCCCC", tick.Quote{Bid: 1, Ask: 2}}, // no receivedAt
		entry{"DDDDDD", tick.Quote{Bid: 1e-30, Ask: 1, ReceivedAt: at1}},
		entry{"EEEEEE", tick.Quote{Bid: 1, Ask: 2, ReceivedAt: at1}},
		entry{"TOOLONGSYM", tick.Quote{Bid: 1, Ask: 2, ReceivedAt: at1}},
	)
	s, err := parseSnapshot(raw)
	if err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if len(s.quotes) != 1 || s.symbol(0) != "EEEEEE" {
		t.Fatalf("kept %+v", s.quotes)
	}
}

// Refusals name what is wrong; none of them panics (FuzzSnapshot covers the rest).
func TestParseSnapshotRefuses(t *testing.T) {
	good := encodeQuotes(t, at0, 3, digitsOf,
		entry{"EURUSD", tick.Quote{Bid: 1.08501, Ask: 1.08512, ReceivedAt: at1}},
		entry{"USDJPY", tick.Quote{Bid: 151.201, Ask: 151.215, ReceivedAt: at2}})
	for _, tc := range []struct{ name, raw, want string }{
		{"empty", "", "not a quote mirror snapshot"},
		{"binary", "FXQM\x01\x00\x00\x00", "not a quote mirror snapshot"},
		{"other version", strings.Replace(good, `"version":1`, `"version":2`, 1), "version"},
		{"bad publishedAt", strings.Replace(good, "2026-12-01T18:20:10.123Z", "2026-12-01 18:20:10.123Z", 1), "publishedAt"},
		{"31 April", strings.Replace(good, `"publishedAt":"2026-12-01`, `"publishedAt":"2026-04-31`, 1), "publishedAt"},
		{"count too high", strings.Replace(good, `"symbols":2`, `"symbols":3`, 1), "quote"},
		{"count too low", strings.Replace(good, `"symbols":2`, `"symbols":1`, 1), "does not end"},
		{"huge count", strings.Replace(good, `"symbols":2`, `"symbols":99999999`, 1), "symbols"},
		{"unordered", strings.Replace(strings.Replace(good, "EURUSD", "ZZZZZZ", 1), "USDJPY", "AAAAAA", 1), "out of order"},
		{"lower-case symbol", strings.Replace(good, "EURUSD", "eurusd", 1), "not a symbol"},
		{"number price", strings.Replace(good, `"bid":"1.08501"`, `"bid":1.08501`, 1), "SYMBOL"},
		{"exponent", strings.Replace(good, `"1.08501"`, `"1e5"`, 1), "bid"},
		{"two points", strings.Replace(good, `"1.08501"`, `"1.08.501"`, 1), "bid"},
		{"trailing point", strings.Replace(good, `"151.215"`, `"151."`, 1), "ask"},
		{"receivedAt zone", strings.Replace(good, "18:20:10.101Z", "18:20:10.101+01:00", 1), "receivedAt"},
		{"space", strings.Replace(good, `"ask":`, `"ask": `, 1), "bid"},
		{"truncated", good[:len(good)-1], "does not end"},
		{"trailing text", good + "\n", "does not end"},
	} {
		_, err := parseSnapshot(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// FuzzSnapshot: whatever Redis hands the follower, parsing never panics, and a snapshot it
// accepts is valid JSON holding strictly ordered desk symbols that find locates.
func FuzzSnapshot(f *testing.F) {
	f.Add(encodeQuotes(f, at0, 9, digitsOf,
		entry{"AUDUSD", tick.Quote{Bid: 0.65432, Ask: 0.65441, ReceivedAt: at1}},
		entry{"EURUSD", tick.Quote{Bid: 1.1, Ask: 1.2, ReceivedAt: at2}},
		entry{"USDJPY", tick.Quote{Bid: 151.2, Ask: -151.25, ReceivedAt: at1}}))
	f.Add(encodeQuotes(f, at0, 0, nil))
	f.Add(encodeQuotes(f, at0, 0, nil, entry{"ODDONE", tick.Quote{Bid: 123456789.123456789, Ask: 1e14, ReceivedAt: at1}}))
	f.Add("")
	f.Add(headVersion)
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := parseSnapshot(raw)
		if err != nil {
			return
		}
		if !json.Valid([]byte(raw)) {
			t.Fatalf("accepted text that is not JSON: %q", raw)
		}
		prev := ""
		for i, q := range s.quotes {
			sym := s.symbol(i)
			if !fx.ValidSymbol(sym) || sym <= prev {
				t.Fatalf("accepted quote %d %q after %q", i, sym, prev)
			}
			if got := s.find(sym); got != i {
				t.Fatalf("find(%q) = %d, want %d", sym, got, i)
			}
			if math.IsNaN(q.bid) || math.IsInf(q.ask, 0) {
				t.Fatalf("accepted a price that is not a number: %+v", q)
			}
			prev = sym
		}
	})
}

// FuzzPriceRoundTrip: a price written with an instrument's digits reads back as the float
// strconv.ParseFloat makes of the same text, and a price written without digits reads back as
// itself.
func FuzzPriceRoundTrip(f *testing.F) {
	f.Add(1.08501, int8(5), int64(1_764_613_210_123))
	f.Add(151.2, int8(3), int64(0))
	f.Add(-0.000123, int8(-1), int64(1))
	f.Fuzz(func(t *testing.T, v float64, d int8, ms int64) {
		if d > 15 {
			d %= 16
		}
		if d < -1 {
			d = -1
		}
		at := time.UnixMilli(ms)
		raw := encodeQuotes(t, at0, 0, func(string) int { return int(d) }, entry{"EURUSD", tick.Quote{Bid: v, Ask: v, ReceivedAt: at}})
		s, err := parseSnapshot(raw)
		if err != nil {
			t.Fatalf("%v\n%s", err, raw)
		}
		if len(s.quotes) == 0 {
			if quotable(v) && ms >= 0 && ms < maxTimeMs && d >= 0 && math.Abs(v)*pow10[d] < exactMantissa {
				t.Fatalf("dropped %v with %d digits", v, d)
			}
			return
		}
		q := s.quotes[0]
		text := raw[strings.Index(raw, `"bid":"`)+7:]
		text = text[:strings.IndexByte(text, '"')]
		want, err := strconv.ParseFloat(text, 64)
		if err != nil || q.bid != want || q.ask != want {
			t.Fatalf("%v with %d digits: wrote %q, read %v, ParseFloat %v (%v)", v, d, text, q.bid, want, err)
		}
		if d < 0 && q.bid != v {
			t.Fatalf("shortest form of %v read back as %v", v, q.bid)
		}
		if d >= 0 && math.Abs(q.bid-v) > 0.5/math.Pow10(int(d))*(1+1e-9)+math.Abs(v)*1e-15 {
			t.Fatalf("%v with %d digits read back as %v", v, d, q.bid)
		}
		if q.receivedAt != ms*int64(time.Millisecond) {
			t.Fatalf("receivedAt %d read back as %d ns", ms, q.receivedAt)
		}
	})
}

// digits7 spells every value it is given.
func TestDigits7SpellsEveryValue(t *testing.T) {
	for x := range uint64(1e7) {
		want := fmt.Sprintf("%07d", x)
		w := digits7(x) | 0x30303030303030
		for i := range 7 {
			if byte(w>>(8*i)) != want[i] {
				t.Fatalf("digits7(%d) = %#x, want %q", x, w, want)
			}
		}
		if w>>56 != 0 {
			t.Fatalf("digits7(%d) = %#x has an eighth byte", x, w)
		}
	}
}

// The prices add writes itself agree with putPriceLong, which writes every price.
func TestAddPriceAgrees(t *testing.T) {
	var d int8
	e := newEncoder(1, func(string) int { return int(d) })
	var want [64]byte
	check := func(v float64) {
		e.start()
		e.lastSyms = nil // d changes between calls: look it up again
		e.add("EURUSD", &tick.Quote{Bid: v, Ask: v, ReceivedAt: at1})
		e.finish(at0, 0)
		w, ok := putPriceLong(want[:], 0, v, d)
		if !ok {
			return
		}
		text := string(e.buf)
		bid := text[strings.Index(text, `"bid":"`)+7:]
		bid = bid[:strings.IndexByte(bid, '"')]
		if bid != string(want[:w]) || !strings.Contains(text, `"ask":"`+bid+`"`) {
			t.Fatalf("%v with %d digits: wrote %s, want %q", v, d, text, want[:w])
		}
	}
	for d = -1; d <= 8; d++ {
		for _, v := range []float64{0, 1e-9, 0.000004, 0.000005, 0.5, 0.99999, 0.999995, 1, 1.08501, 9.999995,
			10, 99.999994, 99.999995, 100, 151.201, 999.9995, 2300.45, 9999.999, 65432.1, 99999.995, 1e7 - 1, 1e7} {
			check(v)
			check(-v)
		}
	}
	r := uint64(1)
	for range 300_000 {
		r ^= r << 13
		r ^= r >> 7
		r ^= r << 17
		d = int8(r % 8)
		check(float64(r>>11) / (1 << 53) * math.Pow10(int(r>>3%7)))
	}
}

// The word-at-a-time price reader accepts exactly what the byte-by-byte one does, and reads the
// same value.
func TestParsePriceAgrees(t *testing.T) {
	const alphabet = "0123456789012345678901234567890123456789..-\"x"
	r := uint64(7)
	var b []byte
	for range 1_000_000 {
		r ^= r << 13
		r ^= r >> 7
		r ^= r << 17
		b = b[:0]
		for j := range int(r % 24) {
			b = append(b, alphabet[(r>>(j%8*5+16)+uint64(j))%uint64(len(alphabet))])
		}
		b = append(b, `"},"ask":"1.2"`...)
		raw := string(b)
		v, end, ok := parsePrice(raw, 0)
		sv, send, sok := parsePriceSlow(raw, 0)
		if ok != sok || ok && (v != sv || end != send) {
			t.Fatalf("%q: parsePrice %v %d %v, parsePriceSlow %v %d %v", raw, v, end, ok, sv, send, sok)
		}
	}
}

// bigSnapshot is a valid snapshot of n moving quotes, and the one before it.
func bigSnapshot(t testing.TB, n int) (raw string, prev []quote) {
	t.Helper()
	m, rounds := benchRounds(2)
	e := newEncoder(n, m.Digits)
	var raws [2]string
	for r := range raws {
		e.start()
		for j, s := range m.Symbols[:n] {
			e.add(s, &rounds[r][j])
		}
		e.finish(rounds[r][0].ReceivedAt, 3)
		raws[r] = string(e.buf)
	}
	s, err := parseSnapshotWith(raws[0], nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return raws[1], s.quotes
}

// checkHalves holds reading raw in chunks on two goroutines to reading it in one run: the same quotes, or an
// error (the same one) for both.
func checkHalves(t *testing.T, raw string, prev []quote) {
	t.Helper()
	one, err1 := parseSnapshotWith(raw, nil, nil, false)
	for _, pv := range [][]quote{prev, nil} {
		two, err2 := parseSnapshotWith(raw, nil, pv, true)
		if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
			t.Fatalf("one run: %v; halves: %v", err1, err2)
		}
		if err1 == nil && !slices.Equal(one.quotes, two.quotes) {
			t.Fatal("halves read other quotes than one run")
		}
	}
}

// Chunks read what one run reads, and refuse what it refuses, wherever the text is broken —
// near a cut above all.
func TestParseHalvesIsOneRun(t *testing.T) {
	raw, prev := bigSnapshot(t, 2500)
	one, err := parseSnapshotWith(raw, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range [][]quote{prev, nil} { // the guess from the last snapshot, or counted
		if !parseChunks(raw, int(one.quotes[0].at)-1, len(raw)-len(tail), make([]quote, 2500), pv) {
			t.Fatal("the halves refused a valid snapshot")
		}
	}
	checkHalves(t, raw, prev)
	checkHalves(t, raw, prev[:1200]) // a last snapshot of other symbols: a wrong guess
	chunks := 2500 / chunkRecords
	for c := 1; c < chunks; c++ { // around each cut
		at := len(raw) * c / chunks
		for pos := at - 100; pos < at+150; pos++ {
			for _, c := range []byte{',', '\n', '"', '0', 'A', 'Z' + 1} {
				b := []byte(raw)
				b[pos] = c
				checkHalves(t, string(b), prev)
			}
			checkHalves(t, raw[:pos]+raw[pos+1:], prev)
		}
	}
	mid := len(raw) / 2
	for _, pos := range []int{200, 300, len(raw) - 300, len(raw) - 3} {
		b := []byte(raw)
		b[pos] = '9'
		checkHalves(t, string(b), prev)
	}
	// A record dropped, or repeated, next to the cut.
	cut := mid + strings.Index(raw[mid:], ",\n")
	next := cut + 2 + strings.Index(raw[cut+2:], ",\n")
	checkHalves(t, raw[:cut]+raw[next:], prev)
	checkHalves(t, raw[:next]+raw[cut:], prev)
}

// FuzzParseHalves: whatever byte is changed, chunks read what one run reads.
func FuzzParseHalves(f *testing.F) {
	raw, prev := bigSnapshot(f, 2100)
	f.Add(uint32(len(raw)/2), byte(','), false)
	f.Add(uint32(len(raw)/2+40), byte('\n'), true)
	f.Fuzz(func(t *testing.T, pos uint32, c byte, cut bool) {
		i := int(pos) % len(raw)
		if cut {
			checkHalves(t, raw[:i]+raw[i+1:], prev)
			return
		}
		b := []byte(raw)
		b[i] = c
		checkHalves(t, string(b), prev)
	})
}
