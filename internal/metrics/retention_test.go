package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/retention"
)

// The retention runner's progress is scraped as it stands, per task; a task with no batch yet
// has no timestamp series.
func TestRetentionSeries(t *testing.T) {
	t.Parallel()
	m := New("test")
	m.WatchRetention(func() []retention.Progress {
		return []retention.Progress{
			{Task: "events", Handled: 120000, Backlog: 3680000, LastBatchRows: 2000, LastBatchDuration: 40 * time.Millisecond,
				LastBatchAt: time.Unix(1750000000, 500_000_000), Passes: 3, Failures: 1},
			{Task: "audit"},
		}
	})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{`fxdesk_retention_rows_total{task="events"} 120000`, `fxdesk_retention_backlog_rows{task="events"} 3.68e+06`,
		`fxdesk_retention_last_batch_rows{task="events"} 2000`, `fxdesk_retention_last_batch_seconds{task="events"} 0.04`,
		`fxdesk_retention_last_batch_timestamp_seconds{task="events"} 1.7500000005e+09`,
		`fxdesk_retention_passes_total{outcome="done",task="events"} 3`, `fxdesk_retention_passes_total{outcome="failed",task="events"} 1`,
		`fxdesk_retention_rows_total{task="audit"} 0`} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Contains(string(body), `fxdesk_retention_last_batch_timestamp_seconds{task="audit"}`) {
		t.Error("a task without a batch has a timestamp")
	}
}
