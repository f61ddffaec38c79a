package tick

import (
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/session"
)

// Quote is a symbol's last published price.
type Quote struct {
	Bid, Ask     float64
	ReceivedAt   time.Time // engine clock when the frame carrying it arrived
	ProviderTime time.Time // the provider's own timestamp (millisecond precision)
	Source       string    // the price source it was published from ("primary", "backup", …)
}

// Mid is the midpoint of bid and ask.
func (q Quote) Mid() float64 { return (q.Bid + q.Ask) / 2 }

// slot is one symbol's cell in the quote map. q, providerClosed and halted are written under mu
// (by whichever source's offer publishes), read by anyone without a lock.
type slot struct {
	symbol         string
	pair           string
	pip            float64
	q              atomic.Pointer[Quote] // the last PUBLISHED quote
	providerClosed atomic.Bool           // the active source announced the symbol closed
	halted         atomic.Bool           // a dealer halted quoting

	mu sync.Mutex
	st symState
}

// slotIndex is immutable once published; adding a symbol publishes a new index.
type slotIndex struct {
	bySymbol map[string]*slot
	byPair   map[string]*slot
}

// LastTick returns symbol's last accepted quote. It takes no lock and allocates nothing.
func (e *Engine) LastTick(symbol string) (Quote, bool) {
	sl := e.slots.Load().bySymbol[symbol]
	if sl == nil {
		return Quote{}, false
	}
	q := sl.q.Load()
	if q == nil {
		return Quote{}, false
	}
	return *q, true
}

// EachWantedQuote calls fn for every wanted symbol that has a quote, in symbol order. It takes no
// lock and looks nothing up: the quote mirror walks 5,000 symbols with it on every publish. The
// quote passed to fn is the stored one; it is never modified and must not be.
func (e *Engine) EachWantedQuote(fn func(symbol string, q *Quote)) {
	p := e.wantedSlots.Load()
	if p == nil {
		return
	}
	for _, sl := range *p {
		if q := sl.q.Load(); q != nil {
			fn(sl.symbol, q)
		}
	}
}

// State is a symbol's tradability.
type State string

const (
	// Quoting: the session is open and the last quote is fresh.
	Quoting State = "QUOTING"
	// QuotingHalted: the session is open but the symbol was never quoted or its last quote is
	// older than StaleAfter. Trading must refuse it.
	QuotingHalted State = "QUOTING_HALTED"
	// MarketClosed: the calendar says closed, or the provider announced the symbol closed.
	MarketClosed State = "MARKET_CLOSED"
)

// SymbolState decides symbol's state at Config.Now.
func (e *Engine) SymbolState(symbol string) State {
	return e.stateAt(symbol, e.cfg.Now(), e.cfg.StaleAfter())
}

func (e *Engine) stateAt(symbol string, now time.Time, staleAfter time.Duration) State {
	if cal := e.calendar(symbol); cal != nil && !cal.IsOpen(now) {
		return MarketClosed
	}
	sl := e.slots.Load().bySymbol[symbol]
	if sl == nil {
		return QuotingHalted
	}
	if sl.halted.Load() {
		return QuotingHalted
	}
	if sl.providerClosed.Load() {
		return MarketClosed
	}
	q := sl.q.Load()
	if q == nil || now.Sub(q.ReceivedAt) > staleAfter {
		return QuotingHalted
	}
	return Quoting
}

func (e *Engine) calendar(symbol string) *session.Calendar {
	if e.cfg.CalendarFor == nil {
		return nil
	}
	return e.cfg.CalendarFor(symbol)
}
