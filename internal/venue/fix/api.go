package fix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

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
	rejectDuplicate    = 6
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
}

// wait registers a waiter for key's answers (waiters.go: none is ever dropped); done
// unregisters it.
func (s *Session) wait(key string) (*mailbox, func()) {
	ch := newMailbox()
	return ch, s.waitOn(ch, key)
}

// waitOn registers ch for key's answers as well; the func unregisters it.
func (s *Session) waitOn(ch *mailbox, key string) func() {
	s.mu.Lock()
	s.waiters[key] = append(s.waiters[key], ch)
	s.mu.Unlock()
	return func() {
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
		ch.put(a)
	}
}

// unknownOrder is whether r is a venue's answer to a status request for an order it never saw.
func unknownOrder(r report) bool {
	return r.ExecType == execStatus && r.OrdStatus == ordRejected && r.HasRejectReason && r.RejectReason == rejectUnknownOrder
}

// duplicateOrder is whether r is a venue's refusal of a ClOrdID it already saw, sent again
// without PossDupFlag (OrdRejReason 6): not a state of that order, whose earlier send is its
// outcome (docs/fix.md, «Reserved closes»).
func duplicateOrder(r report) bool {
	return r.OrdStatus == ordRejected && r.HasRejectReason && r.RejectReason == rejectDuplicate && r.ExecType != execStatus
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
		return errNotLoggedOn
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
	if !s.Reachable() {
		return venue.Outcome{}, errNotLoggedOn
	}
	// Waited for before its identity is written, so that the reconciler, which asks about every
	// unanswered order nobody waits for, never asks about one in flight.
	answers, done := s.wait(o.ClientID)
	defer done()
	out, err := s.order(ctx, order{ClOrdID: o.ClientID, TradeID: o.ClientID, Symbol: o.Symbol, Side: side, Qty: o.Units.Abs(), IOC: o.IOC(), Limit: o.PriceBound}, trigger, answers)
	if errors.Is(err, errIdentityRefused) && store.IsDuplicateKey(err) {
		return out, fmt.Errorf("%v: %w", err, errDuplicateOrder)
	}
	return out, err
}

// CloseTrade closes units (nil: all) of desk trade tradeID with an opposite market order against
// the venue's net position; its ClOrdID names the trade (<trade>.c<n>, n its closes so far plus one).
func (s *Session) CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal) (venue.Outcome, error) {
	return s.closeTrade(ctx, tradeID, units, time.Time{})
}

func (s *Session) closeTrade(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time) (venue.Outcome, error) {
	out, err := s.closeTradeOnce(ctx, tradeID, units, trigger, false)
	if !isTradeNotFound(err) {
		return out, err
	}
	// Memory does not hold the trade open, and the desk reads a 404 as "closed at the venue"
	// (the risk engine stops watching the position): the journal decides. A trade it holds open
	// is one memory missed a report of; it is learned, and the close goes. Off the burst's path:
	// only a close memory refuses reads the journal.
	open, lerr := s.openInJournal(ctx, tradeID)
	switch {
	case lerr != nil:
		return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, lerr, venue.ErrNotSent)
	case !open:
		return out, err
	}
	s.log.Warn("FIX: a close found open in the journal a trade the holder's memory did not; read from the journal", slog.String("trade", tradeID))
	return s.closeTradeOnce(ctx, tradeID, units, trigger, false)
}

// openInJournal reads trade id (its public id) from the journal into memory and answers whether
// the journal holds it open.
func (s *Session) openInJournal(ctx context.Context, id string) (bool, error) {
	s.relearning.Lock()
	defer s.relearning.Unlock()
	key, found, err := s.journal.tradeKey(ctx, id)
	if err != nil || !found {
		return false, err
	}
	ts, err := s.journal.loadTrades(ctx, []string{key})
	if err != nil {
		return false, err
	}
	open := false
	for _, t := range ts {
		open = open || !t.units.IsZero()
	}
	if open {
		s.trades.set(ts, false)
	}
	return open, nil
}

// closeTradeOnce is closeTrade; retried is true once an earlier close's outcome was just asked.
// The close is decided on the holder's trades in memory (liveTrades), with no database read
// between the trigger and the write.
func (s *Session) closeTradeOnce(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time, retried bool) (venue.Outcome, error) {
	if !s.Reachable() {
		return venue.Outcome{}, errNotLoggedOn
	}
	var answers *mailbox
	var done func()
	c, err := s.trades.claimClose(tradeID, units, s.waited, func(clOrdID string) { answers, done = s.wait(clOrdID) }, retried)
	if err != nil {
		return venue.Outcome{}, err
	}
	if c.ask.ClOrdID != "" {
		// Nobody here waits for it: an earlier close whose outcome was unknown. The session is in
		// order, so the venue's answer to a status request comes after every resend of it, and is
		// handed on after every report before it is journaled.
		known, err := s.orderStatus(ctx, c.ask.ClOrdID, c.ask.Symbol, c.ask.Side)
		if err != nil {
			return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, err, venue.ErrNotSent)
		}
		if !known && c.askReserved {
			// An inherited reservation nobody sent: it stays the trade's whole close.
			s.trades.reservationUnsent(c.ask.TradeID, c.ask.ClOrdID)
		} else if !known {
			// It never reached the venue and never will: the next close may go.
			if err := s.journal.endUnsent(ctx, c.ask.ClOrdID); err != nil {
				return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, err, venue.ErrNotSent)
			}
			s.trades.ended(c.ask.TradeID, c.ask.ClOrdID)
		}
		// Its report is journaled now (or it is NEW still): decide again on the trade as the
		// journal has it. Memory alone may not: a report another process journaled (an old
		// holder that heard it after this one loaded its trades) is one this session's intake
		// finds already recorded, and the units it closed never reach memory — a second close
		// would then go, and a netting venue would execute it.
		if known {
			if err := s.reloadTrade(ctx, c.ask.TradeID); err != nil {
				return venue.Outcome{}, fmt.Errorf("close trade %s: %v: %w", tradeID, err, venue.ErrNotSent)
			}
		}
		return s.closeTradeOnce(ctx, tradeID, units, trigger, true)
	}
	defer done()
	// A close ended (or never went): the trade's whole close is named again if it still has a stop.
	defer s.renewReservation(c.order.TradeID)
	out, err := s.order(ctx, c.order, trigger, answers)
	switch {
	case errors.Is(err, errIdentityRefused) && store.IsDuplicateKey(err):
		// The journal holds a close with this number the holder did not know of: it stays the
		// trade's pending close, asked about by the next close.
		return venue.Outcome{}, closeInFlight(tradeID, c.order.ClOrdID)
	case errors.Is(err, errIdentityRefused) && store.ServerRefused(err):
		s.trades.unclaim(c.order) // the server refused the row: it is not there
	case errors.Is(err, errSendRefused) && c.order.Status == stateReserved:
		s.trades.unclaim(c.order) // its row stays RESERVED, never sent
	case errors.Is(err, errSendRefused):
		if s.journal.deleteOrder(context.WithoutCancel(ctx), c.order.ClOrdID) {
			s.trades.unclaim(c.order)
		}
	}
	// Any other failure to write leaves the claim as the trade's pending close, which nobody
	// waits for: the next close asks the venue about it first.
	return out, err
}

// errNotLoggedOn refuses a send while the session is not logged on: nothing was sent.
var errNotLoggedOn = fmt.Errorf("FIX session is not logged on: %w", venue.ErrNotSent)

// errNotLoaded refuses a close while the holder's trades are not loaded (the session is not
// running): nothing was sent.
var errNotLoaded = fmt.Errorf("FIX session is not running: %w", venue.ErrNotSent)

// errIdentityRefused marks an order whose identity row was not written (or may not have been):
// nothing was sent.
var errIdentityRefused = errors.New("identity not written")

// errSendRefused marks an order whose identity row was written and whose message the session
// refused: nothing was sent.
var errSendRefused = errors.New("send refused")

// codeTradeNotFound is the refusal of a close of a trade that is not open.
const codeTradeNotFound = "TRADE_DOESNT_EXIST"

func isTradeNotFound(err error) bool {
	var verr *venue.Error
	return errors.As(err, &verr) && verr.Code == codeTradeNotFound
}

func tradeNotFound(id string) error {
	return &venue.Error{Status: 404, Code: codeTradeNotFound, Message: "no open desk trade " + id + " at the FIX venue"}
}

func closeUnitsInvalid(id string, units, open decimal.Decimal) error {
	return &venue.Error{Status: 400, Code: "CLOSE_UNITS_INVALID", Message: fmt.Sprintf("close %s of trade %s's %s units", units, id, open)}
}

// closeInFlight refuses a close of trade tradeID while its close clOrdID is unanswered.
func closeInFlight(tradeID, clOrdID string) error {
	return &venue.Error{Status: 409, Code: venue.CodeCloseInFlight,
		Message: fmt.Sprintf("trade %s is being closed (order %s has no final report yet); nothing sent", tradeID, clOrdID)}
}

// order commits o's identity row with the orders decided with it (identities), writes o to the
// session and waits on answers for its final report.
func (s *Session) order(ctx context.Context, o order, trigger time.Time, answers *mailbox) (venue.Outcome, error) {
	s.inFlight.Add(1)
	defer func() {
		if s.inFlight.Add(-1) == 0 {
			s.burst.Idle(s.log, s.logons.Load(), 0) // no workers: the session's writer sends
		}
	}()
	// A reserved close's identity committed long before its trigger (reserve.go).
	if o.Status != stateReserved {
		if err := s.identities.commit(o); err != nil {
			return venue.Outcome{}, fmt.Errorf("%w: %w: %w", errIdentityRefused, err, venue.ErrNotSent)
		}
	}
	// The number it is sent under is noted as the library numbers it (ToApp), for a Reject that
	// names it (refusal.go); once nobody waits, a Reject is matched through the store.
	defer s.sent.forget(o.ClOrdID)
	// The FIX 4.4 NewOrderSingle, no repeating group (so a resend is safe from the library's
	// double-checksum defect).
	msg := newOrderSingle(o, s.cfg.Account)
	if !trigger.IsZero() {
		s.burst.ObserveDecided(time.Since(trigger))
	}
	if err := s.send(msg); err != nil {
		if o.TradeID == o.ClOrdID {
			s.journal.deleteOrder(context.WithoutCancel(ctx), o.ClOrdID)
		}
		return venue.Outcome{}, fmt.Errorf("%w: %w", errSendRefused, err)
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
		case <-answers.ready():
			for a, ok := answers.take(); ok; a, ok = answers.take() {
				if duplicateOrder(a.r) {
					// The venue saw this ClOrdID before: an earlier holder sent the reservation.
					// That send is the order; its reports, journaled or asked for, are the outcome.
					out, final, err := s.earlierSend(ctx, o)
					if final || err != nil {
						return out, err
					}
					continue
				}
				if !terminal(a.r) || unknownOrder(a.r) {
					// An "unknown order" answers someone's status request, not this order's state.
					continue
				}
				if a.err != nil {
					return venue.Outcome{}, fmt.Errorf("order %s: the venue reported, the journal did not record it (%v): %w", o.ClOrdID, a.err, venue.ErrOutcomeUnknown)
				}
				return s.outcome(ctx, o, a.r)
			}
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
	if execs := executionsOf(shares); len(execs) > 1 {
		// Filled in several executions: the fill is all of them (CumQty at AvgPx), and whoever
		// books it records each as booked.
		f.TransactionIDs = execs
	}
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

// executionsOf is the distinct executions of shares (oldest first, as shares reads them).
func executionsOf(shares []share) []int64 {
	var out []int64
	for _, sh := range shares {
		if len(out) == 0 || out[len(out)-1] != sh.ExecutionID {
			out = append(out, sh.ExecutionID)
		}
	}
	return out
}

// earlierSend is the outcome of order o whose ClOrdID the venue refused as a duplicate: its
// earlier send's, asked for by OrderStatusRequest (the answer is journaled like any report
// before it is handed on). final is false while that order has no final state yet: its report
// answers o's wait.
func (s *Session) earlierSend(ctx context.Context, o order) (venue.Outcome, bool, error) {
	s.log.Info("FIX: the venue refused a close's ClOrdID as a duplicate; its earlier send is the close", slog.String("clOrdId", o.ClOrdID))
	known, err := s.orderStatus(ctx, o.ClOrdID, o.Symbol, o.Side)
	if err != nil {
		return venue.Outcome{}, true, fmt.Errorf("order %s: sent before, its status unknown (%v): %w", o.ClOrdID, err, venue.ErrOutcomeUnknown)
	}
	j, found, err := s.journal.order(ctx, o.ClOrdID)
	switch {
	case err != nil:
		return venue.Outcome{}, true, fmt.Errorf("order %s: %v: %w", o.ClOrdID, err, venue.ErrOutcomeUnknown)
	case !known || !found:
		return venue.Outcome{}, true, fmt.Errorf("order %s: refused as a duplicate, unknown to the venue's status: %w", o.ClOrdID, venue.ErrOutcomeUnknown)
	case j.Status != stateFilled && j.Status != stateRejected:
		return venue.Outcome{}, false, nil
	}
	r := report{OrderID: j.VenueOrderID, CumQty: j.CumQty, AvgPx: j.AvgPx, RejectReason: j.RejectReason, Text: j.Text}
	out, err := s.outcome(ctx, o, r)
	return out, true, err
}

// cancelReason words a rejection as the desk's venue reasons: the two it tells traders about in
// its own words, a refusal as its text, else the FIX reason and the venue's text.
func cancelReason(reason int, text string) string {
	if strings.HasPrefix(text, refusedReason+":") {
		return text // refused as a message (refusal.go): no OrdRejReason, the LP's own words
	}
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
// found is false when the venue does not know the order. It asks again each patience without an
// answer (query.go), with the same ClOrdID: answers are matched by it, the first one ends the
// wait, and a later one is journaled like any report (once, by CumQty) and answers nobody.
func (s *Session) orderStatus(ctx context.Context, clOrdID, symbol, side string) (bool, error) {
	answers, done := s.wait(clOrdID)
	defer done()
	if side == "" {
		side = sideBuy
	}
	send := func() error {
		msg := quickfix.NewMessage()
		msg.Header.SetString(tag.MsgType, msgOrderStatusRequest)
		msg.Body.SetString(tag.ClOrdID, clOrdID)
		if symbol != "" {
			msg.Body.SetString(tag.Symbol, symbol)
		}
		msg.Body.SetString(tag.Side, side)
		return s.send(msg)
	}
	q, err := s.ask("order status", send, slog.String("clOrdId", clOrdID))
	if err != nil {
		return false, fmt.Errorf("order status %s: %w", clOrdID, err)
	}
	defer q.stop()
	for {
		select {
		case <-answers.ready():
			for a, ok := answers.take(); ok; a, ok = answers.take() {
				if duplicateOrder(a.r) {
					continue // a send's refusal, not the order's status
				}
				if unknownOrder(a.r) {
					return false, nil
				}
				if a.err != nil {
					return false, fmt.Errorf("order status %s: %w", clOrdID, a.err)
				}
				return true, nil
			}
		case <-q.again():
			q.askAgain(ctx)
		case <-q.expired():
			return false, fmt.Errorf("order status %s: %s: %w", clOrdID, q.timedOut(), venue.ErrOutcomeUnknown)
		case <-ctx.Done():
			return false, fmt.Errorf("order status %s: %w", clOrdID, ctx.Err())
		}
	}
}

// resolvePending asks the venue about every order the journal holds without a final report
// that no send is waiting for: a report lost, or a process that died before it came. It also
// asks about reserved closes whose rows cannot say they are in flight (resolveReserved).
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
	return s.resolveReserved(ctx)
}

// resolveReserved asks the venue about the reserved closes whose outcome nobody will learn
// otherwise. Their rows stay RESERVED until a report comes (a reserved close is sent without a
// write), so resolvePending's journal query does not see them: an inherited reservation an
// earlier holder may have sent and died before any write, and a reserved close this holder sent
// that got no report (its wait timed out, or the venue answered a resent copy with nothing).
// Without this the desk learns of such a close only when it closes the trade again — at a stop
// the price may never reach again — and shows the trade open while the venue holds it closed
// (docs/fix.md, «Reserved closes»). Each answer is journaled like any report (a fill closes the
// trade); a reservation the venue never saw stays the trade's whole close, this holder's own.
func (s *Session) resolveReserved(ctx context.Context) error {
	inherited, sent := s.trades.unresolvedReservations(s.waited)
	var asks []reservedAsk
	for _, o := range sent {
		// Its row says whether it is still a reservation nobody heard of.
		j, found, err := s.journal.order(ctx, o.ClOrdID)
		if err != nil {
			return err
		}
		if !found || j.Status != stateReserved {
			continue // a SENDING/NEW row resolvePending asked about; a final one the intake applied
		}
		asks = append(asks, reservedAsk{o, true})
	}
	for _, o := range inherited {
		asks = append(asks, reservedAsk{o, false})
	}
	for _, a := range asks {
		if err := s.askReserved(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// reservedAsk is one reserved close resolveReserved asks about; sent: this holder sent it.
type reservedAsk struct {
	order
	sent bool
}

// askReserved asks the venue about reserved close a and applies the answer to the trade.
func (s *Session) askReserved(ctx context.Context, a reservedAsk) error {
	o := a.order
	if s.waited(o.ClOrdID) {
		return nil // being sent or asked about now
	}
	known, err := s.orderStatus(ctx, o.ClOrdID, o.Symbol, o.Side)
	if err != nil {
		return err
	}
	if s.afterReservedAsk != nil {
		s.afterReservedAsk(o.ClOrdID)
	}
	switch {
	case !known && a.sent:
		// Sent before the question, on the same session: the venue never saw it. Reserved again.
		s.trades.unclaim(order{ClOrdID: o.ClOrdID, TradeID: o.TradeID, Status: stateReserved})
		return nil
	case !known:
		// Not sent by an earlier holder, as far as the question can tell: the answer predates
		// whatever this holder sent after it. A close that claimed the reservation since (a
		// stop that triggered while the question was on the wire) is its trade's close in
		// flight, asked about by a later run if no report settles it, never taken back as
		// unsent: taken back, it was never asked about again, and a report the venue lost left
		// the trade open on the desk for ever (TestAReservedCloseSentWhileTheReconcilerAsksIsAskedAboutLater).
		s.trades.reservationUnsent(o.TradeID, o.ClOrdID)
		return nil
	}
	// As closeTradeOnce after an ask: the trade as the journal has it now.
	if err := s.reloadTrade(ctx, o.TradeID); err != nil {
		return err
	}
	s.renewReservation(o.TradeID) // a close the venue rejected leaves the trade open
	return nil
}
