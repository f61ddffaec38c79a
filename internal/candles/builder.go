package candles

import (
	"time"
)

// OHLC is one side's prices over a candle.
type OHLC struct {
	Open, High, Low, Close float64
}

func (o *OHLC) start(p float64) { *o = OHLC{Open: p, High: p, Low: p, Close: p} }

func (o *OHLC) add(p float64) {
	if p > o.High {
		o.High = p
	}
	if p < o.Low {
		o.Low = p
	}
	o.Close = p
}

// Candle is one symbol's published prices over one period of a granularity.
type Candle struct {
	Symbol      string
	Granularity Granularity
	OpenTime    time.Time // UTC, the period's open (not the first tick's time)
	Bid, Ask    OHLC
	Ticks       int // published ticks in the period
}

// entry is a candle in memory and how many of its ticks a flush has written.
type entry struct {
	c       Candle
	flushed int
}

// series is one symbol's open candle per granularity.
type series struct {
	cur [numGranularities]*entry
	end [numGranularities]int64 // UnixMilli of the open candle's end; 0: none open
}

// Row is one candle a flush writes: the candle as it stands and how many of its ticks no flush
// has written yet (the database adds those to its count, so a candle written in parts — partial
// flushes, or a takeover mid-period — counts every tick once).
type Row struct {
	Candle
	NewTicks int
	e        *entry
}

// DefaultMaxCompleted bounds the completed candles a Builder keeps unflushed (NewBuilder).
const DefaultMaxCompleted = 200_000

// Builder turns published ticks into candles. It is not safe for concurrent use: the Writer
// guards it. Ticks of one symbol must come in the engine's order; a tick stamped before the
// open candle's period (the wall clock stepped back) counts in the open candle rather than
// reopening a written one.
type Builder struct {
	series       map[string]*series
	completed    []*entry // closed candles with ticks no flush has written, oldest first
	maxCompleted int
	lost         uint64 // completed candles discarded past maxCompleted
}

// NewBuilder returns an empty builder that keeps at most maxCompleted closed candles awaiting a
// flush (DefaultMaxCompleted when 0): past it the oldest are discarded and counted (Lost), so a
// holder that cannot write for hours does not grow without bound.
func NewBuilder(maxCompleted int) (*Builder, error) {
	if err := checkZone(); err != nil {
		return nil, err
	}
	if maxCompleted <= 0 {
		maxCompleted = DefaultMaxCompleted
	}
	return &Builder{series: map[string]*series{}, maxCompleted: maxCompleted}, nil
}

// Add counts one published tick of symbol, received at at, in each granularity's candle.
func (b *Builder) Add(symbol string, bid, ask float64, at time.Time) {
	s := b.series[symbol]
	if s == nil {
		s = &series{}
		b.series[symbol] = s
	}
	ms := at.UnixMilli()
	for g := range numGranularities {
		e := s.cur[g]
		if e == nil || ms >= s.end[g] {
			if e != nil && e.flushed < e.c.Ticks {
				b.complete(e)
			}
			open, end := g.Bounds(at)
			e = &entry{c: Candle{Symbol: symbol, Granularity: g, OpenTime: open, Ticks: 1}}
			e.c.Bid.start(bid)
			e.c.Ask.start(ask)
			s.cur[g], s.end[g] = e, end.UnixMilli()
			continue
		}
		e.c.Bid.add(bid)
		e.c.Ask.add(ask)
		e.c.Ticks++
	}
}

func (b *Builder) complete(e *entry) {
	if len(b.completed) >= b.maxCompleted {
		b.completed[0] = nil
		b.completed = b.completed[1:]
		b.lost++
	}
	b.completed = append(b.completed, e)
}

// Pending returns every candle with ticks no flush has written: the completed ones, oldest
// first, then the open ones. Pass what was written to Flushed.
func (b *Builder) Pending() []Row {
	rows := make([]Row, 0, len(b.completed)+len(b.series))
	for _, e := range b.completed {
		rows = append(rows, Row{Candle: e.c, NewTicks: e.c.Ticks - e.flushed, e: e})
	}
	for _, s := range b.series {
		for _, e := range s.cur {
			if e != nil && e.flushed < e.c.Ticks {
				rows = append(rows, Row{Candle: e.c, NewTicks: e.c.Ticks - e.flushed, e: e})
			}
		}
	}
	return rows
}

// Flushed records that rows (from Pending) are written, whatever ticks arrived since: a candle
// that gained ticks meanwhile stays pending with those.
func (b *Builder) Flushed(rows []Row) {
	for _, r := range rows {
		r.e.flushed += r.NewTicks
	}
	kept := b.completed[:0]
	for _, e := range b.completed {
		if e.flushed < e.c.Ticks {
			kept = append(kept, e)
		}
	}
	clear(b.completed[len(kept):])
	b.completed = kept
}

// Lost is how many completed candles were discarded unwritten (NewBuilder's bound).
func (b *Builder) Lost() uint64 { return b.lost }

// Open returns symbol's open candle at g, if any.
func (b *Builder) Open(symbol string, g Granularity) (Candle, bool) {
	s := b.series[symbol]
	if s == nil || s.cur[g] == nil {
		return Candle{}, false
	}
	return s.cur[g].c, true
}
