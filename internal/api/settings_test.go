package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fxdesk/internal/catalog"
)

// The hedger's terms at the admin edge: a request with one bad limit answers 400 naming the
// setting and its range, and writes none of its changes; a good one is read back whole.
func TestPutHedgeSettings(t *testing.T) {
	t.Parallel()
	db := migratedDB(t, "api_hedge_settings")
	settings := catalog.NewSettings(db, slog.New(slog.DiscardHandler))
	r := adminRouter()
	r.Get("/settings", handleSettings(slog.New(slog.DiscardHandler), settings))
	r.Put("/settings", handlePutSettings(slog.New(slog.DiscardHandler), settings))
	put := func(body string) (int, map[string]any) {
		req := httptest.NewRequest(http.MethodPut, "/settings", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		var out map[string]any
		json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out
	}
	for _, tc := range []struct{ body, want string }{
		{`{"fxHedgeLimitLots.EURUSD":"10","fxHedgeLimitLots.GBPUSD":"-3"}`, `fxHedgeLimitLots.GBPUSD must be lots from 0 to 99999999.9999 with at most 4 decimals, or "off" for no limit (got "-3").`},
		{`{"fxHedgeLimitLots.EURUSD":"10","fxHedgeLimitLots.ZZZZZZ":"3"}`, `Unknown setting "fxHedgeLimitLots.ZZZZZZ": fxHedgeLimitLots. must be followed by a symbol the desk lists, such as fxHedgeLimitLots.EURUSD.`},
		{`{"fxHedgeLimitLots.EURUSD":"10","fxHedgeBandLots":"two"}`, `fxHedgeBandLots must be lots from 0 to 99999999.9999 with at most 4 decimals (got "two").`},
	} {
		code, out := put(tc.body)
		e, _ := out["error"].(map[string]any)
		if code != http.StatusBadRequest || e["message"] != tc.want {
			t.Errorf("PUT %s = %d %v; want 400 %q", tc.body, code, out, tc.want)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM `fx_setting` WHERE `name` LIKE 'fxHedge%'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused requests wrote %d hedge settings (%v)", n, err)
	}
	code, out := put(`{"fxHedgeLimitLots.EURUSD":"10","fxHedgeBandLots":"2","fxHedgeMinLots":"0.5"}`)
	s, _ := out["settings"].(map[string]any)
	if code != http.StatusOK || s["fxHedgeLimitLots.EURUSD"] != "10" || s["fxHedgeBandLots"] != "2" || s["fxHedgeMinLots"] != "0.5" {
		t.Fatalf("PUT = %d %v", code, out)
	}
	if terms := settings.HedgeTerms(); terms.Limits["EURUSD"].String() != "10" {
		t.Fatalf("terms after the PUT: %+v", terms)
	}
}
