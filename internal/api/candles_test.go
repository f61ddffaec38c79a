package api

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/candles"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

// publishedTicks is a published-updates subscription the test fills before the writer runs.
type publishedTicks struct {
	ch   chan tick.Update
	once sync.Once
}

func (p *publishedTicks) Updates([]string) (<-chan tick.Update, func()) {
	return p.ch, func() { p.once.Do(func() { close(p.ch) }) }
}

func (p *publishedTicks) DroppedFor(<-chan tick.Update) uint64 { return 0 }

// candleDesk is the desk's router over a database whose EURUSD candles were written by the
// holder's writer from published ticks in minutes 0, 1, 2, 7, 8 and 9 after at: minutes 3 to 6
// are a closed market, no tick published.
type candleDesk struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	at    time.Time
}

func newCandleDesk(t *testing.T) *candleDesk {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated("api_candles")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	parts := newTestParts(t, db, false)
	log := parts.log
	h, err := NewServer(Deps{Log: log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, log), Quotes: &desk.Quotes{}, Metrics: metrics.New("test"),
		Trading: parts.svc, Catalog: parts.admin, Settings: catalog.NewSettings(db, log), Alerts: alert.NewInbox(db, log), Auth: auth.NewResolver(db)})
	if err != nil {
		t.Fatal(err)
	}
	d := &candleDesk{t: t, srv: httptest.NewServer(h), at: time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)}
	t.Cleanup(d.srv.Close)
	if d.token, err = auth.Create(audit.WithActor(context.Background(), audit.Actor{Via: "test"}), db, 801, false, "test"); err != nil {
		t.Fatal(err)
	}
	feed := &publishedTicks{ch: make(chan tick.Update, 100)}
	for _, m := range []int{0, 1, 2, 7, 8, 9} {
		for s := range 3 {
			bid := 1.08 + float64(m)/1e4 + float64(s)/1e5
			feed.ch <- tick.Update{Symbol: "EURUSD", Quote: tick.Quote{Bid: bid, Ask: bid + 0.00012,
				ReceivedAt: d.at.Add(time.Duration(m)*time.Minute + time.Duration(s)*10*time.Second)}}
		}
	}
	w, err := candles.NewWriter(candles.WriterConfig{DB: db, Prices: feed, FlushEvery: time.Hour, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stop() // Run reads what the subscription holds and flushes once as it stops
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return d
}

// GET /api/fx/candles over one desk: its requests only read.
func TestCandles(t *testing.T) {
	t.Parallel()
	d := newCandleDesk(t)
	for name, test := range map[string]func(*testing.T, *candleDesk){
		"PageBackFromTheNewest":            testCandlesPageBackFromTheNewest,
		"InARangeHaveNoneForAClosedMarket": testCandlesInARangeHaveNoneForAClosedMarket,
		"RefuseBadParametersByName":        testCandlesRefuseBadParametersByName,
	} {
		t.Run(name, func(t *testing.T) {
			d := *d
			d.t = t
			test(t, &d)
		})
	}
}

func (d *candleDesk) get(query string) (int, candlePage, string) {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.srv.URL+"/api/fx/candles?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var page candlePage
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &page); err != nil {
			d.t.Fatalf("%s: %v", raw, err)
		}
	}
	return resp.StatusCode, page, string(raw)
}

func (d *candleDesk) ts(minute int) string {
	return d.at.Add(time.Duration(minute) * time.Minute).Format(time.RFC3339)
}

// minutes lists the candles' opens as minutes after at.
func (d *candleDesk) minutes(p candlePage) []int {
	out := []int{}
	for _, c := range p.Candles {
		out = append(out, int(c.OpenTime.Sub(d.at)/time.Minute))
	}
	return out
}

// count pages back from the newest candle: full pages name the next page's before, the last
// (short) one names none; a closed market's minutes are not there, not as flat candles.
func testCandlesPageBackFromTheNewest(t *testing.T, d *candleDesk) {
	status, p, raw := d.get("symbol=EURUSD&granularity=M1&count=4")
	if status != http.StatusOK || !slices.Equal(d.minutes(p), []int{2, 7, 8, 9}) || p.NextBefore == nil || !p.NextBefore.Equal(d.at.Add(2*time.Minute)) {
		t.Fatalf("newest 4: %d %v %s", status, d.minutes(p), raw)
	}
	c := p.Candles[1] // minute 7: bids 1.0807, 1.08071, 1.08072
	if c.BidOpen != "1.08070" || c.BidHigh != "1.08072" || c.BidLow != "1.08070" || c.BidClose != "1.08072" || c.AskClose != "1.08084" || c.Ticks != 3 {
		t.Fatalf("minute 7 as sent: %+v", c)
	}
	status, p, raw = d.get("symbol=eurusd&granularity=M1&count=4&before=" + url.QueryEscape(p.NextBefore.Format(time.RFC3339)))
	if status != http.StatusOK || !slices.Equal(d.minutes(p), []int{0, 1}) || p.NextBefore != nil {
		t.Fatalf("the page before: %d %v %s", status, d.minutes(p), raw)
	}
	status, p, raw = d.get("symbol=EURUSD&granularity=D1&count=10")
	if status != http.StatusOK || len(p.Candles) != 1 || p.Candles[0].Ticks != 18 || p.Candles[0].OpenTime.Format(time.RFC3339) != "2026-11-02T22:00:00Z" {
		t.Fatalf("D1: %d %s", status, raw)
	}
}

// A range answers the candles that opened in [from, to); a range over the closed market answers
// none; USDJPY, never ticked, has none.
func testCandlesInARangeHaveNoneForAClosedMarket(t *testing.T, d *candleDesk) {
	status, p, raw := d.get("symbol=EURUSD&granularity=M1&from=" + d.ts(1) + "&to=" + d.ts(9))
	if status != http.StatusOK || !slices.Equal(d.minutes(p), []int{1, 2, 7, 8}) || p.NextBefore != nil {
		t.Fatalf("range [1, 9): %d %v %s", status, d.minutes(p), raw)
	}
	if status, p, raw = d.get("symbol=EURUSD&granularity=M1&from=" + d.ts(3) + "&to=" + d.ts(7)); status != http.StatusOK || len(p.Candles) != 0 || !strings.Contains(raw, `"candles":[]`) {
		t.Fatalf("the closed market: %d %s", status, raw)
	}
	if status, p, raw = d.get("symbol=EURUSD&granularity=M5&from=" + d.ts(0) + "&to=" + d.ts(10)); status != http.StatusOK || !slices.Equal(d.minutes(p), []int{0, 5}) || p.Candles[0].Ticks != 9 {
		t.Fatalf("M5: %d %s", status, raw)
	}
	if status, p, raw = d.get("symbol=USDJPY&granularity=H1&count=5000"); status != http.StatusOK || len(p.Candles) != 0 {
		t.Fatalf("USDJPY: %d %s", status, raw)
	}
}

// Every bad parameter is a 400 whose message names it, before any query.
func testCandlesRefuseBadParametersByName(t *testing.T, d *candleDesk) {
	wide := d.at.Add(candles.MaxSpan(candles.M1) + time.Second).Format(time.RFC3339)
	for _, c := range []struct{ query, names string }{
		{"granularity=M1&count=5", "symbol"},
		{"symbol=XXXYYY&granularity=M1&count=5", "symbol"},
		{"symbol=EURUSD&count=5", "granularity"},
		{"symbol=EURUSD&granularity=M2&count=5", "granularity"},
		{"symbol=EURUSD&granularity=M1", "count"},
		{"symbol=EURUSD&granularity=M1&count=0", "count"},
		{"symbol=EURUSD&granularity=M1&count=5001", "count"},
		{"symbol=EURUSD&granularity=M1&count=many", "count"},
		{"symbol=EURUSD&granularity=M1&count=5&from=" + d.ts(0), "count"},
		{"symbol=EURUSD&granularity=M1&count=5&before=yesterday", "before"},
		{"symbol=EURUSD&granularity=M1&from=" + d.ts(0) + "&before=" + d.ts(5), "before"},
		{"symbol=EURUSD&granularity=M1&to=" + d.ts(5), "from"},
		{"symbol=EURUSD&granularity=M1&from=2026-11-03", "from"},
		{"symbol=EURUSD&granularity=M1&from=" + d.ts(0) + "&to=soon", "to"},
		{"symbol=EURUSD&granularity=M1&from=" + d.ts(5) + "&to=" + d.ts(5), "to"},
		{"symbol=EURUSD&granularity=M1&from=" + d.ts(0) + "&to=" + wide, "to"},
		{"symbol=EURUSD&granularity=M1&count=5&limit=5", "limit"},
		{"symbol=EURUSD&symbol=USDJPY&granularity=M1&count=5", "symbol"},
	} {
		status, _, raw := d.get(c.query)
		var body errorBody
		json.Unmarshal([]byte(raw), &body)
		if status != http.StatusBadRequest || body.Error.Code != "invalid" || !strings.Contains(body.Error.Message, c.names) {
			t.Errorf("%s: %d %s; want a 400 naming %s", c.query, status, raw, c.names)
		}
	}
	// The widest range served is exactly MaxSpan.
	if status, _, raw := d.get("symbol=EURUSD&granularity=M1&from=" + d.ts(0) + "&to=" + d.at.Add(candles.MaxSpan(candles.M1)).Format(time.RFC3339)); status != http.StatusOK {
		t.Fatalf("a range of MaxSpan: %d %s", status, raw)
	}
}

// The documented Candle and CandlePage schemas name exactly the fields the views send.
func TestOpenAPICandleSchemasMatchTheViews(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for name, view := range map[string]any{"Candle": candleView{}, "CandlePage": candlePage{}} {
		documented := slices.Sorted(maps.Keys(doc.Components.Schemas[name].Properties))
		if sent := jsonFields(reflect.TypeOf(view)); !slices.Equal(documented, sent) {
			t.Errorf("schema %s documents %v; the view sends %v", name, documented, sent)
		}
	}
}
