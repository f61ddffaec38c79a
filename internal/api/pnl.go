package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/pnl"
)

// The dealer's P&L (docs/pnl.md): GET /api/admin/fx/pnl and the status page's day.

var pnlParams = []string{"from", "to"}

// pnlRange reads the route's range at now: nothing is the trading day so far (since the last
// 17:00 New York rollover); from alone runs to now. A range ending now marks the open B-book
// positions (floating is true).
func pnlRange(q map[string][]string, now time.Time) (from, to time.Time, floating bool, err error) {
	if err := checkQuery(q, pnlParams, "the dealer's P&L"); err != nil {
		return from, to, false, err
	}
	get := func(name string) (time.Time, bool, error) {
		vs := q[name]
		if len(vs) == 0 {
			return time.Time{}, false, nil
		}
		t, err := time.Parse(time.RFC3339Nano, vs[0])
		if err != nil {
			return time.Time{}, false, fx.Errorf(fx.EINVALID, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got %q).", name, vs[0])
		}
		return t.UTC(), true, nil
	}
	from, hasFrom, err := get("from")
	if err != nil {
		return from, to, false, err
	}
	to, hasTo, err := get("to")
	if err != nil {
		return from, to, false, err
	}
	switch {
	case hasTo && !hasFrom:
		return from, to, false, fx.Errorf(fx.EINVALID, "to needs a from: the range is [from, to).")
	case !hasFrom:
		day, err := fx.LastRollover(now)
		if err != nil {
			return from, to, false, err
		}
		from = day.At.UTC()
	}
	if !hasTo || !to.Before(now) {
		to, floating = now.UTC(), true
	}
	switch {
	case !from.Before(to):
		return from, to, false, fx.Errorf(fx.EINVALID, "from must be before to, and before now (the range is [from, to)).")
	case to.Sub(from) > pnl.MaxRange:
		return from, to, false, fx.Errorf(fx.EINVALID, "The range may span at most %d days (got %s).", int(pnl.MaxRange/(24*time.Hour)), to.Sub(from).Round(time.Second))
	}
	return from, to, floating, nil
}

// pnlFigures is one row of the P&L as amounts in its currency, positive when the desk earned.
type pnlFigures struct {
	Symbol        string  `json:"symbol,omitempty"`
	BBookRealised string  `json:"bBookRealised"`
	BBookFloating *string `json:"bBookFloating"` // null when the range does not end now
	BBookClient   string  `json:"bBookClient"`
	MarkupBBook   string  `json:"markupBBook"`
	MarkupABook   string  `json:"markupABook"`
	Commission    string  `json:"commission"`
	Swaps         string  `json:"swaps"`
	NBPCost       string  `json:"nbpCost"`
	HedgeBook     string  `json:"hedgeBook"`
	Total         string  `json:"total"`
}

func figuresView(ccy string, f pnl.Figures, floating bool) pnlFigures {
	money := func(d decimal.Decimal) string { return fx.FormatMoney(ccy, d) }
	v := pnlFigures{BBookRealised: money(f.BBookRealised), BBookClient: money(f.BBookClient()), MarkupBBook: money(f.MarkupBBook),
		MarkupABook: money(f.MarkupABook), Commission: money(f.Commission), Swaps: money(f.Swaps), NBPCost: money(f.NBPCost),
		HedgeBook: money(f.HedgeBook), Total: money(f.Total())}
	if floating {
		fl := decimal.Zero
		if f.BBookFloating != nil {
			fl = *f.BBookFloating
		}
		s := money(fl)
		v.BBookFloating = &s
	}
	return v
}

type pnlCurrency struct {
	Currency string       `json:"currency"`
	Symbols  []pnlFigures `json:"symbols"`
	Total    pnlFigures   `json:"total"`
}

// pnlPoint is one hour (or trading day) of the series.
type pnlPoint struct {
	Start      time.Time `json:"start"`
	Amount     string    `json:"amount"`
	Cumulative string    `json:"cumulative"`
}

// pnlView is the dealer's P&L as the route answers it.
type pnlView struct {
	From              time.Time     `json:"from"`
	To                time.Time     `json:"to"`
	Floating          bool          `json:"floating"`
	FloatingAt        *time.Time    `json:"floatingAt"` // when the open book was marked; null when not floating
	LedgerAt          *time.Time    `json:"ledgerAt"`   // how far the recent ledger was read, when not through to
	ReportingCurrency string        `json:"reportingCurrency"`
	Total             *string       `json:"total"`
	Unconverted       []string      `json:"unconverted"`
	Currencies        []pnlCurrency `json:"currencies"`
	Hourly            []pnlPoint    `json:"hourly"` // ranges up to 31 days: clock hours (UTC)
	Daily             []pnlPoint    `json:"daily"`  // longer ranges: trading days from 17:00 New York
	Unpriced          []string      `json:"unpriced"`
	UnrecordedMarkup  int64         `json:"unrecordedMarkupFills"`
	HedgeBook         string        `json:"hedgeBook"`
}

func viewOf(rep pnl.Report) pnlView {
	v := pnlView{From: rep.From, To: rep.To, Floating: rep.Floating, ReportingCurrency: pnl.ReportingCurrency,
		Unconverted: nonNil(rep.Unconverted), Currencies: []pnlCurrency{}, Hourly: []pnlPoint{}, Daily: []pnlPoint{}, Unpriced: nonNil(rep.Unpriced),
		UnrecordedMarkup: rep.UnrecordedMarkup, HedgeBook: pnl.HedgeBookNote}
	if rep.Floating {
		at := rep.FloatingAt
		v.FloatingAt = &at
	}
	if !rep.LedgerAt.IsZero() {
		at := rep.LedgerAt
		v.LedgerAt = &at
	}
	if rep.Total != nil {
		s := fx.FormatMoney(pnl.ReportingCurrency, *rep.Total)
		v.Total = &s
	}
	for _, c := range rep.Currencies {
		pc := pnlCurrency{Currency: c.Currency, Symbols: []pnlFigures{}, Total: figuresView(c.Currency, c.Total, rep.Floating)}
		for _, s := range c.Symbols {
			f := figuresView(c.Currency, s.Figures, rep.Floating)
			f.Symbol = s.Symbol
			pc.Symbols = append(pc.Symbols, f)
		}
		v.Currencies = append(v.Currencies, pc)
	}
	point := func(h pnl.Point) pnlPoint {
		return pnlPoint{Start: h.Start, Amount: fx.FormatMoney(pnl.ReportingCurrency, h.Amount), Cumulative: fx.FormatMoney(pnl.ReportingCurrency, h.Cumulative)}
	}
	for _, h := range rep.Hours {
		v.Hourly = append(v.Hourly, point(h))
	}
	for _, h := range rep.Days {
		v.Daily = append(v.Daily, point(h))
	}
	return v
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// readPnL reads the report with this process's prices (the holder's stream, or the one a
// follower shows) and the process's cached catalog; the open book's floating P&L is
// the process's shared marking (pnl.Marks: at most a few seconds old, floatingAt says when).
func readPnL(ctx context.Context, d Deps, from, to time.Time, floating bool) (pnl.Report, error) {
	cat, err := d.Catalog.Current(ctx)
	if err != nil {
		return pnl.Report{}, err
	}
	if d.marks == nil {
		return pnl.Read(ctx, d.DB, cat, d.Quotes, from, to, floating)
	}
	return d.marks.Read(ctx, cat, d.Quotes, from, to, floating)
}

// handlePnL serves the dealer's P&L over ?from=&to= (default: the trading day so far).
func handlePnL(log *slog.Logger, d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		from, to, floating, err := pnlRange(r.URL.Query(), time.Now())
		if err != nil {
			writeError(r.Context(), log, w, err)
			return
		}
		rep, err := readPnL(r.Context(), d, from, to, floating)
		if err != nil {
			writeError(r.Context(), log, w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"pnl": viewOf(rep)})
	}
}
