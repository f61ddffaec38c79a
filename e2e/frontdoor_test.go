package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The front door (issue 23), end to end against the real holder on one processor: one trader
// token opening 2,000 markets-rail streams, then anonymous connections past the process's cap.
// The holder's own work must keep its timing — read from its own metrics and logs — another
// trader must still trade and be stopped out through a gap, and everything past a cap must be
// refused with a clear answer. The latency figures are TestBenchFrontDoor's, not this test's.
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
