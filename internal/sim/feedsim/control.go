package feedsim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"fxdesk/internal/fx"
	"fxdesk/internal/sim/control"
)

// maxBurstTicks bounds one burst so a typo cannot keep the simulator busy for hours.
const maxBurstTicks = 100_000_000

// SetQuote sets symbol's price at once and pushes it to every subscriber if the symbol is
// quotable (see the package doc). An unknown six-letter symbol is added (5 digits, forex
// calendar), so tests can introduce a pair at runtime. It returns how many clients were sent the
// quote.
func (s *Server) SetQuote(symbol string, bid, ask float64) (int, error) {
	symbol = strings.ToUpper(symbol)
	if !fx.ValidSymbol(symbol) {
		return 0, fmt.Errorf("set quote: symbol %q is not six letters like EURUSD", symbol)
	}
	// Rejecting bad prices here keeps the control API honest; /control/raw exists to send bad ones.
	if !(bid > 0) || !(ask > 0) || bid > ask {
		return 0, fmt.Errorf("set quote %s: bid %v / ask %v must be positive and not crossed", symbol, bid, ask)
	}
	s.mu.Lock()
	now := s.cfg.Now()
	st, ok := s.symbols[symbol]
	if !ok {
		st = s.addSymbolLocked(Instrument{Symbol: symbol, Digits: 5, Mid: (bid + ask) / 2,
			Spread: ask - bid, Volatility: 0.00004, Calendar: "forex"})
	}
	st.bid, st.ask = bid, ask
	if s.cfg.MarketSeed != 0 {
		// The seeded market continues from the set price on this simulator only.
		st.shift = (bid+ask)/2 - s.marketMidLocked(st, now)
	}
	var outs []outgoing
	if s.quotableLocked(st, now) {
		st.sent++
		outs = s.quoteFramesLocked([]quoteEntry{st.entry()}, now)
	}
	s.mu.Unlock()
	n := 0
	for _, o := range outs {
		if o.c.enqueue(o.frame, true) {
			n++
		}
	}
	return n, nil
}

// Quote is symbol's current price as the provider would quote it now; ok is false for an
// unknown symbol or one that is not quotable (see the package doc). It lets an in-process
// venue simulator fill at the feed's price.
func (s *Server) Quote(symbol string) (bid, ask float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, known := s.symbols[strings.ToUpper(symbol)]
	if !known || !s.quotableLocked(st, s.cfg.Now()) {
		return 0, 0, false
	}
	bid, ask = st.quoted()
	return bid, ask, true
}

// SetSession makes the provider announce symbol closed (open=false) or open again; "" or "*"
// means every symbol. Closed symbols are not quoted until reopened.
func (s *Server) SetSession(symbol string, open bool) error {
	s.mu.Lock()
	targets, err := s.targetsLocked(symbol)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("set session: %w", err)
	}
	status := "market_open"
	if !open {
		status = "market_closed"
	}
	per := make(map[*client][]statusEvent)
	for _, st := range targets {
		st.providerClosed = !open
		for c := range s.clients {
			if c.wants(st.pair) {
				per[c] = append(per[c], statusEvent{status, st.pair})
			}
		}
	}
	s.mu.Unlock()
	for c, evs := range per {
		c.enqueue(statusFrame(evs...), true)
	}
	return nil
}

// Silence stops quotes for symbol ("" or "*" = all) for d; d <= 0 lifts the silence. The socket
// stays up: this is the "connected but nothing arrives" failure a tick engine must detect.
func (s *Server) Silence(symbol string, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	until := s.cfg.Now().Add(d)
	if d <= 0 {
		until = time.Time{}
	}
	if symbol == "" || symbol == "*" {
		s.silenceAllUntil = until
		if d <= 0 {
			for _, st := range s.order {
				st.silencedUntil = time.Time{}
			}
		}
		return nil
	}
	st, err := s.lookupSymbolLocked(symbol)
	if err != nil {
		return fmt.Errorf("silence: %w", err)
	}
	st.silencedUntil = until
	return nil
}

// Burst sends ticksPerSecond × d quotes, round-robin over symbols (empty = all), in the
// background. Frames carry up to MaxBatch events and are written with back-pressure, so every
// tick reaches a subscriber that keeps reading. It returns the number of ticks planned.
func (s *Server) Burst(symbols []string, ticksPerSecond float64, d time.Duration) (int, error) {
	if !(ticksPerSecond > 0) || d <= 0 {
		return 0, fmt.Errorf("burst: ticksPerSecond (%v) and seconds (%v) must be positive", ticksPerSecond, d.Seconds())
	}
	total := ticksPerSecond * d.Seconds()
	if total > maxBurstTicks {
		return 0, fmt.Errorf("burst: %.0f ticks is more than the limit of %d", total, maxBurstTicks)
	}
	n := max(1, int(total+0.5))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runCtx == nil || s.stopped {
		return 0, errors.New("burst: simulator is not running")
	}
	var states []*symbolState
	if len(symbols) == 0 {
		states = slices.Clone(s.order)
	}
	for _, sym := range symbols {
		st, err := s.lookupSymbolLocked(sym)
		if err != nil {
			return 0, fmt.Errorf("burst: %w", err)
		}
		states = append(states, st)
	}
	s.activeBursts++
	s.wg.Go(func() { s.runBurst(s.runCtx, states, ticksPerSecond, n) })
	return n, nil
}

func (s *Server) runBurst(ctx context.Context, states []*symbolState, tps float64, total int) {
	defer func() {
		s.mu.Lock()
		s.activeBursts--
		s.mu.Unlock()
	}()
	// Pacing runs on the real monotonic clock: it is about throughput on this machine, not about
	// simulated time (provider timestamps still come from Config.Now).
	start := time.Now()
	sent, next := 0, 0
	batch := make([]quoteEntry, 0, s.cfg.MaxBatch)
	pause := time.NewTimer(0)
	defer pause.Stop()
	for sent < total {
		due := min(total, int(tps*time.Since(start).Seconds())+1) - sent
		if due <= 0 {
			pause.Reset(max(time.Millisecond, time.Duration(float64(time.Second)/tps)))
			select {
			case <-ctx.Done():
				return
			case <-pause.C:
			}
			continue
		}
		n := min(due, s.cfg.MaxBatch)
		s.mu.Lock()
		now := s.cfg.Now()
		batch = batch[:0]
		for range n {
			st := states[next%len(states)]
			next++
			if s.quotableLocked(st, now) {
				s.stepLocked(st, now)
				// Captured per tick: a symbol drawn many times in one batch carries each price.
				batch = append(batch, st.entry())
			}
		}
		outs := s.quoteFramesLocked(batch, now)
		s.mu.Unlock()
		for _, o := range outs {
			if !o.c.enqueue(o.frame, true) && ctx.Err() != nil {
				return
			}
		}
		sent += n
	}
}

// SendRaw sends frame verbatim to every authenticated client: the hook for feeding a tick
// engine malformed, undated, crossed or non-positive quotes over the real socket. It returns the
// number of clients sent to.
func (s *Server) SendRaw(frame string) int {
	s.mu.Lock()
	var targets []*client
	for c := range s.clients {
		if c.authed {
			targets = append(targets, c)
		}
	}
	s.mu.Unlock()
	n := 0
	for _, c := range targets {
		if c.enqueue([]byte(frame), true) {
			n++
		}
	}
	return n
}

// DisconnectAll drops every client socket without a close handshake, as a network fault
// would. It returns the number of sockets dropped.
func (s *Server) DisconnectAll() int {
	conns := s.clientConns()
	for _, c := range conns {
		c.CloseNow()
	}
	return len(conns)
}

// clientConns snapshots the connected sockets, so they are closed outside mu.
func (s *Server) clientConns() []*websocket.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]*websocket.Conn, 0, len(s.clients))
	for c := range s.clients {
		conns = append(conns, c.conn)
	}
	return conns
}

// targetsLocked resolves "" / "*" to every symbol, or one symbol.
func (s *Server) targetsLocked(symbol string) ([]*symbolState, error) {
	if symbol == "" || symbol == "*" {
		return slices.Clone(s.order), nil
	}
	st, err := s.lookupSymbolLocked(symbol)
	if err != nil {
		return nil, err
	}
	return []*symbolState{st}, nil
}

// State is what GET /control/state answers.
type State struct {
	Addr             string        `json:"addr"`
	Connections      int64         `json:"connections"` // accepted since start
	Clients          []ClientState `json:"clients"`
	SilencedAllUntil *time.Time    `json:"silencedAllUntil,omitempty"`
	ActiveBursts     int           `json:"activeBursts"`
	MarketSeed       uint64        `json:"marketSeed,omitempty"` // 0: an independent random walk
	Symbols          []SymbolState `json:"symbols"`
}

// ClientState describes one connected client.
type ClientState struct {
	ID            int      `json:"id"`
	Remote        string   `json:"remote"`
	Authenticated bool     `json:"authenticated"`
	Subscriptions []string `json:"subscriptions"` // wire pairs, sorted; "*" for C.*
	DroppedFrames uint64   `json:"droppedFrames"`
}

// SymbolState describes one simulated symbol.
type SymbolState struct {
	Symbol        string     `json:"symbol"`
	Pair          string     `json:"pair"`
	Bid           float64    `json:"bid"`
	Ask           float64    `json:"ask"`
	ProviderOpen  bool       `json:"providerOpen"`
	SessionOpen   bool       `json:"sessionOpen"`
	Quotable      bool       `json:"quotable"`
	SilencedUntil *time.Time `json:"silencedUntil,omitempty"`
	OffsetPips    float64    `json:"offsetPips"` // /control/offset; Bid and Ask include it
	Sent          uint64     `json:"sent"`
}

// State snapshots the simulator.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	st := State{Connections: s.accepted.Load(), ActiveBursts: s.activeBursts, MarketSeed: s.cfg.MarketSeed}
	if s.ln != nil {
		st.Addr = s.ln.Addr().String()
	}
	if now.Before(s.silenceAllUntil) {
		t := s.silenceAllUntil
		st.SilencedAllUntil = &t
	}
	for c := range s.clients {
		cs := ClientState{ID: c.id, Remote: c.remote, Authenticated: c.authed, DroppedFrames: c.dropped.Load()}
		for p := range c.subs {
			cs.Subscriptions = append(cs.Subscriptions, p)
		}
		if c.all {
			cs.Subscriptions = append(cs.Subscriptions, "*")
		}
		slices.Sort(cs.Subscriptions)
		st.Clients = append(st.Clients, cs)
	}
	slices.SortFunc(st.Clients, func(a, b ClientState) int { return a.ID - b.ID })
	for _, sym := range s.order {
		bid, ask := sym.quoted()
		ss := SymbolState{
			Symbol: sym.inst.Symbol, Pair: sym.pair, Bid: bid, Ask: ask, OffsetPips: sym.offsetPips,
			ProviderOpen: !sym.providerClosed, SessionOpen: sym.cal.IsOpen(now),
			Quotable: s.quotableLocked(sym, now), Sent: sym.sent,
		}
		if now.Before(sym.silencedUntil) {
			t := sym.silencedUntil
			ss.SilencedUntil = &t
		}
		st.Symbols = append(st.Symbols, ss)
	}
	return st
}

func (s *Server) controlRoutes(mux *http.ServeMux) {
	mux.Handle("POST /control/quote", control.LoopbackOnly(s.handleQuote()))
	mux.Handle("POST /control/session", control.LoopbackOnly(s.handleSession()))
	mux.Handle("POST /control/silence", control.LoopbackOnly(s.handleSilence()))
	mux.Handle("POST /control/burst", control.LoopbackOnly(s.handleBurst()))
	mux.Handle("POST /control/raw", control.LoopbackOnly(s.handleRaw()))
	mux.Handle("POST /control/disconnect", control.LoopbackOnly(s.handleDisconnect()))
	mux.Handle("GET /control/state", control.LoopbackOnly(s.handleState()))
	s.faultRoutes(mux)
}

func (s *Server) handleQuote() http.HandlerFunc {
	type request struct {
		Symbol string  `json:"symbol"`
		Bid    float64 `json:"bid"`
		Ask    float64 `json:"ask"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		n, err := s.SetQuote(req.Symbol, req.Bid, req.Ask)
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"symbol": strings.ToUpper(req.Symbol), "pushedTo": n})
	}
}

func (s *Server) handleSession() http.HandlerFunc {
	type request struct {
		Symbol string `json:"symbol"`
		Open   *bool  `json:"open"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		if req.Open == nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", "open is required (true or false)")
			return
		}
		if err := s.SetSession(req.Symbol, *req.Open); err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"symbol": req.Symbol, "open": *req.Open})
	}
}

func (s *Server) handleSilence() http.HandlerFunc {
	type request struct {
		Symbol  string  `json:"symbol"`
		Seconds float64 `json:"seconds"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		if err := s.Silence(req.Symbol, time.Duration(req.Seconds*float64(time.Second))); err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"symbol": req.Symbol, "seconds": req.Seconds})
	}
}

func (s *Server) handleBurst() http.HandlerFunc {
	type request struct {
		Symbols        []string `json:"symbols"`
		TicksPerSecond float64  `json:"ticksPerSecond"`
		Seconds        float64  `json:"seconds"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		n, err := s.Burst(req.Symbols, req.TicksPerSecond, time.Duration(req.Seconds*float64(time.Second)))
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusAccepted, map[string]any{"ticks": n})
	}
}

func (s *Server) handleRaw() http.HandlerFunc {
	type request struct {
		Frame string `json:"frame"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"sentTo": s.SendRaw(req.Frame)})
	}
}

func (s *Server) handleDisconnect() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		control.WriteJSON(w, http.StatusOK, map[string]any{"dropped": s.DisconnectAll()})
	}
}

func (s *Server) handleState() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		control.WriteJSON(w, http.StatusOK, s.State())
	}
}
