package fix

import (
	"context"
	"time"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/field"
	"github.com/quickfixgo/fix44/newordersingle"
	"github.com/quickfixgo/quickfix"
	"github.com/shopspring/decimal"
)

// Reservation is trade key's reserved close as the holder keeps it ("" none) and whether it is usable.
func (s *Session) Reservation(key string) (clOrdID string, ready, inherited bool) {
	s.trades.mu.Lock()
	defer s.trades.mu.Unlock()
	if t := s.trades.byKey[key]; t != nil {
		return t.reserved, t.ready, t.inherited
	}
	return "", false, false
}

// WaitReservations waits until no reservation is being written.
func (s *Session) WaitReservations(ctx context.Context) error {
	for s.trades.reservationsPending() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// SendRaw writes a NewOrderSingle for clOrdID to the session, as an earlier holder did (no
// journal, no memory), and waits for the first report about it.
func (s *Session) SendRaw(ctx context.Context, clOrdID, symbol, side string, qty decimal.Decimal) (TestReport, error) {
	answers, done := s.wait(clOrdID)
	defer done()
	nos := newordersingle.New(field.NewClOrdID(clOrdID), field.NewSide(enum.Side(side)),
		field.NewTransactTimeWithPrecision(time.Now().UTC(), quickfix.Millis), field.NewOrdType(enum.OrdType_MARKET))
	nos.SetAccount(s.cfg.Account)
	nos.SetSymbol(symbol)
	nos.SetOrderQty(qty, 0)
	nos.SetTimeInForce(enum.TimeInForce_IMMEDIATE_OR_CANCEL)
	if err := s.send(nos.ToMessage()); err != nil {
		return TestReport{}, err
	}
	for {
		select {
		case <-answers.ready():
			if a, ok := answers.take(); ok {
				return a.r, nil
			}
		case <-ctx.Done():
			return TestReport{}, ctx.Err()
		}
	}
}

// AfterReservedAsk runs f between the venue's answer about a reserved close and what the
// reconciler's resolveReserved does with it (nil: nothing).
func (s *Session) AfterReservedAsk(f func(clOrdID string)) { s.afterReservedAsk = f }
