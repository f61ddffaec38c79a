package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"fxdesk/internal/tick"
)

// Snapshot wire format, version 1. All integers little-endian.
//
//	header (24 bytes)
//	  0  "FXQM"          magic
//	  4  1               version
//	  5  0 0 0           reserved
//	  8  int64           publishedAt, Unix nanoseconds on the leader's clock
//	 16  uint32          record count n
//	 20  uint32          record size (38)
//	records (n × 38 bytes), strictly ascending by symbol
//	  0  [6]byte         symbol, EURUSD
//	  6  float64         bid (IEEE 754 bits)
//	 14  float64         ask
//	 22  int64           receivedAt, Unix nanoseconds on the leader's clock
//	 30  int64           providerTime, Unix milliseconds (the provider's own stamp)
//
// Fixed-width sorted records let the follower keep the snapshot exactly as Redis returned it
// and binary-search it in LastTick: "decoding" is a header check and one pass confirming the
// order, with no per-symbol allocation.
const (
	magic       = "FXQM"
	version     = 1
	headerSize  = 24
	recordSize  = 38
	symbolSize  = 6
	maxSnapshot = 1 << 20 // records; far above any cap, only guards a corrupt count
)

// entry is one symbol's quote as published.
type entry struct {
	symbol string
	q      tick.Quote
}

// encoder writes snapshots: the format's only writer. It keeps one buffer from cycle to cycle and
// its add method value is made once, so encoding 5,000 records allocates nothing.
type encoder struct {
	buf    []byte // the snapshot being written, then the last one finished; grows to the largest
	off    int    // where the next record goes
	count  int
	max    int
	over   bool                               // add was offered more than max records
	record func(symbol string, q *tick.Quote) // add, for QuoteWalker
}

func newEncoder(max int) *encoder {
	e := &encoder{max: max}
	e.record = e.add
	return e
}

// start begins a snapshot.
func (e *encoder) start() {
	e.buf = e.buf[:cap(e.buf)]
	e.off, e.count, e.over = headerSize, 0, false
	if len(e.buf) < headerSize {
		e.grow()
	}
}

// add appends one record; symbols must come in strictly ascending order. It runs 5,000 times a
// cycle, so it takes the quote by pointer (64 bytes) and stores the symbol as two words rather
// than through a copy call: a third off the encode, measured.
func (e *encoder) add(symbol string, q *tick.Quote) {
	if e.count == e.max {
		e.over = true
		return
	}
	if len(symbol) != symbolSize { // the engine holds desk symbols only; a record needs six bytes
		return
	}
	if e.off+recordSize > len(e.buf) {
		e.grow()
	}
	r := e.buf[e.off : e.off+recordSize : e.off+recordSize]
	le := binary.LittleEndian
	le.PutUint32(r, uint32(symbol[0])|uint32(symbol[1])<<8|uint32(symbol[2])<<16|uint32(symbol[3])<<24)
	le.PutUint16(r[4:], uint16(symbol[4])|uint16(symbol[5])<<8)
	le.PutUint64(r[6:], math.Float64bits(q.Bid))
	le.PutUint64(r[14:], math.Float64bits(q.Ask))
	le.PutUint64(r[22:], uint64(q.ReceivedAt.UnixNano()))
	le.PutUint64(r[30:], uint64(q.ProviderTime.UnixMilli()))
	e.off += recordSize
	e.count++
}

// grow at least doubles the buffer, keeping what was written. Out of line, so add stays small.
//
//go:noinline
func (e *encoder) grow() {
	e.buf = append(e.buf, make([]byte, max(len(e.buf), headerSize+64*recordSize))...)
	e.buf = e.buf[:cap(e.buf)]
}

// finish writes the header and leaves the snapshot in buf.
func (e *encoder) finish(publishedAt time.Time) {
	b := e.buf
	copy(b, magic)
	b[4], b[5], b[6], b[7] = version, 0, 0, 0
	le := binary.LittleEndian
	le.PutUint64(b[8:], uint64(publishedAt.UnixNano()))
	le.PutUint32(b[16:], uint32(e.count))
	le.PutUint32(b[20:], recordSize)
	e.buf = b[:e.off]
}

// holds reports whether the records added since start include symbol.
func (e *encoder) holds(symbol string) bool {
	lo, hi := 0, e.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		off := headerSize + m*recordSize
		if string(e.buf[off:off+symbolSize]) < symbol {
			lo = m + 1
		} else {
			hi = m
		}
	}
	off := headerSize + lo*recordSize
	return lo < e.count && string(e.buf[off:off+symbolSize]) == symbol
}

// snapshot is a decoded view over the raw value: the bytes are kept as Redis returned them
// (a string, so slicing a symbol out of it allocates nothing).
type snapshot struct {
	raw         string
	publishedAt time.Time // leader clock; compare with Equal, never with the follower's clock
	n           int
}

var errNotSnapshot = errors.New("not a quote mirror snapshot")

// parseSnapshot checks raw and returns a view over it.
func parseSnapshot(raw string) (*snapshot, error) {
	if len(raw) < headerSize || raw[:4] != magic {
		return nil, errNotSnapshot
	}
	if raw[4] != version {
		return nil, fmt.Errorf("snapshot version %d, this follower reads %d (upgrade both processes together)", raw[4], version)
	}
	n := int(u32(raw, 16))
	if rs := u32(raw, 20); rs != recordSize {
		return nil, fmt.Errorf("snapshot record size %d, want %d", rs, recordSize)
	}
	if n > maxSnapshot || len(raw) != headerSize+n*recordSize {
		return nil, fmt.Errorf("snapshot of %d bytes does not hold %d records", len(raw), n)
	}
	// Symbols are six upper-case letters, so their order is that of the six bytes read as one
	// big-endian number, and the letters can be checked on that number too: two comparisons per
	// record instead of a string compare and six byte checks (a fifth of a poll, measured).
	var prev uint64
	for i := range n {
		off := headerSize + i*recordSize
		s := raw[off : off+symbolSize]
		k := uint64(s[0])<<40 | uint64(s[1])<<32 | uint64(s[2])<<24 | uint64(s[3])<<16 | uint64(s[4])<<8 | uint64(s[5])
		if k <= prev || !upperLetters(k) {
			return nil, fmt.Errorf("snapshot record %d (%q) is out of order or not a symbol", i, s)
		}
		prev = k
	}
	return &snapshot{raw: raw, publishedAt: time.Unix(0, int64(u64(raw, 8))), n: n}, nil
}

// upperLetters reports whether each of the six bytes packed in k is an upper-case ASCII letter,
// as tick.ValidSymbol does for a string: every byte below 0x80, at least 'A' (adding 0x3F sets
// its top bit) and at most 'Z' (adding 0x25 leaves it clear). No addition carries into the next
// byte, since each byte is below 0x80.
func upperLetters(k uint64) bool {
	const top = 0x808080808080
	return k&^0xFFFFFFFFFFFF == 0 && k&top == 0 && (k+0x3F3F3F3F3F3F)&top == top && (k+0x252525252525)&top == 0
}

// find returns the record index of symbol, or -1.
func (s *snapshot) find(symbol string) int {
	lo, hi := 0, s.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		off := headerSize + m*recordSize
		if s.raw[off:off+symbolSize] < symbol {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < s.n {
		off := headerSize + lo*recordSize
		if s.raw[off:off+symbolSize] == symbol {
			return lo
		}
	}
	return -1
}

// symbol returns record i's symbol.
func (s *snapshot) symbol(i int) string {
	off := headerSize + i*recordSize
	return s.raw[off : off+symbolSize]
}

// record returns record i's prices and the leader's receivedAt (Unix ns).
func (s *snapshot) record(i int) (bid, ask float64, receivedAt int64, providerTime time.Time) {
	off := headerSize + i*recordSize
	bid = math.Float64frombits(u64(s.raw, off+6))
	ask = math.Float64frombits(u64(s.raw, off+14))
	receivedAt = int64(u64(s.raw, off+22))
	providerTime = time.UnixMilli(int64(u64(s.raw, off+30)))
	return
}

// receivedAt returns record i's receivedAt (leader clock, Unix ns).
func (s *snapshot) receivedAt(i int) int64 {
	return int64(u64(s.raw, headerSize+i*recordSize+22))
}

func u32(s string, off int) uint32 {
	_ = s[off+3]
	return uint32(s[off]) | uint32(s[off+1])<<8 | uint32(s[off+2])<<16 | uint32(s[off+3])<<24
}

func u64(s string, off int) uint64 {
	_ = s[off+7]
	return uint64(s[off]) | uint64(s[off+1])<<8 | uint64(s[off+2])<<16 | uint64(s[off+3])<<24 |
		uint64(s[off+4])<<32 | uint64(s[off+5])<<40 | uint64(s[off+6])<<48 | uint64(s[off+7])<<56
}
