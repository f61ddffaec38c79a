package feedsim

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"fxdesk/internal/sim/control"
)

// maxFaultPips bounds the spike, shift and offset controls: far beyond any real move, short of
// a typo that would make a price negative or absurd.
const maxFaultPips = 100_000

// DefaultSpikeDuration is how long a spike stands when the caller does not say.
const DefaultSpikeDuration = 50 * time.Millisecond

func checkPips(what string, pips float64, zeroOK bool) error {
	if math.IsNaN(pips) || math.Abs(pips) > maxFaultPips || (!zeroOK && pips == 0) {
		if zeroOK {
			return fmt.Errorf("%s: pips %v must be from -%d to %d", what, pips, maxFaultPips, maxFaultPips)
		}
		return fmt.Errorf("%s: pips %v must be non-zero, from -%d to %d", what, pips, maxFaultPips, maxFaultPips)
	}
	return nil
}

// Spike sends symbol's subscribers one quote pips away from its price and, d later, the price
// it left, with no walk quote in between: a desk sees exactly one off-market tick (the provider
// glitch the desk's spike filter must hold). d <= 0 means DefaultSpikeDuration. The symbol must
// be quotable, and only one spike per symbol may be out at a time. It returns how many clients
// were sent the spike.
func (s *Server) Spike(symbol string, pips float64, d time.Duration) (int, error) {
	if err := checkPips("spike", pips, false); err != nil {
		return 0, err
	}
	if d <= 0 {
		d = DefaultSpikeDuration
	}
	if d > time.Minute {
		return 0, fmt.Errorf("spike: ms %d must be at most 60000", d.Milliseconds())
	}
	s.mu.Lock()
	if s.runCtx == nil || s.stopped {
		s.mu.Unlock()
		return 0, errors.New("spike: simulator is not running")
	}
	st, err := s.lookupSymbolLocked(symbol)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("spike: %w", err)
	}
	now, wall := s.cfg.Now(), time.Now()
	if !s.quotableLocked(st, now) {
		s.mu.Unlock()
		return 0, fmt.Errorf("spike: %s is not being quoted (closed or silenced)", st.inst.Symbol)
	}
	if wall.Before(st.spikeUntil) {
		s.mu.Unlock()
		return 0, fmt.Errorf("spike: a spike on %s is still out", st.inst.Symbol)
	}
	left := st.entry()
	spike := left
	spike.bid, spike.ask = moved(left.bid, left.ask, pips, left.digits)
	st.spikeUntil = wall.Add(d)
	st.sent++
	outs := s.quoteFramesLocked([]quoteEntry{spike}, now)
	ctx := s.runCtx
	s.wg.Go(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		st.spikeUntil = time.Time{}
		now := s.cfg.Now()
		var outs []outgoing
		if s.quotableLocked(st, now) {
			st.sent++
			outs = s.quoteFramesLocked([]quoteEntry{left}, now)
		}
		s.mu.Unlock()
		for _, o := range outs {
			o.c.enqueue(o.frame, true)
		}
	})
	s.mu.Unlock()
	return s.send(outs), nil
}

// Shift moves symbol's price by pips for good and pushes the moved price at once: a real gap (a
// weekend open, a central bank). The walk continues from the moved price.
func (s *Server) Shift(symbol string, pips float64) (int, error) {
	if err := checkPips("shift", pips, false); err != nil {
		return 0, err
	}
	s.mu.Lock()
	st, err := s.lookupSymbolLocked(symbol)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("shift: %w", err)
	}
	now := s.cfg.Now()
	st.bid, st.ask = moved(st.bid, st.ask, pips, st.inst.Digits)
	st.shift += pips * PipSize(st.inst.Digits)
	var outs []outgoing
	if s.quotableLocked(st, now) {
		st.sent++
		outs = s.quoteFramesLocked([]quoteEntry{st.entry()}, now)
	}
	s.mu.Unlock()
	return s.send(outs), nil
}

// Offset quotes symbol ("" or "*" = every symbol) pips off its price until it is set back to 0:
// a source that disagrees with the market. The walk underneath is unchanged, so setting 0 quotes
// the market again. The new quotes are pushed at once.
func (s *Server) Offset(symbol string, pips float64) (int, error) {
	if err := checkPips("offset", pips, true); err != nil {
		return 0, err
	}
	s.mu.Lock()
	targets, err := s.targetsLocked(symbol)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("offset: %w", err)
	}
	now := s.cfg.Now()
	var entries []quoteEntry
	for _, st := range targets {
		st.offsetPips = pips
		if s.quotableLocked(st, now) {
			st.sent++
			entries = append(entries, st.entry())
		}
	}
	outs := s.quoteFramesLocked(entries, now)
	s.mu.Unlock()
	return s.send(outs), nil
}

// send enqueues control pushes with back-pressure and counts the clients reached.
func (s *Server) send(outs []outgoing) int {
	reached := map[*client]bool{}
	for _, o := range outs {
		if o.c.enqueue(o.frame, true) {
			reached[o.c] = true
		}
	}
	return len(reached)
}

func (s *Server) faultRoutes(mux *http.ServeMux) {
	mux.Handle("POST /control/spike", control.LoopbackOnly(s.handleSpike()))
	mux.Handle("POST /control/shift", control.LoopbackOnly(s.handleShift()))
	mux.Handle("POST /control/offset", control.LoopbackOnly(s.handleOffset()))
}

func (s *Server) handleSpike() http.HandlerFunc {
	type request struct {
		Symbol string  `json:"symbol"`
		Pips   float64 `json:"pips"`
		MS     int64   `json:"ms"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		if req.MS < 0 {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", "spike: ms must not be negative (0 = 50)")
			return
		}
		n, err := s.Spike(req.Symbol, req.Pips, time.Duration(req.MS)*time.Millisecond)
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"symbol": strings.ToUpper(req.Symbol), "pushedTo": n})
	}
}

func (s *Server) handleShift() http.HandlerFunc {
	type request struct {
		Symbol string  `json:"symbol"`
		Pips   float64 `json:"pips"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		n, err := s.Shift(req.Symbol, req.Pips)
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"symbol": strings.ToUpper(req.Symbol), "pushedTo": n})
	}
}

func (s *Server) handleOffset() http.HandlerFunc {
	type request struct {
		Symbol string   `json:"symbol"`
		Pips   *float64 `json:"pips"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if !control.DecodeBody(w, r, &req) {
			return
		}
		if req.Pips == nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", "offset: pips is required (0 quotes the market again)")
			return
		}
		n, err := s.Offset(req.Symbol, *req.Pips)
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"symbol": req.Symbol, "pips": *req.Pips, "pushedTo": n})
	}
}
