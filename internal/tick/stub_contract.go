package tick

import (
	"context"
	"errors"
	"time"
)

// Pin makes symbol quote from source alone; "" unpins. An unknown source or symbol is an error.
func (e *Engine) Pin(symbol, source string) error { return errors.New("tick: Pin not implemented yet") }

// Halt stops (halted) or resumes quoting symbol: while halted nothing is published and
// SymbolState is QUOTING_HALTED.
func (e *Engine) Halt(symbol string, halted bool) error {
	return errors.New("tick: Halt not implemented yet")
}

// Selections returns every wanted symbol's selection, in symbol order.
func (e *Engine) Selections() []Selection { return nil }

// SourceStatuses returns every source's status, in priority order.
func (e *Engine) SourceStatuses() []SourceStatus { return nil }

// Rejected returns up to limit filtered ticks, newest first.
func (e *Engine) Rejected(limit int) []RejectedTick { return nil }

// Switches subscribes to changes of active source; cancel unsubscribes and closes the channel.
func (e *Engine) Switches() (<-chan Switch, func()) {
	ch := make(chan Switch)
	return ch, func() {}
}

// NewWebsocketSource builds a provider-websocket source (Massive/Polygon forex protocol).
func NewWebsocketSource(name, url, key string, opts WebsocketOptions) Source {
	return &wsSource{name: name, url: url, key: key, opts: opts}
}

// WebsocketOptions shapes a websocket source; zero fields take the Config defaults.
type WebsocketOptions struct {
	SilenceAfter                  time.Duration
	BackoffMin, BackoffMax        time.Duration
	DialTimeout, HandshakeTimeout time.Duration
	ReadLimit                     int64
	KeyRefusals                   int
	// Now is the source's clock for silence; default time.Now.
	Now func() time.Time
}

type wsSource struct {
	name, url, key string
	opts           WebsocketOptions
}

func (s *wsSource) Name() string { return s.name }
func (s *wsSource) Run(ctx context.Context, feed Feed) error {
	<-ctx.Done()
	return nil
}
