package pricesource

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/tick"
)

// AlertFailover is raised (warning) while any symbol quotes from other than its first source by
// the engine's choice, and resolved when every one is back (docs/operations.md, «Price sources»).
const AlertFailover = "price-source-failover"

// DefaultResolveAfter is how long every symbol must have been back on its first source before
// the alert is resolved: a market that fails over and back every few seconds keeps one alert
// open instead of opening a new incident each time.
const DefaultResolveAfter = 30 * time.Second

// OffPrimary is true when sel quotes from other than primary by the engine's choice: a pinned
// symbol is where a dealer put it (audited), and a halted one quotes nothing.
func OffPrimary(sel tick.Selection, primary string) bool {
	return sel.Source != "" && sel.Source != primary && sel.Pinned == "" && !sel.Halted
}

// Alerts is the part of the alert inbox the watcher uses; *alert.Inbox is one.
type Alerts interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	Resolve(ctx context.Context, code string) error
}

// SwitchEngine is what the watcher needs of the holder's engine; *tick.Engine is one.
type SwitchEngine interface {
	Selections() []tick.Selection
	SourceStatuses() []tick.SourceStatus
	Switches() (<-chan tick.Switch, func())
}

// WatcherConfig shapes a Watcher. Engine, Alerts and Log are required.
type WatcherConfig struct {
	Engine SwitchEngine
	Alerts Alerts
	// Switched is called for every switch; nil for none. (The engine counts switches itself:
	// fxdesk_price_source_switches_total.)
	Switched func(tick.Switch)
	Log      *slog.Logger
	// ResolveAfter: default DefaultResolveAfter.
	ResolveAfter time.Duration
	// Every is how often the selections are read even without a switch. Default 1s.
	Every time.Duration
	// Grace is how long after Run starts the alert is not raised: the sources connect one after
	// the other, a symbol may start on a backup whose first quote came first, and it returns to
	// the primary only after the engine's hold-down. Set it to the hold-down and a little more.
	// Default 0.
	Grace time.Duration
	// Now is the clock of the debounce. Default time.Now.
	Now func() time.Time
}

// Watcher logs and counts every switch of the holder's engine and keeps the alert
// price-source-failover true. Run it on the holder, beside the engine.
type Watcher struct {
	cfg     WatcherConfig
	state   failoverState
	started time.Time
}

// NewWatcher returns a watcher; it does nothing until Run.
func NewWatcher(cfg WatcherConfig) *Watcher {
	if cfg.ResolveAfter <= 0 {
		cfg.ResolveAfter = DefaultResolveAfter
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Raised until proven otherwise: an alert a previous holder left open while a symbol was off
	// its primary is resolved by this one once every symbol has been back for ResolveAfter.
	return &Watcher{cfg: cfg, state: failoverState{raised: true}}
}

// Run watches until ctx ends and returns nil then. An inbox that cannot be written is logged and
// asked again on the next reading: the alert is a report, and prices must not wait for it.
func (w *Watcher) Run(ctx context.Context) error {
	w.started = w.cfg.Now()
	switches, cancel := w.cfg.Engine.Switches()
	defer cancel()
	t := time.NewTicker(w.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case sw, ok := <-switches:
			if !ok {
				<-ctx.Done()
				return nil
			}
			w.switched(ctx, sw)
		case <-t.C:
		}
		w.evaluate(ctx)
	}
}

// switched counts sw. The engine logs every switch itself, with symbol, from, to and reason
// (internal/tick), so it is not logged twice here.
func (w *Watcher) switched(_ context.Context, sw tick.Switch) {
	if w.cfg.Switched != nil {
		w.cfg.Switched(sw)
	}
}

// evaluate reads the selections and raises, refreshes or resolves the alert as the state says.
func (w *Watcher) evaluate(ctx context.Context) {
	statuses := w.cfg.Engine.SourceStatuses()
	if len(statuses) == 0 {
		return
	}
	off := OffPrimarySymbols(w.cfg.Engine.Selections(), statuses[0].Name)
	now := w.cfg.Now()
	if len(off) > 0 && now.Sub(w.started) < w.cfg.Grace {
		return // the sources are still coming up
	}
	switch w.state.next(off, now, w.cfg.ResolveAfter) {
	case actRaise:
		msg := "Some symbols quote from a backup price source: " + summary(off) + " (docs/operations.md, «Price sources»)."
		if err := w.cfg.Alerts.Raise(ctx, AlertFailover, alert.Warning, msg, map[string]any{"primary": statuses[0].Name, "symbols": off}); err != nil {
			w.cfg.Log.WarnContext(ctx, "price source alert not raised", slog.Any("err", err))
			w.state.raised = false // ask again next time
		}
	case actResolve:
		if err := w.cfg.Alerts.Resolve(ctx, AlertFailover); err != nil {
			w.cfg.Log.WarnContext(ctx, "price source alert not resolved", slog.Any("err", err))
			w.state.raised = true
		}
	}
}

// OffPrimarySymbols maps each symbol quoting from other than primary (OffPrimary) to its source.
func OffPrimarySymbols(sels []tick.Selection, primary string) map[string]string {
	off := map[string]string{}
	for _, s := range sels {
		if OffPrimary(s, primary) {
			off[s.Symbol] = s.Source
		}
	}
	return off
}

func summary(off map[string]string) string {
	var parts []string
	for sym, src := range off {
		parts = append(parts, sym+" from "+src)
	}
	slices.Sort(parts)
	if len(parts) > 10 {
		parts = append(parts[:10], "…")
	}
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += ", "
		}
		out += p
	}
	return out
}

type action int

const (
	actNone action = iota
	actRaise
	actResolve
)

// failoverState is the alert's debounce, a pure decision over successive readings: raise at once
// when a symbol leaves its primary, again whenever the set of symbols off it changes (the inbox
// refreshes the open row's message, not a new incident), and resolve only once every symbol has
// been back for resolveAfter without a break.
type failoverState struct {
	raised    bool
	last      map[string]string
	allBackAt time.Time // when the set last became empty; zero while it is not
}

func (s *failoverState) next(off map[string]string, now time.Time, resolveAfter time.Duration) action {
	if len(off) > 0 {
		s.allBackAt = time.Time{}
		changed := !s.raised || !equalMaps(off, s.last)
		s.last, s.raised = off, true
		if changed {
			return actRaise
		}
		return actNone
	}
	s.last = nil
	if !s.raised {
		return actNone
	}
	if s.allBackAt.IsZero() {
		s.allBackAt = now
	}
	if now.Sub(s.allBackAt) < resolveAfter {
		return actNone
	}
	s.raised, s.allBackAt = false, time.Time{}
	return actResolve
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
