package api

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// The status page reads the book's exposures — an aggregate over every open position — at most
// once per pageExposuresFresh however often it is asked for, while /api/admin/fx/desk reads them
// on every call (a script that trades and then reads the book sees its trade).
func TestStatusPageSharesTheBooksExposures(t *testing.T) {
	ctx := context.Background()
	d, err := dbtest.NewDatabase("api_status_reads")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	setup, err := store.OpenMigrated(ctx, d.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { setup.Close() })
	admin, err := auth.Create(audit.WithActor(ctx, audit.Actor{Via: "test"}), setup, 7, true, "status reads")
	if err != nil {
		t.Fatal(err)
	}
	h, rec := recordedServer(t, d.DSN)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	exposureReads := func() int {
		n := 0
		for _, s := range rec.Take() {
			if strings.Contains(s.Text, "AS `internalLots`") {
				n++
			}
		}
		return n
	}

	const polls = 20
	rec.Take()
	began := time.Now()
	for range polls {
		if page := get("/admin/status"); !strings.Contains(page, "<h2>Book</h2>") {
			t.Fatalf("the status page has no book:\n%.2000s", page)
		}
	}
	// A new reading starts only once the last is pageExposuresFresh old: however slow the
	// machine, no more than one per Fresh of the polls' span (and the first).
	bound := 1 + int(math.Ceil(float64(time.Since(began))/float64(pageExposuresFresh)))
	if n := exposureReads(); n < 1 || n > bound || n >= polls {
		t.Errorf("%d status pages read the book's exposures %d times, want 1 to %d", polls, n, min(bound, polls-1))
	}

	const calls = 5
	for range calls {
		get("/api/admin/fx/desk")
	}
	if n := exposureReads(); n < calls {
		t.Errorf("%d calls of /api/admin/fx/desk read the book's exposures %d times, want one each", calls, n)
	}
}
