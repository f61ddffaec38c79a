package fixvenue

import (
	"fmt"
	"net/http"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/control"
)

// State is GET /control/state.
type State struct {
	LoggedOn bool `json:"loggedOn"`
	// DownUntil is the end of an outage POST /control/drop began with seconds, while it lasts.
	DownUntil *time.Time `json:"downUntil,omitempty"`
	Orders    []Order    `json:"orders"`
	Positions []Position `json:"positions"`
	Held      []string   `json:"held"`
	// Connections is how many TCP connections the desk opened to the venue since it started.
	Connections int64 `json:"connections"`
	// Queries counts the desk's queries the venue received since it started, and those it ignored.
	Queries Queries `json:"queries"`
	// LogonsRefused counts the desk's Logons refused for their credentials (Config.Password).
	LogonsRefused int `json:"logonsRefused"`
	// MarketData is the market-data session: logged on, subscriptions, messages (md.go).
	MarketData MarketDataState `json:"marketData"`
}

// State is the venue's state now.
func (s *Server) State() State {
	st := State{LoggedOn: s.LoggedOn(), Orders: s.book.all(), Positions: s.book.positions(), Held: s.book.heldIDs(), Queries: s.book.queryCounts(),
		MarketData: s.MarketData()}
	s.mu.Lock()
	st.LogonsRefused = s.logonsRefused
	s.mu.Unlock()
	if s.proxy != nil {
		if until, down := s.proxy.down(); down {
			st.DownUntil = &until
		}
		st.Connections = s.proxy.Accepted()
	}
	return st
}

// InjectFault queues f for the next orders (FaultIgnore: the next queries).
func (s *Server) InjectFault(f Fault) error { return s.book.inject(f) }

// Release sends the held report of clOrdID ("": all) and answers how many went out.
func (s *Server) Release(clOrdID string) int { return s.book.release(clOrdID) }

// CloseVenueSide has the venue close units (nil: all) of its net position in symbol itself.
func (s *Server) CloseVenueSide(symbol string, units *decimal.Decimal) (Order, error) {
	return s.book.closeVenueSide(symbol, units, nil, false)
}

// CloseVenueSideHeld is CloseVenueSide with the order's report held until Release(HeldKey(o)):
// the venue has executed it, the desk does not know yet.
func (s *Server) CloseVenueSideHeld(symbol string, units *decimal.Decimal) (Order, error) {
	return s.book.closeVenueSide(symbol, units, nil, true)
}

// CloseVenueSideAs is CloseVenueSide with the venue's own order named clOrdID (any text, such
// as a desk order id; "" sends none).
func (s *Server) CloseVenueSideAs(symbol string, units *decimal.Decimal, clOrdID string) (Order, error) {
	return s.book.closeVenueSide(symbol, units, &clOrdID, false)
}

// ControlHandler is the control API (loopback callers only).
func (s *Server) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /control/state", func(w http.ResponseWriter, _ *http.Request) {
		control.WriteJSON(w, http.StatusOK, s.State())
	})
	mux.HandleFunc("POST /control/fault", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		if !control.DecodeBody(w, r, &f) {
			return
		}
		if err := s.InjectFault(f); err != nil {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]any{"queued": f.Kind})
	})
	mux.HandleFunc("POST /control/release", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ClOrdID string `json:"clOrdId"`
		}
		if r.ContentLength != 0 && !control.DecodeBody(w, r, &body) {
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]int{"released": s.Release(body.ClOrdID)})
	})
	mux.HandleFunc("POST /control/drop", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Seconds float64 `json:"seconds"`
		}
		if r.ContentLength != 0 && !control.DecodeBody(w, r, &body) {
			return
		}
		if body.Seconds < 0 || body.Seconds > 600 {
			control.WriteError(w, http.StatusBadRequest, "EINVALID", fmt.Sprintf("seconds %v must be between 0 and 600", body.Seconds))
			return
		}
		control.WriteJSON(w, http.StatusOK, map[string]int{"dropped": s.DropFor(time.Duration(body.Seconds * float64(time.Second)))})
	})
	mux.HandleFunc("POST /control/close", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Symbol  string           `json:"symbol"`
			Units   *decimal.Decimal `json:"units"`
			ClOrdID *string          `json:"clOrdId"`
		}
		if !control.DecodeBody(w, r, &body) {
			return
		}
		o, err := s.book.closeVenueSide(body.Symbol, body.Units, body.ClOrdID, false)
		if err != nil {
			control.WriteError(w, http.StatusConflict, "ECONFLICT", err.Error())
			return
		}
		control.WriteJSON(w, http.StatusOK, o)
	})
	return control.LoopbackOnly(mux)
}
