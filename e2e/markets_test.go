package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// simControl posts a control request to the holder's in-process feed simulator.
func (p *proc) simControl(path string, body any) {
	p.t.Helper()
	l, ok := p.findLog(msgHas("feed simulator listening (provider protocol and loopback control API)"))
	if !ok {
		p.t.Fatalf("%s started no feed simulator", p.name)
	}
	addr, _ := l["addr"].(string)
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		p.t.Fatalf("simulator %s answered %d", path, resp.StatusCode)
	}
}

// sseClient reads a markets stream and hands each quote event's data to a channel.
type sseClient struct {
	events chan map[string]any
	resp   *http.Response
}

func (p *proc) stream(symbols string) *sseClient {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/api/fx/markets/stream?symbols="+symbols, nil)
	p.authorize(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		p.t.Fatalf("stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c := &sseClient{events: make(chan map[string]any, 100000), resp: resp}
	p.t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				if json.Unmarshal([]byte(data), &ev) == nil {
					c.events <- ev
				}
			}
		}
	}()
	return c
}

// waitFor returns the first event matching pred, failing at the deadline.
func (c *sseClient) waitFor(t *testing.T, timeout time.Duration, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if pred(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no matching stream event within %s", timeout)
		}
	}
}

func bidIs(symbol, bid string) func(map[string]any) bool {
	return func(ev map[string]any) bool { return ev["symbol"] == symbol && ev["bid"] == bid }
}

type quotesBody struct {
	Quotes []struct {
		Symbol string  `json:"symbol"`
		State  string  `json:"state"`
		Bid    *string `json:"bid"`
		Ask    *string `json:"ask"`
	} `json:"quotes"`
}

// The holder quotes from its simulator; a follower has never seen a price: every symbol is
// QUOTING_HALTED and its rail has nothing to send.
func TestMarketsOnHolderAndFollower(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	a := e.start("holder", "fxdesk-web", "CRON_MODE=off")
	b := e.start("follower", "fxdesk-web", "CRON_MODE=off")
	b.waitLog(time.Second, msgHas("role: follower"))

	onHolder := a.stream("EURUSD,USDJPY")
	onFollower := b.stream("EURUSD,USDJPY")
	a.simControl("/control/quote", map[string]any{"symbol": "EURUSD", "bid": 1.1, "ask": 1.1001})
	onHolder.waitFor(t, 5*time.Second, bidIs("EURUSD", "1.10000"))

	var q quotesBody
	if code := a.getAs(e.adminToken(), "/api/fx/quotes?symbols=EURUSD,USDJPY", &q); code != http.StatusOK || len(q.Quotes) != 2 {
		t.Fatalf("holder quotes = %d %+v", code, q)
	}
	if q.Quotes[0].State != "QUOTING" || q.Quotes[0].Bid == nil || q.Quotes[0].Ask == nil {
		t.Fatalf("holder EURUSD = %+v, want QUOTING with a price", q.Quotes[0])
	}

	var syms struct {
		Symbols []struct {
			Symbol string  `json:"symbol"`
			State  string  `json:"state"`
			Bid    *string `json:"bid"`
		} `json:"symbols"`
	}
	if code := b.getAs(e.adminToken(), "/api/fx/symbols", &syms); code != http.StatusOK || len(syms.Symbols) < 30 {
		t.Fatalf("follower symbols = %d, %d symbols", code, len(syms.Symbols))
	}
	for _, s := range syms.Symbols {
		if s.State != "QUOTING_HALTED" || s.Bid != nil {
			t.Fatalf("follower %s = %s bid %v, want QUOTING_HALTED without a price", s.Symbol, s.State, s.Bid)
		}
	}
	// The holder has delivered an event; the follower's rail, open just as long, has nothing.
	select {
	case ev := <-onFollower.events:
		t.Fatalf("follower streamed %v", ev)
	default:
	}

	var bad struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if code := a.getAs(e.adminToken(), "/api/fx/quotes?symbols=EURUSD,NOPE12", &bad); code != http.StatusBadRequest || !strings.Contains(bad.Error.Message, "NOPE12") {
		t.Fatalf("unknown symbol answered %d %+v", code, bad)
	}
}

// A client that stops reading the markets rail must not delay the engine or the other clients.
func TestSlowStreamClientDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	a := e.start("holder", "fxdesk-web")

	// The slow client sends its request and never reads a byte.
	slow, err := net.Dial("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.addr+"/api/fx/markets/stream?symbols=EURUSD", nil)
	a.authorize(req)
	if err := req.Write(slow); err != nil {
		t.Fatal(err)
	}
	fast := a.stream("EURUSD")

	// A burst far larger than any socket buffer, then a marker quote.
	a.simControl("/control/burst", map[string]any{"symbols": []string{"EURUSD"}, "ticksPerSecond": 50000, "seconds": 1})
	var mu sync.Mutex
	got := 0
	fast.waitFor(t, 10*time.Second, func(ev map[string]any) bool {
		mu.Lock()
		got++
		mu.Unlock()
		return got >= 1000
	})
	// A marker quote must reach the fast client. Under heavy load the fast client can itself be
	// behind the burst and lose an update (each subscriber drops only its own), so a fresh marker
	// is sent each second; all of this stays well inside the slow client's 10 s write deadline,
	// past which a blocked engine would have been released anyway.
	for i := 0; ; i++ {
		bid := 1.2 + float64(i)/10000
		a.simControl("/control/quote", map[string]any{"symbol": "EURUSD", "bid": bid, "ask": bid + 0.0001})
		if waitBriefly(fast, time.Second, bidIs("EURUSD", fmt.Sprintf("%.5f", bid))) {
			return
		}
		if i == 5 {
			t.Fatal("no marker quote reached the fast client in 6 s while a slow client stalled")
		}
	}
}

// waitBriefly reports whether a matching event arrives within d.
func waitBriefly(c *sseClient, d time.Duration, pred func(map[string]any) bool) bool {
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return false
			}
			if pred(ev) {
				return true
			}
		case <-deadline:
			return false
		}
	}
}
