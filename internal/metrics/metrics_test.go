package metrics

import (
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"fxdesk/internal/alert"
	"fxdesk/internal/tick"
)

// A collector that cannot reach the database leaves out its own series, not the scrape.
func TestScrapeSurvivesAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: every query fails at once.
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/none?timeout=200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := New("test")
	m.WatchAlerts(alert.NewInbox(db, slog.New(slog.DiscardHandler)))
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "fxdesk_build_info") || strings.Contains(string(body), "fxdesk_alerts_open{") {
		t.Fatalf("scrape with the database down: %d\n%s", resp.StatusCode, body)
	}
}

// The engine's price series: per source connected and tick fates, per symbol the active source.
func TestEngineSeriesNameSourcesAndActiveSource(t *testing.T) {
	t.Parallel()
	e := tick.New(tick.Config{URL: "ws://127.0.0.1:1/forex"}, slog.New(slog.DiscardHandler))
	if err := e.SetWanted([]string{"EURUSD"}); err != nil {
		t.Fatal(err)
	}
	m := New("test")
	m.WatchEngine(e)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`fxdesk_price_source_connected{source="primary"} 0`,
		`fxdesk_price_source_ticks_total{outcome="held",source="primary"} 0`,
		`fxdesk_price_active_source{source="primary",symbol="EURUSD"} 1`,
		`fxdesk_price_source_switches_total{symbol="EURUSD"} 0`,
		`fxdesk_price_symbols_off_primary 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s\n%s", want, body)
		}
	}
}
