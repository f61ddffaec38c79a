package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/pricesource"
	"fxdesk/internal/tick"
)

// priceEngine stands in for the holder's tick engine behind the dealer's routes: two sources,
// a few symbols, and the pins and halts it was given. The engine's own behaviour is tested in
// internal/tick; here only what the routes ask of it matters.
type priceEngine struct {
	mu       sync.Mutex
	sources  []string
	symbols  []string
	pinned   map[string]string
	halted   map[string]bool
	rejected []tick.RejectedTick
}

func newPriceEngine() *priceEngine {
	e := &priceEngine{sources: []string{"primary", "backup"}, symbols: []string{"EURUSD", "GBPUSD", "USDJPY"},
		pinned: map[string]string{}, halted: map[string]bool{}}
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for i := range 5 {
		e.rejected = append(e.rejected, tick.RejectedTick{Symbol: "EURUSD", Source: "primary", Bid: 1.13, Ask: 1.1302,
			ReceivedAt: at.Add(-time.Duration(i) * time.Second), Reason: tick.RejectSpike, Outcome: tick.OutcomeDropped, DecidedAt: at})
	}
	return e
}

func (e *priceEngine) known(symbol string) bool {
	for _, s := range e.symbols {
		if s == symbol {
			return true
		}
	}
	return false
}

func (e *priceEngine) Pin(symbol, source string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.known(symbol) {
		return errUnknown
	}
	e.pinned[symbol] = source
	return nil
}

func (e *priceEngine) Halt(symbol string, halted bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.known(symbol) {
		return errUnknown
	}
	e.halted[symbol] = halted
	return nil
}

var errUnknown = &json.UnsupportedValueError{Str: "unknown symbol"}

func (e *priceEngine) Selections() []tick.Selection {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []tick.Selection
	for _, s := range e.symbols {
		src := "primary"
		if s == "GBPUSD" {
			src = "backup" // failed over by the engine
		}
		if p := e.pinned[s]; p != "" {
			src = p
		}
		out = append(out, tick.Selection{Symbol: s, Source: src, Pinned: e.pinned[s], Halted: e.halted[s],
			Health: []tick.SourceHealth{{Source: "primary", Healthy: s != "GBPUSD", Reason: map[bool]string{true: "silent"}[s == "GBPUSD"]}, {Source: "backup", Healthy: true}}})
	}
	return out
}

func (e *priceEngine) SourceStatuses() []tick.SourceStatus {
	var out []tick.SourceStatus
	for _, n := range e.sources {
		out = append(out, tick.SourceStatus{Name: n, Connected: true, Accepted: 10, Published: 9, Held: 1, Dropped: 1})
	}
	return out
}

func (e *priceEngine) Rejected(limit int) []tick.RejectedTick {
	return e.rejected[:min(limit, len(e.rejected))]
}

func (e *priceEngine) pinOf(symbol string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pinned[symbol], e.halted[symbol]
}

// holderPins is the dealer's side of a holder whose engine is e.
func holderPins(t *testing.T, d *auditDesk, e pricesource.Engine) *pricesource.Pins {
	t.Helper()
	pins := pricesource.NewPins(d.db, slog.New(slog.DiscardHandler))
	if err := pins.SetEngine(context.Background(), e, map[string]string{"backup": "http://127.0.0.1:1/control"}); err != nil {
		t.Fatal(err)
	}
	return pins
}

// The dealer's routes on the holder: the sources and selections, the filtered ticks, a pin and
// a halt with their audit rows, and a refusal naming the field or parameter for each bad input.
func TestPriceSourceRoutes(t *testing.T) {
	d, _ := newAuditDesk(t)
	e := d.priceEngine
	get := func(path string) (int, map[string]json.RawMessage) {
		t.Helper()
		code, body, _ := d.do("GET", path, "")
		var out map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("GET %s: %d %q", path, code, body)
		}
		return code, out
	}
	code, out := get("/api/admin/fx/price-sources")
	if code != http.StatusOK {
		t.Fatalf("GET price-sources: %d %s", code, out)
	}
	var view pricesView
	raw, _ := json.Marshal(out)
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Sources) != 2 || !view.Sources[0].Primary || view.Sources[1].Control == "" || len(view.Symbols) != 3 ||
		strings.Join(view.OffPrimary, ",") != "GBPUSD" || view.Symbols[1].Health[0].Reason != "silent" {
		t.Fatalf("view = %s", raw)
	}

	// Refused, each naming what is wrong, and nothing changes.
	last := d.lastID()
	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/api/admin/fx/price-sources/symbols/eurusd", `{"pin":"backup"}`, 400, "symbol"},
		{"/api/admin/fx/price-sources/symbols/EURUSD", `{"pin":5}`, 400, "pin must be"},
		{"/api/admin/fx/price-sources/symbols/EURUSD", `{"halted":"yes"}`, 400, "halted must be"},
		{"/api/admin/fx/price-sources/symbols/EURUSD", `{"pin":"Back Up!"}`, 400, "pin"},
		{"/api/admin/fx/price-sources/symbols/EURUSD", `{"pinned":"backup"}`, 400, "pinned"},
		{"/api/admin/fx/price-sources/symbols/EURUSD", `{}`, 400, "pin"},
		{"/api/admin/fx/price-sources/symbols/ABCDEF", `{"pin":"backup"}`, 404, "ABCDEF"},
		{"/api/admin/fx/price-sources/symbols/EURUSD", `{"pin":"lp9"}`, 404, "lp9"},
	} {
		code, body, _ := d.do("PUT", tc.path, tc.body)
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("PUT %s %s: %d %s, want %d naming %s", tc.path, tc.body, code, body, tc.status, tc.want)
		}
	}
	if rows := d.newRows(last); len(rows) != 0 {
		t.Fatalf("refused changes wrote audit rows: %+v", rows)
	}
	if p, h := e.pinOf("EURUSD"); p != "" || h {
		t.Fatalf("refused changes reached the engine: pin %q halted %v", p, h)
	}

	// A pin, then a halt: each applied to the engine, stored and audited with before and after.
	if code, body, _ := d.do("PUT", "/api/admin/fx/price-sources/symbols/USDJPY", `{"pin":"backup"}`); code != http.StatusOK || !strings.Contains(body, `"pin":"backup"`) {
		t.Fatalf("pin: %d %s", code, body)
	}
	if code, body, _ := d.do("PUT", "/api/admin/fx/price-sources/symbols/USDJPY", `{"halted":true}`); code != http.StatusOK || !strings.Contains(body, `"halted":true`) {
		t.Fatalf("halt: %d %s", code, body)
	}
	if p, h := e.pinOf("USDJPY"); p != "backup" || !h {
		t.Fatalf("engine has pin %q halted %v, want backup and halted", p, h)
	}
	rows := d.newRows(last)
	if len(rows) != 2 || rows[1].Action != "price_source_pin.update" || rows[1].EntityID != "USDJPY" ||
		!strings.Contains(string(rows[1].Before), `"pin":"backup","halted":false`) || !strings.Contains(string(rows[1].After), `"halted":true`) {
		t.Fatalf("audit rows: %+v", rows)
	}

	// The filtered ticks, newest first, bounded by limit; a bad limit is refused by name.
	code, out = get("/api/admin/fx/price-sources/rejected?limit=2")
	var rejected []rejectedView
	if err := json.Unmarshal(out["rejected"], &rejected); code != http.StatusOK || err != nil || len(rejected) != 2 || rejected[0].Outcome != "dropped" || rejected[0].Reason != "spike" {
		t.Fatalf("rejected: %d %s", code, out["rejected"])
	}
	for _, q := range []string{"0", "1001", "abc"} {
		if code, body, _ := d.do("GET", "/api/admin/fx/price-sources/rejected?limit="+q, ""); code != http.StatusBadRequest || !strings.Contains(body, "limit") {
			t.Errorf("limit=%s: %d %s, want 400 naming limit", q, code, body)
		}
	}

	// A new holder's engine gets the stored pin and halt back from the table.
	next := newPriceEngine()
	holderPins(t, d, next)
	if p, h := next.pinOf("USDJPY"); p != "backup" || !h {
		t.Fatalf("a new holder's engine has pin %q halted %v, want backup and halted from the table", p, h)
	}
	// Unpinning and resuming removes the row: the next holder has nothing to apply.
	if code, body, _ := d.do("PUT", "/api/admin/fx/price-sources/symbols/USDJPY", `{"pin":"","halted":false}`); code != http.StatusOK {
		t.Fatalf("unpin: %d %s", code, body)
	}
	var n int
	if err := d.db.QueryRow("SELECT COUNT(*) FROM `fx_price_source_pin`").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows left after unpinning (%v)", n, err)
	}
}

// Off the holder (no engine) the routes answer 503 and write nothing.
func TestPriceSourceRoutesOffTheHolder(t *testing.T) {
	d, _ := newAuditDesk(t)
	pins := pricesource.NewPins(d.db, slog.New(slog.DiscardHandler))
	log := slog.New(slog.DiscardHandler)
	for name, h := range map[string]http.HandlerFunc{
		"list":     handlePriceSources(log, pins),
		"rejected": handleRejectedTicks(log, pins),
	} {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "holds the desk's lease") {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body.String())
		}
	}
	req := httptest.NewRequest("PUT", "/api/admin/fx/price-sources/symbols/EURUSD", strings.NewReader(`{"pin":"backup"}`))
	req = req.WithContext(audit.WithActor(req.Context(), audit.Actor{UserID: 1, Via: "api"}))
	if _, err := pins.Set(req.Context(), "EURUSD", pricesource.Change{Halted: new(bool)}); err != pricesource.ErrNotHolder {
		t.Fatalf("Set off the holder: %v", err)
	}
}
