package fix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/field"
	"github.com/quickfixgo/fix44/newordersingle"
	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"

	"fxdesk/internal/store"
	"fxdesk/internal/venue"
)

// errDuplicateOrder: the journal already holds an order with that ClOrdID; nothing was sent.
// It wraps venue.ErrNotSent for callers that only ask whether anything went out.
var errDuplicateOrder = fmt.Errorf("ClOrdID already in the journal: %w", venue.ErrNotSent)

// FIX values the desk reads and writes (Side 54, OrdStatus 39, ExecType 150, OrdRejReason 103).
const (
	sideBuy  = "1"
	sideSell = "2"

	ordNew        = "0"
	ordFilled     = "2"
	ordDoneForDay = "3"
	ordCanceled   = "4"
	ordRejected   = "8"
	ordExpired    = "C"

	execTrade  = "F"
	execStatus = "I"

	rejectMarketClosed = 2
	rejectExceedsLimit = 3
	rejectUnknownOrder = 5
)

// seq makes close and request ids unique within this process; the start time makes them unique
// across processes.
var seq atomic.Int64

func uniqueSuffix() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatInt(seq.Add(1), 36)
}

// answer is what a waiter receives: the report, and the execution the journal recorded from it.
type answer struct {
	r      report
	execID int64
	err    error
	last   bool // the last report of a mass status
}

// onReport records a report and hands it to whoever waits for its ClOrdID.
func (s *Session) onReport(r report) {
	if unknownOrder(r) {
		// "Unknown order": the answer to a status request, not a state of any order.
		s.deliver(r.ClOrdID, answer{r: r})
		return
	}
	var id int64
	var err error
	if r.ClOrdID != "NONE" { // a mass status with no orders answers with one empty report
		if id, err = s.journal.apply(context.Background(), r); err != nil {
			// Not counted as received: the session reconnects and the venue resends it. A
			// report of the venue's own order (a venue-side close) has no other way back: the
			// desk cannot ask for a ClOrdID it never knew.
			s.unjournaled.Store(true)
			s.log.Error("could not record the venue's report; the session reconnects and the venue resends it", slog.String("clOrdId", r.ClOrdID), slog.Any("err", err))
		}
		s.deliver(r.ClOrdID, answer{r: r, execID: id, err: err})
	}
	if r.MassStatusReqID != "" {
		s.deliver(r.MassStatusReqID, answer{r: r, execID: id, err: err, last: r.LastRptRequested})
	}
}

// takeUnjournaled refuses, once, to count the message just read as received when its report
// could not be journaled (the store asks before it moves the incoming number).
func (s *Session) takeUnjournaled() error {
	if s.unjournaled.Swap(false) {
		return errors.New("fix: a report the venue sent could not be journaled; reconnecting so that the venue resends it")
	}
	return nil
}

func (s *Session) wait(key string) (<-chan answer, func()) {
	ch := make(chan answer, 8)
	s.mu.Lock()
	s.waiters[key] = append(s.waiters[key], ch)
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.waiters[key]
		for i, c := range list {
			if c == ch {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.waiters, key)
		} else {
			s.waiters[key] = list
		}
	}
}

func (s *Session) waited(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters[key]) > 0
}

func (s *Session) deliver(key string, a answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.waiters[key] {
		select {
		case ch <- a:
		default:
		}
	}
}

// unknownOrder is whether r is a venue's answer to a status request for an order it never saw.
func unknownOrder(r report) bool {
	return r.ExecType == execStatus && r.OrdStatus == ordRejected && r.HasRejectReason && r.RejectReason == rejectUnknownOrder
}

// terminal is whether a report ends its order.
func terminal(r report) bool {
	switch r.OrdStatus {
	case ordFilled, ordRejected, ordCanceled, ordExpired, ordDoneForDay:
		return true
	}
	return false
}

// send writes msg to the session's writer. A session that is not logged on refuses it before
// the library stores it, so it provably never leaves.
func (s *Session) send(msg *quickfix.Message) error {
	if !s.Reachable() {
		return fmt.Errorf("FIX session is not logged on: %w", venue.ErrNotSent)
	}
	if err := quickfix.SendToTarget(msg, s.sessionID); err != nil {
		return fmt.Errorf("FIX send: %v: %w", err, venue.ErrNotSent)
	}
	return nil
}

// PlaceMarket sends one MARKET NewOrderSingle with ClOrdID = the desk's order id and waits for
// its report. It is never re-sent by the desk.
func (s *Session) PlaceMarket(ctx context.Context, o venue.MarketOrder) (venue.Outcome, error) {
	return s.placeMarket(ctx, o, time.Time{})
}

func (s *Session) placeMarket(ctx context.Context, o venue.MarketOrder, trigger time.Time) (venue.Outcome, error) {
	if o.ClientID == "" || o.Units.IsZero() || len(o.Symbol) != 6 {
		return venue.Outcome{}, &venue.Error{Status: 400, Code: "INVALID_ORDER", Message: fmt.Sprintf("order %q %s %s is not a market order the desk sends", o.ClientID, o.Symbol, o.Units)}
	}
	side := sideBuy
	if o.Units.IsNegative() {
		side = sideSell
	}
	return s.order(ctx, order{ClOrdID: o.ClientID, TradeID: o.ClientID, Symbol: o.Symbol, Side: side, Qty: o.Units.Abs()}, trigger)
}

// CloseTrade closes units (nil: all) of desk trade tradeID with an opposite market order against
// the venue's net position; its ClOrdID names the trade (<trade>.c<n>, n its closes so far plus one).
func (s *Session) CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal) (venue.Outcome, error) {
	return s.closeTrade(ctx, tradeID, units, time.Time{})
}

func (s *Session) closeTrade(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time) (venue.Outcome, error) {
	return s.closeTradeOnce(ctx, tradeID, units, trigger, false)
}

// closeTradeOnce is closeTrade; retried is true once an earlier close's outcome was just asked.
func (s *Session) closeTradeOnce(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time, retried bool) (venue.Outcome, error) {
	t, found, err := s.trade(ctx, tradeID)
	if err != nil {
		return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, err, venue.ErrNotSent)
	}
	if !found || t.CurrentUnits.IsZero() {
		return venue.Outcome{}, &venue.Error{Status: 404, Code: "TRADE_DOESNT_EXIST", Message: "no open desk trade " + tradeID + " at the FIX venue"}
	}
	qty := t.CurrentUnits.Abs()
	if units != nil {
		if !units.IsPositive() || units.GreaterThan(qty) {
			return venue.Outcome{}, &venue.Error{Status: 400, Code: "CLOSE_UNITS_INVALID", Message: fmt.Sprintf("close %s of trade %s's %s units", units, tradeID, qty)}
		}
		qty = *units
	}
	side := sideSell
	if t.CurrentUnits.IsNegative() {
		side = sideBuy
	}
	// One close of a trade at a time. A netting venue executes every close it is sent (it has no
	// trade to find already closed, as a REST venue does), so a second close of the same trade
	// would flip it: refused while an earlier one is unanswered, and two decided at once carry
	// the same ClOrdID, the trade's close count, which the journal takes once.
	n, pending, err := s.journal.closes(ctx, t.ClientID)
	if err != nil {
		return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, err, venue.ErrNotSent)
	}
	if pending != "" {
		if s.waited(pending) || retried {
			return venue.Outcome{}, closeInFlight(tradeID, pending)
		}
		// Nobody here waits for it: an earlier close whose outcome was unknown. The session is in
		// order, so the venue's answer to a status request comes after every resend of it.
		known, err := s.orderStatus(ctx, pending, t.Symbol, side)
		if err != nil {
			return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, err, venue.ErrNotSent)
		}
		if !known {
			// It never reached the venue and never will: the next close may go.
			if err := s.journal.endUnsent(ctx, pending); err != nil {
				return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, err, venue.ErrNotSent)
			}
		}
		// Its report is journaled now (or it is NEW still): decide again on the trade as it is.
		return s.closeTradeOnce(ctx, tradeID, units, trigger, true)
	}
	clOrdID := t.ClientID + closeMark + strconv.Itoa(n+1)
	out, err := s.order(ctx, order{ClOrdID: clOrdID, TradeID: t.ClientID, Symbol: t.Symbol, Side: side, Qty: qty}, trigger)
	if errors.Is(err, errDuplicateOrder) {
		return venue.Outcome{}, closeInFlight(tradeID, clOrdID)
	}
	return out, err
}

// closeInFlight refuses a close of trade tradeID while its close clOrdID is unanswered.
func closeInFlight(tradeID, clOrdID string) error {
	return &venue.Error{Status: 409, Code: "CLOSE_IN_FLIGHT",
		Message: fmt.Sprintf("trade %s is being closed (order %s has no final report yet); nothing sent", tradeID, clOrdID)}
}

// order journals o, writes it to the session and waits for its final report.
func (s *Session) order(ctx context.Context, o order, trigger time.Time) (venue.Outcome, error) {
	if !s.Reachable() {
		return venue.Outcome{}, fmt.Errorf("FIX session is not logged on: %w", venue.ErrNotSent)
	}
	s.inFlight.Add(1)
	defer func() {
		if s.inFlight.Add(-1) == 0 {
			s.burst.Idle(s.log, s.logons.Load(), 0) // no workers: the session's writer sends
		}
	}()
	// Waited for before its identity is written, so that the reconciler, which asks about every
	// unanswered order nobody waits for, never asks about one in flight.
	answers, done := s.wait(o.ClOrdID)
	defer done()
	if err := s.journal.insertOrder(ctx, o); err != nil {
		if store.IsDuplicateKey(err) {
			return venue.Outcome{}, fmt.Errorf("%v: %w", err, errDuplicateOrder)
		}
		return venue.Outcome{}, fmt.Errorf("%v: %w", err, venue.ErrNotSent)
	}
	// The FIX 4.4 NewOrderSingle, no repeating group (so a resend is safe from the library's
	// double-checksum defect).
	nos := newordersingle.New(field.NewClOrdID(o.ClOrdID), field.NewSide(enum.Side(o.Side)),
		field.NewTransactTimeWithPrecision(time.Now().UTC(), quickfix.Millis), field.NewOrdType(enum.OrdType_MARKET))
	nos.SetAccount(s.cfg.Account)
	nos.SetSymbol(o.Symbol)
	nos.SetOrderQty(o.Qty, max(0, -o.Qty.Exponent()))
	nos.SetTimeInForce(enum.TimeInForce_IMMEDIATE_OR_CANCEL) // a market order fills now or not at all
	if err := s.send(nos.ToMessage()); err != nil {
		s.journal.deleteOrder(context.WithoutCancel(ctx), o.ClOrdID)
		return venue.Outcome{}, err
	}
	if !trigger.IsZero() {
		own := time.Since(trigger)
		s.burst.Observe(own, s.logons.Load())
		if s.cfg.OnWrote != nil {
			s.cfg.OnWrote(own)
		}
	}
	timeout := time.NewTimer(s.cfg.Timeout)
	defer timeout.Stop()
	for {
		select {
		case a := <-answers:
			if !terminal(a.r) || unknownOrder(a.r) {
				// An "unknown order" answers someone's status request, not this order's state.
				continue
			}
			if a.err != nil {
				return venue.Outcome{}, fmt.Errorf("order %s: the venue reported, the journal did not record it (%v): %w", o.ClOrdID, a.err, venue.ErrOutcomeUnknown)
			}
			return s.outcome(ctx, o, a.r)
		case <-timeout.C:
			return venue.Outcome{}, fmt.Errorf("order %s: no report within %s: %w", o.ClOrdID, s.cfg.Timeout, venue.ErrOutcomeUnknown)
		case <-ctx.Done():
			return venue.Outcome{}, fmt.Errorf("order %s: %v: %w", o.ClOrdID, ctx.Err(), venue.ErrOutcomeUnknown)
		}
	}
}

// outcome is a final report as the desk's venue outcome, built from the journal (so a report
// recorded earlier, by a status request, answers the same).
func (s *Session) outcome(ctx context.Context, o order, r report) (venue.Outcome, error) {
	last, err := s.journal.lastExecution(ctx)
	if err != nil {
		return venue.Outcome{}, fmt.Errorf("order %s: %v: %w", o.ClOrdID, err, venue.ErrOutcomeUnknown)
	}
	if !r.CumQty.IsPositive() {
		return venue.Outcome{LastTransactionID: last, Cancelled: &venue.Cancelled{OrderID: r.OrderID, Reason: cancelReason(r.RejectReason, r.Text), Time: r.Time}}, nil
	}
	shares, err := s.journal.shares(ctx, "e.`clOrdId` = ?", o.ClOrdID)
	if err != nil || len(shares) == 0 {
		return venue.Outcome{}, fmt.Errorf("order %s: filled, not in the journal (%v): %w", o.ClOrdID, err, venue.ErrOutcomeUnknown)
	}
	f := &venue.Fill{TransactionID: shares[len(shares)-1].ExecutionID, OrderID: r.OrderID, Symbol: o.Symbol, Units: signed(o.Side, r.CumQty), Price: r.AvgPx, Time: shares[0].Time}
	if o.TradeID == o.ClOrdID {
		f.TradeOpened = strconv.FormatInt(shares[0].ExecutionID, 10)
	} else {
		t, _, err := s.tradeByKey(ctx, o.TradeID)
		if err != nil {
			return venue.Outcome{}, fmt.Errorf("order %s: %v: %w", o.ClOrdID, err, venue.ErrOutcomeUnknown)
		}
		if t.CurrentUnits.IsZero() {
			f.TradesClosed = []string{t.ID}
		} else {
			f.TradeReduced = t.ID
		}
	}
	return venue.Outcome{Fill: f, LastTransactionID: last}, nil
}

// cancelReason words a rejection as the desk's venue reasons: the two it tells traders about in
// its own words, else the FIX reason and the venue's text.
func cancelReason(reason int, text string) string {
	switch reason {
	case rejectMarketClosed:
		return venue.ReasonMarketHalted
	case rejectExceedsLimit:
		return venue.ReasonInsufficientMargin
	}
	if text == "" {
		return fmt.Sprintf("OrdRejReason=%d", reason)
	}
	return truncate(fmt.Sprintf("OrdRejReason=%d: %s", reason, text), 255)
}

// orderStatus asks the venue for clOrdID's state (OrderStatusRequest) and records the answer:
// found is false when the venue does not know the order.
func (s *Session) orderStatus(ctx context.Context, clOrdID, symbol, side string) (bool, error) {
	answers, done := s.wait(clOrdID)
	defer done()
	msg := quickfix.NewMessage()
	msg.Header.SetString(tag.MsgType, msgOrderStatusRequest)
	msg.Body.SetString(tag.ClOrdID, clOrdID)
	if symbol != "" {
		msg.Body.SetString(tag.Symbol, symbol)
	}
	if side == "" {
		side = sideBuy
	}
	msg.Body.SetString(tag.Side, side)
	if err := s.send(msg); err != nil {
		return false, fmt.Errorf("order status %s: %w", clOrdID, err)
	}
	timeout := time.NewTimer(s.cfg.Timeout)
	defer timeout.Stop()
	for {
		select {
		case a := <-answers:
			if unknownOrder(a.r) {
				return false, nil
			}
			if a.err != nil {
				return false, fmt.Errorf("order status %s: %w", clOrdID, a.err)
			}
			return true, nil
		case <-timeout.C:
			return false, fmt.Errorf("order status %s: no answer within %s: %w", clOrdID, s.cfg.Timeout, venue.ErrOutcomeUnknown)
		case <-ctx.Done():
			return false, fmt.Errorf("order status %s: %w", clOrdID, ctx.Err())
		}
	}
}

// resolvePending asks the venue about every order the journal holds without a final report
// that no send is waiting for: a report lost, or a process that died before it came.
func (s *Session) resolvePending(ctx context.Context) error {
	pending, err := s.journal.pending(ctx, 0)
	if err != nil {
		return err
	}
	for _, o := range pending {
		if s.waited(o.ClOrdID) {
			continue
		}
		if _, err := s.orderStatus(ctx, o.ClOrdID, o.Symbol, o.Side); err != nil {
			return err
		}
	}
	return nil
}
