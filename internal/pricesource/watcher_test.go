package pricesource

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/tick"
)

// The debounce as a pure decision: raise at once, refresh when the set changes, resolve only
// after every symbol has been back for resolveAfter without a break.
func TestFailoverStateDebounces(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var st failoverState
	off := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for i, step := range []struct {
		at   int
		off  map[string]string
		want action
	}{
		{0, off(), actNone},                                        // all on the primary: nothing to say
		{1, off("EURUSD", "backup"), actRaise},                     // a failover raises at once
		{2, off("EURUSD", "backup"), actNone},                      // the same state is not raised again
		{3, off("EURUSD", "backup", "GBPUSD", "backup"), actRaise}, // another symbol refreshes the alert
		{4, off(), actNone},                                        // all back: wait
		{20, off("EURUSD", "backup"), actRaise},                    // flapping: the same alert, refreshed
		{21, off(), actNone},                                       // back again: the wait starts over
		{50, off(), actNone},                                       // 29s: not yet
		{51, off(), actResolve},                                    // 30s without a break
		{80, off(), actNone},                                       // nothing open, nothing to do
	} {
		if got := st.next(step.off, at(step.at), 30*time.Second); got != step.want {
			t.Fatalf("step %d (t=%ds, off %v): %v, want %v", i, step.at, step.off, got, step.want)
		}
	}
	// A new holder's watcher starts raised: an alert its predecessor left open is resolved once
	// every symbol has been on its primary for the debounce.
	w := NewWatcher(WatcherConfig{})
	if w.state.next(off(), at(0), 30*time.Second) != actNone || w.state.next(off(), at(30), 30*time.Second) != actResolve {
		t.Fatal("a new watcher does not resolve a stale alert")
	}
}

// switchEngine feeds the watcher a switch stream and the selections that go with it.
type switchEngine struct {
	mu       sync.Mutex
	sels     []tick.Selection
	switches chan tick.Switch
}

func (e *switchEngine) Selections() []tick.Selection {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]tick.Selection(nil), e.sels...)
}

func (e *switchEngine) SourceStatuses() []tick.SourceStatus {
	return []tick.SourceStatus{{Name: "primary"}, {Name: "backup"}}
}

func (e *switchEngine) Switches() (<-chan tick.Switch, func()) { return e.switches, func() {} }

func (e *switchEngine) switchTo(symbol, from, to string) {
	e.mu.Lock()
	for i := range e.sels {
		if e.sels[i].Symbol == symbol {
			e.sels[i].Source = to
		}
	}
	e.mu.Unlock()
	e.switches <- tick.Switch{Symbol: symbol, From: from, To: to, Reason: "test"}
}

// inbox records what the watcher asks of the alert inbox, one call at a time.
type inbox struct{ calls chan string }

func (in *inbox) Raise(_ context.Context, code string, sev alert.Severity, msg string, _ any) error {
	in.calls <- "raise " + code + " " + string(sev) + ": " + msg
	return nil
}

func (in *inbox) Resolve(_ context.Context, code string) error {
	in.calls <- "resolve " + code
	return nil
}

// The watcher over a fake switch stream: every switch is counted, a failover raises the alert,
// a pinned symbol does not, and the return to the primary resolves it after the debounce.
func TestWatcherRaisesAndResolvesTheAlert(t *testing.T) {
	e := &switchEngine{switches: make(chan tick.Switch),
		sels: []tick.Selection{{Symbol: "EURUSD", Source: "primary"}, {Symbol: "GBPUSD", Source: "primary"}}}
	in := &inbox{calls: make(chan string, 8)}
	var mu sync.Mutex
	counted := 0
	clock := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	w := NewWatcher(WatcherConfig{Engine: e, Alerts: in, Log: slog.New(slog.DiscardHandler), ResolveAfter: time.Minute, Every: time.Hour, Grace: 10 * time.Second,
		Now:      func() time.Time { mu.Lock(); defer mu.Unlock(); return clock },
		Switched: func(tick.Switch) { mu.Lock(); counted++; mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Within the grace of a start, a symbol on the backup is the sources coming up: no alert.
	e.switchTo("EURUSD", "primary", "backup")
	e.switchTo("EURUSD", "backup", "primary")
	mu.Lock()
	clock = clock.Add(11 * time.Second)
	mu.Unlock()
	e.switchTo("EURUSD", "primary", "backup")
	if got := <-in.calls; got != "raise price-source-failover warning: Some symbols quote from a backup price source: EURUSD from backup (docs/operations.md, «Price sources»)." {
		t.Fatalf("first call: %q", got)
	}
	// A dealer's pin elsewhere is not a failover: the alert is not refreshed for it.
	e.mu.Lock()
	e.sels[1].Pinned = "backup"
	e.mu.Unlock()
	e.switchTo("GBPUSD", "primary", "backup")
	e.switchTo("EURUSD", "backup", "primary")
	// Back on the primary, within the debounce: nothing yet. Past it: resolved.
	mu.Lock()
	clock = clock.Add(2 * time.Minute)
	mu.Unlock()
	e.switchTo("EURUSD", "primary", "primary") // any reading past the debounce decides
	if got := <-in.calls; got != "resolve price-source-failover" {
		t.Fatalf("second call: %q, want the resolve", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if counted != 6 {
		t.Fatalf("counted %d switches, want 6", counted)
	}
}
