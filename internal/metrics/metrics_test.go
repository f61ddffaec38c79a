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
