package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/candles"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
)

// Price history (docs/candles.md): GET /api/fx/candles reads the candles the holder stored, on
// any process. A request names a symbol and a granularity and either a range (from, to) or the
// newest count candles, paged back with before. Every refusal is a 400 naming the parameter, and
// a range wider than candles.MaxCandles periods is refused before any query.

var candleParams = []string{"symbol", "granularity", "from", "to", "count", "before"}

// candleView is one candle as the API sends it: prices at the instrument's digits.
type candleView struct {
	OpenTime time.Time `json:"openTime"`
	BidOpen  string    `json:"bidOpen"`
	BidHigh  string    `json:"bidHigh"`
	BidLow   string    `json:"bidLow"`
	BidClose string    `json:"bidClose"`
	AskOpen  string    `json:"askOpen"`
	AskHigh  string    `json:"askHigh"`
	AskLow   string    `json:"askLow"`
	AskClose string    `json:"askClose"`
	Ticks    int       `json:"ticks"`
}

// candlePage is the answer: candles oldest first, and with count the before of the next (older)
// page, null when nothing is left.
type candlePage struct {
	Symbol      string       `json:"symbol"`
	Granularity string       `json:"granularity"`
	Candles     []candleView `json:"candles"`
	NextBefore  *time.Time   `json:"nextBefore"`
}

// candleQuery is a request's parameters, checked.
type candleQuery struct {
	symbol      string
	digits      int
	granularity candles.Granularity
	from, to    time.Time // range mode
	count       int       // count mode when > 0
	before      time.Time // count mode; zero: the newest
}

// readCandleQuery checks every parameter; now is the default to.
func readCandleQuery(q url.Values, known map[string]catalog.Instrument, now time.Time) (candleQuery, error) {
	var c candleQuery
	if err := checkQuery(q, candleParams, "GET /api/fx/candles"); err != nil {
		return c, err
	}
	c.symbol = strings.ToUpper(strings.TrimSpace(q.Get("symbol")))
	if c.symbol == "" {
		return c, fx.Errorf(fx.EINVALID, "symbol is required: a six-letter code such as EURUSD.")
	}
	in, ok := known[c.symbol]
	if !ok {
		return c, fx.Errorf(fx.EINVALID, "symbol: unknown symbol %q; GET /api/fx/symbols lists the desk's symbols.", c.symbol)
	}
	c.digits = in.Digits
	raw := q.Get("granularity")
	if raw == "" {
		return c, fx.Errorf(fx.EINVALID, "granularity is required: M1, M5, H1 or D1.")
	}
	if c.granularity, ok = candles.ParseGranularity(strings.ToUpper(strings.TrimSpace(raw))); !ok {
		return c, fx.Errorf(fx.EINVALID, "granularity must be M1, M5, H1 or D1 (got %q).", raw)
	}
	ranged := q.Has("from") || q.Has("to")
	switch {
	case q.Has("count") && ranged:
		return c, fx.Errorf(fx.EINVALID, "count cannot be given with from or to: ask for the newest count candles, or for a range.")
	case q.Has("count"):
		n, err := strconv.Atoi(q.Get("count"))
		if err != nil || n < 1 || n > candles.MaxCandles {
			return c, fx.Errorf(fx.EINVALID, "count must be a whole number from 1 to %d (got %q).", candles.MaxCandles, q.Get("count"))
		}
		c.count = n
		if q.Has("before") {
			if c.before, err = timeParam("before", q.Get("before")); err != nil {
				return c, err
			}
		}
		return c, nil
	case !ranged:
		return c, fx.Errorf(fx.EINVALID, "count or from is required: count=N for the newest N candles (at most %d), or from= (and to=) for a range.", candles.MaxCandles)
	}
	if q.Has("before") {
		return c, fx.Errorf(fx.EINVALID, "before pages a count; a range (from, to) takes no before.")
	}
	if !q.Has("from") {
		return c, fx.Errorf(fx.EINVALID, "from is required with to: the range's start, for example 2026-01-05T00:00:00Z.")
	}
	var err error
	if c.from, err = timeParam("from", q.Get("from")); err != nil {
		return c, err
	}
	c.to = now
	if q.Has("to") {
		if c.to, err = timeParam("to", q.Get("to")); err != nil {
			return c, err
		}
	}
	if !c.to.After(c.from) {
		return c, fx.Errorf(fx.EINVALID, "to must be after from (from %s, to %s).", c.from.Format(time.RFC3339Nano), c.to.Format(time.RFC3339Nano))
	}
	if max := candles.MaxSpan(c.granularity); c.to.Sub(c.from) > max {
		return c, fx.Errorf(fx.EINVALID, "to: the range from %s to %s is wider than %d %s candles (%s): narrow it, or page back with count and before.",
			c.from.Format(time.RFC3339Nano), c.to.Format(time.RFC3339Nano), candles.MaxCandles, c.granularity, max)
	}
	return c, nil
}

// timeParam reads an RFC 3339 time.
func timeParam(name, raw string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(raw))
	if err != nil {
		return time.Time{}, fx.Errorf(fx.EINVALID, "%s must be an RFC 3339 time such as 2026-01-05T00:00:00Z (got %q).", name, raw)
	}
	return t.UTC(), nil
}

// handleCandles serves a symbol's candles.
func handleCandles(log *slog.Logger, svc *catalog.Admin, reader *candles.Reader) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		known, _, err := svc.Tradable(r.Context())
		if err != nil {
			return err
		}
		q, err := readCandleQuery(r.URL.Query(), known, time.Now())
		if err != nil {
			return err
		}
		var list []candles.Candle
		if q.count > 0 {
			list, err = reader.Latest(r.Context(), q.symbol, q.granularity, q.before, q.count)
		} else {
			list, err = reader.Range(r.Context(), q.symbol, q.granularity, q.from, q.to)
		}
		if err != nil {
			return err
		}
		page := candlePage{Symbol: q.symbol, Granularity: q.granularity.String(), Candles: make([]candleView, 0, len(list))}
		p := func(v float64) string { return strconv.FormatFloat(v, 'f', q.digits, 64) }
		for _, c := range list {
			page.Candles = append(page.Candles, candleView{OpenTime: c.OpenTime,
				BidOpen: p(c.Bid.Open), BidHigh: p(c.Bid.High), BidLow: p(c.Bid.Low), BidClose: p(c.Bid.Close),
				AskOpen: p(c.Ask.Open), AskHigh: p(c.Ask.High), AskLow: p(c.Ask.Low), AskClose: p(c.Ask.Close), Ticks: c.Ticks})
		}
		if q.count > 0 && len(list) == q.count {
			oldest := list[0].OpenTime
			page.NextBefore = &oldest
		}
		writeJSON(w, http.StatusOK, page)
		return nil
	})
}
