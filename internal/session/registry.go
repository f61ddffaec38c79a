package session

import (
	"maps"
	"slices"
)

// Registry holds calendars by name. It is immutable after construction and safe for concurrent
// use; build a new one to change it.
type Registry struct {
	byName map[string]*Calendar
}

// NewRegistry holds the given calendars; a later calendar with the same name replaces an earlier.
func NewRegistry(cals ...*Calendar) *Registry {
	r := &Registry{byName: make(map[string]*Calendar, len(cals))}
	for _, c := range cals {
		r.byName[c.Name()] = c
	}
	return r
}

// DefaultRegistry holds the built-in "forex" and "metals" calendars.
func DefaultRegistry() *Registry {
	return NewRegistry(Forex(), Metals())
}

// Lookup returns the calendar with the given name.
func (r *Registry) Lookup(name string) (*Calendar, bool) {
	c, ok := r.byName[name]
	return c, ok
}

// Names lists the registered calendar names in order.
func (r *Registry) Names() []string {
	return slices.Sorted(maps.Keys(r.byName))
}

// OpenAlways returns a registry with the same names in which every calendar is AlwaysOpen: the
// FXDESK_CALENDAR=always-open switch, which must not change which names resolve.
func (r *Registry) OpenAlways() *Registry {
	open := AlwaysOpen()
	out := &Registry{byName: make(map[string]*Calendar, len(r.byName))}
	for name := range r.byName {
		out.byName[name] = open
	}
	return out
}
