package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
	"fxdesk/internal/pnl"
)

// The P&L's range: nothing is the trading day so far, a range ending now (or later) is marked
// floating, and every bad range is refused by what is wrong with it.
func TestPnLRange(t *testing.T) {
	t.Parallel()
	// Thursday 03:24 UTC is Wednesday 22:24 in New York (EST): the day began at 17:00 New York,
	// 22:00 UTC on Wednesday.
	now := time.Date(2026, 12, 3, 3, 24, 0, 0, time.UTC)
	day := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, query string
		from, to    time.Time
		floating    bool
		refused     string
	}{
		{name: "the trading day so far", query: "", from: day, to: now, floating: true},
		{name: "from alone runs to now", query: "from=2026-12-01T00:00:00Z", from: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), to: now, floating: true},
		{name: "a past range is not marked", query: "from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z",
			from: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), to: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)},
		{name: "an end past now is now", query: "from=2026-12-02T00:00:00%2B01:00&to=2027-01-01T00:00:00Z",
			from: time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC), to: now, floating: true},
		{name: "to needs a from", query: "to=2026-12-02T00:00:00Z", refused: "to needs a from"},
		{name: "not a time", query: "from=yesterday", refused: `from must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got "yesterday")`},
		{name: "a date alone", query: "from=2026-12-01", refused: "from must be an RFC 3339 time"},
		{name: "reversed", query: "from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", refused: "from must be before to"},
		{name: "empty", query: "from=2026-12-01T00:00:00Z&to=2026-12-01T00:00:00Z", refused: "from must be before to"},
		{name: "in the future", query: "from=2026-12-04T00:00:00Z", refused: "from must be before to, and before now"},
		{name: "a year and a day", query: "from=2025-12-01T00:00:00Z&to=2026-12-02T00:00:00Z",
			from: time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC), to: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)},
		{name: "too long", query: "from=2025-12-01T00:00:00Z&to=2026-12-02T00:00:01Z", refused: "at most 366 days (got 8784h0m1s)"},
		{name: "unknown parameter", query: "since=2026-12-01T00:00:00Z", refused: `Unknown query parameter "since": the dealer's P&L takes from, to.`},
		{name: "given twice", query: "from=2026-12-01T00:00:00Z&from=2026-12-02T00:00:00Z", refused: "Query parameter from is given 2 times"},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		from, to, floating, err := pnlRange(q, now)
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) || statusOf[fx.ErrorCode(err)] != http.StatusBadRequest {
				t.Errorf("%s: %v, want 400 %q", c.name, err, c.refused)
			}
			continue
		}
		if err != nil || !from.Equal(c.from) || !to.Equal(c.to) || floating != c.floating {
			t.Errorf("%s: [%s, %s) floating %v, %v; want [%s, %s) floating %v", c.name, from, to, floating, err, c.from, c.to, c.floating)
		}
	}
}

// The route over the real router and a real database: admin only, the day's empty report in
// its shape (one hourly point per hour of the day so far), and a bad range refused with 400.
func TestPnLRoute(t *testing.T) {
	d, _ := newAuditDesk(t)
	trader, err := auth.Create(audit.WithActor(context.Background(), audit.Actor{Via: "test"}), d.db, 2, false, "trader")
	if err != nil {
		t.Fatal(err)
	}
	get := func(token, query string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, d.srv.URL+"/api/admin/fx/pnl"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get(trader, ""); st != http.StatusForbidden {
		t.Errorf("a trader: %d %s", st, body)
	}
	if st, body := get(d.admin, "?from=2026-13-01T00:00:00Z"); st != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid"`) || !strings.Contains(body, "from must be an RFC 3339 time") {
		t.Errorf("a bad from: %d %s", st, body)
	}
	st, body := get(d.admin, "")
	var got struct {
		PnL pnlView `json:"pnl"`
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("the day: %d %s", st, body)
	}
	v := got.PnL
	hours := int((v.To.Sub(v.From) + time.Hour - 1) / time.Hour)
	if !v.Floating || v.Total == nil || *v.Total != "0.00" || len(v.Currencies) != 0 || len(v.Hourly) != hours || v.HedgeBook != pnl.HedgeBookNote ||
		v.ReportingCurrency != "USD" || v.To.Sub(v.From) > 24*time.Hour {
		t.Errorf("the day on an empty ledger: %s", body)
	}
	if st, body := get(d.admin, "?from=2026-01-01T00:00:00Z&to=2026-01-01T05:00:00Z"); st != http.StatusOK ||
		!strings.Contains(body, `"floating":false`) || strings.Count(body, `"cumulative":"0.00"`) != 5 {
		t.Errorf("five past hours: %d %s", st, body)
	}
}

// The day's chart starts at zero, draws one point per hour and puts the zero line where zero
// is; the status page shows the section with its figures and the chart.
func TestPnLChartAndStatusSection(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	hours := []pnl.Point{{Start: start, Cumulative: decimal.RequireFromString("100")}, {Start: start.Add(time.Hour), Cumulative: decimal.RequireFromString("-20")},
		{Start: start.Add(2 * time.Hour), Cumulative: decimal.RequireFromString("40.5")}}
	c := chartOf(hours)
	// 468 px over 3 steps: x = 6, 162, 318, 474; y spans 100 (top, 6) to −20 (bottom, 114), 0.9 px
	// a unit: 0 at 6 + 100 × 0.9 = 96, 40.5 at 6 + 59.5 × 0.9 = 59.55.
	if c == nil || c.Points != "6.0,96.0 162.0,6.0 318.0,114.0 474.0,59.5" || c.ZeroY != "96.0" || c.Min != "-20.00" || c.Max != "100.00" || c.Last != "40.50" {
		t.Fatalf("chart: %+v", c)
	}
	if chartOf(nil) != nil {
		t.Error("a chart of no hours")
	}
	total := "980.60"
	fl := "-30.00"
	r := report{PnL: &pnlDay{View: pnlView{From: start, ReportingCurrency: "USD", Total: &total, HedgeBook: pnl.HedgeBookNote,
		Currencies: []pnlCurrency{{Currency: "USD", Symbols: []pnlFigures{{Symbol: "NZDUSD", BBookRealised: "1518.00", BBookFloating: &fl, MarkupBBook: "29.00",
			MarkupABook: "2.00", Commission: "12.60", Swaps: "1.50", NBPCost: "523.50", HedgeBook: "0.00", Total: "980.60"}},
			Total: pnlFigures{BBookRealised: "1518.00", Total: "980.60"}}}}, Chart: c}}
	var page strings.Builder
	if err := statusPage.Execute(&page, r); err != nil {
		t.Fatalf("status page: %v", err)
	}
	for _, want := range []string{"Dealer's P&amp;L today", `<strong id="pnl-total">980.60 USD</strong>`, "<td>NZDUSD</td><td>1518.00</td><td>-30.00</td><td>29.00 / 2.00</td>",
		`<svg id="pnl-chart" width="480" height="120"`, `points="6.0,96.0 162.0,6.0 318.0,114.0 474.0,59.5"`, "now 40.50 · range -20.00 to 100.00"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	r.PnL = &pnlDay{Error: "database down"}
	page.Reset()
	if err := statusPage.Execute(&page, r); err != nil || !strings.Contains(page.String(), "dealer's P&amp;L unreadable: database down") {
		t.Errorf("status page with the P&L unreadable: %v", err)
	}
}
