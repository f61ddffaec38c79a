package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/desk"
	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
	"fxdesk/internal/tick"
	"fxdesk/internal/trading"
)

// symbolView is one instrument as traders see it, with its live state and last bid/ask.
type symbolView struct {
	Symbol       string     `json:"symbol"`
	Base         string     `json:"base"`
	Quote        string     `json:"quote"`
	Digits       int        `json:"digits"`
	ContractSize string     `json:"contractSize"`
	VolumeMin    string     `json:"volumeMin"`
	VolumeStep   string     `json:"volumeStep"`
	VolumeMax    string     `json:"volumeMax"`
	Status       string     `json:"status"`
	State        tick.State `json:"state"`
	Bid          *string    `json:"bid"`
	Ask          *string    `json:"ask"`
	Time         *time.Time `json:"time,omitempty"` // provider time of the last quote
}

type quoteView struct {
	Symbol string     `json:"symbol"`
	State  tick.State `json:"state"`
	Bid    *string    `json:"bid"`
	Ask    *string    `json:"ask"`
	Time   *time.Time `json:"time,omitempty"`
	AgeMs  *int64     `json:"ageMs,omitempty"`
}

func price(v float64, digits int) *string {
	s := strconv.FormatFloat(v, 'f', digits, 64)
	return &s
}

// requestedSymbols reads ?symbols= against the enabled instruments (cached by the trading
// catalog) and returns them with the enabled instruments, by symbol and in order. nil symbols
// means all.
func requestedSymbols(r *http.Request, svc *trading.Service) (map[string]trading.Instrument, []trading.Instrument, []string, error) {
	known, enabled, err := svc.Tradable(r.Context())
	if err != nil {
		return nil, nil, nil, err
	}
	symbols, err := parseSymbols(r.URL.Query().Get("symbols"), known)
	return known, enabled, symbols, err
}

// parseSymbols reads ?symbols=A,B: each must be an enabled instrument. Empty means all.
func parseSymbols(raw string, known map[string]trading.Instrument) ([]string, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var out []string
	seen := map[string]bool{}
	for s := range strings.SplitSeq(raw, ",") {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "" || seen[s] {
			continue
		}
		if _, ok := known[s]; !ok {
			return nil, fx.Errorf(fx.EINVALID, "Unknown symbol %q: symbols are six-letter codes such as EURUSD.", s)
		}
		seen[s] = true
		out = append(out, s)
	}
	if len(out) > 200 {
		return nil, fx.Errorf(fx.EINVALID, "At most 200 symbols per request.")
	}
	return out, nil
}

// handleSymbols lists enabled instruments with their state and last bid/ask.
func handleSymbols(log *slog.Logger, svc *trading.Service, quotes *desk.Quotes) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		_, enabled, err := svc.Tradable(r.Context())
		if err != nil {
			return err
		}
		out := make([]symbolView, 0, len(enabled))
		for _, in := range enabled {
			v := symbolView{
				Symbol: in.Symbol, Base: in.Base, Quote: in.Quote, Digits: in.Digits,
				ContractSize: in.ContractSize.String(), VolumeMin: in.VolumeMin.String(),
				VolumeStep: in.VolumeStep.String(), VolumeMax: in.VolumeMax.String(),
				Status: string(in.Status), State: quotes.SymbolState(in.Symbol),
			}
			if q, ok := quotes.LastTick(in.Symbol); ok {
				v.Bid, v.Ask = price(q.Bid, in.Digits), price(q.Ask, in.Digits)
				t := q.ProviderTime.UTC()
				v.Time = &t
			}
			out = append(out, v)
		}
		writeJSON(w, http.StatusOK, map[string]any{"symbols": out})
		return nil
	})
}

// handleQuotes answers the last quote of each requested symbol.
func handleQuotes(log *slog.Logger, svc *trading.Service, quotes *desk.Quotes) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		known, enabled, symbols, err := requestedSymbols(r, svc)
		if err != nil {
			return err
		}
		if symbols == nil {
			for _, in := range enabled {
				symbols = append(symbols, in.Symbol)
			}
		}
		now := time.Now()
		out := make([]quoteView, 0, len(symbols))
		for _, s := range symbols {
			v := quoteView{Symbol: s, State: quotes.SymbolState(s)}
			if q, ok := quotes.LastTick(s); ok {
				d := known[s].Digits
				v.Bid, v.Ask = price(q.Bid, d), price(q.Ask, d)
				t := q.ProviderTime.UTC()
				age := now.Sub(q.ReceivedAt).Milliseconds()
				v.Time, v.AgeMs = &t, &age
			}
			out = append(out, v)
		}
		writeJSON(w, http.StatusOK, map[string]any{"quotes": out})
		return nil
	})
}

// handleMarketsStream is the markets rail: server-sent events, one "quote" event per accepted
// tick of the requested symbols. Each client has its own bounded buffer in the engine, so a slow
// client loses updates instead of delaying the engine or other clients.
func handleMarketsStream(log *slog.Logger, svc *trading.Service, quotes *desk.Quotes, m *metrics.Metrics) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		known, _, symbols, err := requestedSymbols(r, svc)
		if err != nil {
			return err
		}
		flusher, ok := w.(http.Flusher)
		if !ok {
			return fx.Errorf(fx.EINTERNAL, "streaming unsupported")
		}
		rc := http.NewResponseController(w)
		changed := quotes.Changed() // before Updates: a change in between ends the stream too
		ch, cancel := quotes.Updates(symbols)
		defer cancel()
		m.SSEClients.Inc()
		defer m.SSEClients.Dec()

		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, ": fxdesk markets rail\n\n")
		flusher.Flush()

		heartbeat := time.NewTicker(15 * time.Second)
		defer heartbeat.Stop()
		type event struct {
			Symbol string `json:"symbol"`
			Bid    string `json:"bid"`
			Ask    string `json:"ask"`
			Time   int64  `json:"t"` // provider time, Unix milliseconds
		}
		for {
			select {
			case <-r.Context().Done():
				return nil // the stream has begun: there is nothing left to answer
			case <-changed:
				// The price view changed source (a standby took over, or a follower started or
				// stopped following): this subscription hears the old one. Ending the stream makes
				// the client reconnect to the new one.
				return nil
			case <-heartbeat.C:
				rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
					return nil
				}
				flusher.Flush()
			case u, ok := <-ch:
				if !ok {
					return nil
				}
				d := known[u.Symbol].Digits
				b, _ := json.Marshal(event{Symbol: u.Symbol, Bid: *price(u.Quote.Bid, d), Ask: *price(u.Quote.Ask, d), Time: u.Quote.ProviderTime.UnixMilli()})
				// A client that stops reading must not hold this goroutine forever.
				rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := fmt.Fprintf(w, "event: quote\ndata: %s\n\n", b); err != nil {
					return nil
				}
				flusher.Flush()
			}
		}
	})
}
