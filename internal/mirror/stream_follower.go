package mirror

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/redisname"
	"fxdesk/internal/session"
	"fxdesk/internal/tick"
)

// StreamFollowerConfig builds a StreamFollower; Redis is required.
type StreamFollowerConfig struct {
	Redis redis.UniversalClient
	// Names gives the channel to follow, the same as the install's publisher's (the zero value
	// is the default install's fx:ticks).
	Names redisname.Names
	// CalendarFor gives a symbol's session calendar (nil: always open), as the engine's does.
	CalendarFor func(symbol string) *session.Calendar
	// StaleAfter is the trading staleness (fxTradingQuoteStaleSecondsFx), as the engine's is.
	StaleAfter func() time.Duration
	// UpdateBuffer is each Updates subscriber's buffer (default 256).
	UpdateBuffer int
	Now          func() time.Time
}

// StreamFollower holds the last tick the holder published for each symbol and fans ticks out to
// Updates subscribers (the markets rail). It answers like the tick engine: LastTick,
// SymbolState, Updates.
type StreamFollower struct {
	cfg StreamFollowerConfig
	log *slog.Logger

	mu     sync.RWMutex
	quotes map[string]tick.Quote
	fence  termFence // an older term than one heard is a deposed holder

	subsMu sync.RWMutex
	subs   map[*subscriber]struct{}
}

type subscriber struct {
	ch     chan tick.Update
	filter map[string]struct{}
}

// NewStreamFollower returns a follower; it refuses a missing Redis.
func NewStreamFollower(cfg StreamFollowerConfig, log *slog.Logger) (*StreamFollower, error) {
	if cfg.Redis == nil || log == nil {
		return nil, errors.New("tick stream follower: Redis and a logger are required")
	}
	if cfg.StaleAfter == nil {
		cfg.StaleAfter = func() time.Duration { return 30 * time.Second }
	}
	if cfg.UpdateBuffer <= 0 {
		cfg.UpdateBuffer = 256
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &StreamFollower{cfg: cfg, log: log, quotes: map[string]tick.Quote{}, subs: map[*subscriber]struct{}{}}, nil
}

// Run listens on the install's ticks channel until ctx ends; go-redis resubscribes after a lost
// connection.
func (f *StreamFollower) Run(ctx context.Context) error {
	channel := f.cfg.Names.Ticks()
	ps := f.cfg.Redis.Subscribe(ctx, channel)
	defer ps.Close()
	f.log.InfoContext(ctx, "fx ticks followed from the lease holder (display only: this process never fills at them)", slog.String("channel", channel))
	ch := ps.Channel(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			f.apply([]byte(m.Payload), f.cfg.Now())
		}
	}
}

func (f *StreamFollower) apply(payload []byte, heardAt time.Time) {
	symbol, q, term, ok := decodeTick(payload, heardAt)
	if !ok {
		return
	}
	f.mu.Lock()
	if !f.fence.admit(term) {
		f.mu.Unlock()
		return
	}
	f.quotes[symbol] = q
	f.mu.Unlock()
	f.subsMu.RLock()
	for s := range f.subs {
		if s.filter != nil {
			if _, ok := s.filter[symbol]; !ok {
				continue
			}
		}
		select {
		case s.ch <- tick.Update{Symbol: symbol, Quote: q}:
		default: // a reader that cannot keep up loses updates; the holder never waits for it
		}
	}
	f.subsMu.RUnlock()
}

// LastTick returns the last quote heard for symbol.
func (f *StreamFollower) LastTick(symbol string) (tick.Quote, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	q, ok := f.quotes[symbol]
	return q, ok
}

// SymbolState is the engine's rule on what was heard: MARKET_CLOSED when the calendar says so,
// QUOTING_HALTED when never heard or older than StaleAfter (on the holder's clock), else QUOTING.
// A provider's own "closed" announcement is not relayed: such a symbol stops ticking and reads
// QUOTING_HALTED here once stale.
func (f *StreamFollower) SymbolState(symbol string) tick.State {
	now := f.cfg.Now()
	if f.cfg.CalendarFor != nil {
		if cal := f.cfg.CalendarFor(symbol); cal != nil && !cal.IsOpen(now) {
			return tick.MarketClosed
		}
	}
	q, ok := f.LastTick(symbol)
	if !ok || now.Sub(q.ReceivedAt) > f.cfg.StaleAfter() {
		return tick.QuotingHalted
	}
	return tick.Quoting
}

// Updates subscribes to heard ticks for symbols (none: every symbol); cancel unsubscribes and
// closes the channel, and is safe to call more than once.
func (f *StreamFollower) Updates(symbols []string) (<-chan tick.Update, func()) {
	s := &subscriber{ch: make(chan tick.Update, f.cfg.UpdateBuffer)}
	if len(symbols) > 0 {
		s.filter = make(map[string]struct{}, len(symbols))
		for _, sym := range symbols {
			s.filter[sym] = struct{}{}
		}
	}
	f.subsMu.Lock()
	f.subs[s] = struct{}{}
	f.subsMu.Unlock()
	var once atomic.Bool
	return s.ch, func() {
		if once.Swap(true) {
			return
		}
		f.subsMu.Lock()
		delete(f.subs, s)
		f.subsMu.Unlock()
		close(s.ch)
	}
}
