package forward

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// clock is a test clock moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func refusal(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// At its bound the replay memory refuses (busy) rather than forgets; a nonce is forgotten only
// once the header carrying it has turned stale, so forgetting never lets a replay through.
func TestReplayMemoryRefusesAtItsBoundAndForgetsOnlyStaleHeaders(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	const key = "8f14e45fceea167a5a36dedd4bea2543c9f0f895fb98ab9159f51fd0297e236d"
	s, err := NewSigner(key, c.now)
	if err != nil {
		t.Fatal(err)
	}
	s.limit = 2
	req := Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(`{}`)}
	a, b, third := s.Sign(req, 1), s.Sign(req, 1), s.Sign(req, 1)
	for _, v := range []string{a, b} {
		if _, err := s.Verify(req, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Verify(req, a); refusal(err) != RefusalReplayed {
		t.Fatalf("replay = %v", err)
	}
	if _, err := s.Verify(req, third); !errors.Is(err, errBusy) {
		t.Fatalf("a third header with two remembered and a bound of two = %v, want busy", err)
	}
	// Within the window the two are still remembered; past it they are forgotten, and a replay of
	// either is refused as stale instead.
	c.add(rememberFor)
	if _, err := s.Verify(req, a); refusal(err) != RefusalStale && refusal(err) != RefusalReplayed {
		t.Fatalf("replay at the window's end = %v", err)
	}
	c.add(time.Millisecond)
	if _, err := s.Verify(req, a); refusal(err) != RefusalStale {
		t.Fatalf("replay past the window = %v, want stale", err)
	}
	fresh := s.Sign(req, 1)
	if _, err := s.Verify(req, fresh); err != nil {
		t.Fatalf("a fresh header once the old ones expired = %v", err)
	}
	if len(s.seen) != 1 {
		t.Fatalf("remembering %d nonces, want only the fresh one", len(s.seen))
	}
}

// A header signed ahead of the receiver's clock (a follower whose clock runs fast) is remembered
// until it turns stale on the receiver's clock too.
func TestHeaderFromAFastClockIsRememberedUntilStale(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	fast := &clock{t: c.t.Add(maxSkew - time.Second)}
	const key = "8f14e45fceea167a5a36dedd4bea2543c9f0f895fb98ab9159f51fd0297e236d"
	recv, _ := NewSigner(key, c.now)
	send, _ := NewSigner(key, fast.now)
	req := Request{Method: "DELETE", Path: "/api/fx/orders/5"}
	v := send.Sign(req, 3)
	if _, err := recv.Verify(req, v); err != nil {
		t.Fatal(err)
	}
	for step := time.Duration(0); step <= rememberFor; step += time.Second {
		c.add(time.Second)
		_, err := recv.Verify(req, v)
		if r := refusal(err); r != RefusalReplayed && r != RefusalStale {
			t.Fatalf("%s after acceptance: replay = %v", step, err)
		}
	}
}
