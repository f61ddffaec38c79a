package mirror

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/tick"
)

// The follower decodes into buffers it reuses while LastTick reads lock-free: a reader must never
// see a quote half from one snapshot and half from another (run it with -race: the reuse must also
// be ordered after every read of the buffer).
func TestQuoteStoreReuseNeverTears(t *testing.T) {
	const n, versions = 2000, 6
	syms := make([]string, n)
	for i := range syms {
		syms[i] = string([]byte{'A' + byte(i/676), 'A' + byte(i/26%26), 'A' + byte(i%26), 'U', 'S', 'D'})
	}
	at := time.Date(2026, 12, 1, 18, 20, 10, 0, time.UTC)
	raws := make([]string, versions)
	e := newEncoder(n, func(string) int { return 5 })
	for g := range raws {
		e.start()
		for _, s := range syms {
			// Every quote of version g has bid g+0.25 and ask g+0.75: a torn read shows.
			q := tick.Quote{Bid: float64(g) + 0.25, Ask: float64(g) + 0.75, ReceivedAt: at}
			e.add(s, &q)
		}
		e.finish(at.Add(time.Duration(g)*time.Second), 1)
		raws[g] = string(e.buf)
	}
	f := &Follower{cfg: FollowerConfig{Now: func() time.Time { return at }, MaxAge: time.Hour}}
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := r; !stop.Load(); i += 7 {
				q, ok := f.LastTick(syms[i%n])
				if !ok {
					continue
				}
				reads.Add(1)
				if q.Ask-q.Bid != 0.5 || q.Bid-float64(int(q.Bid)) != 0.25 {
					t.Errorf("torn quote %+v", q)
					return
				}
			}
		})
	}
	deadline := time.Now().Add(time.Second)
	for g := 0; time.Now().Before(deadline) || reads.Load() < 1000; g++ {
		// A publishedAt that goes back and forth is still a new snapshot to the store.
		s, err := f.quotes.parse(raws[g%versions], f.view.Load())
		if err != nil {
			t.Fatal(err)
		}
		f.view.Store(&view{snap: s, firstSeen: at})
	}
	stop.Store(true)
	wg.Wait()
	if len(f.quotes.bufs) > storeBuffers {
		t.Fatalf("%d buffers kept", len(f.quotes.bufs))
	}
}
