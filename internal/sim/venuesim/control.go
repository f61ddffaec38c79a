package venuesim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/sim/control"
	"fxdesk/internal/venue"
)

// Fault kinds (POST /control/fault).
const (
	FaultOutage  = "outage"  // the trading listener is down for Duration
	Fault5xx     = "5xx"     // the next Count trading requests answer 503, executing nothing
	FaultTimeout = "timeout" // the next Count orders or closes execute, then the connection is cut after Duration
	FaultHold    = "hold"    // the next Count orders execute and their answers wait for Release
	FaultCancel  = "cancel"  // the next Count orders are cancelled with Reason
	// FaultPartial: the next Count IOC orders fill Percent of their units (rounded down to
	// whole 1,000s); the trade opens with what filled. A FOK order is cancelled whole
	// (INSUFFICIENT_LIQUIDITY), as OANDA's fill-or-kill never fills a part.
	FaultPartial = "partial"
)

// Fault is one injected fault. A fault replaces a pending fault of the same kind.
type Fault struct {
	Kind     string
	Count    int           // how many requests it applies to; 0 means 1 (not used by outage)
	Duration time.Duration // outage: how long; timeout: how long the answer is held before the cut
	Reason   string        // cancel: the orderCancelTransaction reason, e.g. INSUFFICIENT_MARGIN
	Percent  int           // partial: the share of the order's units that fills, 1 to 99
}

// ErrNotFound is returned by the control methods for a trade the venue does not hold open.
var ErrNotFound = errors.New("not found")

// InjectFault arms f.
func (s *Server) InjectFault(f Fault) error {
	count := f.Count
	if count == 0 {
		count = 1
	}
	if count < 0 {
		return fmt.Errorf("fault %s: count %d must not be negative", f.Kind, f.Count)
	}
	switch f.Kind {
	case FaultOutage:
		if f.Duration <= 0 {
			return errors.New("fault outage: seconds must be positive")
		}
		return s.outage(f.Duration)
	case FaultTimeout:
		if f.Duration <= 0 {
			return errors.New("fault timeout: seconds (how long the answer is held before the cut) must be positive")
		}
	case FaultCancel:
		if f.Reason == "" {
			return fmt.Errorf("fault cancel: reason is required (e.g. %s or %s)", venue.ReasonInsufficientMargin, venue.ReasonMarketHalted)
		}
	case FaultPartial:
		if f.Percent < 1 || f.Percent > 99 {
			return fmt.Errorf("fault partial: percent %d must be between 1 and 99", f.Percent)
		}
	case Fault5xx, FaultHold:
	default:
		return fmt.Errorf("fault kind %q is not one of %s, %s, %s, %s, %s, %s", f.Kind, FaultOutage, Fault5xx, FaultTimeout, FaultHold, FaultCancel, FaultPartial)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.Kind {
	case Fault5xx:
		s.faults.fail5xx = count
	case FaultTimeout:
		s.faults.timeouts, s.faults.timeoutAfter = count, f.Duration
	case FaultHold:
		s.faults.holds = count
	case FaultCancel:
		s.faults.cancels, s.faults.cancelReason = count, f.Reason
	case FaultPartial:
		s.faults.partials, s.faults.partialPercent = count, f.Percent
	}
	return nil
}

// Release answers every held order normally and returns how many were held.
func (s *Server) Release() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
	return s.held
}

// SetLatency changes the execution latency of orders and closes received from now on.
func (s *Server) SetLatency(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("latency %v must not be negative", d)
	}
	s.mu.Lock()
	s.latency = d
	s.mu.Unlock()
	return nil
}

// maxGap bounds SkipTransactionIDs: a gap wider than any a venue leaves is a typing error.
const maxGap = 1_000_000

// SkipTransactionIDs leaves n transaction ids unused: the next transaction's id is the last's
// plus n plus 1, as after a batch the venue rolled back or under a database cluster's id stride.
// The transaction pages (GET …/transactions/sinceid) walk past the gap by count.
func (s *Server) SkipTransactionIDs(n int64) error {
	if n < 1 || n > maxGap {
		return fmt.Errorf("transaction id gap %d must be between 1 and %d", n, maxGap)
	}
	s.mu.Lock()
	s.acct.last += n
	s.mu.Unlock()
	return nil
}

// VenueClose is the fill of a close the venue made itself.
type VenueClose struct {
	TransactionID int64           `json:"transactionId"`
	TradeID       string          `json:"tradeId"`
	Units         decimal.Decimal `json:"units"` // signed, as filled
	Price         decimal.Decimal `json:"price"`
	RealizedPL    decimal.Decimal `json:"realizedPL"`
}

// CloseTradeAtVenue closes units (nil: all) of an open trade at the current price, as a venue
// stop-out does: the fill's reason is MARKET_ORDER_MARGIN_CLOSEOUT. It returns ErrNotFound for
// a trade that is not open.
func (s *Server) CloseTradeAtVenue(tradeID string, units *decimal.Decimal) (VenueClose, error) {
	if units != nil && !units.IsPositive() {
		return VenueClose{}, fmt.Errorf("close trade %s: units %s must be positive", tradeID, units)
	}
	var out VenueClose
	var err error
	s.withAccount(s.ctx(), func(a *account, pb *priceBook, now time.Time) {
		t := a.lookupTrade(tradeID)
		switch closeRefusal(t, units) {
		case closeNoTrade:
			err = fmt.Errorf("close trade %s: %w: no such open trade", tradeID, ErrNotFound)
			return
		case closeTooLarge:
			err = fmt.Errorf("close trade %s: units %s exceed the %s open", tradeID, units, t.currentUnits.Abs())
			return
		}
		_, result, fill := a.closeTrade(now, pb, t, units, reasonMarginCloseout, fillMarginCloseout)
		if result.Type != txOrderFill {
			err = fmt.Errorf("close trade %s: %s is %s", tradeID, t.symbol, venue.ReasonMarketHalted)
			return
		}
		out = fill
	})
	return out, err
}

// OpenUntagged opens a trade with no client extensions, as a person trading the account by hand
// would; it returns the trade id.
func (s *Server) OpenUntagged(symbol string, units decimal.Decimal) (string, error) {
	symbol = strings.ToUpper(symbol)
	if !fx.ValidSymbol(symbol) {
		return "", fmt.Errorf("open untagged: symbol %q is not six letters like EURUSD", symbol)
	}
	if units.IsZero() {
		return "", errors.New("open untagged: units must not be zero")
	}
	var id string
	var err error
	s.withAccount(s.ctx(), func(a *account, pb *priceBook, now time.Time) {
		_, result := a.placeMarket(now, pb, marketRequest{symbol: symbol, units: units}, "")
		if result.Type != txOrderFill {
			err = fmt.Errorf("open untagged %s %s: cancelled %s", symbol, units, result.Reason)
			return
		}
		id = result.TradeOpened.TradeID
	})
	return id, err
}

// ctx is the run context, or Background before Run: the control methods work on a simulator
// that is not serving yet.
func (s *Server) ctx() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runCtx == nil {
		return context.Background()
	}
	return s.runCtx
}

// State is what GET /control/state answers.
type State struct {
	URL         string `json:"url"`
	ControlURL  string `json:"controlUrl"`
	Connections int64  `json:"connections"` // trading connections accepted since start
	// OpenConnections are the trading connections open now.
	OpenConnections int `json:"openConnections"`
	// OutageUntil is set from an outage's start until the trading listener listens again.
	OutageUntil *time.Time   `json:"outageUntil,omitempty"`
	LatencyMS   float64      `json:"latencyMs"`
	Pending     PendingState `json:"pendingFaults"`
	Held        int          `json:"held"` // answers held now
	// OrdersExecuted counts filled orders; OrdersCancelled the cancelled ones; ClosesExecuted
	// the filled closes, the venue's own included.
	OrdersExecuted    int   `json:"ordersExecuted"`
	OrdersCancelled   int   `json:"ordersCancelled"`
	ClosesExecuted    int   `json:"closesExecuted"`
	LastTransactionID int64 `json:"lastTransactionId"`
	// OrderRequests counts the order requests received per clientExtensions.id, re-sends and
	// refused ones included.
	OrderRequests map[string]int `json:"orderRequests"`
	// Requests counts the trading requests received per endpoint, e.g. "POST /orders".
	Requests map[string]int `json:"requests"`
	Account  AccountState   `json:"account"`
	Trades   []TradeState   `json:"trades"` // open and closed, oldest first
}

// PendingState is the injected faults not yet used up.
type PendingState struct {
	FiveXX         int     `json:"5xx"`
	Timeouts       int     `json:"timeout"`
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	Holds          int     `json:"hold"`
	Cancels        int     `json:"cancel"`
	CancelReason   string  `json:"cancelReason,omitempty"`
	Partials       int     `json:"partial"`
}

// AccountState is the account's money at the current prices.
type AccountState struct {
	Currency              string          `json:"currency"`
	Balance               decimal.Decimal `json:"balance"`
	NAV                   decimal.Decimal `json:"nav"`
	UnrealizedPL          decimal.Decimal `json:"unrealizedPL"`
	MarginUsed            decimal.Decimal `json:"marginUsed"`
	MarginAvailable       decimal.Decimal `json:"marginAvailable"`
	MarginCloseoutPercent decimal.Decimal `json:"marginCloseoutPercent"`
	OpenTradeCount        int             `json:"openTradeCount"`
}

// TradeState describes one trade.
type TradeState struct {
	ID                    string           `json:"id"`
	Symbol                string           `json:"symbol"`
	State                 string           `json:"state"`
	ClientID              string           `json:"clientId,omitempty"`
	Tag                   string           `json:"tag,omitempty"`
	InitialUnits          decimal.Decimal  `json:"initialUnits"`
	CurrentUnits          decimal.Decimal  `json:"currentUnits"`
	Price                 decimal.Decimal  `json:"price"`
	AverageClosePrice     *decimal.Decimal `json:"averageClosePrice,omitempty"`
	RealizedPL            decimal.Decimal  `json:"realizedPL"`
	OpenTime              time.Time        `json:"openTime"`
	CloseTime             *time.Time       `json:"closeTime,omitempty"`
	ClosingTransactionIDs []int64          `json:"closingTransactionIds,omitempty"`
}

// State snapshots the simulator.
func (s *Server) State() State {
	url, controlURL := s.URL(), s.ControlURL()
	var st State
	s.withAccount(s.ctx(), func(a *account, pb *priceBook, _ time.Time) {
		f := a.figures(pb)
		st = State{
			URL: url, ControlURL: controlURL, Connections: s.accepted.Load(), OpenConnections: len(s.conns),
			LatencyMS: float64(s.latency) / float64(time.Millisecond), Held: s.held,
			Pending: PendingState{FiveXX: s.faults.fail5xx, Timeouts: s.faults.timeouts, Holds: s.faults.holds,
				Cancels: s.faults.cancels, Partials: s.faults.partials},
			OrdersExecuted: a.ordersFilled, OrdersCancelled: a.ordersCancelled, ClosesExecuted: a.closesFilled,
			LastTransactionID: a.lastID(),
			OrderRequests:     maps.Clone(s.orderRequests),
			Requests:          maps.Clone(s.requests),
			Account: AccountState{Currency: a.currency, Balance: f.balance.Round(moneyPlaces), NAV: f.nav.Round(moneyPlaces),
				UnrealizedPL: f.unrealized.Round(moneyPlaces), MarginUsed: f.marginUsed.Round(moneyPlaces),
				MarginAvailable: f.marginAvailable.Round(moneyPlaces), MarginCloseoutPercent: f.closeoutPercent,
				OpenTradeCount: f.openTrades},
			Trades: make([]TradeState, 0, len(a.tradeList)),
		}
		if s.faults.timeouts > 0 {
			st.Pending.TimeoutSeconds = s.faults.timeoutAfter.Seconds()
		}
		if s.faults.cancels > 0 {
			st.Pending.CancelReason = s.faults.cancelReason
		}
		if !s.outageUntil.IsZero() {
			until := s.outageUntil
			st.OutageUntil = &until
		}
		for _, t := range a.tradeList {
			ts := TradeState{ID: wireID(t.id), Symbol: t.symbol, State: t.state(), InitialUnits: t.initialUnits,
				CurrentUnits: t.currentUnits, Price: t.price, RealizedPL: t.realizedPL, OpenTime: t.openTime,
				ClosingTransactionIDs: slices.Clone(t.closingTxIDs)}
			if t.ext != nil {
				ts.ClientID, ts.Tag = t.ext.ID, t.ext.Tag
			}
			if p, ok := t.averageClose(); ok {
				ts.AverageClosePrice = &p
			}
			if !t.open() {
				ct := t.closeTime
				ts.CloseTime = &ct
			}
			st.Trades = append(st.Trades, ts)
		}
	})
	return st
}

func (s *Server) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /control/fault", control.LoopbackOnly(s.handleFault()))
	mux.Handle("POST /control/release", control.LoopbackOnly(s.handleRelease()))
	mux.Handle("POST /control/close-trade", control.LoopbackOnly(s.handleVenueClose()))
	mux.Handle("POST /control/untagged", control.LoopbackOnly(s.handleUntagged()))
	mux.Handle("POST /control/latency", control.LoopbackOnly(s.handleLatency()))
	mux.Handle("POST /control/gap", control.LoopbackOnly(s.handleGap()))
	mux.Handle("GET /control/state", control.LoopbackOnly(s.handleState()))
	return mux
}

func (s *Server) handleFault() http.HandlerFunc {
	type request struct {
		Kind    string  `json:"kind"`
		Count   int     `json:"count"`
		Seconds float64 `json:"seconds"`
		Reason  string  `json:"reason"`
		Percent int     `json:"percent"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		f := Fault{Kind: req.Kind, Count: req.Count, Duration: time.Duration(req.Seconds * float64(time.Second)), Reason: req.Reason, Percent: req.Percent}
		if err := s.InjectFault(f); err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"kind": req.Kind, "count": max(req.Count, 1), "seconds": req.Seconds})
	}
}

func (s *Server) handleRelease() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		control.WriteJSON(w, http.StatusOK, map[string]any{"released": s.Release()})
	}
}

func (s *Server) handleVenueClose() http.HandlerFunc {
	type request struct {
		TradeID string           `json:"tradeId"`
		Units   *decimal.Decimal `json:"units"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		fill, err := s.CloseTradeAtVenue(req.TradeID, req.Units)
		switch {
		case errors.Is(err, ErrNotFound):
			control.WriteError(w, http.StatusNotFound, "ENOTFOUND", err.Error())
		case err != nil:
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
		default:
			control.WriteJSON(w, http.StatusOK, fill)
		}
	}
}

func (s *Server) handleUntagged() http.HandlerFunc {
	type request struct {
		Symbol string          `json:"symbol"`
		Units  decimal.Decimal `json:"units"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		id, err := s.OpenUntagged(req.Symbol, req.Units)
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"tradeId": id})
	}
}

func (s *Server) handleLatency() http.HandlerFunc {
	type request struct {
		MS *float64 `json:"ms"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		if req.MS == nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", "ms is required (0 for none)")
			return
		}
		if err := s.SetLatency(time.Duration(*req.MS * float64(time.Millisecond))); err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"ms": *req.MS})
	}
}

func (s *Server) handleGap() http.HandlerFunc {
	type request struct {
		IDs int64 `json:"ids"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		if err := s.SkipTransactionIDs(req.IDs); err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"ids": req.IDs})
	}
}

func (s *Server) handleState() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		control.WriteJSON(w, http.StatusOK, s.State())
	}
}
