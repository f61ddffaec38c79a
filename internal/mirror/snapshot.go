package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"fxdesk/internal/tick"
)

// Snapshot format, version 1: one JSON document an operator reads with
// `redis-cli GET fx:quote-mirror:snapshot` (or pipes into jq), one symbol per line:
//
//	{"version":1,"publishedAt":"2026-12-01T18:20:10.123Z","term":7,"symbols":2,"quotes":{
//	"EURUSD":{"bid":"1.08501","ask":"1.08512","receivedAt":"2026-12-01T18:20:10.101Z"},
//	"USDJPY":{"bid":"151.201","ask":"151.215","receivedAt":"2026-12-01T18:20:09.870Z"}
//	}}
//
// publishedAt and receivedAt are the leader's clock, RFC 3339 in UTC with milliseconds. Prices
// are decimal strings in the instrument's digits. term is the lease term of the publisher (0 when
// it was not told one). symbols counts the quotes, which come in strictly ascending symbol order.
//
// The document is written and read by hand, not through encoding/json: the encoder formats
// straight into one reused buffer and the decoder reads exactly the shape above (field order,
// no spaces, a newline after each line) into a sorted slice that LastTick binary-searches.
// Anything else — a hand-edited snapshot, another version — is refused with an error, so a
// follower never serves a price it half understood. The benchmark holds both sides against a
// plain SET and GET of the same bytes.
const (
	version     = 1
	maxSnapshot = 1 << 20 // symbols; far above any cap, only guards a corrupt count
	symbolSize  = 6
	headerRoom  = 128 // bytes reserved ahead of the quotes for the header, written last
	timeSize    = len("2006-01-02T15:04:05.000Z")
	minuteSize  = len("2006-01-02T15:04:")
	maxPriceLen = 24 // digits, sign and point; longer is not a price this desk quotes
)

// maxTimeMs bounds the times the format carries, from 1970 to the end of 2199: every one is a
// Unix nanosecond count that fits an int64.
var maxTimeMs = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// The fixed text between the values.
const (
	headVersion   = `{"version":1,"publishedAt":"`
	headTerm      = `","term":`
	headSymbols   = `,"symbols":`
	headQuotes    = `,"quotes":{` + "\n"
	recSymbol     = `"`
	recBid        = `":{"bid":"`
	recAsk        = `","ask":"`
	recReceivedAt = `","receivedAt":"`
	recEnd        = `"}`
	tail          = "\n}}"
)

// entry is one symbol's quote as published.
type entry struct {
	symbol string
	q      tick.Quote
}

// encoder writes snapshots: the format's only writer. It keeps one buffer from cycle to cycle and
// its add method value is made once, so encoding 5,000 quotes allocates nothing.
type encoder struct {
	buf    []byte // records from headerRoom on; after finish, the snapshot itself (a sub-slice)
	all    []byte // the whole buffer, header room included
	off    int    // where the next record goes in all
	count  int
	max    int
	over   bool                               // add was offered more than max records
	record func(symbol string, q *tick.Quote) // add, for QuoteWalker
	// digitsOf gives a symbol's quoted decimals; -1 (or a nil func) writes the shortest decimal
	// that reads back as the same float. Looked up once per symbol and position: the walk offers
	// the same symbols in the same order every cycle, so syms/digs of the last cycle answer.
	digitsOf func(symbol string) int
	syms     []uint64 // symbols added this cycle, in order, their bytes as little-endian words
	digs     []int8
	lastSyms []uint64 // the previous cycle's
	lastDigs []int8
	minutes  [minuteWays]spelledMinute // the minutes last spelled out, by minute modulo minuteWays
}

func newEncoder(max int, digitsOf func(string) int) *encoder {
	e := &encoder{max: max, digitsOf: digitsOf}
	for i := range e.minutes {
		e.minutes[i].minute = math.MinInt64
	}
	e.record = e.add
	return e
}

// start begins a snapshot.
func (e *encoder) start() {
	e.lastSyms, e.syms = e.syms, e.lastSyms[:0]
	e.lastDigs, e.digs = e.digs, e.lastDigs[:0]
	if len(e.all) < headerRoom+1024 {
		e.all = make([]byte, headerRoom+64*1024)
	}
	e.all = e.all[:cap(e.all)]
	e.off, e.count, e.over = headerRoom, 0, false
}

// maxRecord bounds one record's length: symbol, two prices, a time and the fixed text.
const maxRecord = len(recSymbol) + symbolSize + len(recBid) + 2*maxPriceLen + len(recAsk) +
	len(recReceivedAt) + timeSize + len(recEnd) + 2

// recordRoom is the room add wants ahead of it: a record, the tail, and the word a store may
// write past the end.
const recordRoom = maxRecord + len(tail) + 8

// add appends one record; symbols must come in strictly ascending order. It runs 5,000 times a
// cycle, so it takes the quote by pointer, calls nothing on the usual path, and writes the
// fixed text and each value as whole words.
func (e *encoder) add(symbol string, q *tick.Quote) {
	if e.count == e.max {
		e.over = true
		return
	}
	// The engine holds desk symbols only; a price or a time the format cannot carry is not
	// published (no quote has one).
	ms := q.ReceivedAt.UnixMilli()
	if len(symbol) != symbolSize || !quotable(q.Bid) || !quotable(q.Ask) || ms < 0 || ms >= maxTimeMs {
		return
	}
	if e.off+recordRoom > len(e.all) {
		e.grow()
	}
	sym := uint64(symbol[0]) | uint64(symbol[1])<<8 | uint64(symbol[2])<<16 | uint64(symbol[3])<<24 |
		uint64(symbol[4])<<32 | uint64(symbol[5])<<40
	i := e.count
	var d int8
	if i < len(e.lastSyms) && e.lastSyms[i] == sym {
		d = e.lastDigs[i]
	} else {
		d = e.digits(symbol)
	}
	b := e.all
	o := e.off
	if i > 0 {
		binary.LittleEndian.PutUint16(b[o:], ','|'\n'<<8)
		o += 2
	}
	binary.LittleEndian.PutUint64(b[o:], '"'|sym<<8|'"'<<56)
	binary.LittleEndian.PutUint64(b[o+8:], wordBid)
	b[o+16] = '"'
	o += 17
	// The usual price — non-negative, 1 to 6 decimals, under 10⁷ in units of its last digit
	// (below 100 with 5 decimals, 10,000 with 3) — is at most 8 bytes with its point: its digits
	// are made in one word (digits7), the point put in and the leading zeros dropped by shifts.
	// Anything else goes to putPriceLong.
	v := q.Bid
	for j := 0; ; j++ {
		if f := v*pow10[d&15] + 0.5; uint8(d-1) < 6 && v >= 0 && f < 1e7 {
			w := digits7(uint64(int64(f)))
			k := intDigits[d] // digits before the point, leading zeros included
			lead := min(uint(bits.TrailingZeros64(w|1<<56))>>3, k-1)
			w = w&lowBytes[k] | (w&^lowBytes[k])<<8 | pointAt[k]
			binary.LittleEndian.PutUint64(b[o:], w>>(8*lead&63))
			o += 8 - int(lead)
		} else {
			var ok bool
			if o, ok = putPriceLong(b, o, v, d); !ok {
				return
			}
		}
		if j == 1 {
			break
		}
		binary.LittleEndian.PutUint64(b[o:], wordAsk)
		b[o+8] = '"'
		o += 9
		v = q.Ask
	}
	binary.LittleEndian.PutUint64(b[o:], wordReceivedAt0)
	binary.LittleEndian.PutUint64(b[o+8:], wordReceivedAt1)
	o += 16
	minute, rest := ms/60000, ms%60000
	m := &e.minutes[uint64(minute)%minuteWays]
	if m.minute != minute {
		m.set(minute)
	}
	_ = b[o+timeSize+1]
	binary.LittleEndian.PutUint64(b[o:], m.words[0])
	binary.LittleEndian.PutUint64(b[o+8:], m.words[1])
	binary.LittleEndian.PutUint64(b[o+16:], ':'|uint64(secondText[rest/1000])<<8|'.'<<24|uint64(milliText[rest%1000])<<32)
	b[o+24], b[o+25] = '"', '}'
	e.off = o + 26
	e.syms = append(e.syms, sym)
	e.digs = append(e.digs, d)
	e.count++
}

// digits looks up a symbol's decimals: -1 for the shortest form.
//
//go:noinline
func (e *encoder) digits(symbol string) int8 {
	if e.digitsOf != nil {
		if v := e.digitsOf(symbol); v >= 0 && v <= 15 {
			return int8(v)
		}
	}
	return -1
}

// For a price of d decimals (1 to 6) written from seven digits: intDigits[d] digits go before
// the point; lowBytes[k] keeps k bytes; pointAt[k] is the point after k digits, with every
// digit's ASCII offset.
var (
	intDigits [16]uint
	lowBytes  [8]uint64
	pointAt   [8]uint64
)

func init() {
	for d := 1; d <= 6; d++ {
		intDigits[d] = uint(7 - d)
	}
	for k := 1; k < 8; k++ {
		lowBytes[k] = 1<<(8*k) - 1
		pointAt[k] = 0x3030303030303030&^(0xFF<<(8*k)) | '.'<<(8*k)
	}
}

// quotable reports whether v is a price the format carries: finite and below 10¹⁵ in size.
func quotable(v float64) bool { return v > -1e15 && v < 1e15 }

// grow at least doubles the buffer, keeping what was written. Out of line, so add stays small.
//
//go:noinline
func (e *encoder) grow() {
	e.all = append(e.all[:e.off], make([]byte, len(e.all))...)
	e.all = e.all[:cap(e.all)]
}

// finish writes the header into the room left ahead of the records and leaves the snapshot in buf.
func (e *encoder) finish(publishedAt time.Time, term int64) {
	b := e.all
	o := e.off
	o += copy(b[o:], tail)
	var h [headerRoom]byte
	n := copy(h[:], headVersion)
	n = e.putTime(h[:], n, publishedAt.UnixMilli())
	n += copy(h[n:], headTerm)
	n = len(strconv.AppendInt(h[:n], max(term, 0), 10))
	n += copy(h[n:], headSymbols)
	n = len(strconv.AppendInt(h[:n], int64(e.count), 10))
	n += copy(h[n:], headQuotes)
	start := headerRoom - n
	copy(b[start:], h[:n])
	e.buf = b[start:o]
}

// holds reports whether the records added since start include symbol.
func (e *encoder) holds(symbol string) bool {
	if len(symbol) != symbolSize {
		return false
	}
	// Words compare in symbol order once their bytes are reversed.
	k := bits.ReverseBytes64(uint64(symbol[0]) | uint64(symbol[1])<<8 | uint64(symbol[2])<<16 |
		uint64(symbol[3])<<24 | uint64(symbol[4])<<32 | uint64(symbol[5])<<40)
	lo, hi := 0, len(e.syms)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bits.ReverseBytes64(e.syms[m]) < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(e.syms) && bits.ReverseBytes64(e.syms[lo]) == k
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
	1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactMantissa: integers below it are exact in a float64, so float64(m)/pow10[k] is the
// correctly rounded value of the decimal m·10⁻ᵏ — the same float strconv.ParseFloat returns.
const exactMantissa = 1 << 53

// digits7 spreads x < 10⁷ into seven bytes, one decimal digit (0–9) each, its leading digit in
// the lowest byte: a digit and two groups of three from a table.
func digits7(x uint64) uint64 {
	t := x / 1000
	a := t / 1000
	return a | uint64(digits3[t-a*1000])<<8 | uint64(digits3[x-t*1000])<<32
}

// digits3 holds the three digits of 0–999, the first in the lowest byte.
var digits3 [1000]uint32

func init() {
	for i := range digits3 {
		digits3[i] = uint32(i/100) | uint32(i/10%10)<<8 | uint32(i%10)<<16
	}
}

// putPriceLong writes v with d decimals (d < 0: the shortest decimal that reads back as v) at
// b[o:] and returns the offset after it; false when that takes more than maxPriceLen bytes. add
// writes the usual prices itself and leaves this the rest: negative prices, no or many
// decimals, large numbers.
//
//go:noinline
func putPriceLong(b []byte, o int, v float64, d int8) (int, bool) {
	neg := v < 0
	if neg {
		v = -v
	}
	if d < 0 || v*pow10[d] >= exactMantissa {
		if neg {
			v = -v
		}
		var long [64]byte
		t := strconv.AppendFloat(long[:0], v, 'f', int(d), 64)
		if len(t) > maxPriceLen {
			return o, false
		}
		return o + copy(b[o:], t), true
	}
	// m is the price in units of its last digit; ip and frac split it at the point without a
	// division by a variable (the truncated float is the integer part, or one below it when
	// rounding carried).
	p10 := upow10[d]
	m := uint64(v*pow10[d] + 0.5)
	ip := uint64(v)
	frac := m - ip*p10
	if frac >= p10 {
		ip, frac = ip+1, frac-p10
	}
	if neg {
		b[o] = '-'
		o++
	}
	switch {
	case ip < 10:
		b[o] = byte('0' + ip)
		o++
	case ip < 100:
		b[o], b[o+1] = digitPairs[2*ip], digitPairs[2*ip+1]
		o += 2
	case ip < 1000:
		r := ip % 100
		b[o], b[o+1], b[o+2] = byte('0'+ip/100), digitPairs[2*r], digitPairs[2*r+1]
		o += 3
	default:
		o += len(strconv.AppendUint(b[o:o], ip, 10))
	}
	if d == 0 {
		return o, true
	}
	b[o] = '.'
	end := o + 1 + int(d)
	w := end
	for ; w-o > 2; w -= 2 {
		r := frac % 100
		frac /= 100
		b[w-2], b[w-1] = digitPairs[2*r], digitPairs[2*r+1]
	}
	if w-o == 2 {
		b[w-1] = byte('0' + frac)
	}
	return end, true
}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// upow10 are the powers of ten below 2⁶⁴.
var upow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
	1e16, 1e17, 1e18, 1e19}

// minuteWays is how many minutes the encoder and decoder keep spelled out. The quotes of a
// snapshot come in symbol order, not time order: most share the current minute or the one before,
// but symbols that tick rarely interleave older minutes, which a single remembered minute would
// spell out again at each switch.
const minuteWays = 16

// spelledMinute is a Unix minute and its first 16 bytes of text, "YYYY-MM-DDTHH:MM", as words.
type spelledMinute struct {
	minute int64
	words  [2]uint64
}

// putTime writes the Unix millisecond ms as RFC 3339 UTC with milliseconds. add does the same
// inline.
func (e *encoder) putTime(b []byte, o int, ms int64) int {
	minute, rest := ms/60000, ms%60000
	if rest < 0 {
		minute, rest = minute-1, rest+60000
	}
	m := &e.minutes[uint64(minute)%minuteWays]
	if m.minute != minute {
		m.set(minute)
	}
	binary.LittleEndian.PutUint64(b[o:], m.words[0])
	binary.LittleEndian.PutUint64(b[o+8:], m.words[1])
	binary.LittleEndian.PutUint64(b[o+16:], ':'|uint64(secondText[rest/1000])<<8|'.'<<24|uint64(milliText[rest%1000])<<32)
	return o + timeSize
}

//go:noinline
func (m *spelledMinute) set(minute int64) {
	var t [minuteSize]byte
	time.UnixMilli(minute*60000).UTC().AppendFormat(t[:0], "2006-01-02T15:04:")
	*m = spelledMinute{minute: minute, words: [2]uint64{binary.LittleEndian.Uint64(t[:]), binary.LittleEndian.Uint64(t[8:])}}
}

// secondText and milliText hold "SS" for 0–59 and "mmmZ" for 0–999, as little-endian bytes.
var (
	secondText [60]uint16
	milliText  [1000]uint32
)

func init() {
	for s := range secondText {
		secondText[s] = uint16('0'+s/10) | uint16('0'+s%10)<<8
	}
	for m := range milliText {
		milliText[m] = uint32('0'+m/100) | uint32('0'+m/10%10)<<8 | uint32('0'+m%10)<<16 | 'Z'<<24
	}
}

// word reads the first eight bytes of s as a little-endian word.
func word(s string) uint64 { return binary.LittleEndian.Uint64([]byte(s[:8])) }

// The fixed text of a record as the words the encoder stores and the decoder compares.
var (
	wordBid         = word(recBid[1:]) // after the symbol's closing quote: `:{"bid":`, then '"'
	wordAsk         = word(recAsk)     // `","ask":`, then '"'
	wordReceivedAt0 = word(recReceivedAt)
	wordReceivedAt1 = word(recReceivedAt[8:])
)

// quote is one decoded record. It holds no pointer, so 5,000 of them are one allocation the
// garbage collector never scans.
type quote struct {
	key        uint64  // the symbol's six bytes, big-endian: ordered as the symbols are
	bid, ask   float64 // as the leader held them, to the instrument's digits
	receivedAt int64   // leader clock, Unix ns (millisecond precision)
	at         uint32  // where the symbol starts in raw
}

// snapshot is a decoded snapshot: its quotes sorted by symbol, and the raw text it came from.
type snapshot struct {
	raw         string
	publishedAt time.Time // leader clock; compare with Equal, never with the follower's clock
	term        int64     // the publisher's lease term; 0 when it did not know it
	quotes      []quote
	buf         *quoteBuf // the follower's reused buffer quotes lives in; nil when it is its own
}

var (
	errNotSnapshot = errors.New("not a quote mirror snapshot (version 1 JSON)")
	errMoreQuotes  = errors.New("snapshot holds more quotes than it says")
)

// parseSnapshot decodes raw into a fresh quote slice.
func parseSnapshot(raw string) (*snapshot, error) { return parseSnapshotInto(raw, nil, nil) }

// parseSnapshotInto decodes raw, keeping the quotes in dst when it has the room (the follower
// hands it a buffer no reader holds, see quoteStore); prev, the quotes of the snapshot before,
// only helps split the work (see parseChunks). It accepts exactly what the encoder writes and
// names what it found otherwise; it never panics (see the fuzz test).
func parseSnapshotInto(raw string, dst, prev []quote) (*snapshot, error) {
	return parseSnapshotWith(raw, dst, prev, runtime.GOMAXPROCS(0) > 1)
}

// parseSnapshotWith is parseSnapshotInto, reading large snapshots in chunks on two goroutines
// when split is true.
func parseSnapshotWith(raw string, dst, prev []quote, split bool) (*snapshot, error) {
	if !hasAt(raw, 0, headVersion) {
		if hasAt(raw, 0, `{"version":`) {
			return nil, fmt.Errorf("snapshot version %.4q…, this follower reads %d (upgrade both processes together)", raw[len(`{"version":`):], version)
		}
		return nil, errNotSnapshot
	}
	p := len(headVersion)
	var d timeDecoder
	pub, ok := d.parse(raw, p)
	if !ok {
		return nil, fmt.Errorf("snapshot publishedAt %.24q is not RFC 3339 UTC with milliseconds", raw[p:])
	}
	p += timeSize
	if !hasAt(raw, p, headTerm) {
		return nil, errNotSnapshot
	}
	p += len(headTerm)
	term, p, ok := parseCount(raw, p)
	if !ok || !hasAt(raw, p, headSymbols) {
		return nil, errors.New("snapshot term is not a non-negative integer")
	}
	p += len(headSymbols)
	n, p, ok := parseCount(raw, p)
	if !ok || n > maxSnapshot || !hasAt(raw, p, headQuotes) {
		return nil, errors.New("snapshot symbols is not a count of quotes")
	}
	p += len(headQuotes)
	// A record is at least this long, which bounds the allocation by the text's length.
	const minRecord = len(recSymbol) + symbolSize + len(recBid) + 1 + len(recAsk) + 1 + len(recReceivedAt) + timeSize + len(recEnd)
	if n*minRecord > len(raw) {
		return nil, fmt.Errorf("snapshot of %d bytes cannot hold %d quotes", len(raw), n)
	}
	if cap(dst) < n {
		dst = make([]quote, n)
	}
	s := &snapshot{raw: raw, publishedAt: time.Unix(0, pub), term: int64(term), quotes: dst[:n]}
	// The records tile raw from p to the tail: end is where the last one must stop.
	end := len(raw) - len(tail)
	if n == 0 && raw[p:] == tail {
		return s, nil
	}
	if n == 0 || end < p || raw[end:] != tail {
		return nil, errShortCount(n)
	}
	if split && n >= minSplit && parseChunks(raw, p, end, s.quotes, prev) {
		return s, nil
	}
	got, err := parseRun(raw, p, end, s.quotes, 0, 0, &d)
	if err == errMoreQuotes || err == nil && got != n {
		err = errShortCount(n)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Large snapshots are read in chunks of about chunkRecords records, shared between this
// goroutine and one other; below minSplit records one run is as fast (starting the other
// goroutine, and waking a thread for it, costs tens of microseconds; a record about 25 ns).
const (
	minSplit     = 2000
	chunkRecords = 500
	maxChunks    = 16
)

// parseChunks reads the records that tile raw[p:end] into qs, all of them, in chunks cut at the
// ",\n" nearest past evenly spaced offsets. The caller's goroutine and one more take the chunks
// in turn from a shared counter, so a helper that starts late (a sleeping thread takes up to
// milliseconds to wake on a loaded machine) takes fewer of them and delays the caller by at most
// the one it is inside, and one that never starts costs nothing. A chunk is written from the
// index its first symbol has in prev (the last snapshot, which usually holds the same symbols),
// or else one past the count of newlines ahead of it (every record before it ends at one).
//
// It reports false when the chunks did not read back as one valid run exactly filling qs — a
// bad snapshot, or a wrong guess — and the caller then reads the whole text again in one run,
// which gives that run's answer and error. What it accepts is exactly what parseRun accepts in
// one run: every record is read from the same offset, each chunk starts just after a ",\n" that
// one run would find after the chunk before, and the order across each cut is checked here.
func parseChunks(raw string, p, end int, qs, prev []quote) bool {
	n := len(qs)
	chunks := min(n/chunkRecords, maxChunks)
	var at [maxChunks + 1]int // chunk c is raw[at[c]:cut[c]], into qs[k[c]:k[c+1]]
	var cut, k [maxChunks + 1]int
	at[0], k[0], k[chunks] = p, 0, n
	c := 1
	for ; c < chunks; c++ {
		j := strings.Index(raw[p+(end-p)*c/chunks:end], ",\n")
		if j < 0 {
			return false
		}
		cut[c-1] = p + (end-p)*c/chunks + j
		at[c] = cut[c-1] + 2
		if at[c] <= at[c-1] || len(raw)-at[c] < 1+symbolSize {
			return false
		}
		k[c] = -1
		if len(prev) > 0 {
			s := raw[at[c]+1:]
			key := uint64(s[0])<<40 | uint64(s[1])<<32 | uint64(s[2])<<24 | uint64(s[3])<<16 | uint64(s[4])<<8 | uint64(s[5])
			k[c] = (&snapshot{quotes: prev}).findKey(key)
		}
		if k[c] < 0 {
			k[c] = k[c-1] + strings.Count(raw[at[c-1]:cut[c-1]], "\n") + 1
		}
		if k[c] <= k[c-1] || k[c] >= n {
			return false
		}
	}
	cut[chunks-1] = end
	var (
		next    atomic.Int32
		claimed atomic.Bool
		got     [maxChunks]int
		errs    [maxChunks]error
		done    = make(chan struct{})
	)
	work := func() {
		var d timeDecoder
		for {
			c := int(next.Add(1)) - 1
			if c >= chunks {
				return
			}
			got[c], errs[c] = parseRun(raw, at[c], cut[c], qs[k[c]:k[c+1]], k[c], 0, &d)
		}
	}
	go func() {
		if claimed.CompareAndSwap(false, true) {
			work()
			close(done)
		}
	}()
	// A new goroutine waits in this P's runnext slot, which an idle P steals only after a sleep
	// of a few microseconds that timer slack makes about 70. A second, empty goroutine takes
	// that slot and leaves the helper in the run queue, stolen at once.
	go func() {}()
	work()
	if !claimed.CompareAndSwap(false, true) {
		<-done // the helper started: wait for the chunk it is reading
	}
	for c := range chunks {
		if errs[c] != nil || got[c] != k[c+1]-k[c] || c > 0 && qs[k[c]-1].key >= qs[k[c]].key {
			return false
		}
	}
	return true
}

func errShortCount(n int) error {
	return fmt.Errorf("snapshot says %d quotes but does not end after them", n)
}

// parseRun reads the records that tile raw[p:end], separated by ",\n", into qs, the first of
// them quote number first of the snapshot (for the errors) and ordered after the symbol key
// prev. It returns how many it read; finding more than len(qs) is errMoreQuotes.
func parseRun(raw string, p, end int, qs []quote, first int, prev uint64, d *timeDecoder) (int, error) {
	var ok bool
	for i := 0; ; i++ {
		if i == len(qs) {
			return i, errMoreQuotes
		}
		q := &qs[i]
		// Symbols are six upper-case letters, so their order is that of the six bytes read as
		// one big-endian number, and the letters can be checked on that number too. The fixed
		// text around the values is compared a word at a time.
		if len(raw)-p < 1+symbolSize+len(recBid) {
			//lint:ignore ST1005 the message quotes the JSON a quote must start with, which ends in a colon
			return i, fmt.Errorf("snapshot quote %d: want \"SYMBOL\":{\"bid\":", first+i)
		}
		w := load64(raw, p)
		if w&0xFF00_0000_0000_00FF != '"'|'"'<<56 || load64(raw, p+8) != wordBid || raw[p+16] != '"' {
			//lint:ignore ST1005 the message quotes the JSON a quote must start with, which ends in a colon
			return i, fmt.Errorf("snapshot quote %d: want \"SYMBOL\":{\"bid\":", first+i)
		}
		k := bits.ReverseBytes64(w) >> 8 & 0xFFFF_FFFF_FFFF
		if k <= prev || !upperLetters(k) {
			return i, fmt.Errorf("snapshot quote %d (%q) is out of order or not a symbol", first+i, raw[p+1:p+1+symbolSize])
		}
		prev = k
		q.key, q.at = k, uint32(p+1)
		p += 1 + symbolSize + len(recBid)
		if q.bid, p, ok = parsePrice(raw, p); !ok || len(raw)-p < len(recAsk) || load64(raw, p) != wordAsk || raw[p+8] != '"' {
			return i, fmt.Errorf("snapshot %s: bid is not a decimal string", raw[q.at:q.at+symbolSize])
		}
		p += len(recAsk)
		if q.ask, p, ok = parsePrice(raw, p); !ok || len(raw)-p < len(recReceivedAt) ||
			load64(raw, p) != wordReceivedAt0 || load64(raw, p+8) != wordReceivedAt1 {
			return i, fmt.Errorf("snapshot %s: ask is not a decimal string", raw[q.at:q.at+symbolSize])
		}
		p += len(recReceivedAt)
		if q.receivedAt, ok = d.parse(raw, p); !ok || !hasAt(raw, p+timeSize, recEnd) {
			return i, fmt.Errorf("snapshot %s: receivedAt is not RFC 3339 UTC with milliseconds", raw[q.at:q.at+symbolSize])
		}
		p += timeSize + len(recEnd)
		if p == end {
			return i + 1, nil
		}
		if p > end || !hasAt(raw, p, ",\n") {
			return i, fmt.Errorf("snapshot quote %d: want \",\\n\" between quotes", first+i+1)
		}
		p += 2
	}
}

// hasAt reports whether raw holds lit at p.
func hasAt(raw string, p int, lit string) bool {
	return p <= len(raw) && len(raw)-p >= len(lit) && raw[p:p+len(lit)] == lit
}

// parseCount reads a non-negative decimal integer (at most 18 digits) at p.
func parseCount(raw string, p int) (v, end int, ok bool) {
	start := p
	for p < len(raw) && p-start < 18 && raw[p]-'0' < 10 {
		v = v*10 + int(raw[p]-'0')
		p++
	}
	return v, p, p > start && (p == start+1 || raw[start] != '0')
}

// parsePrice reads a quoted decimal (an optional '-', digits, an optional '.' and digits) at p,
// up to its closing '"', which it leaves at the returned offset. The usual price — up to seven
// digits each side of the point, with room after it for the next field — is read a word at a
// time; the rest, and anything malformed, by parsePriceSlow, which accepts exactly the same.
func parsePrice(raw string, p int) (v float64, end int, ok bool) {
	if p >= 0 && len(raw)-p >= 16 {
		w := load64(raw, p)
		ni := digitRun(w)
		if ni >= 1 && ni < 8 {
			switch byte(w >> (8 * ni)) {
			case '"':
				return float64(digitsValue(w, ni)), p + ni, true
			case '.':
				f := load64(raw, p+ni+1)
				nf := digitRun(f)
				if nf >= 1 && nf < 8 && byte(f>>(8*nf)) == '"' {
					m := digitsValue(w, ni)*upow10[nf] + digitsValue(f, nf)
					return float64(m) / pow10[nf], p + ni + 1 + nf, true
				}
			}
		}
	}
	return parsePriceSlow(raw, p)
}

// digitRun counts the ASCII digits at the start (lowest bytes) of w. A byte above '9' gets its
// top bit from the addition, one below '0' from the subtraction; a carry or borrow only moves
// upwards from a byte already marked, so the lowest mark is the first byte that is not a digit.
func digitRun(w uint64) int {
	marks := ((w + 0x4646464646464646) | (w - 0x3030303030303030)) & 0x8080808080808080
	return bits.TrailingZeros64(marks) >> 3
}

// digitsValue is the number the first n (1 to 8) bytes of w spell, all ASCII digits: the
// digits are moved to the top, then pairs, quads and octets combined in place.
func digitsValue(w uint64, n int) uint64 {
	v := (w - 0x3030303030303030) << (64 - 8*uint(n)&63)
	v = (v*10 + v>>8) & 0x00FF00FF00FF00FF
	v = (v*100 + v>>16) & 0x0000FFFF0000FFFF
	return (v*10000 + v>>32) & 0xFFFFFFFF
}

// parsePriceSlow reads a quoted decimal byte by byte.
func parsePriceSlow(raw string, p int) (v float64, end int, ok bool) {
	start := p
	neg := p < len(raw) && raw[p] == '-'
	if neg {
		p++
	}
	var m uint64
	digits, frac, dot := 0, 0, -1
	for ; p < len(raw) && p-start <= maxPriceLen; p++ {
		c := raw[p]
		if c-'0' < 10 {
			m = m*10 + uint64(c-'0')
			digits++
			if dot >= 0 {
				frac++
			}
			continue
		}
		if c == '.' && dot < 0 && digits > 0 {
			dot = p
			continue
		}
		break
	}
	if p >= len(raw) || raw[p] != '"' || digits == 0 || dot == p-1 {
		return 0, p, false
	}
	if digits > 15 || m >= exactMantissa || frac >= len(pow10) {
		f, err := strconv.ParseFloat(raw[start:p], 64)
		return f, p, err == nil
	}
	v = float64(m) / pow10[frac]
	if neg {
		v = -v
	}
	return v, p, true
}

// timeDecoder reads RFC 3339 UTC millisecond times, remembering the minutes it spelled out
// (see minuteWays) by their text.
type timeDecoder struct {
	minutes [minuteWays]struct {
		words [2]uint64 // "YYYY-MM-DDTHH:MM"; zero, which no time's text is, when unused
		ns    int64
	}
}

// parse reads a time at p, followed by anything; it returns Unix nanoseconds.
func (d *timeDecoder) parse(raw string, p int) (int64, bool) {
	if p > len(raw) || len(raw)-p < timeSize {
		return 0, false
	}
	w0, w1, w2 := load64(raw, p), load64(raw, p+8), load64(raw, p+16)
	// The minute's units digit picks the way: consecutive minutes land apart.
	m := &d.minutes[(w1>>56)%minuteWays]
	if m.words[0] != w0 || m.words[1] != w1 || w0 == 0 {
		ns, ok := parseMinute(raw[p : p+minuteSize])
		if !ok {
			return 0, false
		}
		m.words, m.ns = [2]uint64{w0, w1}, ns
	}
	// w2 is ":SS.mmmZ": x holds the digits' values where the text has digits and zero elsewhere
	// when it is well formed.
	const (
		form   = ':' | '0'<<8 | '0'<<16 | '.'<<24 | '0'<<32 | '0'<<40 | '0'<<48 | 'Z'<<56
		digits = 0x00FFFFFF00FFFF00
	)
	x := w2 ^ form
	if x&^digits != 0 || (x|(x+0x0076767600767600))&0x0080808000808000 != 0 || x>>8&0xFF > 5 {
		return 0, false
	}
	ms := int64(x>>8&0xFF)*10000 + int64(x>>16&0xFF)*1000 + int64(x>>32&0xFF)*100 + int64(x>>40&0xFF)*10 + int64(x>>48&0xFF)
	return m.ns + ms*int64(time.Millisecond), true
}

// load64 reads the eight bytes of raw at p as a little-endian word; p+8 must not pass the end.
func load64(raw string, p int) uint64 {
	b := raw[p : p+8] // one bounds check, and one load
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// parseMinute reads "YYYY-MM-DDTHH:MM:" and returns its Unix nanoseconds.
func parseMinute(t string) (int64, bool) {
	num := func(a, b int) (int, bool) {
		v := 0
		for i := a; i < b; i++ {
			c := t[i] - '0'
			if c > 9 {
				return 0, false
			}
			v = v*10 + int(c)
		}
		return v, true
	}
	if t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' {
		return 0, false
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 7)
	dd, ok3 := num(8, 10)
	h, ok4 := num(11, 13)
	mi, ok5 := num(14, 16)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || y < 1970 || y >= 2200 || mo < 1 || mo > 12 || dd < 1 || h > 23 || mi > 59 {
		return 0, false
	}
	tm := time.Date(y, time.Month(mo), dd, h, mi, 0, 0, time.UTC)
	if tm.Day() != dd { // 31 April, 29 February of a common year
		return 0, false
	}
	return tm.UnixNano(), true
}

// upperLetters reports whether each of the six bytes packed in k is an upper-case ASCII letter,
// as fx.ValidSymbol does for a string: every byte below 0x80, at least 'A' (adding 0x3F sets
// its top bit) and at most 'Z' (adding 0x25 leaves it clear). No addition carries into the next
// byte, since each byte is below 0x80.
func upperLetters(k uint64) bool {
	const top = 0x808080808080
	return k&^0xFFFFFFFFFFFF == 0 && k&top == 0 && (k+0x3F3F3F3F3F3F)&top == top && (k+0x252525252525)&top == 0
}

// find returns the index of symbol's quote, or -1.
func (s *snapshot) find(symbol string) int {
	if len(symbol) != symbolSize {
		return -1
	}
	return s.findKey(uint64(symbol[0])<<40 | uint64(symbol[1])<<32 | uint64(symbol[2])<<24 | uint64(symbol[3])<<16 | uint64(symbol[4])<<8 | uint64(symbol[5]))
}

// findKey returns the index of the quote of symbol key k, or -1.
func (s *snapshot) findKey(k uint64) int {
	lo, hi := 0, len(s.quotes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.quotes[m].key < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.quotes) && s.quotes[lo].key == k {
		return lo
	}
	return -1
}

// symbol returns quote i's symbol, a slice of the raw text.
func (s *snapshot) symbol(i int) string {
	at := int(s.quotes[i].at)
	return s.raw[at : at+symbolSize]
}
