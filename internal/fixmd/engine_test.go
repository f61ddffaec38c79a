package fixmd_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"fxdesk/internal/fixmd"
	"fxdesk/internal/tick"
)

// The source inside a real tick.Engine: the engine's wanted symbols are subscribed at the venue,
// the snapshot and then an incremental are published with the source's name, a symbol the
// engine comes to want later is subscribed live, and the engine sees the session connected.
func TestEngineQuotesFromTheFIXSource(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.feed.SetQuote("EURUSD", 1.10000, 1.10010); err != nil {
		t.Fatal(err)
	}
	if _, err := r.feed.SetQuote("GBPUSD", 1.25000, 1.25020); err != nil {
		t.Fatal(err)
	}
	src, err := fixmd.New(r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := tick.New(tick.Config{Sources: []tick.Source{src}}, slog.New(slog.DiscardHandler))
	if err := e.SetWanted([]string{"EURUSD"}); err != nil {
		t.Fatal(err)
	}
	updates, cancelUpdates := e.Updates(nil)
	defer cancelUpdates()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine Run: %v", err)
		}
	}()

	await := func(what, symbol string, bid, ask float64) tick.Quote {
		t.Helper()
		deadline := time.After(wait)
		for {
			select {
			case u := <-updates:
				if u.Symbol == symbol && u.Quote.Bid == bid && u.Quote.Ask == ask {
					return u.Quote
				}
			case <-deadline:
				t.Fatalf("the engine published no %s within %s (last: %+v)", what, wait, mustLast(e, symbol))
			}
		}
	}
	q := await("EURUSD snapshot", "EURUSD", 1.10000, 1.10010)
	if q.Source != "lpfix" || q.ProviderTime.IsZero() {
		t.Fatalf("published %+v; want it from lpfix with the provider's time", q)
	}
	if _, err := r.feed.SetQuote("EURUSD", 1.10020, 1.10030); err != nil {
		t.Fatal(err)
	}
	await("EURUSD incremental", "EURUSD", 1.10020, 1.10030)
	if err := e.SetWanted([]string{"EURUSD", "GBPUSD"}); err != nil {
		t.Fatal(err)
	}
	await("GBPUSD snapshot once wanted", "GBPUSD", 1.25000, 1.25020)
	st := e.SourceStatuses()
	if len(st) != 1 || st[0].Name != "lpfix" || !st[0].Connected || st[0].Published < 3 {
		t.Fatalf("source statuses %+v; want lpfix connected with 3 quotes published", st)
	}
}

func mustLast(e *tick.Engine, symbol string) any {
	q, ok := e.LastTick(symbol)
	if !ok {
		return "none"
	}
	return q
}
