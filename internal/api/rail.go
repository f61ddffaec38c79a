package api

import (
	"context"
	"strconv"
	"sync"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/metrics"
	"fxdesk/internal/tick"
)

// Rail is the markets rail's one fan-out (docs/architecture.md, «The front door»). It hears every
// accepted quote once, formats it once into the bytes of its server-sent event, and hands those
// same bytes to every stream that asked for the symbol. Nobody is waited for: a stream whose buffer
// is full loses that quote alone (a burst outruns a client for a moment; the next quote supersedes
// the lost one), and a stream whose buffer has stayed full for slowFor is dropped — its client
// reconnects and starts again from the latest quotes. A stream takes its slot of the front
// door's stream caps (StreamSlots) before it joins.
type Rail struct {
	quotes  *desk.Quotes
	digits  func(symbol string) (int, bool)
	slots   *StreamSlots
	buffer  int
	slowFor time.Duration
	metrics *metrics.Metrics
	now     func() time.Time

	mu       sync.Mutex
	bySymbol map[string]map[*railStream]struct{}
	all      map[*railStream]struct{} // streams of every symbol
	open     int
}

// railStream is one subscriber: the event bytes it has yet to write, and gone, closed when the
// rail ends it (it fell behind, or the price source changed).
type railStream struct {
	events  chan []byte
	gone    chan struct{}
	key     string
	symbols []string // nil: every symbol
	ended   bool     // under Rail.mu
	// fullSince is when the stream's buffer was first found full with nothing taken from it
	// since; zero while it keeps up. Under Rail.mu.
	fullSince time.Time
}

// slowFor is how long a stream's buffer may stay full before the stream is dropped: well past a
// burst, well inside the write deadline that would end a stuck writer anyway.
const slowFor = 5 * time.Second

// RailConfig sizes the rail.
type RailConfig struct {
	Quotes *desk.Quotes
	// Digits gives a symbol's quoted decimals, false for a symbol the rail must not carry
	// (InstrumentDigits: the tradable instruments').
	Digits func(symbol string) (int, bool)
	// Slots are the stream caps the rail shares with the events stream.
	Slots *StreamSlots
	// Buffer is how many events a stream may have unwritten before it is dropped (default 256).
	Buffer  int
	Metrics *metrics.Metrics
}

// NewRail returns a rail; Run feeds it.
func NewRail(c RailConfig) *Rail {
	if c.Buffer <= 0 {
		c.Buffer = 256
	}
	return &Rail{quotes: c.Quotes, digits: c.Digits, slots: c.Slots, buffer: c.Buffer, metrics: c.Metrics,
		slowFor: slowFor, now: time.Now,
		bySymbol: map[string]map[*railStream]struct{}{}, all: map[*railStream]struct{}{}}
}

// InstrumentDigits is RailConfig.Digits over the catalog's tradable instruments, as last
// loaded: the fan-out never waits for a database read (only the very first, when nothing was
// ever loaded, and that bounded by a second).
func InstrumentDigits(svc *catalog.Admin) func(symbol string) (int, bool) {
	return func(symbol string) (int, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return svc.QuotedDigits(ctx, symbol)
	}
}

// streamRetryAfter is the Retry-After, in seconds, of a stream refused at a cap: streams are long
// lived, so a slot frees slowly.
const streamRetryAfter = "5"

// subscribe opens a stream for the token key over symbols (nil: all), or refuses it with
// ELIMITED past a stream cap.
func (r *Rail) subscribe(key string, symbols []string) (*railStream, error) {
	if err := r.slots.take(key); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &railStream{events: make(chan []byte, r.buffer), gone: make(chan struct{}), key: key, symbols: symbols}
	if symbols == nil {
		r.all[s] = struct{}{}
	}
	for _, sym := range symbols {
		set := r.bySymbol[sym]
		if set == nil {
			set = map[*railStream]struct{}{}
			r.bySymbol[sym] = set
		}
		set[s] = struct{}{}
	}
	r.open++
	r.metrics.SSEClients.Inc()
	return s, nil
}

// unsubscribe releases s's slot; safe after the rail ended it.
func (r *Rail) unsubscribe(s *railStream) {
	r.mu.Lock()
	r.endLocked(s)
	r.open--
	r.metrics.SSEClients.Dec()
	r.mu.Unlock()
	r.slots.give(s.key)
}

// endLocked removes s from the fan-out and tells its stream to end; the slot stays counted
// until unsubscribe.
func (r *Rail) endLocked(s *railStream) {
	if s.ended {
		return
	}
	s.ended = true
	delete(r.all, s)
	for _, sym := range s.symbols {
		if set := r.bySymbol[sym]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(r.bySymbol, sym)
			}
		}
	}
	close(s.gone)
}

// Open is the number of open markets-rail streams.
func (r *Rail) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open
}

// Run feeds the rail from the price view until ctx ends. When the view changes source (a standby
// took over, a follower started or stopped following) every stream ends, as its client must
// reconnect to hear the new one.
func (r *Rail) Run(ctx context.Context) error {
	for {
		changed := r.quotes.Changed() // before Updates: a change in between is not missed
		updates, cancel := r.quotes.Updates(nil)
		feeding := true
		for feeding {
			select {
			case <-ctx.Done():
				cancel()
				r.endAll()
				return nil
			case <-changed:
				feeding = false
			case u, ok := <-updates:
				if !ok {
					updates = nil // the source stopped; wait for the next one
					continue
				}
				r.publish(u)
			}
		}
		cancel()
		r.endAll()
	}
}

func (r *Rail) endAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.all {
		r.endLocked(s)
	}
	for _, set := range r.bySymbol {
		for s := range set {
			r.endLocked(s)
		}
	}
}

// publish formats u once and offers it to every stream of its symbol.
func (r *Rail) publish(u tick.Update) {
	digits, ok := r.digits(u.Symbol)
	if !ok {
		return
	}
	ev := quoteEvent(u, digits)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	offer := func(s *railStream) {
		select {
		case s.events <- ev:
			s.fullSince = time.Time{}
			return
		default:
		}
		r.metrics.StreamUpdatesLost.Inc()
		switch {
		case s.fullSince.IsZero():
			s.fullSince = now
		case now.Sub(s.fullSince) >= r.slowFor:
			r.endLocked(s)
			r.metrics.StreamsDropped.Inc()
		}
	}
	for s := range r.all {
		offer(s)
	}
	for s := range r.bySymbol[u.Symbol] {
		offer(s)
	}
}

// quoteEvent is one "quote" event: {"symbol","bid","ask","t","source"} with t the provider time
// in Unix milliseconds, prices at the instrument's digits, source the price source it was
// published from (omitted when unknown).
func quoteEvent(u tick.Update, digits int) []byte {
	b := make([]byte, 0, 112)
	b = append(b, "event: quote\ndata: {\"symbol\":"...)
	b = strconv.AppendQuote(b, u.Symbol)
	b = append(b, ",\"bid\":\""...)
	b = strconv.AppendFloat(b, u.Quote.Bid, 'f', digits, 64)
	b = append(b, "\",\"ask\":\""...)
	b = strconv.AppendFloat(b, u.Quote.Ask, 'f', digits, 64)
	b = append(b, "\",\"t\":"...)
	b = strconv.AppendInt(b, u.Quote.ProviderTime.UnixMilli(), 10)
	if u.Quote.Source != "" {
		b = append(b, ",\"source\":"...)
		b = strconv.AppendQuote(b, u.Quote.Source)
	}
	return append(b, "}\n\n"...)
}
