package feedsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// startSim runs a simulator on addr until the test ends (or stop is called) and returns it.
func startSim(t *testing.T, cfg Config, addr string) (*Server, func()) {
	t.Helper()
	s := New(cfg, slog.New(slog.DiscardHandler))
	if _, err := s.Listen(addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("simulator did not stop within 5s")
		}
	}
	t.Cleanup(stop)
	return s, stop
}

type event struct {
	Ev      string  `json:"ev"`
	Status  string  `json:"status"`
	Message string  `json:"message"`
	Pair    string  `json:"p"`
	Ask     float64 `json:"a"`
	Bid     float64 `json:"b"`
	T       int64   `json:"t"`
}

type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func dial(t *testing.T, url string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(-1)
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn}
}

func (c *wsClient) send(action, params string) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]string{"action": action, "params": params})
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

// until reads frames until one holds an event matching ok, failing after 5s.
func (c *wsClient) until(what string, ok func(event) bool) event {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		_, msg, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		var evs []event
		if err := json.Unmarshal(msg, &evs); err != nil {
			c.t.Fatalf("frame %q is not an array of events: %v", msg, err)
		}
		for _, e := range evs {
			if ok(e) {
				return e
			}
		}
	}
}

func status(s, msg string) func(event) bool {
	return func(e event) bool { return e.Ev == "status" && e.Status == s && (msg == "" || e.Message == msg) }
}

func post(t *testing.T, s *Server, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+s.Addr().String()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s answered %q: %v", path, raw, err)
	}
	return resp.StatusCode, out
}

func TestProtocolRefusesBeforeAuthThenPushesQuotesAndClosures(t *testing.T) {
	t.Parallel()
	s, _ := startSim(t, Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	c := dial(t, s.URL())
	c.until("connected", status("connected", "Connected Successfully"))

	// Subscribing before auth is refused and changes nothing.
	c.send("subscribe", "C.EUR/USD")
	c.until("not authorized", status("error", "not authorized"))
	c.send("auth", "any-key")
	c.until("auth_success", status("auth_success", "authenticated"))
	if n, _ := s.SetQuote("EURUSD", 1.1, 1.1002); n != 0 {
		t.Fatalf("a subscribe sent before auth took effect: quote pushed to %d clients", n)
	}

	c.send("subscribe", "C.EUR/USD,C.USD/JPY")
	c.until("subscribe ack", status("success", "subscribed to: C.USD/JPY"))

	// A control quote is pushed at once with exactly the price set.
	code, out := post(t, s, "/control/quote", map[string]any{"symbol": "EURUSD", "bid": 1.08410, "ask": 1.08412})
	if code != http.StatusOK || out["pushedTo"] != 1.0 {
		t.Fatalf("quote: %d %v", code, out)
	}
	q := c.until("EUR/USD quote", func(e event) bool { return e.Ev == "C" && e.Pair == "EUR/USD" })
	if q.Bid != 1.08410 || q.Ask != 1.08412 || q.T == 0 {
		t.Fatalf("quote = %+v", q)
	}

	// Provider-announced closure reaches the subscriber, and the symbol is no longer quoted.
	if code, out := post(t, s, "/control/session", map[string]any{"symbol": "EURUSD", "open": false}); code != 200 {
		t.Fatalf("session: %d %v", code, out)
	}
	c.until("market_closed", status("market_closed", "EUR/USD"))
	if n, _ := s.SetQuote("EURUSD", 1.1, 1.1002); n != 0 {
		t.Fatal("a provider-closed symbol was quoted")
	}
	post(t, s, "/control/session", map[string]any{"symbol": "EURUSD", "open": true})
	c.until("market_open", status("market_open", "EUR/USD"))

	// Unsubscribe on the live socket stops the pair.
	c.send("unsubscribe", "C.EUR/USD")
	c.until("unsubscribe ack", status("success", "unsubscribed to: C.EUR/USD"))
	if n, _ := s.SetQuote("EURUSD", 1.1, 1.1002); n != 0 {
		t.Fatal("an unsubscribed pair was still pushed")
	}

	// Raw frames pass through byte for byte.
	raw := `[{"ev":"C","p":"USD/JPY","a":1,"b":2}]`
	post(t, s, "/control/raw", map[string]any{"frame": raw})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, msg, err := c.conn.Read(ctx)
	if err != nil || string(msg) != raw {
		t.Fatalf("raw frame = %q, %v", msg, err)
	}

	// A burst delivers exactly the ticks it announced, each one well-formed.
	code, out = post(t, s, "/control/burst", map[string]any{"symbols": []string{"USDJPY"}, "ticksPerSecond": 20000, "seconds": 0.1})
	if code != http.StatusAccepted || out["ticks"] != 2000.0 {
		t.Fatalf("burst: %d %v", code, out)
	}
	got := 0
	for got < 2000 {
		_, msg, err := c.conn.Read(ctx)
		if err != nil {
			t.Fatalf("after %d burst ticks: %v", got, err)
		}
		var evs []event
		if err := json.Unmarshal(msg, &evs); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Ev != "C" || e.Pair != "USD/JPY" || !(e.Bid > 0) || e.Bid >= e.Ask || e.T == 0 {
				t.Fatalf("bad burst event %+v", e)
			}
			got++
		}
	}
	if got != 2000 {
		t.Fatalf("burst delivered %d ticks, want 2000", got)
	}
}

func TestControlRefusesMalformedCallsWith400(t *testing.T) {
	t.Parallel()
	s, _ := startSim(t, Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	tests := []struct {
		name, path string
		body       any
	}{
		// Each row is a control call a test author could get wrong; all must answer 400.
		{"crossed quote", "/control/quote", map[string]any{"symbol": "EURUSD", "bid": 1.2, "ask": 1.1}},
		{"zero bid", "/control/quote", map[string]any{"symbol": "EURUSD", "bid": 0, "ask": 1.1}},
		{"provider form symbol", "/control/quote", map[string]any{"symbol": "EUR/USD", "bid": 1, "ask": 1.1}},
		{"unknown field", "/control/quote", map[string]any{"symbol": "EURUSD", "bid": 1, "ask": 1.1, "spread": 2}},
		{"session without open", "/control/session", map[string]any{"symbol": "EURUSD"}},
		{"unknown symbol silence", "/control/silence", map[string]any{"symbol": "ABCDEF", "seconds": 1}},
		{"burst without rate", "/control/burst", map[string]any{"symbols": []string{"EURUSD"}, "seconds": 1}},
		{"spike of zero pips", "/control/spike", map[string]any{"symbol": "EURUSD", "pips": 0}},
		{"spike of an unknown symbol", "/control/spike", map[string]any{"symbol": "ABCDEF", "pips": 300}},
		{"spike longer than a minute", "/control/spike", map[string]any{"symbol": "EURUSD", "pips": 300, "ms": 61000}},
		{"shift beyond the limit", "/control/shift", map[string]any{"symbol": "EURUSD", "pips": 1e9}},
		{"offset without pips", "/control/offset", map[string]any{"symbol": "*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := post(t, s, tt.path, tt.body)
			if code != http.StatusBadRequest || out["error"] == nil {
				t.Fatalf("%s answered %d %v, want 400 with an error", tt.path, code, out)
			}
		})
	}
}

func TestControlLoopbackOnly(t *testing.T) {
	t.Parallel()
	s := New(Config{DisableWalk: true}, slog.New(slog.DiscardHandler))
	req := httptest.NewRequest(http.MethodGet, "/control/state", nil)
	req.RemoteAddr = "203.0.113.7:40000"
	rec := httptest.NewRecorder()
	s.routes().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("remote caller got %d, want 403", rec.Code)
	}
	req.RemoteAddr = "127.0.0.1:40000"
	rec = httptest.NewRecorder()
	s.routes().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"XAUUSD"`) {
		t.Fatalf("loopback caller got %d %s", rec.Code, rec.Body.String())
	}
}

func TestWalkFollowsCalendar(t *testing.T) {
	t.Parallel()
	saturday := time.Date(2025, 6, 21, 16, 0, 0, 0, time.UTC)
	s, _ := startSim(t, Config{WalkInterval: 20 * time.Millisecond, Now: func() time.Time { return saturday }}, "127.0.0.1:0")
	open, _ := startSim(t, Config{WalkInterval: 20 * time.Millisecond, AlwaysOpen: true, Now: func() time.Time { return saturday }}, "127.0.0.1:0")
	for _, sim := range []*Server{s, open} {
		c := dial(t, sim.URL())
		c.send("auth", "k")
		c.send("subscribe", "C.*")
		c.until("subscribe ack", status("success", "subscribed to: C.*"))
	}
	// The always-open twin proves the walk is running; the calendar one must stay silent.
	deadline := time.Now().Add(5 * time.Second)
	for open.State().Symbols[0].Sent < 3 {
		if time.Now().After(deadline) {
			t.Fatal("always-open simulator never walked")
		}
		time.Sleep(10 * time.Millisecond) // polling a counter, not synchronising on it
	}
	for _, sym := range s.State().Symbols {
		if sym.Sent != 0 || sym.SessionOpen {
			t.Fatalf("%s quoted %d times on a saturday (session open %v)", sym.Symbol, sym.Sent, sym.SessionOpen)
		}
	}
}

func TestRestartOnSameAddress(t *testing.T) {
	t.Parallel()
	s, stop := startSim(t, Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	addr := s.Addr().String()
	c := dial(t, s.URL())
	c.until("connected", status("connected", ""))
	stop()
	// The old client's socket must be closed by the stop, not left dangling.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := c.conn.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("client read after stop: %v (ctx %v)", err, ctx.Err())
	}
	s2, _ := startSim(t, Config{AlwaysOpen: true, DisableWalk: true}, addr)
	c2 := dial(t, s2.URL())
	c2.until("connected", status("connected", ""))
	if s2.Connections() != 1 {
		t.Fatalf("restarted simulator counts %d connections", s2.Connections())
	}
}

func TestQuoteFollowsQuotability(t *testing.T) {
	t.Parallel()
	s := New(Config{AlwaysOpen: true, DisableWalk: true}, slog.New(slog.DiscardHandler))
	if _, err := s.SetQuote("EURUSD", 1.1, 1.1002); err != nil {
		t.Fatal(err)
	}
	if bid, ask, ok := s.Quote("eurusd"); !ok || bid != 1.1 || ask != 1.1002 {
		t.Fatalf("Quote = %v %v %v, want 1.1 1.1002 true", bid, ask, ok)
	}
	if err := s.SetSession("EURUSD", false); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Quote("EURUSD"); ok {
		t.Fatal("a provider-closed symbol is quotable")
	}
	if _, _, ok := s.Quote("ABCDEF"); ok {
		t.Fatal("an unknown symbol is quotable")
	}
}
