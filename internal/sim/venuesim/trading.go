package venuesim

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/sim/control"
	"fxdesk/internal/venue"
)

// sinceIDPage is the most transactions one GET …/transactions/sinceid answers, as at OANDA.
const sinceIDPage = 1000

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.handle(mux, "POST /orders", s.handlePlaceOrder())
	s.handle(mux, "PUT /trades/{trade}/close", s.handleCloseTrade())
	s.handle(mux, "GET /openTrades", s.handleOpenTrades())
	s.handle(mux, "GET /trades/{trade}", s.handleTrade())
	s.handle(mux, "GET /orders/{order}", s.handleOrder())
	s.handle(mux, "GET /summary", s.handleSummary())
	s.handle(mux, "GET /transactions/sinceid", s.handleTransactionsSince())
	s.handle(mux, "GET /transactions/{id}", s.handleTransaction())
	return mux
}

// handle mounts one endpoint ("METHOD /path" under /v3/accounts/{account}) behind the checks
// every trading request passes: counted, authenticated, for this account.
func (s *Server) handle(mux *http.ServeMux, endpoint string, h http.HandlerFunc) {
	method, path, _ := strings.Cut(endpoint, " ")
	mux.Handle(method+" /v3/accounts/{account}"+path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests[endpoint]++
		s.mu.Unlock()
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" || (s.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.Token)) != 1) {
			writeVenueError(w, http.StatusUnauthorized, "", "Insufficient authorization to perform request.")
			return
		}
		if r.PathValue("account") != s.cfg.AccountID {
			writeVenueError(w, http.StatusForbidden, "", "The provided request was forbidden: the token does not give access to that account.")
			return
		}
		h(w, r)
	}))
}

// fail5xx answers 503 when a 5xx fault is pending, before anything is executed.
func (s *Server) fail5xx(w http.ResponseWriter) bool {
	s.mu.Lock()
	fail := s.faults.fail5xx > 0
	if fail {
		s.faults.fail5xx--
	}
	s.mu.Unlock()
	if fail {
		writeVenueError(w, http.StatusServiceUnavailable, "", "Service unavailable (an injected fault): nothing was executed.")
	}
	return fail
}

// answerFault is what an injected fault does to one answer, drawn when the request arrives.
type answerFault struct {
	timeoutAfter time.Duration // > 0: hold the answer that long, then cut the connection
	hold         bool          // hold the answer until Release
}

// drawAnswerFaultLocked takes the next timeout (orders and closes) or hold (orders only).
func (s *Server) drawAnswerFaultLocked(isOrder bool) answerFault {
	switch {
	case s.faults.timeouts > 0:
		s.faults.timeouts--
		return answerFault{timeoutAfter: s.faults.timeoutAfter}
	case isOrder && s.faults.holds > 0:
		s.faults.holds--
		return answerFault{hold: true}
	}
	return answerFault{}
}

// executeAfter waits the venue's latency on the real clock, then runs fn on the account with
// one price snapshot. A client that hangs up meanwhile does not stop the execution, as at a
// real venue; only the simulator's stop does (ok=false).
func (s *Server) executeAfter(latency time.Duration, fn func(a *account, pb *priceBook, now time.Time)) bool {
	s.mu.Lock()
	ctx := s.runCtx
	s.mu.Unlock()
	if latency > 0 {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	s.withAccount(ctx, fn)
	return true
}

// withAccount runs fn under mu with a price book; a snapshot source is read before locking.
func (s *Server) withAccount(ctx context.Context, fn func(a *account, pb *priceBook, now time.Time)) {
	src := s.cfg.Prices
	if snap, ok := src.(snapshotSource); ok {
		var err error
		if src, err = snap.snapshot(ctx); err != nil {
			s.log.WarnContext(ctx, "venue simulator: no prices, every symbol counts as halted", slog.Any("error", err))
			src = staticPrices{}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.acct, newPriceBook(src), s.cfg.Now())
}

// deliver writes an answer unless a fault holds it: a timeout cuts the connection after the
// hold, a hold waits for Release. A held answer whose client hung up, or whose simulator
// stops, is never written.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, f answerFault, status int, body any) {
	switch {
	case f.timeoutAfter > 0:
		t := time.NewTimer(f.timeoutAfter)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		panic(http.ErrAbortHandler) // closes the connection without an answer
	case f.hold:
		s.mu.Lock()
		s.held++
		release := s.release
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.held--
			s.mu.Unlock()
		}()
		select {
		case <-release:
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		}
	}
	control.WriteJSON(w, status, body)
}

// decodeVenueBody reads a JSON body; unknown fields are ignored, as the venue ignores them.
func decodeVenueBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, false)
}

// decodeOptionalVenueBody is decodeVenueBody for an endpoint whose body may be left out (a
// trade close: OANDA closes ALL units): no body reads as {}.
func decodeOptionalVenueBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, true)
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v)
	if err != nil && !(optional && errors.Is(err, io.EOF)) {
		writeVenueError(w, http.StatusBadRequest, "INVALID_REQUEST", "Invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// parseInstrument reads EUR_USD into the desk's EURUSD.
func parseInstrument(instrument string) (string, bool) {
	if len(instrument) != 7 || instrument[3] != '_' {
		return "", false
	}
	symbol := venue.DeskSymbol(instrument)
	return symbol, fx.ValidSymbol(symbol)
}

func (s *Server) handlePlaceOrder() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req orderRequest
		if !decodeVenueBody(w, r, &req) {
			return
		}
		o := req.Order
		clientID := ""
		if o.ClientExtensions != nil {
			clientID = o.ClientExtensions.ID
		}
		if clientID != "" {
			s.mu.Lock()
			s.orderRequests[clientID]++
			s.mu.Unlock()
		}
		if s.fail5xx(w) {
			return
		}
		symbol, okSymbol := parseInstrument(o.Instrument)
		units, err := decimal.NewFromString(o.Units)
		switch {
		case o.Type != "MARKET":
			writeVenueError(w, http.StatusBadRequest, "INVALID_ORDER_TYPE", fmt.Sprintf("The simulator takes MARKET orders only (got %q).", o.Type))
			return
		case !okSymbol:
			writeVenueError(w, http.StatusBadRequest, "INSTRUMENT_INVALID", fmt.Sprintf("Instrument %q is not like EUR_USD.", o.Instrument))
			return
		case !s.instruments[symbol]:
			// As at OANDA: refused before anything is created, so no transaction id is used
			// and the client id stays free.
			s.mu.Lock()
			last := s.acct.lastID()
			s.mu.Unlock()
			control.WriteJSON(w, http.StatusBadRequest, map[string]string{"errorCode": "INSTRUMENT_UNKNOWN",
				"errorMessage":      fmt.Sprintf("The instrument %q is unknown to this account; nothing was created.", o.Instrument),
				"lastTransactionID": wireID(last)})
			return
		case err != nil || units.IsZero():
			writeVenueError(w, http.StatusBadRequest, "UNITS_INVALID", fmt.Sprintf("Units %q must be a non-zero decimal.", o.Units))
			return
		case o.TimeInForce != "" && o.TimeInForce != venue.FOK && o.TimeInForce != venue.IOC:
			writeVenueError(w, http.StatusBadRequest, "TIME_IN_FORCE_INVALID", "A MARKET order is FOK or IOC.")
			return
		}
		bound, berr := parseBound(o.PriceBound)
		if berr != "" {
			writeVenueError(w, http.StatusBadRequest, "PRICE_BOUND_INVALID", berr)
			return
		}

		s.mu.Lock()
		if clientID != "" && (s.acct.orders[clientID] != nil || s.acct.reserved[clientID]) {
			s.mu.Unlock()
			writeVenueError(w, http.StatusBadRequest, "CLIENT_ORDER_ID_ALREADY_EXISTS",
				fmt.Sprintf("An order with client id %q already exists; nothing was executed.", clientID))
			return
		}
		if clientID != "" {
			s.acct.reserved[clientID] = true // a concurrent re-send is refused during the latency
		}
		cancelReason := ""
		if s.faults.cancels > 0 {
			s.faults.cancels--
			cancelReason = s.faults.cancelReason
		}
		fillPercent := 0
		if cancelReason == "" && s.faults.partials > 0 {
			s.faults.partials--
			fillPercent = s.faults.partialPercent
		}
		fault := s.drawAnswerFaultLocked(true)
		latency := s.latency
		s.mu.Unlock()

		var answer map[string]any
		ok := s.executeAfter(latency, func(a *account, pb *priceBook, now time.Time) {
			create, result := a.placeMarket(now, pb, marketRequest{symbol: symbol, units: units,
				ext: o.ClientExtensions, tradeExt: o.TradeClientExtensions, fillPercent: fillPercent, ioc: o.TimeInForce == venue.IOC, bound: bound}, cancelReason)
			answer = outcomeAnswer(create, result, a.lastID())
		})
		if !ok {
			panic(http.ErrAbortHandler)
		}
		s.deliver(w, r, fault, http.StatusCreated, answer)
	}
}

// outcomeAnswer is the body of an order or close answer.
func outcomeAnswer(create, result transaction, last int64) map[string]any {
	answer := map[string]any{
		"orderCreateTransaction": create,
		"relatedTransactionIDs":  []string{create.ID, result.ID},
		"lastTransactionID":      wireID(last),
	}
	if result.Type == txOrderFill {
		answer["orderFillTransaction"] = result
	} else {
		answer["orderCancelTransaction"] = result
	}
	return answer
}

// lookupTrade resolves a tradeSpecifier: an id, or @clientId.
func (a *account) lookupTrade(specifier string) *trade {
	if clientID, ok := strings.CutPrefix(specifier, "@"); ok {
		return a.tradesByClient[clientID]
	}
	id, err := strconv.ParseInt(specifier, 10, 64)
	if err != nil {
		return nil
	}
	return a.trades[id]
}

// Why the venue refuses a close, as it spells the errorCode.
const (
	closeNoTrade  = "TRADE_DOESNT_EXIST"
	closeTooLarge = "CLOSE_TRADE_UNITS_EXCEED_TRADE_SIZE"
)

// closeRefusal is why a close of units (nil: all) of t (nil: unknown) is refused, or "" when it
// executes.
func closeRefusal(t *trade, units *decimal.Decimal) string {
	switch {
	case t == nil || !t.open():
		return closeNoTrade
	case units != nil && units.GreaterThan(t.currentUnits.Abs()):
		return closeTooLarge
	}
	return ""
}

func (s *Server) handleCloseTrade() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req closeRequest
		if !decodeOptionalVenueBody(w, r, &req) {
			return
		}
		if s.fail5xx(w) {
			return
		}
		var units *decimal.Decimal
		if req.Units != "ALL" && req.Units != "" { // units default to ALL, as at OANDA
			u, err := decimal.NewFromString(req.Units)
			if err != nil || !u.IsPositive() {
				writeVenueError(w, http.StatusBadRequest, "UNITS_INVALID", fmt.Sprintf("Units %q must be ALL or a positive decimal.", req.Units))
				return
			}
			units = &u
		}
		specifier := r.PathValue("trade")
		s.mu.Lock()
		var fault answerFault
		// Only a close that executes takes a timeout: a refused one (404, 400) executes nothing.
		// It is judged on arrival, like every fault; a close of the same trade that executes
		// in the latency between can still leave this one refused.
		if closeRefusal(s.acct.lookupTrade(specifier), units) == "" {
			fault = s.drawAnswerFaultLocked(false)
		}
		latency := s.latency
		s.mu.Unlock()

		status, answer := http.StatusOK, any(nil)
		ok := s.executeAfter(latency, func(a *account, pb *priceBook, now time.Time) {
			t := a.lookupTrade(specifier)
			switch closeRefusal(t, units) {
			case closeNoTrade:
				status, answer = http.StatusNotFound, map[string]string{"errorCode": closeNoTrade,
					"errorMessage": fmt.Sprintf("No open trade %q in the account.", specifier)}
			case closeTooLarge:
				status, answer = http.StatusBadRequest, map[string]string{"errorCode": closeTooLarge,
					"errorMessage": fmt.Sprintf("Trade %d has %s units open.", t.id, t.currentUnits.Abs())}
			default:
				create, result, _ := a.closeTrade(now, pb, t, units, reasonTradeClose, fillTradeClose)
				answer = outcomeAnswer(create, result, a.lastID())
			}
		})
		if !ok {
			panic(http.ErrAbortHandler)
		}
		s.deliver(w, r, fault, status, answer)
	}
}

func (s *Server) handleOpenTrades() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.fail5xx(w) {
			return
		}
		var answer map[string]any
		s.withAccount(r.Context(), func(a *account, pb *priceBook, _ time.Time) {
			trades := []tradeJSON{}
			// Newest first, as OANDA lists them.
			for i := len(a.tradeList) - 1; i >= 0; i-- {
				if t := a.tradeList[i]; t.open() {
					trades = append(trades, a.tradeJSON(t, pb))
				}
			}
			answer = map[string]any{"trades": trades, "lastTransactionID": wireID(a.lastID())}
		})
		control.WriteJSON(w, http.StatusOK, answer)
	}
}

func (s *Server) handleTrade() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.fail5xx(w) {
			return
		}
		specifier := r.PathValue("trade")
		var answer map[string]any
		s.withAccount(r.Context(), func(a *account, pb *priceBook, _ time.Time) {
			if t := a.lookupTrade(specifier); t != nil {
				answer = map[string]any{"trade": a.tradeJSON(t, pb), "lastTransactionID": wireID(a.lastID())}
			}
		})
		if answer == nil {
			writeVenueError(w, http.StatusNotFound, "TRADE_DOESNT_EXIST", fmt.Sprintf("No trade %q in the account.", specifier))
			return
		}
		control.WriteJSON(w, http.StatusOK, answer)
	}
}

func (s *Server) handleOrder() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.fail5xx(w) {
			return
		}
		specifier := r.PathValue("order")
		s.mu.Lock()
		var answer map[string]any
		if clientID, ok := strings.CutPrefix(specifier, "@"); ok {
			if o := s.acct.orders[clientID]; o != nil {
				answer = map[string]any{"order": o.json(), "lastTransactionID": wireID(s.acct.lastID())}
			}
		}
		s.mu.Unlock()
		if answer == nil {
			// Orders are kept by client id only: the desk never reads one by venue id.
			writeVenueError(w, http.StatusNotFound, "ORDER_DOESNT_EXIST", fmt.Sprintf("No order %q in the account.", specifier))
			return
		}
		control.WriteJSON(w, http.StatusOK, answer)
	}
}

func (s *Server) handleSummary() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.fail5xx(w) {
			return
		}
		var answer map[string]any
		s.withAccount(r.Context(), func(a *account, pb *priceBook, _ time.Time) {
			answer = map[string]any{"account": a.summaryJSON(pb), "lastTransactionID": wireID(a.lastID())}
		})
		control.WriteJSON(w, http.StatusOK, answer)
	}
}

func (s *Server) handleTransactionsSince() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.fail5xx(w) {
			return
		}
		since, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
		if err != nil || since < 0 {
			writeVenueError(w, http.StatusBadRequest, "INVALID_VALUE", fmt.Sprintf("id %q must be a transaction id.", r.URL.Query().Get("id")))
			return
		}
		s.mu.Lock()
		last := s.acct.lastID()
		// The page is the next transactions after since by count, never the ids since+1 …
		// since+1000: over a gap of ids that range is empty although transactions follow it.
		// Recorded transactions never change, so the page is encoded outside mu.
		from := s.acct.after(since)
		page := s.acct.txs[from:min(from+sinceIDPage, len(s.acct.txs))]
		s.mu.Unlock()
		control.WriteJSON(w, http.StatusOK, map[string]any{"transactions": page, "lastTransactionID": wireID(last)})
	}
}

func (s *Server) handleTransaction() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.fail5xx(w) {
			return
		}
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		s.mu.Lock()
		last := s.acct.lastID()
		var tx *transaction
		if err == nil {
			tx, _ = s.acct.transactionByID(id)
		}
		s.mu.Unlock()
		if tx == nil {
			writeVenueError(w, http.StatusNotFound, "TRANSACTION_DOESNT_EXIST", fmt.Sprintf("No transaction %q in the account.", r.PathValue("id")))
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"transaction": tx, "lastTransactionID": wireID(last)})
	}
}
