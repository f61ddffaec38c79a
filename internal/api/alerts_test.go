package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/testkit/dbtest"
)

// The alert routes over a real inbox: list with a status filter, acknowledge, and the error
// statuses an admin client relies on. The database is made here rather than in a TestMain so
// this file stands alone in the package.
func TestAlertRoutesListAcknowledgeAndAnswerErrors(t *testing.T) {
	ctx := context.Background()
	db, closeDB, err := dbtest.NewMigrated("api_alerts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	log := slog.New(slog.DiscardHandler)
	inbox := alert.NewInbox(db, log)
	if err := inbox.Raise(ctx, "quote-mirror-unavailable", alert.Critical, "no mirror", map[string]string{"key": "k"}); err != nil {
		t.Fatal(err)
	}
	if err := inbox.Raise(ctx, "quote-mirror-stale", alert.Warning, "stale", nil); err != nil {
		t.Fatal(err)
	}
	if err := inbox.Raise(ctx, "old", alert.Info, "gone", nil); err != nil {
		t.Fatal(err)
	}
	if err := inbox.Resolve(ctx, "old"); err != nil {
		t.Fatal(err)
	}

	r := chi.NewRouter()
	// The actor requireToken would set: acknowledging is an audited admin write.
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(audit.WithActor(r.Context(), audit.Actor{UserID: 7, Via: "api"})))
		})
	})
	r.Get("/api/admin/fx/alerts", handleAlerts(log, inbox))
	r.Post("/api/admin/fx/alerts/{id}/ack", handleAckAlert(log, inbox, func(*http.Request) string { return "user-7" }))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	call := func(method, path string) (int, map[string]json.RawMessage) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body map[string]json.RawMessage
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, b, err)
		}
		return resp.StatusCode, body
	}
	list := func(query string) []alert.Alert {
		t.Helper()
		st, body := call("GET", "/api/admin/fx/alerts"+query)
		if st != http.StatusOK {
			t.Fatalf("GET alerts%s: %d %s", query, st, body["error"])
		}
		var all []alert.Alert
		if err := json.Unmarshal(body["alerts"], &all); err != nil {
			t.Fatal(err)
		}
		return all
	}
	codes := func(all []alert.Alert) string {
		var cs []string
		for _, a := range all {
			cs = append(cs, a.Code)
		}
		return strings.Join(cs, ",")
	}

	if got := codes(list("?status=open")); got != "quote-mirror-stale,quote-mirror-unavailable" {
		t.Fatalf("open alerts: %s", got)
	}
	if got := codes(list("?status=RESOLVED")); got != "old" {
		t.Fatalf("resolved alerts: %s", got)
	}
	if got := len(list("")); got != 3 {
		t.Fatalf("all alerts: %d", got)
	}
	var unavailable alert.Alert
	for _, a := range list("?code=quote-mirror-unavailable") {
		unavailable = a
	}
	if unavailable.Severity != alert.Critical || string(unavailable.Details) != `{"key":"k"}` {
		t.Fatalf("unavailable alert: %+v", unavailable)
	}

	st, body := call("POST", "/api/admin/fx/alerts/"+strconv.FormatInt(unavailable.ID, 10)+"/ack")
	var acked alert.Alert
	json.Unmarshal(body["alert"], &acked)
	if st != http.StatusOK || acked.Status != alert.Acknowledged || acked.AcknowledgedBy != "user-7" {
		t.Fatalf("ack: %d %+v", st, acked)
	}
	if got := codes(list("?status=OPEN")); got != "quote-mirror-stale" {
		t.Fatalf("open after ack: %s", got)
	}

	// Intent: each failure answers the vocabulary's status and code, nothing else.
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/admin/fx/alerts?status=CLOSED", 400, "invalid"},
		{"GET", "/api/admin/fx/alerts?limit=-1", 400, "invalid"},
		{"POST", "/api/admin/fx/alerts/999999/ack", 404, "not_found"},
		{"POST", "/api/admin/fx/alerts/abc/ack", 404, "not_found"},
		{"POST", "/api/admin/fx/alerts/" + strconv.FormatInt(list("?status=RESOLVED")[0].ID, 10) + "/ack", 409, "conflict"},
	} {
		st, body := call(tc.method, tc.path)
		var e struct{ Code, Message string }
		json.Unmarshal(body["error"], &e)
		if st != tc.status || e.Code != tc.code || e.Message == "" {
			t.Errorf("%s %s: %d %+v, want %d %s", tc.method, tc.path, st, e, tc.status, tc.code)
		}
	}
}
