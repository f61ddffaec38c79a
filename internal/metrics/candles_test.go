package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fxdesk/internal/candles"
)

// The candle writer's and archive's counters are scraped as they stand.
func TestCandlesSeries(t *testing.T) {
	t.Parallel()
	m := New("test")
	m.WatchCandles(func() candles.WriterStats {
		return candles.WriterStats{Ticks: 1200, Dropped: 3, Flushes: 4, Rows: 40, Statements: 5, Failures: 1, Skipped: 2}
	}, func() int64 { return 7 })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{`fxdesk_candle_ticks_total{outcome="read"} 1200`, `fxdesk_candle_ticks_total{outcome="dropped"} 3`,
		`fxdesk_candle_writes_total{kind="statement"} 5`, `fxdesk_candle_writes_total{kind="failed"} 1`, `fxdesk_candle_writes_total{kind="lost"} 0`,
		"fxdesk_candles_archived_total 7"} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
}
