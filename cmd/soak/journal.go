package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"fxdesk/internal/forward"
)

// Outcomes of a request, as the client knows them.
const (
	answered = "answered"        // a status and a body came back
	unknown  = "outcome unknown" // sent, but no answer (timeout, reset): it may or may not have happened
	notSent  = "not sent"        // the connection was refused: the desk never saw it
)

// entry is one request and its answer, one line of journal.jsonl.
type entry struct {
	Seq     int64           `json:"seq"`
	Client  string          `json:"client"`
	Op      string          `json:"op"`
	Proc    string          `json:"proc"`
	Method  string          `json:"method"`
	Path    string          `json:"path"`
	Body    json.RawMessage `json:"body,omitempty"`
	Start   time.Time       `json:"start"`
	End     time.Time       `json:"end"`
	Outcome string          `json:"outcome"`
	Status  int             `json:"status,omitempty"`
	Resp    json.RawMessage `json:"resp,omitempty"`
	// ForwardedTerm is the lease term a follower forwarded the request for (0: answered where it
	// was sent): the holder of that term wrote it.
	ForwardedTerm int64  `json:"forwardedTerm,omitempty"`
	Err           string `json:"err,omitempty"`
}

// journal is the client-side record of every request, on disk and in memory for the checks.
type journal struct {
	mu      sync.Mutex
	f       *os.File
	enc     *json.Encoder
	entries []entry
}

func newJournal(path string) (*journal, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &journal{f: f, enc: json.NewEncoder(f)}, nil
}

func (j *journal) add(e entry) entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	e.Seq = int64(len(j.entries) + 1)
	j.entries = append(j.entries, e)
	j.enc.Encode(e)
	return e
}

func (j *journal) snapshot() []entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]entry(nil), j.entries...)
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
func (j *journal) call(ctx context.Context, p *proc, token, client, op, method, path string, body any) entry {
	e := entry{Client: client, Op: op, Method: method, Path: path}
	if p == nil {
		e.Start, e.End, e.Outcome, e.Err = time.Now(), time.Now(), notSent, "no web process to send to"
		return j.add(e)
	}
	e.Proc = p.name
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		e.Body = b
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+p.addr+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	e.Start = time.Now()
	resp, err := httpClient.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			e.Status = resp.StatusCode
			e.ForwardedTerm, _ = strconv.ParseInt(resp.Header.Get(forward.ForwardedHeader), 10, 64)
			if json.Valid(b) {
				e.Resp = bytes.TrimSpace(b)
			} else {
				e.Resp, _ = json.Marshal(string(b))
			}
		}
	}
	e.End = time.Now()
	switch {
	case err == nil:
		e.Outcome = answered
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Outcome, e.Err = notSent, err.Error()
	default:
		e.Outcome, e.Err = unknown, err.Error()
	}
	return j.add(e)
}

// decode reads the answer's body into v.
func (e entry) decode(v any) bool { return len(e.Resp) > 0 && json.Unmarshal(e.Resp, v) == nil }

func (e entry) ok() bool { return e.Outcome == answered && e.Status >= 200 && e.Status < 300 }

// errorMessage is the answer's error message, if it is one.
func (e entry) errorMessage() string {
	var b struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	e.decode(&b)
	return b.Error.Message
}
