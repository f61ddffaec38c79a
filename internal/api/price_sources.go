package api

import (
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/fx"
	"fxdesk/internal/pricesource"
)

// The dealer's price sources (docs/operations.md, «Price sources»): what each source is doing,
// which source each symbol quotes from and why, the ticks the spike filter held, and a pin or a
// halt per symbol. They live in the holder's tick engine, so every route here is desk-priced.

// sourceView is one price source as the dealer sees it.
type sourceView struct {
	Name           string     `json:"name"`
	Primary        bool       `json:"primary"`
	Connected      bool       `json:"connected"`
	ConnectedSince *time.Time `json:"connectedSince,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
	Accepted       uint64     `json:"accepted"`
	Held           uint64     `json:"held"`
	Dropped        uint64     `json:"dropped"`
	Published      uint64     `json:"published"`
	// Control is a bundled simulator's control API (spike, shift, offset, silence…); "" for a
	// real provider.
	Control string `json:"control,omitempty"`
}

type healthView struct {
	Source        string `json:"source"`
	Healthy       bool   `json:"healthy"`
	Reason        string `json:"reason,omitempty"`
	LastTickAgeMs *int64 `json:"lastTickAgeMs"`
	TickMs        int64  `json:"tickIntervalMs"`
	SilentAfterMs int64  `json:"silentAfterMs"`
}

// selectionView is one symbol's choice of source.
type selectionView struct {
	Symbol     string       `json:"symbol"`
	Source     string       `json:"source"`
	OffPrimary bool         `json:"offPrimary"`
	Pinned     string       `json:"pinned,omitempty"`
	Halted     bool         `json:"halted"`
	Since      *time.Time   `json:"since,omitempty"`
	Failovers  uint64       `json:"failovers"`
	Health     []healthView `json:"health"`
}

// pricesView is GET /price-sources, and the prices section of /desk.
type pricesView struct {
	Sources []sourceView `json:"sources"`
	// OffPrimary lists the symbols quoting from other than the first source by the engine's
	// choice (not pinned, not halted): what the alert price-source-failover is about.
	OffPrimary []string          `json:"offPrimary"`
	Symbols    []selectionView   `json:"symbols,omitempty"`
	Pins       []pricesource.Pin `json:"pins,omitempty"`
}

// buildPrices reads the engine; withSymbols adds every symbol's selection (the /desk report
// keeps to the sources and the symbols off their primary).
func buildPrices(e pricesource.Engine, controls map[string]string, withSymbols bool) *pricesView {
	v := &pricesView{Sources: []sourceView{}, OffPrimary: []string{}}
	statuses := e.SourceStatuses()
	primary := ""
	for i, s := range statuses {
		if i == 0 {
			primary = s.Name
		}
		sv := sourceView{Name: s.Name, Primary: i == 0, Connected: s.Connected, LastError: s.LastError, Accepted: s.Accepted,
			Held: s.Held, Dropped: s.Dropped, Published: s.Published, Control: controls[s.Name]}
		if s.Connected && !s.ConnectedSince.IsZero() {
			t := s.ConnectedSince.UTC()
			sv.ConnectedSince = &t
		}
		v.Sources = append(v.Sources, sv)
	}
	for _, sel := range e.Selections() {
		off := pricesource.OffPrimary(sel, primary)
		if off {
			v.OffPrimary = append(v.OffPrimary, sel.Symbol)
		}
		if !withSymbols {
			continue
		}
		sv := selectionView{Symbol: sel.Symbol, Source: sel.Source, OffPrimary: off, Pinned: sel.Pinned, Halted: sel.Halted,
			Failovers: sel.Failovers, Health: make([]healthView, 0, len(sel.Health))}
		if !sel.Since.IsZero() {
			t := sel.Since.UTC()
			sv.Since = &t
		}
		for _, h := range sel.Health {
			hv := healthView{Source: h.Source, Healthy: h.Healthy, Reason: h.Reason, TickMs: h.TickInterval.Milliseconds(), SilentAfterMs: h.SilentAfter.Milliseconds()}
			if h.LastTickAge > 0 {
				ms := h.LastTickAge.Milliseconds()
				hv.LastTickAgeMs = &ms
			}
			sv.Health = append(sv.Health, hv)
		}
		v.Symbols = append(v.Symbols, sv)
	}
	return v
}

func holderEngine(pins *pricesource.Pins) (pricesource.Engine, error) {
	if pins == nil {
		return nil, pricesource.ErrNotHolder
	}
	e := pins.Engine()
	if e == nil {
		return nil, pricesource.ErrNotHolder
	}
	return e, nil
}

// handlePriceSources is GET /price-sources: every source, every symbol's selection and health,
// and the stored pins.
func handlePriceSources(log *slog.Logger, pins *pricesource.Pins) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		e, err := holderEngine(pins)
		if err != nil {
			return err
		}
		v := buildPrices(e, pins.Controls(), true)
		if v.Pins, err = pins.List(r.Context()); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	})
}

var sourceNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// handlePutPriceSourcePin is PUT /price-sources/symbols/{symbol}: {"pin":"backup"} pins,
// {"pin":""} unpins, {"halted":true|false} halts or resumes quoting; both may be sent.
func handlePutPriceSourcePin(log *slog.Logger, pins *pricesource.Pins) http.HandlerFunc {
	type request struct {
		Pin    *string `json:"pin"`
		Halted *bool   `json:"halted"`
	}
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		symbol := chi.URLParam(r, "symbol")
		if !fx.ValidSymbol(symbol) {
			return fx.Errorf(fx.EINVALID, "symbol %q must be six capital letters like EURUSD.", symbol)
		}
		var req request
		if err := decodeStrict(r.Body, &req, false); err != nil {
			return err
		}
		if req.Pin == nil && req.Halted == nil {
			return fx.Errorf(fx.EINVALID, "Send pin (a source name, or \"\" to unpin) or halted (true or false), or both.")
		}
		if req.Pin != nil && *req.Pin != "" && !sourceNamePattern.MatchString(*req.Pin) {
			return fx.Errorf(fx.EINVALID, "pin %q must be a price source's name (1 to 32 of a-z, 0-9 and '-'), or \"\" to unpin.", *req.Pin)
		}
		if _, err := holderEngine(pins); err != nil {
			return err
		}
		pin, err := pins.Set(r.Context(), symbol, pricesource.Change{Pin: req.Pin, Halted: req.Halted})
		if err != nil {
			return err
		}
		var sel *selectionView
		for _, s := range buildPrices(pins.Engine(), nil, true).Symbols {
			if s.Symbol == symbol {
				sel = &s
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"pin": pin, "selection": sel})
		return nil
	})
}

// rejectedView is one tick the spike filter held.
type rejectedView struct {
	Symbol     string     `json:"symbol"`
	Source     string     `json:"source"`
	Bid        float64    `json:"bid"`
	Ask        float64    `json:"ask"`
	ReceivedAt time.Time  `json:"receivedAt"`
	Reason     string     `json:"reason"`
	Outcome    string     `json:"outcome"`
	DecidedAt  *time.Time `json:"decidedAt"`
}

const (
	defaultRejectedLimit = 100
	maxRejectedLimit     = 1000
)

// handleRejectedTicks is GET /price-sources/rejected?limit=N: the last ticks the spike filter
// held, newest first, with why and what became of them.
func handleRejectedTicks(log *slog.Logger, pins *pricesource.Pins) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		limit := defaultRejectedLimit
		if raw := strings.TrimSpace(r.URL.Query().Get("limit")); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 || n > maxRejectedLimit {
				return fx.Errorf(fx.EINVALID, "limit %q must be a whole number from 1 to %d.", raw, maxRejectedLimit)
			}
			limit = n
		}
		e, err := holderEngine(pins)
		if err != nil {
			return err
		}
		out := []rejectedView{}
		for _, t := range e.Rejected(limit) {
			v := rejectedView{Symbol: t.Symbol, Source: t.Source, Bid: t.Bid, Ask: t.Ask, ReceivedAt: t.ReceivedAt.UTC(), Reason: t.Reason, Outcome: t.Outcome}
			if !t.DecidedAt.IsZero() {
				d := t.DecidedAt.UTC()
				v.DecidedAt = &d
			}
			out = append(out, v)
		}
		writeJSON(w, http.StatusOK, map[string]any{"rejected": out})
		return nil
	})
}
