package soak

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/auth"
	"fxdesk/internal/redisname"
	"fxdesk/internal/testkit/soak/invariant"
)

type sampleLine struct {
	Desk   *invariant.DeskSample   `json:"desk,omitempty"`
	Row    *invariant.RowSample    `json:"row,omitempty"`
	Mirror *invariant.MirrorSample `json:"mirror,omitempty"`
}

// sampler records the desk's view of itself every 200 ms and keeps the holder for the clients.
type sampler struct {
	c      *cluster
	holder atomic.Pointer[proc]

	mu      sync.Mutex
	f       *os.File
	enc     *json.Encoder
	desks   []invariant.DeskSample
	rows    []invariant.RowSample
	mirrors []invariant.MirrorSample
	trails  trailSamples // orders_trail.go
	pages   statusPages  // status_page.go
}

func newSampler(c *cluster, path string) (*sampler, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &sampler{c: c, f: f, enc: json.NewEncoder(f)}, nil
}

func (s *sampler) currentHolder() *proc {
	if h := s.holder.Load(); h != nil && h.alive() {
		return h
	}
	return nil
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(invariant.SampleEvery)
	defer t.Stop()
	for {
		s.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sampleOnce(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range s.c.all() {
		if !p.alive() || p.isStopped() {
			continue
		}
		wg.Go(func() {
			if d, ok := s.sampleDesk(ctx, p); ok {
				s.record(sampleLine{Desk: &d})
			}
		})
	}
	wg.Go(func() {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		r := invariant.RowSample{At: time.Now()}
		row, ok, err := s.c.readRow(rctx)
		r.OK, r.Row = ok, row
		if err != nil {
			r.Err = err.Error()
		} else {
			var h *proc
			if ok && row.Live {
				for _, p := range s.c.live("web") {
					if p.pid == row.PID {
						h = p
					}
				}
			}
			s.holder.Store(h)
		}
		s.record(sampleLine{Row: &r})
	})
	wg.Go(func() { s.trails.sample(ctx, s.c.direct) })
	// The page beside the loop, not in it: a page the database holds up must not space out the
	// lease samples.
	go s.pages.sample(ctx, s.currentHolder(), s.c.staff[auth.RoleViewer])
	wg.Go(func() {
		m := s.sampleMirror(ctx)
		s.record(sampleLine{Mirror: &m})
	})
	wg.Wait()
}

func (s *sampler) sampleDesk(ctx context.Context, p *proc) (invariant.DeskSample, bool) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	d := invariant.DeskSample{Proc: p.name, PID: p.pid, Sent: time.Now()}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/admin/fx/desk", nil)
	req.Header.Set("Authorization", "Bearer "+s.c.staff[auth.RoleViewer])
	resp, err := httpClient.Do(req)
	if err != nil {
		return d, false
	}
	defer resp.Body.Close()
	var b struct {
		Role  string `json:"role"`
		Lease *struct {
			HoldsLease  bool  `json:"holdsLease"`
			Term        int64 `json:"term"`
			TrustLeftMs int64 `json:"trustLeftMs"`
			Lost        bool  `json:"lost"`
		} `json:"lease"`
		Commits *invariant.CommitCounts `json:"commits"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&b) != nil {
		return d, false
	}
	d.Recv = time.Now()
	d.Role, d.Commits = b.Role, b.Commits
	if b.Lease != nil {
		d.HoldsLease, d.Term, d.TrustLeftMs, d.Lost = b.Lease.HoldsLease, b.Lease.Term, b.Lease.TrustLeftMs, b.Lease.Lost
	}
	return d, true
}

func (s *sampler) sampleMirror(ctx context.Context) invariant.MirrorSample {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	m := invariant.MirrorSample{At: time.Now()}
	v, err := s.c.rdb.Get(ctx, redisname.Names{}.QuoteMirrorSnapshot()).Result() // the soak runs the default install
	if errors.Is(err, redis.Nil) {
		return m
	}
	if err != nil {
		m.Err = err.Error()
		return m
	}
	var snap struct {
		PublishedAt string `json:"publishedAt"`
		Term        int64  `json:"term"`
		Quotes      map[string]struct {
			Bid string `json:"bid"`
			Ask string `json:"ask"`
		} `json:"quotes"`
	}
	if err := json.Unmarshal([]byte(v), &snap); err != nil {
		m.Err = "decode snapshot: " + err.Error()
		return m
	}
	m.Present, m.Term, m.PublishedAt = true, snap.Term, snap.PublishedAt
	m.Mids = map[string]float64{}
	for _, sym := range []string{"USDJPY", "EURUSD"} {
		q, ok := snap.Quotes[sym]
		if !ok {
			continue
		}
		bid, e1 := strconv.ParseFloat(q.Bid, 64)
		ask, e2 := strconv.ParseFloat(q.Ask, 64)
		if e1 == nil && e2 == nil {
			m.Mids[sym] = (bid + ask) / 2
		}
	}
	return m
}

func (s *sampler) record(l sampleLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case l.Desk != nil:
		s.desks = append(s.desks, *l.Desk)
	case l.Row != nil:
		s.rows = append(s.rows, *l.Row)
	case l.Mirror != nil:
		s.mirrors = append(s.mirrors, *l.Mirror)
	}
	s.enc.Encode(l)
}

// snapshot copies what has been sampled so far.
func (s *sampler) snapshot() ([]invariant.DeskSample, []invariant.RowSample, []invariant.MirrorSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]invariant.DeskSample(nil), s.desks...), append([]invariant.RowSample(nil), s.rows...), append([]invariant.MirrorSample(nil), s.mirrors...)
}

func (s *sampler) close() { s.f.Close() }

// commitTotals adds up the last group commit counters each web process reported: what every
// holder of the run committed, and how (one round trip, run again after a stale check).
func commitTotals(desks []invariant.DeskSample) invariant.CommitCounts {
	last := map[int]invariant.CommitCounts{}
	for _, d := range desks {
		if d.Commits != nil {
			last[d.PID] = *d.Commits
		}
	}
	var t invariant.CommitCounts
	for _, c := range last {
		t.Batches += c.Batches
		t.Writes += c.Writes
		t.OneTrip += c.OneTrip
		t.Stale += c.Stale
		t.Split += c.Split
		t.Retried += c.Retried
	}
	return t
}
