package venue

import (
	"context"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// Sender is the venue as the desk trades through it: the sends of an API run on the executor's
// pre-started workers, each measured from its trigger to the moment its request was written.
// Reads (lookups, the summary) go straight to the API: they are few and never in a burst.
type Sender struct {
	api     API
	exec    *Executor
	account string
	admit   func(context.Context) error
}

// NewSender sends through api on exec; account names the venue account. admit, when not nil,
// is the caller's gate, asked again when a worker takes a send off the queue: a send that waited
// behind a burst past the lease's trust window is then not sent at all (its error wraps admit's
// and ErrNotSent), instead of leaving after the lease may have moved.
func NewSender(api API, exec *Executor, account string, admit func(context.Context) error) *Sender {
	return &Sender{api: api, exec: exec, account: account, admit: admit}
}

// admitted re-checks the gate on the worker, right before the request is built.
func (s *Sender) admitted(ctx context.Context) error {
	if s.admit == nil {
		return nil
	}
	if err := s.admit(ctx); err != nil {
		return fmt.Errorf("%w: %w", err, ErrNotSent)
	}
	return nil
}

// Reachable is false while the venue cannot be reached.
func (s *Sender) Reachable() bool { return s.exec.Reachable() }

// AccountID is the venue account's id.
func (s *Sender) AccountID() string { return s.account }

// PlaceMarket sends o on a worker; trigger is when the order arrived (own time).
func (s *Sender) PlaceMarket(ctx context.Context, o MarketOrder, trigger time.Time) (Outcome, error) {
	var out Outcome
	err := s.exec.Do(ctx, func(ctx context.Context) error {
		if err := s.admitted(ctx); err != nil {
			return err
		}
		var err error
		out, err = s.api.PlaceMarket(s.measure(ctx, trigger), o)
		return err
	})
	return out, err
}

// CloseTrade closes units (nil: all) of trade tradeID on a worker; trigger is the tick (or the
// request) that decided the close.
func (s *Sender) CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time) (Outcome, error) {
	var out Outcome
	err := s.exec.Do(ctx, func(ctx context.Context) error {
		if err := s.admitted(ctx); err != nil {
			return err
		}
		var err error
		out, err = s.api.CloseTrade(s.measure(ctx, trigger), tradeID, units)
		return err
	})
	return out, err
}

// TradeByID looks a trade up (not through the executor).
func (s *Sender) TradeByID(ctx context.Context, id string) (Trade, bool, error) {
	return s.api.TradeByID(ctx, id)
}

// measure reports the call's own time to the executor's observer when its request is written;
// nothing else runs on that path.
func (s *Sender) measure(ctx context.Context, trigger time.Time) context.Context {
	if trigger.IsZero() {
		return ctx
	}
	return WithWrote(ctx, func(wrote time.Time) { s.exec.ownTime(wrote.Sub(trigger)) })
}
