package desk

import (
	"sync/atomic"

	"fxdesk/internal/tick"
)

// Quotes is the desk's price view: the tick engine's on the holder. Any other process has never
// seen a price, so every symbol reads QUOTING_HALTED and the markets rail has nothing to send.
// The engine is kept even after the lease is lost: standing it down would stop the stream that
// the order gate and the rail read, for every trader connected to this process.
type Quotes struct {
	engine atomic.Pointer[tick.Engine]
}

// SetEngine attaches the running tick engine (holder only).
func (q *Quotes) SetEngine(e *tick.Engine) { q.engine.Store(e) }

// Engine returns the attached engine, or nil.
func (q *Quotes) Engine() *tick.Engine { return q.engine.Load() }

// LastTick returns the last quote for symbol, if this process has one.
func (q *Quotes) LastTick(symbol string) (tick.Quote, bool) {
	if e := q.engine.Load(); e != nil {
		return e.LastTick(symbol)
	}
	return tick.Quote{}, false
}

// SymbolState is the engine's state for symbol, or QUOTING_HALTED where there is no engine.
func (q *Quotes) SymbolState(symbol string) tick.State {
	if e := q.engine.Load(); e != nil {
		return e.SymbolState(symbol)
	}
	return tick.QuotingHalted
}

// Updates subscribes to accepted quotes. Without an engine the channel never carries anything
// and is closed by cancel.
func (q *Quotes) Updates(symbols []string) (<-chan tick.Update, func()) {
	if e := q.engine.Load(); e != nil {
		return e.Updates(symbols)
	}
	ch := make(chan tick.Update)
	var once atomic.Bool
	return ch, func() {
		if !once.Swap(true) {
			close(ch)
		}
	}
}
