package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/forward"
)

// clusterSecret is FXDESK_CLUSTER_SECRET of every multi-process install the tests start.
const clusterSecret = "a87ff679a2f3e71d9181a67b7542122c1f0e3dadd8fd4ee8f9c2d1b0a3e5c7f9" // as openssl rand -hex 32 prints

// webTier is an install of two web processes sharing one database and one Redis: the holder
// (host box-a) and a follower (host box-b), forwarding on, fed by a test-driven simulator.
type webTier struct {
	t        *testing.T
	d        *tradingDesk // d.web is the current holder
	follower *proc
}

// webTierEnv is the environment of every web process of a web tier; extra entries override it.
func (d *tradingDesk) webTierEnv(host string, extra ...string) []string {
	return append([]string{"FXDESK_FEED=" + d.sim.url, "FXDESK_FEED_KEY=test", "FXDESK_LEASE_TTL=6s", "FXDESK_LEASE_FENCE=2s",
		"FXDESK_WEB_INSTANCES=2", "FXDESK_CLUSTER_SECRET=" + clusterSecret, "FXDESK_HOSTNAME=" + host}, extra...)
}

func newWebTier(t *testing.T, extra ...string) *webTier {
	t.Helper()
	return newWebTierOn(t, newDeskEnv(t), extra...)
}

// newWebTierOn starts a web tier as install e (newDeskEnvOn: a Redis server shared with others).
func newWebTierOn(t *testing.T, e *deskEnv, extra ...string) *webTier {
	t.Helper()
	sim := startFeedSim(t)
	d := &tradingDesk{e: e, sim: sim}
	d.web = e.start("holder", "fxdesk-web", d.webTierEnv("box-a", extra...)...)
	d.web.waitLog(10*time.Second, msgHas("role: holder"))
	d.web.waitLog(10*time.Second, msgIs(msgRiskWatching)) // a holder refuses fills until then
	d.admin = e.adminToken()
	f := e.start("follower", "fxdesk-web", d.webTierEnv("box-b", extra...)...)
	f.waitLog(10*time.Second, msgHas("role: follower"))
	return &webTier{t: t, d: d, follower: f}
}

// nginxBinary finds Debian's nginx (scripts/nginx.sh installs it) or skips the test.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Skip("nginx is not installed and could not be (scripts/nginx.sh installs Debian's nginx-light with apt): the reverse-proxy tests need a real one")
	return ""
}

// startNginx runs a private nginx — its own prefix, config and logs, on a free loopback port —
// balancing round-robin over upstreams, and returns it as a proc the call helpers can address.
// It never retries a request at the other upstream once one has been sent (proxy_next_upstream
// covers connection errors only, and never a POST), so what a test sees is what one process said.
func startNginx(t *testing.T, upstreams ...*proc) *proc {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var servers strings.Builder
	for _, u := range upstreams {
		fmt.Fprintf(&servers, "    server %s max_fails=0;\n", u.addr)
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
user root root;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream fxdesk {
%[2]s    keepalive 64;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://fxdesk;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      # The markets rail is server-sent events: pass each event on as it comes.
      proxy_buffering off;
      proxy_read_timeout 1h;
      proxy_next_upstream error;
    }
  }
}
`, dir, servers.String(), addr)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := exec.Command(bin, "-t", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("--- nginx error.log ---\n%s", b)
		}
	})
	// nginx says nothing when it is ready: poll its port.
	eventually(t, 10*time.Second, 20*time.Millisecond, "nginx listening on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return &proc{t: t, name: "nginx", addr: addr}
}

// tradeCycle opens, modifies, partially closes and closes one 1-lot EURUSD buy, and places and
// cancels one resting order, every request sent to via. At a constant 1.10000/1.10020 each cycle
// costs 27.00: commission 7.00, then 0.0002 × 100,000 on the lot, closed in two parts.
func (w *webTier) tradeCycle(via *proc, tok string, acct int64, nonce string) {
	t := w.t
	t.Helper()
	var o orderResp
	must(t, via, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1.00","sl":"1.09000","requestNonce":%q}`, acct, nonce), http.StatusCreated, &o)
	if o.Order.Status != "FILLED" || o.Position == nil {
		t.Fatalf("open via %s = %+v", via.name, o)
	}
	pos := fmt.Sprintf("/api/fx/positions/%d", o.Position.ID)
	var mod struct{ Position positionJSON }
	must(t, via, tok, "PATCH", pos, `{"sl":"1.09500","tp":"1.12000"}`, http.StatusOK, &mod)
	if mod.Position.SL == nil || *mod.Position.SL != "1.095" || mod.Position.TP == nil {
		t.Fatalf("modify via %s = %+v", via.name, mod.Position)
	}
	var c closeResp
	must(t, via, tok, "POST", pos+"/close", `{"volume":"0.40"}`, http.StatusOK, &c)
	if c.Deal.Amount != "-8.00" || c.Position.Volume != "0.6" || c.Position.Status != "OPEN" {
		t.Fatalf("partial close via %s = %+v", via.name, c)
	}
	must(t, via, tok, "POST", pos+"/close", "", http.StatusOK, &c)
	if c.Deal.Amount != "-12.00" || c.Position.Status != "CLOSED" {
		t.Fatalf("close via %s = %+v", via.name, c)
	}
	var lim orderResp
	must(t, via, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","price":"1.05000","volume":"0.10","requestNonce":%q}`, acct, nonce+"-limit"), http.StatusCreated, &lim)
	must(t, via, tok, "DELETE", fmt.Sprintf("/api/fx/orders/%d", lim.Order.ID), "", http.StatusOK, nil)
}

// Behind a real nginx balancing round-robin over the holder and a follower, a trader's open,
// modify, partial close, close and cancel all succeed whichever process answers; and the same
// cycle sent to each process directly does too. The ledger stays whole.
func TestWebTierBehindNginx(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	edge := startNginx(t, w.d.web, w.follower)
	tok, acct := w.d.newTrader(700, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	for i, via := range []*proc{edge, edge, w.follower, w.d.web} {
		w.tradeCycle(via, tok, acct, fmt.Sprintf("tier-%d", i))
	}
	// From a follower a withdrawal is always forwarded: only the holder prices open positions.
	must(t, edge, tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"92.00","requestNonce":"tier-w"}`, http.StatusCreated, nil)
	must(t, w.follower, tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"92.00","requestNonce":"tier-w"}`, http.StatusOK, nil)
	w.d.checkLedger(acct, "9800.00") // 10000 − 4 × 27 − 92

	// The row advertises the holder's own address, and both processes report it.
	for _, p := range []*proc{w.d.web, w.follower} {
		var s struct {
			Holder struct {
				Row struct {
					AdvertiseURL string `json:"advertiseUrl"`
				} `json:"row"`
			} `json:"holder"`
		}
		if code := p.getAs(w.d.admin, "/api/admin/fx/desk", &s); code != http.StatusOK || s.Holder.Row.AdvertiseURL != "http://"+w.d.web.addr {
			t.Fatalf("%s desk: %d advertiseUrl %q, want http://%s", p.name, code, s.Holder.Row.AdvertiseURL, w.d.web.addr)
		}
	}
}

// The same requestNonce sent to both processes at the same instant opens one position: the
// follower's copy is forwarded, and the holder's nonce decides between the two.
func TestWebTierSameNonceOnBothProcessesOpensOnce(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	tok, acct := w.d.newTrader(710, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	for round := range 5 {
		body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":"both-%d"}`, acct, round)
		var wg sync.WaitGroup
		codes := make([]int, 2)
		ids := make([]int64, 2)
		start := make(chan struct{})
		for i, p := range []*proc{w.d.web, w.follower} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				code, b := call(t, p, tok, "POST", "/api/fx/orders", body)
				var o orderResp
				json.Unmarshal(b, &o)
				codes[i] = code
				if o.Position != nil {
					ids[i] = o.Position.ID
				}
			}()
		}
		close(start)
		wg.Wait()
		if !(codes[0] == 201 && codes[1] == 200 || codes[0] == 200 && codes[1] == 201) || ids[0] != ids[1] || ids[0] == 0 {
			t.Fatalf("round %d: holder %d position %d, follower %d position %d; want one 201 and one replay of the same position", round, codes[0], ids[0], codes[1], ids[1])
		}
	}
	var ps struct{ Positions []positionJSON }
	must(t, w.d.web, tok, "GET", fmt.Sprintf("/api/fx/positions?accountId=%d", acct), "", http.StatusOK, &ps)
	if len(ps.Positions) != 5 {
		t.Fatalf("%d positions after five doubled submits, want 5", len(ps.Positions))
	}
}

// A client cannot pass itself off as a web process: a node header sent through nginx — made up,
// or signed with another secret — is refused with 403 and nothing is written.
func TestWebTierForgedNodeHeaderIsRefused(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	edge := startNginx(t, w.d.web, w.follower)
	tok, acct := w.d.newTrader(720, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	h, _ := w.d.e.row()
	other, err := forward.NewSigner("c4ca4238a0b923820dcc509a6f75849bc81e728d9d4c2f636f067f89cc14862c", nil) // another install's
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct)
	for _, forged := range []string{
		"term=" + strconv.FormatInt(h.Term, 10) + ";ts=" + strconv.FormatInt(time.Now().UnixMilli(), 10) + ";nonce=00112233445566778899aabbccddeeff;sig=00ff",
		other.Sign(forward.Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(body)}, h.Term),
	} {
		for range 2 { // round-robin: both processes see it
			req, _ := http.NewRequest("POST", "http://"+edge.addr+"/api/fx/orders", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set(forward.Header, forged)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("forged %q = %d, want 403", forged, resp.StatusCode)
			}
		}
	}
	w.d.checkLedger(acct, "10000.00")
	var ps struct{ Positions []positionJSON }
	must(t, w.d.web, tok, "GET", "/api/fx/positions", "", http.StatusOK, &ps)
	if len(ps.Positions) != 0 {
		t.Fatalf("a forged request opened %d positions", len(ps.Positions))
	}
}

// A forward loop is impossible: with the holder (mis)advertising a follower's address, a
// follower's forward reaches that follower, which refuses it (it does not serve the term) and
// never forwards again; the first follower looks at the row once more, finds the same holder,
// and answers 503 with the pricing text and Retry-After.
func TestWebTierForwardLoopIsImpossible(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	sim := startFeedSim(t)
	d := &tradingDesk{e: e, sim: sim}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f2Addr := ln.Addr().String()
	ln.Close()
	d.web = e.start("holder", "fxdesk-web", d.webTierEnv("box-a", "FXDESK_ADVERTISE_URL=http://"+f2Addr)...)
	d.web.waitLog(10*time.Second, msgHas("role: holder"))
	d.web.waitLog(10*time.Second, msgIs(msgRiskWatching)) // a holder refuses fills until then
	d.admin = e.adminToken()
	f1 := e.start("follower-1", "fxdesk-web", d.webTierEnv("box-b")...)
	f2 := e.start("follower-2", "fxdesk-web", d.webTierEnv("box-c", "FXDESK_HTTP_ADDR="+f2Addr)...)
	tok, acct := d.newTrader(730, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	code, b := callHeaders(t, f1, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct))
	var er errorResp
	json.Unmarshal(b.body, &er)
	if code != http.StatusServiceUnavailable || er.Error.Message != "Pricing is temporarily unavailable for this instrument — please retry shortly" || b.header.Get("Retry-After") == "" {
		t.Fatalf("loop = %d %s Retry-After %q", code, b.body, b.header.Get("Retry-After"))
	}
	// Both processes log before they answer, but the test reads their logs behind them. Follower-1
	// logs its 503 after every hop of the request, a refusal of its own in a cycle included.
	refused := msgHas("forwarded request refused")
	f1.waitLog(5*time.Second, msgHas("forward: no holder took the request"))
	if n := f1.countLog(refused); n != 0 {
		t.Fatalf("follower-1 was forwarded to %d times: a cycle", n)
	}
	// Follower-2 is sent a forward for a term nobody holds after the request: once its refusal is
	// read, every earlier one is too.
	const barrierTerm = 99
	signer, err := forward.NewSigner(clusterSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+f2.addr+"/api/fx/orders", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(forward.Header, signer.Sign(forward.Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(`{}`)}, barrierTerm))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f2.waitLog(5*time.Second, func(l logLine) bool { return refused(l) && l["term"] == float64(barrierTerm) })
	if n := f2.countLog(func(l logLine) bool { return refused(l) && l["term"] != float64(barrierTerm) }); n != 1 {
		t.Fatalf("follower-2 refused %d forwarded requests, want exactly 1", n)
	}
	d.checkLedger(acct, "10000.00")
}

type answer struct {
	header http.Header
	body   []byte
}

// callHeaders is call that also returns the response headers.
func callHeaders(t *testing.T, p *proc, token, method, path, body string) (int, answer) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	a.header = resp.Header
	a.body, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, a
}

// The holder is SIGKILLed while the follower forwards: the follower answers 503 with the pricing
// text and Retry-After (the row still names the dead holder, which no longer answers), and as
// soon as a replacement holds the lease — on the same host it reclaims at once, the old pid being
// dead — forwarding resumes to it.
func TestWebTierHolderKilledThenReplaced(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	tok, acct := w.d.newTrader(740, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	order := func(nonce string) string {
		return fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":%q}`, acct, nonce)
	}
	must(t, w.follower, tok, "POST", "/api/fx/orders", order("k-1"), http.StatusCreated, nil)

	w.d.web.stop(syscall.SIGKILL)
	code, a := callHeaders(t, w.follower, tok, "POST", "/api/fx/orders", order("k-2"))
	var er errorResp
	json.Unmarshal(a.body, &er)
	if code != http.StatusServiceUnavailable || er.Error.Message != "Pricing is temporarily unavailable for this instrument — please retry shortly" || a.header.Get("Retry-After") == "" {
		t.Fatalf("with the holder dead = %d %s Retry-After %q", code, a.body, a.header.Get("Retry-After"))
	}

	w.d.web = w.d.e.start("replacement", "fxdesk-web", w.d.webTierEnv("box-a")...)
	w.d.web.waitLog(10*time.Second, msgHas("role: holder"))
	w.d.web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, w.follower, tok, "POST", "/api/fx/orders", order("k-2"), http.StatusCreated, &o)
	if o.Replayed {
		t.Fatal("the refused submit had opened a position")
	}
	w.d.checkLedger(acct, "9998.60") // two 0.10-lot commissions of 0.70
}

// A follower shows the holder's prices: its markets rail streams the holder's ticks (also through
// nginx), and /quotes and /symbols answer QUOTING with the holder's bid/ask and an age measured on
// the holder's clock. Those prices are for display: the follower's own gate stays shut, and its
// desk-priced requests go to the holder (TestWebTierBehindNginx).
func TestWebTierFollowerStreamsTheHoldersPrices(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	edge := startNginx(t, w.follower) // the rail through a real reverse proxy, on the follower
	tok, _ := w.d.newTrader(750, "USD", "100", "10000.00")

	for i, via := range []*proc{w.follower, edge} {
		bid := fmt.Sprintf("1.1%d000", i+1)
		ask := fmt.Sprintf("1.1%d020", i+1)
		railSees(t, via, tok, func() { w.d.simQuote("EURUSD", bid, ask) }, "EURUSD", bid, ask)
		var qs struct {
			Quotes []struct {
				Symbol, State, Bid, Ask string
				AgeMs                   *int64 `json:"ageMs"`
			}
		}
		must(t, w.follower, tok, "GET", "/api/fx/quotes?symbols=EURUSD", "", http.StatusOK, &qs)
		if len(qs.Quotes) != 1 || qs.Quotes[0].State != "QUOTING" || qs.Quotes[0].Bid != bid || qs.Quotes[0].Ask != ask || qs.Quotes[0].AgeMs == nil || *qs.Quotes[0].AgeMs > 5000 {
			t.Fatalf("follower quotes = %+v", qs.Quotes)
		}
	}
	var syms struct {
		Symbols []struct{ Symbol, State string }
	}
	must(t, w.follower, tok, "GET", "/api/fx/symbols", "", http.StatusOK, &syms)
	for _, s := range syms.Symbols {
		if s.Symbol == "EURUSD" && s.State != "QUOTING" {
			t.Fatalf("follower symbols: EURUSD %s", s.State)
		}
	}
}

// railSees opens p's markets rail for symbol, runs move once the rail has greeted, and returns
// when the rail shows bid/ask.
func railSees(t *testing.T, p *proc, tok string, move func(), symbol, bid, ask string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/fx/markets/stream?symbols="+symbol, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s markets rail = %d", p.name, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatalf("%s markets rail closed before its greeting", p.name)
	}
	move()
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Symbol, Bid, Ask string }
		json.Unmarshal([]byte(line), &ev)
		if ev.Symbol == symbol && ev.Bid == bid && ev.Ask == ask {
			return
		}
	}
	t.Fatalf("%s markets rail never showed %s %s/%s", p.name, symbol, bid, ask)
}

// recordingHop stands where the holder's advertised URL points and passes every forward on to the
// holder, keeping the node header and body of the last one: what anyone on the network between
// two web processes could capture.
type recordingHop struct {
	srv      *httptest.Server
	mu       sync.Mutex
	header   string
	body     []byte
	forwards int
}

func newRecordingHop(t *testing.T, holderAddr string) *recordingHop {
	h := &recordingHop{}
	target := &url.URL{Scheme: "http", Host: holderAddr}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.header, h.body = r.Header.Get(forward.Header), b
		h.forwards++
		h.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *recordingHop) last() (header string, body []byte, forwards int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.header, h.body, h.forwards
}

// Between real processes: a node header captured on its way from the follower to the holder is
// accepted once — sent again with the same body, another body or another query it is refused
// (403, logged at warn with the reason) and the ledger shows the one order. An oversized body
// answers the same 413 on the follower (nothing forwarded) and on the holder. A follower whose
// secret differs logs why at error and answers its trader 503; neither process logs a secret or
// a signature.
func TestWebTierNodeHeaderIsAcceptedOnce(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	sim := startFeedSim(t)
	d := &tradingDesk{e: e, sim: sim}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	holderAddr := ln.Addr().String()
	ln.Close()
	hop := newRecordingHop(t, holderAddr)
	d.web = e.start("holder", "fxdesk-web", d.webTierEnv("box-a", "FXDESK_HTTP_ADDR="+holderAddr, "FXDESK_ADVERTISE_URL="+hop.srv.URL)...)
	d.web.waitLog(10*time.Second, msgHas("role: holder"))
	d.web.waitLog(10*time.Second, msgIs(msgRiskWatching)) // a holder refuses fills until then
	d.admin = e.adminToken()
	follower := e.start("follower", "fxdesk-web", d.webTierEnv("box-b")...)
	const otherSecret = "1679091c5a880faf6fb5e6087eb1b2dc8f14e45fceea167a5a36dedd4bea2543"
	stranger := e.start("stranger", "fxdesk-web", d.webTierEnv("box-c", "FXDESK_CLUSTER_SECRET="+otherSecret)...)
	tok, acct := d.newTrader(740, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	order := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":"once-1"}`, acct)
	if code, b := call(t, follower, tok, "POST", "/api/fx/orders", order); code != http.StatusCreated {
		t.Fatalf("order via the follower = %d %s", code, b)
	}
	captured, body, _ := hop.last()
	if captured == "" || string(body) != order {
		t.Fatalf("the hop captured header %q body %q", captured, body)
	}
	other := strings.Replace(order, "once-1", "once-2", 1)
	for _, tc := range []struct{ name, path, body, reason string }{
		{"the same body", "/api/fx/orders", order, forward.RefusalReplayed},
		{"another body", "/api/fx/orders", other, forward.RefusalSignature},
		{"another query", "/api/fx/orders?accountId=1", order, forward.RefusalSignature},
	} {
		req, _ := http.NewRequest("POST", "http://"+d.web.addr+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(forward.Header, captured)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(forward.RefusedHeader) != tc.reason {
			t.Errorf("captured header with %s = %d %s (%s %q), want 403 %s", tc.name, resp.StatusCode, b, forward.RefusedHeader, resp.Header.Get(forward.RefusedHeader), tc.reason)
		}
		d.web.waitLog(5*time.Second, func(l logLine) bool {
			return l.msg() == "node header refused" && l.level() == "WARN" && l["reason"] == tc.reason && l["path"] == "/api/fx/orders"
		})
	}
	d.checkLedger(acct, "9999.30") // the one order's commission, nothing replayed

	// An oversized body: the same 413 from the follower, which forwards nothing, and from the
	// holder reading a forward signed over it.
	big := `{"requestNonce":"` + strings.Repeat("x", 70_000) + `"}`
	_, _, forwardsBefore := hop.last()
	code, fromFollower := call(t, follower, tok, "POST", "/api/fx/orders", big)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body on the follower = %d %s", code, fromFollower)
	}
	h, _ := e.row()
	signer, err := forward.NewSigner(clusterSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+d.web.addr+"/api/fx/orders", strings.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forward.Header, signer.Sign(forward.Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(big)}, h.Term))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	fromHolder, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(fromHolder) != string(fromFollower) || !strings.Contains(string(fromHolder), "65536 bytes") {
		t.Fatalf("oversized body: holder %d %s, follower %s", resp.StatusCode, fromHolder, fromFollower)
	}
	if _, _, n := hop.last(); n != forwardsBefore {
		t.Fatalf("the follower forwarded an oversized body")
	}

	// A follower with another secret: its trader gets 503, it says why at error, the holder at warn.
	code, a := callHeaders(t, stranger, tok, "POST", "/api/fx/orders", strings.Replace(order, "once-1", "once-3", 1))
	if code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("order via a follower with another secret = %d %s", code, a.body)
	}
	l := stranger.waitLog(5*time.Second, msgHas("forward refused by the holder"))
	if l.level() != "ERROR" || l["reason"] != forward.RefusalSignature || !strings.Contains(fmt.Sprint(l["fix"]), "FXDESK_CLUSTER_SECRET") {
		t.Fatalf("the follower with another secret logged %v", l)
	}
	d.checkLedger(acct, "9999.30")
	for _, p := range []*proc{d.web, follower, stranger} {
		for _, line := range p.rawLines() {
			if strings.Contains(line, clusterSecret) || strings.Contains(line, otherSecret) || strings.Contains(line, "sig=") {
				t.Errorf("%s logged a secret or a signature: %s", p.name, line)
			}
		}
	}
}
