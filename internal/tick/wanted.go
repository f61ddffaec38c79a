package tick

import (
	"fmt"
	"slices"

	"fxdesk/internal/fx"
)

// SetSource replaces the symbols wanted by one named source ("instruments", "exposed",
// "pinned", …); the engine subscribes the union of all sources. Changes go out on the live
// socket without reconnecting. Every symbol must be a desk symbol; if one is not, nothing
// changes and the error names it. An empty list removes the source.
func (e *Engine) SetSource(name string, symbols []string) error {
	if err := checkSymbols(symbols); err != nil {
		return fmt.Errorf("set source %q: %w", name, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSourceLocked(name, slices.Clone(symbols))
	return nil
}

// SetWanted replaces the engine's own source, for callers that compute the whole set themselves.
func (e *Engine) SetWanted(symbols []string) error { return e.SetSource("wanted", symbols) }

// adhocSource holds what Subscribe and Unsubscribe change.
const adhocSource = "adhoc"

// Subscribe adds symbols to the ad-hoc source.
func (e *Engine) Subscribe(symbols ...string) error {
	if err := checkSymbols(symbols); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSourceLocked(adhocSource, append(slices.Clone(e.wantSets[adhocSource]), symbols...))
	return nil
}

// Unsubscribe removes symbols from the ad-hoc source; a symbol another source wants stays
// subscribed.
func (e *Engine) Unsubscribe(symbols ...string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSourceLocked(adhocSource, slices.DeleteFunc(slices.Clone(e.wantSets[adhocSource]), func(s string) bool {
		return slices.Contains(symbols, s)
	}))
	return nil
}

func checkSymbols(symbols []string) error {
	for _, s := range symbols {
		if !fx.ValidSymbol(s) {
			return fmt.Errorf("symbol %q is not six upper-case letters like EURUSD", s)
		}
	}
	return nil
}

func (e *Engine) setSourceLocked(name string, symbols []string) {
	if len(symbols) == 0 {
		delete(e.wantSets, name)
	} else {
		e.wantSets[name] = symbols
	}
	e.recomputeLocked()
}

// Wanted returns the sorted union of all sources.
func (e *Engine) Wanted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.wanted)
}

func (e *Engine) recomputeLocked() {
	var all []string
	for _, syms := range e.wantSets {
		all = append(all, syms...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if slices.Equal(all, e.wanted) {
		return
	}
	e.wanted = all
	// New symbols get a slot now, so quotes arriving right after the subscribe have a home.
	idx := e.slots.Load()
	var missing []string
	for _, s := range all {
		if _, ok := idx.bySymbol[s]; !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		next := &slotIndex{
			bySymbol: make(map[string]*slot, len(idx.bySymbol)+len(missing)),
			byPair:   make(map[string]*slot, len(idx.byPair)+len(missing)),
		}
		for k, v := range idx.bySymbol {
			next.bySymbol[k] = v
		}
		for k, v := range idx.byPair {
			next.byPair[k] = v
		}
		for _, s := range missing {
			pair, _ := ProviderPair(s) // validated by SetSource
			sl := &slot{symbol: s, pair: pair, pip: e.cfg.PipSize(s), st: e.newSymState()}
			next.bySymbol[s] = sl
			next.byPair[pair] = sl
		}
		e.slots.Store(next)
		idx = next
	}
	ordered := make([]*slot, len(all))
	for i, s := range all {
		ordered[i] = idx.bySymbol[s]
	}
	e.wantedSlots.Store(&ordered)
	for _, src := range e.srcs {
		select {
		case src.wantedCh <- struct{}{}:
		default: // a change is already pending; the source reads the latest set
		}
	}
}
