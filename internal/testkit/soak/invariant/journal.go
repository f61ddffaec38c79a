package invariant

import (
	"bytes"
	"encoding/json"
	"time"
)

// Outcomes of a request, as the client knows them.
const (
	Answered       = "answered"        // a status and a body came back
	OutcomeUnknown = "outcome unknown" // sent, but no answer (timeout, reset): it may or may not have happened
	NotSent        = "not sent"        // the connection was refused: the desk never saw it
)

// Entry is one request and its answer, one line of journal.jsonl.
type Entry struct {
	Seq    int64  `json:"seq"`
	Client string `json:"client"`
	Op     string `json:"op"`
	Proc   string `json:"proc"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// RequestID is the X-Request-Id the soak sent (admin writes: the desk records it on the
	// change's audit row; a retry replayed by its requestNonce sends the same one).
	RequestID string          `json:"requestId,omitempty"`
	Body      json.RawMessage `json:"body,omitempty"`
	Start     time.Time       `json:"start"`
	End       time.Time       `json:"end"`
	Outcome   string          `json:"outcome"`
	Status    int             `json:"status,omitempty"`
	Resp      json.RawMessage `json:"resp,omitempty"`
	// ForwardedTerm is the lease term a follower forwarded the request for (0: answered where it
	// was sent): the holder of that term wrote it.
	ForwardedTerm int64 `json:"forwardedTerm,omitempty"`
	// RetryAfter is the answer's Retry-After header: every 429 and 503 must carry one.
	RetryAfter string `json:"retryAfter,omitempty"`
	Err        string `json:"err,omitempty"`
}

// Decode reads the answer's body into v.
func (e Entry) Decode(v any) bool { return len(e.Resp) > 0 && json.Unmarshal(e.Resp, v) == nil }

// OK reports whether the request was answered 2xx.
func (e Entry) OK() bool { return e.Outcome == Answered && e.Status >= 200 && e.Status < 300 }

// ErrorMessage is the answer's error message, if it is one.
func (e Entry) ErrorMessage() string {
	var b struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	e.Decode(&b)
	return b.Error.Message
}

// JSONOrString is b as the journal keeps an answer: JSON as it is, anything else as a string.
func JSONOrString(b []byte) json.RawMessage {
	if json.Valid(b) {
		return bytes.TrimSpace(b)
	}
	out, _ := json.Marshal(string(b))
	return out
}
