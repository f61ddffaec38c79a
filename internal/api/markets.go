package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/fx"
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
	// Source is the price source the quote was published from (docs/prices.md).
	Source string `json:"source,omitempty"`
}

func price(v float64, digits int) *string {
	s := strconv.FormatFloat(v, 'f', digits, 64)
	return &s
}

// accountPrices reads ?accountId=: the account whose prices the answer shows — the caller's
// own, or any for an admin (ENOTFOUND otherwise) — or nil without it, when the answer shows the
// feed's prices. The markets rail has no such parameter: its bytes are formatted once for every
// stream, so they can carry no one account's markup.
func accountPrices(r *http.Request, svc *trading.Service) (*trading.AccountPrices, error) {
	vs, ok := r.URL.Query()["accountId"]
	if !ok {
		return nil, nil
	}
	if len(vs) > 1 {
		return nil, fx.Errorf(fx.EINVALID, "Query parameter accountId is given %d times; give it once.", len(vs))
	}
	id, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || id <= 0 {
		return nil, fx.Errorf(fx.EINVALID, "accountId must be a positive whole number.")
	}
	p := principal(r.Context())
	owner := p.UserID
	if p.Staff() {
		owner = 0
	}
	prices, err := svc.Accounts().Prices(r.Context(), owner, id)
	if err != nil {
		return nil, err
	}
	return &prices, nil
}

// shownPrices are q's bid and ask on symbol as an answer shows them: the feed's at the symbol's
// digits, or with prices the account's (more decimals only where its markup has them). Both are
// nil where the account has no terms on symbol.
func shownPrices(prices *trading.AccountPrices, symbol string, digits int, q tick.Quote) (bid, ask *string) {
	if prices == nil {
		return price(q.Bid, digits), price(q.Ask, digits)
	}
	b, a, ok := prices.Quote(symbol, q)
	if !ok {
		return nil, nil
	}
	return decimalPrice(b, digits), decimalPrice(a, digits)
}

// decimalPrice shows d at digits decimals, or at all of its own where it has more.
func decimalPrice(d decimal.Decimal, digits int) *string {
	s := d.StringFixed(int32(digits))
	if !decimal.RequireFromString(s).Equal(d) {
		s = d.String()
	}
	return &s
}

// requestedSymbols reads ?symbols= against the enabled instruments (cached by the trading
// catalog) and returns them with the enabled instruments, by symbol and in order. nil symbols
// means all.
func requestedSymbols(r *http.Request, svc *catalog.Admin) (map[string]catalog.Instrument, []catalog.Instrument, []string, error) {
	known, enabled, err := svc.Tradable(r.Context())
	if err != nil {
		return nil, nil, nil, err
	}
	symbols, err := parseSymbols(r.URL.Query().Get("symbols"), known)
	return known, enabled, symbols, err
}

// parseSymbols reads ?symbols=A,B: each must be an enabled instrument. Empty means all.
func parseSymbols(raw string, known map[string]catalog.Instrument) ([]string, error) {
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

// handleSymbols lists enabled instruments with their state and last bid/ask: the feed's, or
// with ?accountId= the prices that account trades at.
func handleSymbols(log *slog.Logger, svc *catalog.Admin, accounts *trading.Service, quotes *desk.Quotes) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		_, enabled, err := svc.Tradable(r.Context())
		if err != nil {
			return err
		}
		prices, err := accountPrices(r, accounts)
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
				v.Bid, v.Ask = shownPrices(prices, in.Symbol, in.Digits, q)
				t := q.ProviderTime.UTC()
				v.Time = &t
			}
			out = append(out, v)
		}
		writeJSON(w, http.StatusOK, map[string]any{"symbols": out})
		return nil
	})
}

// handleQuotes answers the last quote of each requested symbol: the feed's bid and ask, or with
// ?accountId= the prices that account trades at (docs/groups.md).
func handleQuotes(log *slog.Logger, svc *catalog.Admin, accounts *trading.Service, quotes *desk.Quotes) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		known, enabled, symbols, err := requestedSymbols(r, svc)
		if err != nil {
			return err
		}
		prices, err := accountPrices(r, accounts)
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
				v.Bid, v.Ask = shownPrices(prices, s, known[s].Digits, q)
				t := q.ProviderTime.UTC()
				age := now.Sub(q.ReceivedAt).Milliseconds()
				v.Time, v.AgeMs, v.Source = &t, &age, q.Source
			}
			out = append(out, v)
		}
		writeJSON(w, http.StatusOK, map[string]any{"quotes": out})
		return nil
	})
}

// handleMarketsStream is the markets rail: server-sent events, one "quote" event per accepted
// tick of the requested symbols, formatted once for every stream by the Rail — the feed's
// prices, with no account's markup (?accountId= is refused rather than ignored). A stream whose
// client falls behind is ended (it reconnects), and streams past the caps are refused with 429.
func handleMarketsStream(log *slog.Logger, svc *catalog.Admin, rail *Rail) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Query().Has("accountId") {
			return fx.Errorf(fx.EINVALID, "accountId is not taken by the markets stream, whose prices are the feed's for every stream; GET /api/fx/quotes?accountId= answers the prices an account trades at.")
		}
		if rail == nil {
			return fx.Errorf(fx.EUNAVAILABLE, "This process serves no prices; connect to a web process.")
		}
		_, _, symbols, err := requestedSymbols(r, svc)
		if err != nil {
			return err
		}
		flusher, ok := w.(http.Flusher)
		if !ok {
			return fx.Errorf(fx.EINTERNAL, "streaming unsupported")
		}
		s, err := rail.subscribe(tokenKey(r.Context()), symbols)
		if err != nil {
			w.Header().Set("Retry-After", streamRetryAfter)
			return err
		}
		defer rail.unsubscribe(s)

		st, ok := startSSE(w, flusher, railPreamble)
		if !ok {
			return nil
		}
		// Ends when the client leaves, or when the stream is dropped for falling behind or the
		// price view changed source: the client reconnects and hears the current one. The stream
		// has begun: there is nothing left to answer.
		pump(r.Context(), st, s.gone, s.events, st.write)
		return nil
	})
}

var (
	railPreamble  = []byte(": fxdesk markets rail\n\n")
	railKeepAlive = []byte(": keep-alive\n\n")
)

// A stream's heartbeat period, and how long one write may wait for its client.
const (
	streamHeartbeat    = 15 * time.Second
	streamWriteTimeout = 10 * time.Second
)
