package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/testkit/tcpproxy"
)

// mirrorSnapshot is the snapshot key as an operator reads it with redis-cli GET.
type mirrorSnapshot struct {
	PublishedAt time.Time `json:"publishedAt"`
	Term        int64     `json:"term"`
	Quotes      map[string]struct {
		Bid string `json:"bid"`
	} `json:"quotes"`
}

func (s mirrorSnapshot) bid(symbol string) float64 {
	v, err := strconv.ParseFloat(s.Quotes[symbol].Bid, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

func (e *deskEnv) snapshot() (mirrorSnapshot, bool) {
	e.t.Helper()
	raw, err := e.rdb.Get(context.Background(), e.names.QuoteMirrorSnapshot()).Bytes()
	if err != nil {
		return mirrorSnapshot{}, false
	}
	var s mirrorSnapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		e.t.Fatalf("snapshot is not JSON: %v", err)
	}
	return s, true
}

// near tells the two processes' USDJPY (61.1 and 156) apart while their simulators walk.
func near(v, want float64) bool { return math.Abs(v-want) < 1 }

// A holder frozen past the TTL and replaced must never feed the followers
// again. Its publish that had already left for Redis when it froze (held here by a proxy, as a
// stalled network or a pause between the gate and the write would hold it) lands after the new
// holder's snapshot and is refused by Redis for its older term; once resumed, its gate is shut
// and it publishes nothing. Every read of the key, over several of the new holder's intervals,
// carries the new holder's term and prices (USDJPY 156, not the zombie's 61.1), and fxdesk-cron
// serves only the new holder's snapshots.
func TestZombieHolderCannotOverwriteTheMirror(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	rp, err := tcpproxy.Start(e.redis.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.Close() })
	var mu sync.Mutex
	var held []byte
	holding := false
	rp.Tap(func(_ int, b []byte) {
		mu.Lock()
		if holding {
			held = append(held, b...)
		}
		mu.Unlock()
	})

	a := e.start("web-a", "fxdesk-web", "CRON_MODE=off", "FXDESK_MIRROR_INTERVAL=200ms",
		"FXDESK_REDIS_URL=redis://"+rp.Addr()+"/0")
	aTerm := a.waitRowGrant(10 * time.Second)
	a.waitLog(5*time.Second, msgHas("fx quote mirror publishing"))
	cron := e.start("cron", "fxdesk-cron", "FXDESK_MIRROR_INTERVAL=100ms")
	a.simControl("/control/quote", map[string]any{"symbol": "USDJPY", "bid": 61.1, "ask": 61.12})
	eventually(t, 10*time.Second, 20*time.Millisecond, "web-a's snapshot with USDJPY 61.1", func() bool {
		s, ok := e.snapshot()
		return ok && s.Term == aTerm && near(s.bid("USDJPY"), 61.1)
	})

	// web-a's next publish leaves for Redis and is held on the way; then web-a freezes.
	mu.Lock()
	holding = true
	mu.Unlock()
	rp.Hold()
	var zombieAt time.Time
	eventually(t, 5*time.Second, 5*time.Millisecond, "a publish of web-a held by the proxy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		i := bytes.Index(held, []byte(`{"version":1,"publishedAt":"`))
		if i < 0 || !bytes.Contains(held[i:], []byte("\n}}")) {
			return false
		}
		at := held[i+len(`{"version":1,"publishedAt":"`):]
		zombieAt, err = time.Parse(time.RFC3339Nano, string(at[:len("2006-01-02T15:04:05.000Z")]))
		return err == nil
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// web-b takes over after the row expired and publishes its own prices under the row's next
	// term (past aTerm; read from web-b's grant, as a boot claim that MySQL answered late is
	// granted by Redis first and by the row at the next renew).
	e.waitRowExpired(10 * time.Second)
	b := e.start("web-b", "fxdesk-web", "CRON_MODE=off", "FXDESK_HOSTNAME=elsewhere", "FXDESK_MIRROR_INTERVAL=1s")
	b.waitLog(time.Second, msgHas("role: holder"))
	bTerm := b.waitRowGrant(10 * time.Second)
	if bTerm <= aTerm {
		t.Fatalf("web-b's term %d is not past web-a's %d", bTerm, aTerm)
	}
	b.simControl("/control/quote", map[string]any{"symbol": "USDJPY", "bid": 156, "ask": 156.02})
	var last mirrorSnapshot
	eventually(t, 10*time.Second, 10*time.Millisecond, "web-b's snapshot with USDJPY 156", func() bool {
		s, ok := e.snapshot()
		last = s
		return ok && s.Term == bTerm && near(s.bid("USDJPY"), 156)
	})
	// Right after one of web-b's publishes (so a whole interval of web-b lies ahead), the held
	// publish reaches Redis and web-a resumes.
	eventually(t, 5*time.Second, 5*time.Millisecond, "web-b's next publish", func() bool {
		s, ok := e.snapshot()
		return ok && !s.PublishedAt.Equal(last.PublishedAt)
	})
	rp.Release()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// Every read, until web-b has published three more snapshots after web-a found the lease
	// lost, is web-b's; and so is every snapshot fxdesk-cron serves.
	var cyclesAtLoss uint64
	lostSeen, after, reads := false, 0, 0
	prev := last.PublishedAt
	deadline := time.Now().Add(20 * time.Second)
	for after < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("web-b published %d snapshots after web-a's loss (lost seen: %v) within the deadline", after, lostSeen)
		}
		s, ok := e.snapshot()
		reads++
		if !ok || s.Term != bTerm || !near(s.bid("USDJPY"), 156) {
			t.Fatalf("read %d of the snapshot key: term %d USDJPY bid %v (present %v); want web-b's term %d and 156", reads, s.Term, s.bid("USDJPY"), ok, bTerm)
		}
		if v := cron.mirror().Mirror; v == nil || v.LastPublishedAt != "" && mustTime(t, v.LastPublishedAt).Equal(zombieAt) {
			t.Fatalf("fxdesk-cron serves web-a's snapshot published %s: %+v", zombieAt, v)
		}
		if !s.PublishedAt.Equal(prev) {
			prev = s.PublishedAt
			if lostSeen {
				after++
			}
		}
		if !lostSeen {
			if _, ok := a.findLog(msgHas("lease lost")); ok {
				lostSeen = true
				cyclesAtLoss = a.mirror().Mirror.Cycles
			}
		}
		time.Sleep(10 * time.Millisecond) // pacing the reads; every condition above has a deadline
	}
	if v := a.mirror().Mirror; v.Cycles != cyclesAtLoss {
		t.Errorf("web-a's mirror cycles went from %d to %d after it lost the lease", cyclesAtLoss, v.Cycles)
	}
	if v := cron.mirror().Mirror; v.Term != bTerm {
		t.Errorf("fxdesk-cron serves term %d, want %d", v.Term, bTerm)
	}
	t.Logf("%d reads of the snapshot key after the held publish was delivered, all web-b's", reads)

	// A SIGTERM now says web-a released nothing.
	a.stop(syscall.SIGTERM)
	if _, ok := a.findLog(msgIs("engine lease released")); ok {
		t.Error(`web-a logged "engine lease released" although it had lost the lease`)
	}
	if _, ok := a.findLog(msgHas("nothing was handed back")); !ok {
		t.Error("web-a's stop does not say that nothing was released")
	}
	if h, _ := e.row(); h.PID != b.pid() || h.Term != bTerm || !h.Live {
		t.Errorf("row after web-a's stop = %+v, want web-b term %d", h, bTerm)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
