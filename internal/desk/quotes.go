package desk

import (
	"sync"
	"sync/atomic"

	"fxdesk/internal/tick"
)

// Source is a view of prices that also streams them: the tick engine, or on a follower web
// process the ticks the holder publishes (mirror.StreamFollower).
type Source interface {
	tick.Prices
	Updates(symbols []string) (<-chan tick.Update, func())
}

// Quotes is the desk's price view: the tick engine's on the holder. A follower web process shows
// the holder's published ticks when the web tier forwards (SetFollowed), for display: its gate
// refuses every fill and close whatever it shows. Any other process has never seen a price, so
// every symbol reads QUOTING_HALTED and the markets rail has nothing to send.
// The engine is kept even after the lease is lost: standing it down would stop the stream that
// the order gate and the rail read, for every trader connected to this process.
type Quotes struct {
	engine   atomic.Pointer[tick.Engine]
	followed atomic.Pointer[Source]

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, whenever the source changes
}

// SetEngine attaches the running tick engine (holder only). It wins over a followed source.
func (q *Quotes) SetEngine(e *tick.Engine) { q.engine.Store(e); q.sourceChanged() }

// SetFollowed attaches the holder's published ticks (a follower web process).
func (q *Quotes) SetFollowed(s Source) { q.followed.Store(&s); q.sourceChanged() }

// StopFollowing detaches the followed source: a standby that took the lease over shows nothing
// (QUOTING_HALTED) until its own engine is attached, rather than fill at the old holder's last
// published prices.
func (q *Quotes) StopFollowing() { q.followed.Store(nil); q.sourceChanged() }

// Changed is closed when the source changes after the call: a subscriber of Updates must then
// subscribe again, since its channel belongs to the old source (the markets rail ends its stream
// and the browser reconnects).
func (q *Quotes) Changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

func (q *Quotes) sourceChanged() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// Engine returns the attached engine, or nil.
func (q *Quotes) Engine() *tick.Engine { return q.engine.Load() }

func (q *Quotes) source() Source {
	if e := q.engine.Load(); e != nil {
		return e
	}
	if s := q.followed.Load(); s != nil {
		return *s
	}
	return nil
}

// LastTick returns the last quote for symbol, if this process has one.
func (q *Quotes) LastTick(symbol string) (tick.Quote, bool) {
	if s := q.source(); s != nil {
		return s.LastTick(symbol)
	}
	return tick.Quote{}, false
}

// SymbolState is the source's state for symbol, or QUOTING_HALTED where there is none.
func (q *Quotes) SymbolState(symbol string) tick.State {
	if s := q.source(); s != nil {
		return s.SymbolState(symbol)
	}
	return tick.QuotingHalted
}

// Updates subscribes to accepted quotes. Without a source the channel never carries anything
// and is closed by cancel.
func (q *Quotes) Updates(symbols []string) (<-chan tick.Update, func()) {
	if s := q.source(); s != nil {
		return s.Updates(symbols)
	}
	ch := make(chan tick.Update)
	var once atomic.Bool
	return ch, func() {
		if !once.Swap(true) {
			close(ch)
		}
	}
}
