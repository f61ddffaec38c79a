package e2e

import (
	"context"
	"log/slog"

	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/alert"
)

func (p *proc) metrics() string {
	p.t.Helper()
	// /metrics on the API listener needs the admin token (FXDESK_METRICS_ADDR serves it without).
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/metrics", nil)
	p.authorize(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("/metrics = %d", resp.StatusCode)
	}
	return string(b)
}

// metricValue returns the sample line's value for an exact series (name plus labels).
func metricValue(body, series string) (string, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// /metrics on both processes exposes the named series with values that match the roles.
func TestMetricsExposeTheDesk(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	h := e.start("holder", "fxdesk-web", "CRON_MODE=off")
	f := e.start("follower", "fxdesk-web", "CRON_MODE=off")
	c := e.start("cron", "fxdesk-cron")
	h.waitLog(10*time.Second, msgIs("provider connected"))
	// The renew histogram gets a sample per cycle (every TTL/3 = 1 s here); no event announces a
	// successful renew, so poll the series with a deadline.
	eventually(t, 10*time.Second, 100*time.Millisecond, "a successful renew in fxdesk_lease_renew_seconds", func() bool {
		v, ok := metricValue(h.metrics(), `fxdesk_lease_renew_seconds_count{outcome="ok"}`)
		return ok && v != "0"
	})
	stream := h.stream("EURUSD")
	stream.waitFor(t, 10*time.Second, func(map[string]any) bool { return true })

	hm := h.metrics()
	for series, want := range map[string]string{
		`fxdesk_lease_held`:                            "1",
		`fxdesk_lease_term`:                            "1",
		`fxdesk_lease_lost`:                            "0",
		`fxdesk_feed_connected`:                        "1",
		`fxdesk_sse_clients`:                           "1",
		`fxdesk_build_info{process="web"}`:             "1",
		`fxdesk_ticks_dropped_total{reason="crossed"}`: "0",
		// The gate's one series exists at zero for every kind of guarded work.
		`fxdesk_gate_dropped_total{at="gate",work="fill"}`:           "0",
		`fxdesk_gate_dropped_total{at="fence",work="stop_out"}`:      "0",
		`fxdesk_gate_dropped_total{at="gate",work="mirror_publish"}`: "0",
	} {
		if got, ok := metricValue(hm, series); !ok || got != want {
			t.Errorf("holder %s = %q (present %v), want %s", series, got, ok, want)
		}
	}
	if got, _ := metricValue(hm, "fxdesk_ticks_received_total"); got == "" || got == "0" {
		t.Errorf("holder fxdesk_ticks_received_total = %q, want > 0", got)
	}
	for _, name := range []string{"fxdesk_lease_trust_left_seconds", "fxdesk_quote_age_seconds", `fxdesk_symbols{state="QUOTING"}`} {
		if _, ok := metricValue(hm, name); !ok {
			t.Errorf("holder lacks %s", name)
		}
	}
	if got, _ := metricValue(f.metrics(), "fxdesk_lease_held"); got != "0" {
		t.Errorf("follower fxdesk_lease_held = %q, want 0", got)
	}
	for _, name := range []string{`fxdesk_mirror_age_seconds{mode="publishing"}`, "fxdesk_risk_own_time_seconds_count", "fxdesk_risk_loaded", `fxdesk_risk_ticks_total{outcome="evaluated"}`,
		"fxdesk_commit_batch_size_count", "fxdesk_commit_seconds_count", "fxdesk_commit_rows_refused_total",
		`fxdesk_commit_one_trip_total{result="committed"}`, `fxdesk_commit_one_trip_total{result="stale"}`} {
		if _, ok := metricValue(hm, name); !ok {
			t.Errorf("holder lacks %s", name)
		}
	}
	cm := c.metrics()
	for _, name := range []string{`fxdesk_mirror_age_seconds{mode="following"}`, `fxdesk_mirror_symbols{mode="following"}`} {
		if _, ok := metricValue(cm, name); !ok {
			t.Errorf("cron lacks %s", name)
		}
	}
	if _, ok := metricValue(cm, `fxdesk_build_info{process="cron"}`); !ok {
		t.Error("cron /metrics lacks fxdesk_build_info")
	}
	if strings.Contains(cm, "fxdesk_lease_held") {
		t.Error("cron exposes lease series: it has no lease keeper")
	}

	// Orders and alerts are counted as they happen.
	e.openPosition(h)
	if err := alert.NewInbox(e.sql, slog.New(slog.DiscardHandler)).Raise(context.Background(), "ledger-drift", alert.Critical, "test", nil); err != nil {
		t.Fatal(err)
	}
	hm = h.metrics()
	for series, want := range map[string]string{
		`fxdesk_orders_total{result="filled"}`:                        "1",
		`fxdesk_alerts_open{code="ledger-drift",severity="critical"}`: "1",
	} {
		if got, ok := metricValue(hm, series); !ok || got != want {
			t.Errorf("holder %s = %q (present %v), want %s", series, got, ok, want)
		}
	}
}
