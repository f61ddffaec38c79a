package forward_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/forward"
	"fxdesk/internal/fx"
	"fxdesk/internal/lease"
)

// secret is what `openssl rand -hex 32` prints; otherSecret is another install's.
const (
	secret      = "5d41402abc4b2a76b9719d911017c592a3f4e1c2b7d8e9f0a1b2c3d4e5f60718"
	otherSecret = "9e107d9d372bb6826bd81d3542a419d6c0ffee1234567890abcdef0fedcba987"
)

func signer(t *testing.T) *forward.Signer {
	t.Helper()
	s, err := forward.NewSigner(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fail writes errors the way the API's one error table does, closely enough for these tests.
func fail(w http.ResponseWriter, _ *http.Request, err error) {
	status := map[string]int{fx.EUNAVAILABLE: 503, fx.EUNKNOWN: 504, fx.EFORBIDDEN: 403, fx.EINVALID: 400, fx.ETOOLARGE: 413}[fx.ErrorCode(err)]
	if status == 0 {
		status = 500
	}
	if status == 503 {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": fx.ErrorCode(err), "message": fx.ErrorMessage(err)}})
}

// node is one web process as far as forwarding goes: Edge, then Desk around a handler that
// answers who served the request. raw counts every request that reached it, before Edge, and
// lastHeader is the node header the last one carried (what an eavesdropper between the
// processes would capture).
type node struct {
	name       string
	term       atomic.Int64
	serving    atomic.Bool
	row        func() (lease.Holder, bool, error)
	served     atomic.Int64
	raw        atomic.Int64
	lastHeader atomic.Value // string
	logs       *syncBuffer
	srv        *httptest.Server
	url        string
}

// bodyLimit is every test node's FXDESK_BODY_LIMIT_BYTES.
const bodyLimit = 1024

func newNode(t *testing.T, name string, row func() (lease.Holder, bool, error), opts ...func(*forward.Config)) *node {
	t.Helper()
	n := &node{name: name, row: row, logs: &syncBuffer{}}
	n.lastHeader.Store("")
	log := slog.New(slog.NewJSONHandler(n.logs, nil))
	cfg := forward.Config{
		Signer:     signer(t),
		Self:       func() (int64, bool) { return n.term.Load(), n.serving.Load() },
		InstanceID: name,
		Holder:     func(context.Context) (lease.Holder, bool, error) { return n.row() },
		MaxAge:     time.Hour, // only a failed forward reads the row again
		BodyLimit:  bodyLimit,
		Timeout:    time.Minute,
		InFlight:   16,
		Log:        log,
	}
	for _, o := range opts {
		o(&cfg)
	}
	f, err := forward.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := forward.Edge(f, log, fail)(f.Desk(fail)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.served.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Served-By", n.name)
		w.WriteHeader(http.StatusCreated)
		w.Write(append([]byte(r.Header.Get("Authorization")+" "), b...))
	})))
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.raw.Add(1)
		n.lastHeader.Store(r.Header.Get(forward.Header))
		h.ServeHTTP(w, r)
	}))
	n.url = n.srv.URL
	t.Cleanup(n.srv.Close)
	return n
}

// syncBuffer is a log sink the test reads while the server writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// logged returns the log lines whose msg contains msg, decoded.
func (n *node) logged(msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(n.logs.String()) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && strings.Contains(fmt.Sprint(l["msg"]), msg) {
			out = append(out, l)
		}
	}
	return out
}

// orderBody is what post sends.
const orderBody = `{"volume":"0.10"}`

func post(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	return send(t, "POST", url+"/api/fx/orders", orderBody, header...)
}

// send sends one request with the trader's token and the given headers, and reads the answer.
func send(t *testing.T, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer trader")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// rowOf is a mutable lease row shared by the nodes of one test.
type rowOf struct {
	mu    sync.Mutex
	h     lease.Holder
	reads atomic.Int64
}

func (r *rowOf) set(h lease.Holder) { r.mu.Lock(); r.h = h; r.mu.Unlock() }
func (r *rowOf) read() (lease.Holder, bool, error) {
	r.reads.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h, r.h.Term != 0, nil
}

// A follower forwards to the holder the row advertises: the trader's token and body arrive
// unchanged, the holder serves it, and the follower serves nothing itself.
func TestFollowerForwardsToTheAdvertisedHolder(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(7)
	holder.serving.Store(true)
	follower := newNode(t, "follower", row.read)
	row.set(lease.Holder{InstanceID: "holder", Term: 7, Live: true, AdvertiseURL: holder.url})

	resp, body := post(t, follower.url)
	if resp.StatusCode != 201 || resp.Header.Get("Served-By") != "holder" || body != `Bearer trader {"volume":"0.10"}` {
		t.Fatalf("forward = %d %q by %q", resp.StatusCode, body, resp.Header.Get("Served-By"))
	}
	if follower.served.Load() != 0 || holder.served.Load() != 1 {
		t.Fatalf("served: follower %d, holder %d", follower.served.Load(), holder.served.Load())
	}
	if got := resp.Header.Get(forward.ForwardedHeader); got != "7" {
		t.Errorf("%s = %q, want the term forwarded for, 7", forward.ForwardedHeader, got)
	}
}

// orderReq is what a node header for post's request covers.
var orderReq = forward.Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(orderBody)}

// A client cannot pass itself off as a web process: a node header that does not verify — made
// up, signed with another secret, or a real one for another method, path, query or body — is
// refused with 403 and its reason, and a process with forwarding off refuses any.
func TestForgedNodeHeaderIsRefused(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(3)
	holder.serving.Store(true)
	other, err := forward.NewSigner(otherSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := signer(t)
	for _, tc := range []struct {
		name, value, reason string
	}{
		{"made up", "term=3;ts=1;nonce=00112233445566778899aabbccddeeff;sig=00", forward.RefusalSignature},
		{"other secret", other.Sign(orderReq, 3), forward.RefusalSignature},
		{"other path", s.Sign(forward.Request{Method: "POST", Path: "/api/fx/positions/1/close", Body: orderReq.Body}, 3), forward.RefusalSignature},
		{"other method", s.Sign(forward.Request{Method: "PATCH", Path: orderReq.Path, Body: orderReq.Body}, 3), forward.RefusalSignature},
		{"other query", s.Sign(forward.Request{Method: "POST", Path: orderReq.Path, Query: "accountId=2", Body: orderReq.Body}, 3), forward.RefusalSignature},
		{"other body", s.Sign(forward.Request{Method: "POST", Path: orderReq.Path, Body: []byte(`{"volume":"100"}`)}, 3), forward.RefusalSignature},
		{"stale", staleSign(t, 3), forward.RefusalStale},
		{"no nonce", "term=3;ts=1;sig=00", forward.RefusalMalformed},
		{"no fields at all", "x", forward.RefusalMalformed},
	} {
		resp, body := post(t, holder.url, forward.Header, tc.value)
		if resp.StatusCode != 403 || !strings.Contains(body, forward.Header) || resp.Header.Get(forward.RefusedHeader) != tc.reason {
			t.Errorf("%s: %d %s (%s %q)", tc.name, resp.StatusCode, body, forward.RefusedHeader, resp.Header.Get(forward.RefusedHeader))
		}
	}
	if holder.served.Load() != 0 {
		t.Fatalf("a forged request was served")
	}
	// Each refusal is logged at warn with its reason, and no line carries a signature.
	if lines := holder.logged("node header refused"); len(lines) != 9 || lines[0]["level"] != "WARN" || lines[0]["reason"] != forward.RefusalSignature {
		t.Errorf("holder logged %d refusals: %v", len(lines), lines)
	}
	if strings.Contains(holder.logs.String(), "sig=") {
		t.Errorf("a log line carries a signature: %s", holder.logs.String())
	}
	off := httptest.NewServer(forward.Edge(nil, slog.New(slog.DiscardHandler), fail)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })))
	defer off.Close()
	if resp, _ := post(t, off.URL, forward.Header, signer(t).Sign(orderReq, 3)); resp.StatusCode != 403 || resp.Header.Get(forward.RefusedHeader) != forward.RefusalOff {
		t.Fatalf("forwarding off: a node header got %d %q", resp.StatusCode, resp.Header.Get(forward.RefusedHeader))
	}
}

func staleSign(t *testing.T, term int64) string {
	s, err := forward.NewSigner(secret, func() time.Time { return time.Now().Add(-time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	return s.Sign(orderReq, term)
}

// A header captured between a follower and the holder is accepted once: replayed within its
// validity window with the same body it is refused as replayed, and with another body or query
// it does not verify. The holder served the trader's request exactly once.
func TestCapturedNodeHeaderIsAcceptedOnce(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(7)
	holder.serving.Store(true)
	follower := newNode(t, "follower", row.read)
	row.set(lease.Holder{InstanceID: "holder", Term: 7, Live: true, AdvertiseURL: holder.url})

	if resp, body := post(t, follower.url); resp.StatusCode != 201 {
		t.Fatalf("forward = %d %s", resp.StatusCode, body)
	}
	captured := holder.lastHeader.Load().(string)
	if captured == "" {
		t.Fatal("the forward carried no node header")
	}
	for _, tc := range []struct {
		name, url, body, reason string
	}{
		{"same body", holder.url + "/api/fx/orders", orderBody, forward.RefusalReplayed},
		{"another body", holder.url + "/api/fx/orders", `{"volume":"50.00"}`, forward.RefusalSignature},
		{"another query", holder.url + "/api/fx/orders?accountId=1", orderBody, forward.RefusalSignature},
	} {
		resp, body := send(t, "POST", tc.url, tc.body, forward.Header, captured)
		if resp.StatusCode != 403 || resp.Header.Get(forward.RefusedHeader) != tc.reason {
			t.Errorf("replay with %s = %d %s (%q), want 403 %s", tc.name, resp.StatusCode, body, resp.Header.Get(forward.RefusedHeader), tc.reason)
		}
	}
	if n := holder.served.Load(); n != 1 {
		t.Fatalf("holder served %d requests, want only the forwarded one", n)
	}
}

// Two identical requests forwarded at once are two requests, each with its own signature: the
// replay rule refuses a captured header, never a trader's second submit.
func TestIdenticalForwardsAreBothAccepted(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(2)
	holder.serving.Store(true)
	follower := newNode(t, "follower", row.read)
	row.set(lease.Holder{InstanceID: "holder", Term: 2, Live: true, AdvertiseURL: holder.url})
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() {
			req, _ := http.NewRequest("DELETE", follower.url+"/api/fx/orders/5", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != 201 {
			t.Errorf("request %d = %d", i, c)
		}
	}
}

// A follower whose secret differs from the holder's: the holder refuses its header and logs why at
// warn; the follower logs why at error and answers the trader 503 with Retry-After (nothing was
// done, and nothing the trader can fix), not the holder's 403.
func TestRefusedForwardIsLoggedOnBothSides(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(4)
	holder.serving.Store(true)
	otherSigner, err := forward.NewSigner(otherSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	follower := newNode(t, "follower", row.read, func(c *forward.Config) { c.Signer = otherSigner })
	row.set(lease.Holder{InstanceID: "holder", Term: 4, Live: true, AdvertiseURL: holder.url})

	resp, body := post(t, follower.url)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get(forward.RefusedHeader) != "" {
		t.Fatalf("forward with another secret = %d %s (%v)", resp.StatusCode, body, resp.Header)
	}
	if holder.served.Load() != 0 {
		t.Fatal("the holder served a forward it did not trust")
	}
	got := follower.logged("forward refused by the holder")
	if len(got) != 1 || got[0]["level"] != "ERROR" || got[0]["reason"] != forward.RefusalSignature || !strings.Contains(fmt.Sprint(got[0]["fix"]), "FXDESK_CLUSTER_SECRET") {
		t.Fatalf("follower logged %v", got)
	}
	if h := holder.logged("node header refused"); len(h) != 1 || h[0]["level"] != "WARN" || h[0]["reason"] != forward.RefusalSignature {
		t.Fatalf("holder logged %v", h)
	}
	for _, n := range []*node{holder, follower} {
		if l := n.logs.String(); strings.Contains(l, secret) || strings.Contains(l, otherSecret) || strings.Contains(l, "sig=") {
			t.Errorf("%s logged a secret or a signature: %s", n.name, l)
		}
	}
}

// An oversized body answers the same 413 on the follower (before anything is sent) and on the
// holder (a forwarded request whose signed body is too long), announced or chunked.
func TestOversizedBodyAnswersTheSame413(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(6)
	holder.serving.Store(true)
	follower := newNode(t, "follower", row.read)
	row.set(lease.Holder{InstanceID: "holder", Term: 6, Live: true, AdvertiseURL: holder.url})
	big := `{"requestNonce":"` + strings.Repeat("a", bodyLimit) + `"}`
	want := fx.TooLarge(bodyLimit).Message

	answer := func(name, url string, chunked bool, header ...string) string {
		t.Helper()
		var r io.Reader = strings.NewReader(big)
		if chunked {
			r = io.MultiReader(r) // no length known: sent chunked
		}
		req, _ := http.NewRequest("POST", url+"/api/fx/orders", r)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || !strings.Contains(string(b), want) {
			t.Errorf("%s = %d %s, want 413 %q", name, resp.StatusCode, b, want)
		}
		return string(b)
	}
	signed := signer(t).Sign(forward.Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(big)}, 6)
	answers := []string{
		answer("follower", follower.url, false),
		answer("follower, chunked", follower.url, true),
		answer("holder", holder.url, false, forward.Header, signed),
		answer("holder, chunked", holder.url, true, forward.Header, signer(t).Sign(forward.Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(big)}, 6)),
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Errorf("answers differ: %q and %q", answers[0], a)
		}
	}
	if holder.raw.Load() != 2 || holder.served.Load() != 0 {
		t.Fatalf("holder reached %d times (want only the two direct ones), served %d", holder.raw.Load(), holder.served.Load())
	}
}

// A trader trickling a body cannot hold a forward open: the body read ends at the forward's
// Timeout (the test's server has no ReadTimeout of its own), the trader is answered, and nothing
// reaches the holder.
func TestSlowBodyIsCutAtTheForwardTimeout(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(8)
	holder.serving.Store(true)
	follower := newNode(t, "follower", row.read, func(c *forward.Config) { c.Timeout = 300 * time.Millisecond })
	row.set(lease.Holder{InstanceID: "holder", Term: 8, Live: true, AdvertiseURL: holder.url})

	c, err := net.Dial("tcp", strings.TrimPrefix(follower.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One byte of a 100-byte body, then nothing: the trickle's next byte never comes.
	fmt.Fprintf(c, "POST /api/fx/orders HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	// A failure guard, not a measurement: a forward with no deadline would hold this forever.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer while the body trickled: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "did not arrive") {
		t.Fatalf("slow body = %d %s", resp.StatusCode, b)
	}
	if holder.raw.Load() != 0 {
		t.Fatal("a request whose body never arrived reached the holder")
	}
}

// blockingHolder is a stand-in for a holder that has taken requests and not answered yet: a real
// HTTP server that reports each arrival and answers once released.
type blockingHolder struct {
	srv     *httptest.Server
	arrived chan struct{}
	release chan struct{}
}

func newBlockingHolder(t *testing.T) *blockingHolder {
	b := &blockingHolder{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.arrived <- struct{}{}
		select {
		case <-b.release:
			w.WriteHeader(http.StatusCreated)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(b.srv.Close)
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	})
	return b
}

// Past InFlight forwards with the holder, a follower answers 503 busy with Retry-After and sends
// nothing; once one answers, the next is forwarded again.
func TestForwardsInFlightAreCapped(t *testing.T) {
	t.Parallel()
	holder := newBlockingHolder(t)
	row := &rowOf{}
	follower := newNode(t, "follower", row.read, func(c *forward.Config) { c.InFlight = 2 })
	row.set(lease.Holder{InstanceID: "holder", Term: 5, Live: true, AdvertiseURL: holder.srv.URL})

	codes := make(chan int, 2)
	for range 2 {
		go func() {
			resp, _ := post(t, follower.url)
			codes <- resp.StatusCode
		}()
	}
	<-holder.arrived
	<-holder.arrived
	resp, body := post(t, follower.url)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "busy") {
		t.Fatalf("third forward = %d %s (Retry-After %q), want 503 busy", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if n := len(holder.arrived); n != 0 {
		t.Fatalf("the refused request reached the holder")
	}
	if l := follower.logged("answering 503 busy"); len(l) != 1 {
		t.Errorf("follower logged the cap %d times, want once", len(l))
	}
	close(holder.release)
	for range 2 {
		if c := <-codes; c != 201 {
			t.Fatalf("a forward within the cap = %d", c)
		}
	}
	if resp, _ := post(t, follower.url); resp.StatusCode != 201 {
		t.Fatalf("a forward after the cap cleared = %d", resp.StatusCode)
	}
}

// A holder that takes a request and does not answer is given the forward's Timeout, no more: the
// trader is answered 504 outcome unknown (the holder may have acted).
func TestSlowHolderIsCutAtTheForwardTimeout(t *testing.T) {
	t.Parallel()
	holder := newBlockingHolder(t)
	row := &rowOf{}
	follower := newNode(t, "follower", row.read, func(c *forward.Config) { c.Timeout = 300 * time.Millisecond })
	row.set(lease.Holder{InstanceID: "holder", Term: 5, Live: true, AdvertiseURL: holder.srv.URL})
	resp, body := post(t, follower.url)
	if resp.StatusCode != 504 || !strings.Contains(body, "requestNonce") {
		t.Fatalf("forward to a holder that never answers = %d %s", resp.StatusCode, body)
	}
	if len(holder.arrived) != 1 {
		t.Fatalf("the request reached the holder %d times, want 1", len(holder.arrived))
	}
}

// A follower whose row points at another follower gets that follower's 503, never a cycle: the
// forwarded request is not forwarded again, and the row is read once more before answering.
func TestForwardLoopIsImpossible(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	a := newNode(t, "a", row.read)
	b := newNode(t, "b", row.read)
	// The row (wrongly) advertises b, a follower, for term 5; b's own reads point back at a.
	row.set(lease.Holder{InstanceID: "b", Term: 5, Live: true, AdvertiseURL: b.url})
	b.row = func() (lease.Holder, bool, error) {
		return lease.Holder{InstanceID: "a", Term: 5, Live: true, AdvertiseURL: a.url}, true, nil
	}
	resp, body := post(t, a.url)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, fx.MsgPricingUnavailable) {
		t.Fatalf("loop = %d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if resp.Header.Get(forward.NotHolderHeader) != "" {
		t.Fatal("the follower passed the refusal marker on to the trader")
	}
	if a.served.Load()+b.served.Load() != 0 {
		t.Fatal("a follower served a desk-priced request")
	}
	if n := row.reads.Load(); n != 2 {
		t.Fatalf("row read %d times, want 2 (the first look and one look again)", n)
	}
}

// The holder changed: the old one refuses the term it no longer serves (or is gone), the
// follower reads the row again and retries once at the new holder.
func TestFollowerRetriesOnceWhenTheHolderChanged(t *testing.T) {
	t.Parallel()
	for _, oldGone := range []bool{false, true} {
		row := &rowOf{}
		old := newNode(t, "old", row.read)
		old.term.Store(1) // lost: term 1 was replaced by term 2
		fresh := newNode(t, "new", row.read)
		fresh.term.Store(2)
		fresh.serving.Store(true)
		follower := newNode(t, "follower", row.read)
		row.set(lease.Holder{InstanceID: "old", Term: 1, Live: true, AdvertiseURL: old.url})
		if _, body := post(t, follower.url); body == "" {
			t.Fatal("no answer")
		} // the first answer cached the old row
		if oldGone {
			old.srv.Close()
		}
		row.set(lease.Holder{InstanceID: "new", Term: 2, Live: true, AdvertiseURL: fresh.url})
		resp, _ := post(t, follower.url)
		if resp.StatusCode != 201 || resp.Header.Get("Served-By") != "new" {
			t.Fatalf("old gone %v: %d by %q", oldGone, resp.StatusCode, resp.Header.Get("Served-By"))
		}
	}
}

// Nobody holds (the holder is gone and the row still names it, or the row has expired): 503 with
// the pricing text and Retry-After.
func TestNoHolderAnswers503(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	follower := newNode(t, "follower", row.read)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for _, h := range []lease.Holder{
		{InstanceID: "gone", Term: 4, Live: true, AdvertiseURL: deadURL},
		{InstanceID: "gone", Term: 4, Live: false, AdvertiseURL: deadURL},
		{},
	} {
		row.set(h)
		resp, body := post(t, follower.url)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, fx.MsgPricingUnavailable) {
			t.Fatalf("row %+v: %d %s", h, resp.StatusCode, body)
		}
	}
}

// The connection died after the request was written: the holder may have acted, so the answer is
// 504 and nothing is retried behind the trader's back.
func TestOutcomeUnknownAnswers504(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var got atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				// Read the whole request, then die without answering. One Read may return the
				// headers alone (the body in a segment of its own): read on until the body is in,
				// or a close after the headers would be a request never written.
				var req []byte
				buf := make([]byte, 4096)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				for !strings.Contains(string(req), "volume") {
					n, err := c.Read(buf)
					req = append(req, buf[:n]...)
					if err != nil {
						break
					}
				}
				if strings.Contains(string(req), "volume") {
					got.Add(1)
				}
				c.Close()
			}()
		}
	}()
	row := &rowOf{}
	follower := newNode(t, "follower", row.read)
	row.set(lease.Holder{InstanceID: "holder", Term: 9, Live: true, AdvertiseURL: "http://" + ln.Addr().String()})
	resp, body := post(t, follower.url)
	if resp.StatusCode != 504 || !strings.Contains(body, "requestNonce") {
		t.Fatalf("outcome unknown = %d %s", resp.StatusCode, body)
	}
	if n := got.Load(); n != 1 {
		t.Fatalf("the request reached the holder %d times, want exactly 1", n)
	}
}
