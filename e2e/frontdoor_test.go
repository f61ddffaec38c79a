package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The front door (docs/architecture.md, «The front door»), end to end against the real holder on
// one processor: one trader token opening 2,000 markets-rail streams, then anonymous connections
// past the process's cap. The holder's own work must keep its timing — read from its own metrics
// and logs — another trader must still trade and be stopped out through a gap, and everything past
// a cap must be refused with a clear answer. The latency figures are TestBenchFrontDoor's, not this
// test's.
func TestFrontDoorStreamAndConnectionAttack(t *testing.T) {
	t.Parallel()
	const maxConns, streamsPerToken, idle = 400, 8, 500
	d := newTradingDesk(t, "GOMAXPROCS=1", "FXDESK_MAX_CONNS="+strconv.Itoa(maxConns), "FXDESK_STREAMS_PER_TOKEN="+strconv.Itoa(streamsPerToken),
		"FXDESK_HTTP_READ_TIMEOUT=3s", "FXDESK_TRUSTED_PROXIES=127.0.0.1")
	waitRiskReady(d.web)
	attacker := d.e.issueToken(2300, false)
	tok, acct := d.newTrader(2301, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	sl := d.openMarket(tok, acct, "BUY", "0.10", `,"sl":"1.09500"`)
	renewsBefore := renewCount(d.web.metrics(), "ok")

	// Phase 1: 2,000 streams of every symbol from one token, 200 connections at a time. The
	// attacker comes through the trusted proxy as another address than the trader's.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attack := &streamOpener{ctx: ctx, tr: &http.Transport{MaxConnsPerHost: 200, MaxIdleConnsPerHost: 200}, addr: d.web.addr}
	defer attack.tr.CloseIdleConnections()
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		noRetry  int
		wg       sync.WaitGroup
	)
	for range 2000 {
		wg.Go(func() {
			code, retryAfter := attack.open(attacker, "203.0.113.66")
			mu.Lock()
			statuses[code]++
			if code == http.StatusTooManyRequests && retryAfter == "" {
				noRetry++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[http.StatusOK] != streamsPerToken || statuses[http.StatusTooManyRequests] != 2000-streamsPerToken || noRetry > 0 {
		t.Fatalf("2,000 streams of one token answered %v (%d 429s without Retry-After), want %d accepted and every other one 429",
			statuses, noRetry, streamsPerToken)
	}

	// With the streams held open, the other trader still trades, and a gap through a stop is
	// still closed at the market.
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"SELL","type":"MARKET","volume":"0.10"}`, acct), http.StatusCreated, &o)
	d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
	wantClose(t, "gapped buy under the stream attack", d.waitClosed(sl), "SL", "1.08000")

	// Phase 2: anonymous connections that never send a byte, past the cap. The trader keeps a
	// connection it opened before, as a live client does.
	attack.tr.CloseIdleConnections()
	warm := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
	getAccounts := func() int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.web.addr+"/api/fx/accounts", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := warm.Do(req)
		if err != nil {
			t.Fatalf("the trader's own connection: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := getAccounts(); code != http.StatusOK {
		t.Fatalf("accounts before the flood = %d", code)
	}
	refused := make(chan bool, idle)
	for range idle {
		go func() {
			c, err := net.Dial("tcp", d.web.addr)
			if err != nil {
				refused <- false
				return
			}
			defer c.Close()
			// A connection past the cap is answered at once; one under it hears nothing until
			// the header deadline closes it.
			line, _ := bufio.NewReader(c).ReadString('\n')
			refused <- strings.HasPrefix(line, "HTTP/1.1 503")
		}()
	}
	turnedAway := 0
	for range idle {
		if <-refused {
			turnedAway++
		}
	}
	if turnedAway < idle-maxConns {
		t.Fatalf("%d of %d idle connections were refused, want at least %d past the cap of %d", turnedAway, idle, idle-maxConns, maxConns)
	}
	if code := getAccounts(); code != http.StatusOK {
		t.Fatalf("the trader's reads after the flood = %d", code)
	}

	// The holder's own work kept its timing: at least two renews since the attack began and none
	// failed; the gate never shut; nothing was dropped; the lease was never distrusted.
	eventually(t, 20*time.Second, 100*time.Millisecond, "two renews since the attack began", func() bool {
		return renewCount(d.web.metrics(), "ok") >= renewsBefore+2
	})
	m := d.web.metrics()
	if n := renewCount(m, "failed") + renewCount(m, "lost"); n != 0 {
		t.Fatalf("%d renews failed or lost under the attack", n)
	}
	if v, _ := metricValue(m, "fxdesk_lease_held"); v != "1" {
		t.Fatalf("fxdesk_lease_held = %q after the attack", v)
	}
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "fxdesk_gate_dropped_total{") && !strings.HasSuffix(line, " 0") {
			t.Fatalf("the gate dropped work under the attack: %s", line)
		}
	}
	for _, bad := range []string{"engine lease renew failed", "lease not confirmed past its trust window", "work not executed"} {
		if l, ok := d.web.findLog(msgHas(bad)); ok {
			t.Fatalf("the holder logged %q under the attack: %v", bad, l)
		}
	}
	for reason, atLeast := range map[string]int{"streams_token": 1, "connections": idle - maxConns} {
		v, _ := metricValue(m, `fxdesk_http_refused_total{reason="`+reason+`"}`)
		if n, _ := strconv.Atoi(v); n < atLeast {
			t.Fatalf(`fxdesk_http_refused_total{reason=%q} = %q, want at least %d`, reason, v, atLeast)
		}
	}
	cancel()
	attack.held.Wait()
}

// renewCount is fxdesk_lease_renew_seconds_count for outcome (0 when never observed).
func renewCount(metrics, outcome string) int {
	v, _ := metricValue(metrics, `fxdesk_lease_renew_seconds_count{outcome="`+outcome+`"}`)
	n, _ := strconv.Atoi(v)
	return n
}

// Each door's refusal, end to end on the real holder: what is refused says why, and leaves the
// database exactly as it was.
func TestFrontDoorRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t, "FXDESK_HTTP_READ_TIMEOUT=2s", "FXDESK_RATE_PER_TOKEN=5", "FXDESK_METRICS_ADDR=127.0.0.1:0")
	waitRiskReady(d.web)
	tok, acct := d.newTrader(2400, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	other := d.e.issueToken(2401, false)
	// A trader's token of its own, so these requests do not spend tok's rate (5/s here); its
	// orders would name another user's account, but none gets past the body's checks.
	bodies := d.e.issueToken(2402, false)
	before := d.snapshot()
	order := fmt.Sprintf(`"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"`, acct)

	send := func(contentType, body string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.web.addr+"/api/fx/orders", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bodies)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		says                    string
	}{
		// {"accountId":2,"accountId":1} would trade account 1 under encoding/json's last-wins.
		{"duplicate key", "application/json", `{"accountId":999999,` + order + `}`, 400, `Duplicate key \"accountId\"`},
		{"key in another case", "application/json", `{"AccountId":1,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, 400, "keys are case-sensitive"},
		{"data after the object", "application/json", `{` + order + `}` + strings.Repeat(" ", 70_000) + `{}`, 413, "at most 65536 bytes"},
		{"trailing object", "application/json", `{` + order + `} {}`, 400, "nothing after it"},
		{"no Content-Type", "", `{` + order + `}`, 400, "Content-Type: application/json"},
		{"a form", "application/x-www-form-urlencoded", `{` + order + `}`, 400, "is not accepted"},
		{"oversized body", "application/json", `{"requestNonce":"` + strings.Repeat("x", 100_000) + `"}`, 413, "at most 65536 bytes"},
	} {
		status, _, body := send(tc.contentType, tc.body)
		if status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, status, body, tc.status, tc.says)
		}
	}

	// A body trickled a byte at a time is cut at the read deadline (2 s here): the connection is
	// closed under it, and nothing it carried is done.
	c, err := net.Dial("tcp", d.web.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{` + order + `}`
	fmt.Fprintf(c, "POST /api/fx/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", tok, len(body))
	cut := make(chan error, 1)
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < len(body)-1; i++ { // never the last byte
			<-tick.C
			if _, err := c.Write([]byte{body[i]}); err != nil {
				cut <- err
				return
			}
		}
		cut <- nil
	}()
	// ReadAll returns when the server closes the connection; the client's own deadline only
	// turns a server that never cuts into a failure instead of a hang.
	c.SetReadDeadline(time.Now().Add(time.Minute))
	reply, _ := io.ReadAll(c)
	if err := <-cut; err == nil && len(body) > 20 {
		// The writer finished before the cut only if the deadline never came.
		t.Fatalf("a trickled body was read to its last byte but one; the server answered %q", reply)
	}

	// A token past its rate: 429 with Retry-After, naming the token; its streams past their cap
	// likewise (covered by TestFrontDoorStreamAndConnectionAttack).
	var limited *http.Response
	for range 50 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.web.addr+"/api/fx/accounts", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited = resp
			break
		}
	}
	if limited == nil || limited.Header.Get("Retry-After") == "" {
		t.Fatalf("50 requests at once from a token limited to 5/s (burst 10) were never refused with Retry-After: %v", limited)
	}

	// /metrics needs the admin token on the API listener, and is served without one on
	// FXDESK_METRICS_ADDR.
	if code, _ := call(t, d.web, "", "GET", "/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token = %d, want 401", code)
	}
	// Another trader's token: tok has just spent its rate.
	if code, _ := call(t, d.web, other, "GET", "/metrics", ""); code != http.StatusForbidden {
		t.Fatalf("/metrics with a trader's token = %d, want 403", code)
	}
	l := d.web.waitLog(5*time.Second, msgIs("metrics listening (no token)"))
	resp, err := http.Get("http://" + l["addr"].(string) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics on FXDESK_METRICS_ADDR = %d", resp.StatusCode)
	}

	if after := d.snapshot(); !maps.Equal(before, after) {
		t.Fatalf("refused requests changed the database:\nbefore %v\nafter  %v", before, after)
	}
}

// streamOpener asks for markets-rail streams of every symbol through tr, and holds each one
// accepted, read as a client reads it, until ctx ends; held waits for them to close.
type streamOpener struct {
	ctx  context.Context
	tr   *http.Transport
	addr string // the holder's
	held sync.WaitGroup
}

// open asks for one stream for tok from the client address from (through the trusted proxy) and
// returns the answer's status (0 when there was none) and its Retry-After.
func (s *streamOpener) open(tok, from string) (int, string) {
	req, _ := http.NewRequestWithContext(s.ctx, http.MethodGet, "http://"+s.addr+"/api/fx/markets/stream", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Forwarded-For", from)
	resp, err := s.tr.RoundTrip(req)
	if err != nil {
		return 0, ""
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	s.held.Go(func() {
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
	})
	return http.StatusOK, ""
}
