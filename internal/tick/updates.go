package tick

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Update is one accepted quote, as delivered to Updates subscribers.
type Update struct {
	Symbol string
	Quote  Quote
}

type subscriber struct {
	ch      chan Update
	filter  map[string]struct{} // nil: every symbol
	dropped atomic.Uint64

	logMu         sync.Mutex // guards the drop log's rate limit
	loggedAt      time.Time
	loggedDropped uint64
}

// Updates subscribes to accepted quotes for symbols (none: every symbol). Each subscriber has
// its own buffer of Config.UpdateBuffer; when it is full the update is dropped for that
// subscriber alone and counted in Status.UpdatesDropped — the engine never waits for a reader.
// cancel unsubscribes and closes the channel; it is safe to call more than once.
func (e *Engine) Updates(symbols []string) (<-chan Update, func()) {
	s := &subscriber{ch: make(chan Update, e.cfg.UpdateBuffer)}
	if len(symbols) > 0 {
		s.filter = make(map[string]struct{}, len(symbols))
		for _, sym := range symbols {
			s.filter[sym] = struct{}{}
		}
	}
	e.subsMu.Lock()
	e.subs[s] = struct{}{}
	e.subsMu.Unlock()
	var once atomic.Bool
	return s.ch, func() {
		if once.Swap(true) {
			return
		}
		// Publishing holds the read lock, so once the write lock is ours no send is in flight.
		e.subsMu.Lock()
		delete(e.subs, s)
		e.subsMu.Unlock()
		close(s.ch)
	}
}

// DroppedFor returns how many updates the subscription ch (from Updates) has lost; 0 once it is
// cancelled.
func (e *Engine) DroppedFor(ch <-chan Update) uint64 {
	e.subsMu.RLock()
	defer e.subsMu.RUnlock()
	for s := range e.subs {
		if (<-chan Update)(s.ch) == ch {
			return s.dropped.Load()
		}
	}
	return 0
}

// publishLocked offers q to every interested subscriber; the caller holds subsMu for reading.
func (e *Engine) publishLocked(symbol string, q *Quote) {
	for s := range e.subs {
		if s.filter != nil {
			if _, ok := s.filter[symbol]; !ok {
				continue
			}
		}
		select {
		case s.ch <- Update{Symbol: symbol, Quote: *q}:
		default:
			s.dropped.Add(1)
			e.updatesDropped.Add(1)
			e.logDropped(symbol, s)
		}
	}
}

// dropLogEvery bounds the "updates dropped" line to one per subscriber and period.
const dropLogEvery = 10 * time.Second

// logDropped records at debug level, at most once per dropLogEvery for s, that s lost updates.
// Dropping is by design for a reader that cannot keep up (a browser on the markets stream); a
// reader for which a loss matters watches its own count (DroppedFor) and says so itself, as the
// risk engine does.
func (e *Engine) logDropped(symbol string, s *subscriber) {
	now := e.cfg.Now()
	s.logMu.Lock()
	if !s.loggedAt.IsZero() && now.Sub(s.loggedAt) < dropLogEvery {
		s.logMu.Unlock()
		return
	}
	total := s.dropped.Load()
	since := total - s.loggedDropped
	s.loggedAt, s.loggedDropped = now, total
	s.logMu.Unlock()
	e.log.Debug("tick updates dropped for a subscriber that is not keeping up",
		slog.String("symbol", symbol), slog.Uint64("droppedSinceLastLine", since),
		slog.Uint64("droppedBySubscriber", total), slog.Int("buffer", cap(s.ch)))
}
