package soak

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"time"

	"fxdesk/internal/testkit/soak/invariant"
)

// pageEvery is how many samples apart the sampler reads the holder's status page: every 2 s,
// the pace of a dealer's page refreshing itself (every 5 s) in a few tabs.
const pageEvery = 10

// statusPages are the holder's status pages the sampler read (invariant.PageSample).
type statusPages struct {
	mu      sync.Mutex
	n       int
	reading bool // a read under way: the next due one waits for the sample after it
	samples []invariant.PageSample
}

// lotsReadAt is the page's mark of when its book's lots were read (internal/api/status.html).
var lotsReadAt = regexp.MustCompile(`id="exposures-at">lots as read at <time datetime="([^"]+)"`)

// sample reads p's status page every pageEvery calls, as the soak's viewer.
func (sp *statusPages) sample(ctx context.Context, p *proc, token string) {
	sp.mu.Lock()
	sp.n++
	due := sp.n%pageEvery == 1 && p != nil && !sp.reading
	sp.reading = sp.reading || due
	sp.mu.Unlock()
	if !due {
		return
	}
	defer func() {
		sp.mu.Lock()
		sp.reading = false
		sp.mu.Unlock()
	}()
	// The page waits at most a second for each of its parts.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s := invariant.PageSample{Proc: p.name, PID: p.pid, Sent: time.Now()}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/admin/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return // a process stopped or killed under the read: the next sample reads the new one
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return
	}
	s.Recv, s.Code = time.Now(), resp.StatusCode
	if m := lotsReadAt.FindSubmatch(body); m != nil {
		at, err := time.Parse(time.RFC3339Nano, string(m[1]))
		if err != nil {
			s.Unparsed = string(m[1])
		} else {
			s.LotsReadAt = &at
		}
	}
	sp.mu.Lock()
	sp.samples = append(sp.samples, s)
	sp.mu.Unlock()
}

func (sp *statusPages) all() []invariant.PageSample {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return append([]invariant.PageSample(nil), sp.samples...)
}
