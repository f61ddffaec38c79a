package api

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/desk"
	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/tick"
)

// feed is a price source the test publishes into, as the tick engine would.
type feed struct {
	mu         sync.Mutex
	subs       []chan tick.Update
	subscribed chan struct{} // closed at the first subscription
}

func (f *feed) LastTick(string) (tick.Quote, bool) { return tick.Quote{}, false }
func (f *feed) SymbolState(string) tick.State      { return tick.Quoting }
func (f *feed) Updates([]string) (<-chan tick.Update, func()) {
	ch := make(chan tick.Update, 1024)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	if len(f.subs) == 1 {
		close(f.subscribed)
	}
	f.mu.Unlock()
	return ch, func() {}
}
func (f *feed) publish(symbol string, bid, ask float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		ch <- tick.Update{Symbol: symbol, Quote: tick.Quote{Bid: bid, Ask: ask, ProviderTime: time.UnixMilli(1700000000123)}}
	}
}

func newTestRail(t *testing.T, perToken, perProcess, buffer int) (*Rail, *feed) {
	t.Helper()
	f := &feed{subscribed: make(chan struct{})}
	q := &desk.Quotes{}
	q.SetFollowed(f)
	m := metrics.New("test")
	r := NewRail(RailConfig{Quotes: q, Slots: NewStreamSlots(perToken, perProcess, m), Buffer: buffer, Metrics: m,
		Digits: func(s string) (int, bool) { return 5, s != "NOSUCH" }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		poll.Receive(t, done, 10*time.Second, "the rail's Run returning after its context ended")
	})
	return r, f
}

// waitFeed waits until the rail has subscribed to the source.
func waitFeed(t *testing.T, f *feed) {
	t.Helper()
	select {
	case <-f.subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("the rail never subscribed to the price source")
	}
}

// One quote is formatted once and the same bytes reach every stream of its symbol, and no
// other; a stream of every symbol hears everything.
func TestRailFormatsOnceForEveryStream(t *testing.T) {
	t.Parallel()
	r, f := newTestRail(t, 10, 10, 16)
	a, err := r.subscribe("a", []string{"EURUSD"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := r.subscribe("b", []string{"EURUSD", "USDJPY"})
	c, _ := r.subscribe("c", []string{"USDJPY"})
	all, _ := r.subscribe("d", nil)
	waitFeed(t, f)
	f.publish("EURUSD", 1.085, 1.0851)

	want := "event: quote\ndata: {\"symbol\":\"EURUSD\",\"bid\":\"1.08500\",\"ask\":\"1.08510\",\"t\":1700000000123}\n\n"
	var first []byte
	for _, s := range []*railStream{a, b, all} {
		ev := <-s.events
		if string(ev) != want {
			t.Fatalf("event %q, want %q", ev, want)
		}
		if first == nil {
			first = ev
		} else if &ev[0] != &first[0] {
			t.Fatal("a stream got its own copy of the event: the rail must format once per tick")
		}
	}
	f.publish("USDJPY", 150.1, 150.2)
	if ev := <-c.events; !strings.Contains(string(ev), "USDJPY") {
		t.Fatalf("c got %q", ev)
	}
	select {
	case ev := <-a.events:
		t.Fatalf("a stream of EURUSD got %q", ev)
	default:
	}
}

// A stream that stops reading loses quotes while its buffer is full, and is dropped once it has
// stayed full for slowFor; a stream that keeps up loses nothing and stays.
func TestRailDropsASlowStream(t *testing.T) {
	t.Parallel()
	r, f := newTestRail(t, 10, 10, 4)
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	r.mu.Lock()
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r.mu.Unlock()
	slow, _ := r.subscribe("slow", nil)
	fast, _ := r.subscribe("fast", nil)
	waitFeed(t, f)
	publish := func(n int) {
		for i := range n {
			f.publish("EURUSD", 1+float64(i)/100, 1.1)
			<-fast.events // the rail has offered it to both
		}
	}
	publish(6) // the slow stream's buffer (4) fills, two quotes are lost
	select {
	case <-slow.gone:
		t.Fatal("a stream behind for a moment was dropped")
	default:
	}
	mu.Lock()
	now = now.Add(slowFor)
	mu.Unlock()
	publish(1)
	select {
	case <-slow.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("a stream full for slowFor was not dropped")
	}
	select {
	case <-fast.gone:
		t.Fatal("the stream that kept up was dropped")
	default:
	}
	r.unsubscribe(slow)
	r.unsubscribe(fast)
	if n := r.Open(); n != 0 {
		t.Fatalf("%d streams open after both left", n)
	}
}

// Past the per-token and the per-process caps a stream is refused with ELIMITED; a slot freed is
// a slot again.
func TestStreamsPastEitherCapAreRefusedWithELIMITED(t *testing.T) {
	t.Parallel()
	r, _ := newTestRail(t, 2, 3, 4)
	s1, _ := r.subscribe("a", nil)
	if _, err := r.subscribe("a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.subscribe("a", nil); fx.ErrorCode(err) != fx.ELIMITED || !strings.Contains(fx.ErrorMessage(err), "2 open streams") {
		t.Fatalf("third stream of one token: %v, want ELIMITED naming the cap", err)
	}
	if _, err := r.subscribe("b", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.subscribe("c", nil); fx.ErrorCode(err) != fx.ELIMITED || !strings.Contains(fx.ErrorMessage(err), "most open streams (3)") {
		t.Fatalf("fourth stream of the process: %v, want ELIMITED naming the cap", err)
	}
	r.unsubscribe(s1)
	if _, err := r.subscribe("c", nil); err != nil {
		t.Fatalf("a freed slot was not given again: %v", err)
	}
}

// A token bucket allows its burst, then refuses with the wait until the next token, and refills.
func TestRateLimitsBurstThenRefuse(t *testing.T) {
	t.Parallel()
	l := newRateLimits(5, 10) // 5/s, burst 10
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := range 10 {
		if ok, _ := l.allow("k"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.allow("k")
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("past the burst: ok=%v wait=%s, want a refusal of about 200ms", ok, wait)
	}
	if ok, _ := l.allow("other"); !ok {
		t.Fatal("another key shares the first one's bucket")
	}
	now = now.Add(wait)
	if ok, _ := l.allow("k"); !ok {
		t.Fatal("not allowed again after the wait it named")
	}
	if newRateLimits(0, 10) != nil {
		t.Fatal("a rate of 0 must mean no limit")
	}
	if ok, _ := (*rateLimits)(nil).allow("k"); !ok {
		t.Fatal("no limit refused")
	}
}

// Memory is bounded: past maxKeys, refilled buckets are forgotten.
func TestRateLimitsForgetIdleKeys(t *testing.T) {
	t.Parallel()
	l := newRateLimits(1, 3)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for _, k := range []string{"a", "b", "c"} {
		l.allow(k)
	}
	now = now.Add(time.Hour)
	l.allow("d")
	if len(l.keys) != 1 {
		t.Fatalf("%d keys remembered, want only the new one", len(l.keys))
	}
}

// The per-address limit counts the client behind a trusted proxy, never an address a client
// wrote into X-Forwarded-For itself.
func TestClientAddressIgnoresForgedForwardedFor(t *testing.T) {
	t.Parallel()
	_, lan, _ := net.ParseCIDR("10.0.0.0/8")
	trusted := []*net.IPNet{lan}
	for _, tc := range []struct {
		name, remote, xff string
		trusted           []*net.IPNet
		want              string
	}{
		{"direct", "203.0.113.7:5000", "", trusted, "203.0.113.7"},
		{"direct with a forged header", "203.0.113.7:5000", "1.2.3.4", trusted, "203.0.113.7"},
		{"through the proxy", "10.0.0.2:5000", "198.51.100.9", trusted, "198.51.100.9"},
		{"forged hop before the proxy's", "10.0.0.2:5000", "1.2.3.4, 198.51.100.9", trusted, "198.51.100.9"},
		{"two trusted proxies", "10.0.0.2:5000", "198.51.100.9, 10.0.0.3", trusted, "198.51.100.9"},
		{"no proxies trusted", "10.0.0.2:5000", "198.51.100.9", nil, "10.0.0.2"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := clientAddress(r, tc.trusted); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// Past the cap a connection is answered 503 with Retry-After at once and closed; a closed
// connection frees its slot.
func TestLimitListenerRefusesPastTheCap(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused sync.WaitGroup
	ln := LimitListener(inner, 2, refused.Done)
	closed := make(chan struct{}, 8)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				closed <- struct{}{}
			}
		}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(c net.Conn) *http.Response {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, b := dial(), dial()
	if get(a).StatusCode != 200 || get(b).StatusCode != 200 {
		t.Fatal("connections under the cap were not served")
	}
	refused.Add(1)
	resp := get(dial())
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "most open connections") {
		t.Fatalf("past the cap: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	refused.Wait()
	a.Close()
	// The server notices a's close when its read fails, and closes its side: the slot is free.
	<-closed
	if n := ln.(*limitListener).Open(); n != 1 {
		t.Fatalf("%d connections counted open, want 1", n)
	}
	if get(dial()).StatusCode != 200 {
		t.Fatal("a freed slot was not given to the next connection")
	}
}

// A body is refused before it is read when it announces more than the bound, where it is read
// when it grows past it, and on an API route when it does not say it is JSON.
func TestBodyIsRefusedWhenTooLargeOrNotJSON(t *testing.T) {
	t.Parallel()
	m := metrics.New("test")
	h := bodyRules(slog.New(slog.DiscardHandler), 1024, m)(handle(slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) error {
		var v map[string]any
		if err := decodeStrict(r.Body, &v, false); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	for _, tc := range []struct {
		name, ct, body string
		chunked        bool
		want           int
		says           string
	}{
		{"json", "application/json", `{"a":1}`, false, http.StatusNoContent, ""},
		{"json with charset", "application/json; charset=utf-8", `{"a":1}`, false, http.StatusNoContent, ""},
		{"announced too large", "application/json", `{"a":"` + strings.Repeat("x", 2000) + `"}`, false, http.StatusRequestEntityTooLarge, "at most 1024 bytes"},
		{"grows too large", "application/json", `{"a":"` + strings.Repeat("x", 2000) + `"}`, true, http.StatusRequestEntityTooLarge, "at most 1024 bytes"},
		{"no content type", "", `{"a":1}`, false, http.StatusBadRequest, "needs Content-Type: application/json"},
		{"form", "application/x-www-form-urlencoded", `{"a":1}`, false, http.StatusBadRequest, "is not accepted"},
		{"other charset", "application/json; charset=latin1", `{"a":1}`, false, http.StatusBadRequest, "charset=utf-8"},
	} {
		var body io.Reader = strings.NewReader(tc.body)
		if tc.chunked {
			body = io.MultiReader(body) // hides the length: the request is sent chunked
		}
		r := httptest.NewRequest(http.MethodPost, "/api/fx/orders", body)
		if tc.chunked {
			r.ContentLength = -1
		}
		if tc.ct != "" {
			r.Header.Set("Content-Type", tc.ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, w.Code, w.Body, tc.want, tc.says)
		}
	}
}
