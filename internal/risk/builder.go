package risk

import "context"

// A ViewSink takes a risk view in parts: the terms first, then the accounts, then the positions
// and resting orders in any number of batches, in any interleaving. A Snapshot collects them;
// a ViewBuilder builds the engine's view from them as they come.
type ViewSink interface {
	AddTerms(instruments []Instrument, groups []GroupTerms)
	AddAccounts(accounts []Account)
	AddPositions(positions []Position)
	AddOrders(orders []Order)
}

// A StreamLoader is a Loader that can also hand the view over in parts as its reads return
// them. The engine prefers it: it builds the view while the rows still arrive, off its lock,
// instead of installing a whole Snapshot after the last row (docs/boot.md, «The risk view's
// read»). LoadInto's calls to the sink come from one goroutine at a time, in ViewSink's order;
// when it returns an error the parts given are dropped and the load is retried whole.
type StreamLoader interface {
	Loader
	LoadInto(ctx context.Context, sink ViewSink) error
}

// AddTerms, AddAccounts, AddPositions and AddOrders collect the parts into s.
func (s *Snapshot) AddTerms(instruments []Instrument, groups []GroupTerms) {
	s.Instruments, s.Groups = append(s.Instruments, instruments...), append(s.Groups, groups...)
}
func (s *Snapshot) AddAccounts(accounts []Account) { s.Accounts = append(s.Accounts, accounts...) }
func (s *Snapshot) AddPositions(positions []Position) {
	s.Positions = append(s.Positions, positions...)
}
func (s *Snapshot) AddOrders(orders []Order) { s.Orders = append(s.Orders, orders...) }

// A viewBuilder builds an engine's view from its parts (ViewSink), off the engine's lock; the
// engine installs the result by swapping it in. Its methods must not be called concurrently.
type viewBuilder struct {
	e Engine // only its view is used: the view's methods live on the engine
}

// newViewBuilder is a builder of an empty view.
func newViewBuilder() *viewBuilder {
	b := &viewBuilder{}
	b.e.view = newView()
	return b
}

func (b *viewBuilder) AddTerms(instruments []Instrument, groups []GroupTerms) {
	b.e.addTermsLocked(instruments, groups)
}
func (b *viewBuilder) AddAccounts(accounts []Account)    { b.e.addAccountsLocked(accounts) }
func (b *viewBuilder) AddPositions(positions []Position) { b.e.addPositionsLocked(positions) }
func (b *viewBuilder) AddOrders(orders []Order)          { b.e.addOrdersLocked(orders) }
