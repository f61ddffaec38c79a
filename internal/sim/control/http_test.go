package control_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fxdesk/internal/sim/control"
)

// The simulators' control clients (tests, e2e, the soak) read these bodies: they are pinned
// byte for byte.
func TestControlAnswersLoopbackOnlyWithPinnedBodies(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		control.WriteJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	tests := []struct {
		remote string
		status int
		body   string
	}{
		{"127.0.0.1:40000", 200, `{"ok":true}` + "\n"},
		{"[::1]:40000", 200, `{"ok":true}` + "\n"},
		{"203.0.113.7:40000", 403, `{"error":{"code":"EFORBIDDEN","message":"the simulator control API answers loopback callers only"}}` + "\n"},
		{"not an address", 403, `{"error":{"code":"EFORBIDDEN","message":"the simulator control API answers loopback callers only"}}` + "\n"},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, "/control/state", nil)
		req.RemoteAddr = tt.remote
		rec := httptest.NewRecorder()
		control.LoopbackOnly(ok).ServeHTTP(rec, req)
		if rec.Code != tt.status || rec.Body.String() != tt.body {
			t.Errorf("from %s: %d %q, want %d %q", tt.remote, rec.Code, rec.Body.String(), tt.status, tt.body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("from %s: Content-Type %q", tt.remote, ct)
		}
	}
}

// A misspelt field is refused, not ignored: a control call that silently did nothing would make
// a test pass for the wrong reason.
func TestDecodeBodyRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	type request struct {
		Count int `json:"count"`
	}
	for _, tt := range []struct {
		body  string
		ok    bool
		count int
	}{
		{`{"count":2}`, true, 2},
		{`{"cuont":2}`, false, 0},
		{`not json`, false, 0},
	} {
		rec := httptest.NewRecorder()
		var req request
		got := control.DecodeBody(rec, httptest.NewRequest(http.MethodPost, "/control/fault", strings.NewReader(tt.body)), &req)
		if got != tt.ok || req.Count != tt.count {
			t.Errorf("%s: ok %v count %d, want %v %d", tt.body, got, req.Count, tt.ok, tt.count)
		}
		if !tt.ok && (rec.Code != http.StatusBadRequest || !strings.HasPrefix(rec.Body.String(), `{"error":{"code":"EINVALID","message":"decode request body: `)) {
			t.Errorf("%s: answered %d %q", tt.body, rec.Code, rec.Body.String())
		}
	}
}
