package forward_test

import (
	"context"
	"encoding/json"
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

const secret = "test-cluster-secret-0123456789"

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
	status := map[string]int{fx.EUNAVAILABLE: 503, fx.EUNKNOWN: 504, fx.EFORBIDDEN: 403, fx.EINVALID: 400}[fx.ErrorCode(err)]
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
// answers who served the request.
type node struct {
	name    string
	term    atomic.Int64
	serving atomic.Bool
	row     func() (lease.Holder, bool, error)
	served  atomic.Int64
	srv     *httptest.Server
	url     string
}

func newNode(t *testing.T, name string, row func() (lease.Holder, bool, error)) *node {
	t.Helper()
	n := &node{name: name, row: row}
	f, err := forward.New(forward.Config{
		Signer:     signer(t),
		Self:       func() (int64, bool) { return n.term.Load(), n.serving.Load() },
		InstanceID: name,
		Holder:     func(context.Context) (lease.Holder, bool, error) { return n.row() },
		MaxAge:     time.Hour, // only a failed forward reads the row again
		Log:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := forward.Edge(f.Signer(), fail)(f.Desk(fail)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.served.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Served-By", n.name)
		w.WriteHeader(http.StatusCreated)
		w.Write(append([]byte(r.Header.Get("Authorization")+" "), b...))
	})))
	n.srv = httptest.NewServer(h)
	n.url = n.srv.URL
	t.Cleanup(n.srv.Close)
	return n
}

func post(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/api/fx/orders", strings.NewReader(`{"volume":"0.10"}`))
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

// A client cannot pass itself off as a web process: a node header that does not verify — made
// up, signed with another secret, or a real one replayed on another path — is refused, and a
// process with forwarding off refuses any.
func TestForgedNodeHeaderIsRefused(t *testing.T) {
	t.Parallel()
	row := &rowOf{}
	holder := newNode(t, "holder", row.read)
	holder.term.Store(3)
	holder.serving.Store(true)
	other, _ := forward.NewSigner("another-secret-0123456789", nil)
	for name, value := range map[string]string{
		"made up":          "term=3;ts=1;sig=00",
		"other secret":     other.Sign("POST", "/api/fx/orders", 3),
		"other path":       signer(t).Sign("POST", "/api/fx/positions/1/close", 3),
		"stale":            staleSign(t, 3),
		"no fields at all": "x",
	} {
		resp, body := post(t, holder.url, forward.Header, value)
		if resp.StatusCode != 403 || !strings.Contains(body, forward.Header) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	if holder.served.Load() != 0 {
		t.Fatalf("a forged request was served")
	}
	off := httptest.NewServer(forward.Edge(nil, fail)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })))
	defer off.Close()
	if resp, _ := post(t, off.URL, forward.Header, signer(t).Sign("POST", "/api/fx/orders", 3)); resp.StatusCode != 403 {
		t.Fatalf("forwarding off: a node header got %d", resp.StatusCode)
	}
}

func staleSign(t *testing.T, term int64) string {
	s, err := forward.NewSigner(secret, func() time.Time { return time.Now().Add(-time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	return s.Sign("POST", "/api/fx/orders", term)
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
