package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"fxdesk/internal/forward"
	"fxdesk/internal/testkit/soak/invariant"
)

// journal is the client-side record of every request, on disk and in memory for the checks.
type journal struct {
	mu      sync.Mutex
	f       *os.File
	enc     *json.Encoder
	entries []invariant.Entry
	// inFlight counts, by request id, the requests sent with one and not yet journaled.
	inFlight map[string]int
}

func newJournal(path string) (*journal, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &journal{f: f, enc: json.NewEncoder(f), inFlight: map[string]int{}}, nil
}

func (j *journal) add(e invariant.Entry) invariant.Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	if e.RequestID != "" {
		if j.inFlight[e.RequestID]--; j.inFlight[e.RequestID] <= 0 {
			delete(j.inFlight, e.RequestID)
		}
	}
	e.Seq = int64(len(j.entries) + 1)
	j.entries = append(j.entries, e)
	j.enc.Encode(e)
	return e
}

func (j *journal) snapshot() []invariant.Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]invariant.Entry(nil), j.entries...)
}

// evidence is the journal and the request ids in flight, read at one instant: a request sent
// before it is in one or the other.
func (j *journal) evidence() ([]invariant.Entry, map[string]bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	in := map[string]bool{}
	for id := range j.inFlight {
		in[id] = true
	}
	return append([]invariant.Entry(nil), j.entries...), in
}

func (j *journal) sent(requestID string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.inFlight[requestID]++
}

func (j *journal) close() { j.f.Close() }

var httpClient = &http.Client{Transport: &http.Transport{
	MaxIdleConnsPerHost: 16,
	IdleConnTimeout:     30 * time.Second,
	DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
}}

// requestTimeout bounds a trader request: past it the outcome is unknown and the client may
// retry with the same requestNonce.
const requestTimeout = 2 * time.Second

// call sends one JSON request to p with token and journals it.
func (j *journal) call(ctx context.Context, p *proc, token, client, op, method, path string, body any) invariant.Entry {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	return j.send(ctx, httpClient, p, outgoing{token: token, client: client, op: op, method: method, path: path, body: b, contentType: "application/json"})
}

// callID is call with an X-Request-Id, which the desk records on an admin write's audit row.
func (j *journal) callID(ctx context.Context, p *proc, token, client, op, method, path, requestID string, body any) invariant.Entry {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	return j.send(ctx, httpClient, p, outgoing{token: token, client: client, op: op, method: method, path: path, body: b,
		contentType: "application/json", requestID: requestID})
}

// outgoing is one request as the soak sends it: body as it goes on the wire (nil: none), with
// contentType when there is one.
type outgoing struct {
	token, client, op, method, path string
	body                            []byte
	contentType                     string
	requestID                       string // X-Request-Id ("": none)
}

// send sends o to p through hc and journals it. The request names its client's own address in
// X-Forwarded-For (the soak is the desk's trusted proxy, as nginx is in compose), so the
// per-address limit counts every client apart, as it would on the desk's real front door.
func (j *journal) send(ctx context.Context, hc *http.Client, p *proc, o outgoing) invariant.Entry {
	e := invariant.Entry{Client: o.client, Op: o.op, Method: o.method, Path: o.path, RequestID: o.requestID}
	if o.requestID != "" {
		j.sent(o.requestID)
	}
	if p == nil {
		e.Start, e.End, e.Outcome, e.Err = time.Now(), time.Now(), invariant.NotSent, "no web process to send to"
		return j.add(e)
	}
	e.Proc = p.name
	var rd io.Reader
	if o.body != nil {
		if json.Valid(o.body) && len(o.body) <= 4096 {
			e.Body = o.body
		} else {
			e.Body, _ = json.Marshal(invariant.Truncate(string(o.body), 200))
		}
		rd = bytes.NewReader(o.body)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, o.method, "http://"+p.addr+o.path, rd)
	req.Header.Set("Authorization", "Bearer "+o.token)
	req.Header.Set("X-Forwarded-For", clientAddress(o.client))
	if o.requestID != "" {
		req.Header.Set("X-Request-Id", o.requestID)
	}
	if o.body != nil && o.contentType != "" {
		req.Header.Set("Content-Type", o.contentType)
	}
	e.Start = time.Now()
	resp, err := hc.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			e.Status = resp.StatusCode
			e.RetryAfter = resp.Header.Get("Retry-After")
			e.ForwardedTerm, _ = strconv.ParseInt(resp.Header.Get(forward.ForwardedHeader), 10, 64)
			e.Resp = invariant.JSONOrString(b)
		}
	}
	e.End = time.Now()
	e.Outcome, e.Err = outcomeOf(err)
	return j.add(e)
}

// outcomeOf is what the client knows of a request that ended with err.
func outcomeOf(err error) (string, string) {
	switch {
	case err == nil:
		return invariant.Answered, ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return invariant.NotSent, err.Error()
	default:
		return invariant.OutcomeUnknown, err.Error()
	}
}

// clientAddress is the address a soak client's requests come from, as X-Forwarded-For names
// it: one of TEST-NET-2 per client name (the attacker's is its own, in TEST-NET-3).
func clientAddress(client string) string {
	if client == invariant.AttackerClient {
		return attackerAddress
	}
	h := fnv.New32a()
	h.Write([]byte(client))
	return fmt.Sprintf("198.51.100.%d", 1+h.Sum32()%250)
}
