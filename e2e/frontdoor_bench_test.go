package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/testkit/dbtest"
)

// TestBenchFrontDoor measures what the front door's attacks (docs/architecture.md, «The front
// door») still cost, against a real holder with the shipped limits: another trader's GET
// /api/fx/accounts latency and the holder's own lease renews, quiet and then during each attack,
// and the memory one idle stream holds.
//
//   - quiet: the control, measured first and again last;
//   - memory: RSS and Go heap before and after opening FXDESK_BENCH_STREAMS (default 1000) idle
//     streams of every symbol, eight per token (the per-token cap), each token from its own
//     address, with FXDESK_STREAMS_PER_PROCESS raised above them; reported per stream;
//   - stream attack: 2,000 streams asked for at once by one token (eight held, the rest refused),
//     then the refused ones asking again at 2,000/5 a second, as if each obeyed Retry-After;
//   - bad tokens: 64 senders as fast as this process can send, half with fresh random well-formed
//     tokens (each one a lookup) and half with one repeated unknown token (the negative cache),
//     from one address and then from 256 (an attacker the per-address limit does not stop);
//   - idle connections: FXDESK_MAX_CONNS+500 connections that never send a byte, each one opened
//     again when the holder closes it at its header deadline, the refused ones after Retry-After.
//
// The traders (four tokens, one address) each read, then wait out the rest of 25 ms: 40 reads a
// second a token keeps under the per-token limit, which a closed loop at full speed would meet
// before any attack did. EURUSD is quoted every 5 s. The lease renews every second
// (FXDESK_LEASE_TTL=3s), so each phase has ten renews, timed by the holder's own histogram. Each
// phase also reports the processor time the holder, MariaDB and this process (the attacker)
// spent: they share the machine's cores, so the ratios to the quiet control say more than the
// absolute figures, and a flood's cost is partly its sender's.
//
//	FXDESK_BENCH=1 go test -count=1 -run TestBenchFrontDoor -v ./e2e/
//
// FXDESK_BENCH_SECONDS (default 10) sets each measured phase's length, FXDESK_BENCH_GOMAXPROCS
// (default 1) the holder's GOMAXPROCS. The figures are reported, not asserted.
func TestBenchFrontDoor(t *testing.T) {
	dbtest.SkipUnlessBench(t, "front door")
	phase := envDuration("FXDESK_BENCH_SECONDS", 10) * time.Second
	idleStreams := int(envDuration("FXDESK_BENCH_STREAMS", 1000))
	procs := dbtest.BenchProcs(t)
	const (
		maxConns, streamsPerToken = 4096, 8 // the defaults, set here because the phases count on them
		traders, pace             = 4, 25 * time.Millisecond
		attempts, retryAfter      = 2000, 5 // the stream attack, and a stream refusal's Retry-After
		floodSenders              = 64
	)
	d := newTradingDesk(t, "LOG_LEVEL=info", fmt.Sprintf("GOMAXPROCS=%d", procs), "FXDESK_LEASE_TTL=3s", "FXDESK_LEASE_FENCE=1s",
		"FXDESK_TRUSTED_PROXIES=127.0.0.1", "FXDESK_MAX_CONNS="+strconv.Itoa(maxConns), "FXDESK_STREAMS_PER_TOKEN="+strconv.Itoa(streamsPerToken),
		"FXDESK_STREAMS_PER_PROCESS="+strconv.Itoa(idleStreams+100))
	waitRiskReady(d.web)
	// The simulator's walk is off: the same quote every 5 s keeps the provider from being found
	// silent (its reconnect would be part of what is measured) and gives every stream an event.
	defer d.keepQuoting(t, func() float64 { return 1.10000 })()
	tokens := map[int64]string{}
	var accts []int64
	for i := range traders {
		tok, acct := d.newTrader(int64(9500+i), "USD", "100", "10000.00")
		tokens[acct] = tok
		accts = append(accts, acct)
	}
	reader := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: traders, MaxConnsPerHost: traders}}
	get := func(c *http.Client, tok, from string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.web.addr+"/api/fx/accounts", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Forwarded-For", from)
		resp, err := c.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	// measure starts load (when not nil), which returns once its attack is under way, runs the
	// traders' reads for one phase beside it, then ends its context and reads its report from
	// done. The renews are read before load starts and after done, since a load may hold the
	// listener's every connection.
	type result struct {
		name     string
		p50, p99 time.Duration
		reads    int
		refused  map[int]int // the traders' answers other than 200 (0: no answer)
		renews   string
		load     string
		cpu      orderCost // the processor time each side spent in the phase
		warnings []logLine // what the holder logged at warn or error in the phase
	}
	measure := func(name string, load func(ctx context.Context) (done func() string)) result {
		r := result{name: name, refused: map[int]int{}}
		before, from := readRenews(d.web.metrics()), d.web.lineCount()
		ctx, cancel := context.WithCancel(context.Background())
		done := func() string { return "" }
		if load != nil {
			done = load(ctx)
		}
		var mu sync.Mutex
		var lat []time.Duration
		read := func(acct int64) error {
			t0 := time.Now()
			code := get(reader, tokens[acct], "198.51.100.7")
			el := time.Since(t0)
			mu.Lock()
			if code == http.StatusOK {
				lat = append(lat, el)
			} else {
				r.refused[code]++
			}
			mu.Unlock()
			time.Sleep(time.Until(t0.Add(pace))) // a trader's think time, not a wait for a result
			return nil
		}
		r.cpu.measure(d.web.pid(), phase, func() float64 { return closedLoop(t, traders, phase, accts, read) })
		cancel()
		r.load = done()
		if len(lat) == 0 {
			t.Fatalf("%s: no read of the traders' answered 200 (%v)", name, r.refused)
		}
		slices.Sort(lat)
		r.p50, r.p99, r.reads = percentile(lat, 0.50), percentile(lat, 0.99), len(lat)
		r.renews = readRenews(d.web.metrics()).since(before)
		r.warnings = d.web.matching(from, func(l logLine) bool { return l.level() == "WARN" || l.level() == "ERROR" })
		return r
	}
	var results []result
	results = append(results, measure("quiet", nil))

	// Memory per idle stream, on a holder that has not yet met an attack.
	rss0, heap0 := memory(t, d.web.metrics())
	idleCtx, closeIdle := context.WithCancel(context.Background())
	idle := &streamOpener{ctx: idleCtx, tr: &http.Transport{}, addr: d.web.addr}
	var opened atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100)
	for i := range (idleStreams + streamsPerToken - 1) / streamsPerToken {
		tok, err := auth.Create(audit.WithActor(context.Background(), audit.Actor{Via: "test"}), d.e.sql, int64(20000+i), false, "bench")
		if err != nil {
			t.Fatal(err)
		}
		for range min(streamsPerToken, idleStreams-i*streamsPerToken) {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if code, _ := idle.open(tok, fmt.Sprintf("198.18.%d.%d", i/256, i%256)); code == http.StatusOK {
					opened.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if n := int(opened.Load()); n != idleStreams {
		t.Fatalf("%d of %d idle streams were accepted", n, idleStreams)
	}
	m := d.web.metrics()
	rss1, heap1 := memory(t, m)
	clients, _ := metricValue(m, "fxdesk_sse_clients")
	closeIdle()
	idle.held.Wait()
	idle.tr.CloseIdleConnections()

	// The stream attack: every attempt at once, then the refused ones again at a steady rate.
	attacker := d.e.issueToken(9600, false)
	results = append(results, measure("stream attack", func(ctx context.Context) func() string {
		attack := &streamOpener{ctx: ctx, tr: &http.Transport{MaxConnsPerHost: 200, MaxIdleConnsPerHost: 200}, addr: d.web.addr}
		var first, retries statusCount
		var asks sync.WaitGroup
		for range attempts {
			asks.Go(func() { first.add(statusOf(attack.open(attacker, "203.0.113.66"))) })
		}
		asks.Wait()
		rate := float64(attempts-first.of(http.StatusOK)) / retryAfter
		asks.Go(func() {
			for next := time.Now(); ctx.Err() == nil; next = next.Add(time.Duration(float64(time.Second) / rate)) {
				time.Sleep(time.Until(next)) // pacing the retries, not waiting for a result
				asks.Go(func() { retries.add(statusOf(attack.open(attacker, "203.0.113.66"))) })
			}
		})
		return func() string {
			asks.Wait()
			attack.held.Wait()
			attack.tr.CloseIdleConnections()
			return fmt.Sprintf("%d streams asked for at once answered %s; retries at %.0f/s answered %s", attempts, &first, rate, &retries)
		}
	}))

	// Bad tokens as fast as this process sends them.
	badTokens := func(addrs int) func(ctx context.Context) func() string {
		return func(ctx context.Context) func() string {
			flood := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: floodSenders, MaxConnsPerHost: floodSenders}}
			repeated := randomToken()
			var answers statusCount
			var senders sync.WaitGroup
			start := time.Now()
			for i := range floodSenders {
				senders.Go(func() {
					for n := 0; ctx.Err() == nil; n++ {
						tok := repeated
						if i%2 == 1 {
							tok = randomToken()
						}
						answers.add(get(flood, tok, fmt.Sprintf("192.0.2.%d", (i*1000+n)%addrs)))
					}
				})
			}
			return func() string {
				senders.Wait()
				flood.CloseIdleConnections()
				return fmt.Sprintf("%.0f requests/s from %d address(es), answered %s", float64(answers.total())/time.Since(start).Seconds(), addrs, &answers)
			}
		}
	}
	results = append(results, measure("bad tokens, 1 address", badTokens(1)))
	results = append(results, measure("bad tokens, 256 addresses", badTokens(256)))

	// Idle connections past the cap, kept there; measured once the cap is full.
	results = append(results, measure("idle connections", func(ctx context.Context) func() string {
		const past = 500
		var dials, refused atomic.Int64
		full := make(chan struct{})
		var conns sync.WaitGroup
		for range maxConns + past {
			conns.Go(func() {
				for ctx.Err() == nil {
					wait := true // a failed dial waits as a refused one does
					if c, err := (&net.Dialer{}).DialContext(ctx, "tcp", d.web.addr); err == nil {
						dials.Add(1)
						stop := context.AfterFunc(ctx, func() { c.Close() })
						// A connection past the cap is answered 503 at once; one under it
						// hears nothing until the header deadline closes it.
						line, _ := bufio.NewReader(c).ReadString('\n')
						stop()
						c.Close()
						if wait = strings.HasPrefix(line, "HTTP/1.1 503"); wait && refused.Add(1) == past {
							close(full)
						}
					}
					if !wait {
						continue // closed at its header deadline: opened again at once
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Second): // its Retry-After
					}
				}
			})
		}
		select {
		case <-full:
		case <-time.After(time.Minute):
			t.Fatalf("fewer than %d of %d idle connections refused within a minute", past, maxConns+past)
		}
		return func() string {
			conns.Wait()
			return fmt.Sprintf("%d connections kept open: %d dials, %d refused 503", maxConns+past, dials.Load(), refused.Load())
		}
	}))
	results = append(results, measure("quiet again", nil))

	t.Logf("holder GOMAXPROCS=%d, FXDESK_MAX_CONNS=%d, FXDESK_STREAMS_PER_TOKEN=%d, default rate limits; %d traders reading every %s from one address, phases of %s",
		procs, maxConns, streamsPerToken, traders, pace, phase)
	quiet := results[0]
	for _, r := range results {
		t.Logf("%-26s reads p50 %-9s (×%.2f) p99 %-9s (×%.2f), %d reads, refused %v; renews %s",
			r.name+":", r.p50.Round(10*time.Microsecond), float64(r.p50)/float64(quiet.p50),
			r.p99.Round(10*time.Microsecond), float64(r.p99)/float64(quiet.p99), r.reads, r.refused, r.renews)
		t.Logf("%-26s processor: fxdesk-web %s, mariadbd %s, this process %s", "", share(r.cpu.web, phase), share(r.cpu.db, phase), share(r.cpu.bench, phase))
		if r.load != "" {
			t.Logf("%-26s %s", "", r.load)
		}
		for _, l := range r.warnings {
			t.Logf("%-26s holder logged %s %q: %v", "", l.level(), l.msg(), l)
		}
	}
	t.Logf("memory per idle stream: RSS %.1f KiB (%.1f → %.1f MiB), Go heap in use %.1f KiB (%.1f → %.1f MiB), over %d streams (fxdesk_sse_clients %s)",
		(rss1-rss0)/float64(idleStreams)/1024, rss0/(1<<20), rss1/(1<<20),
		(heap1-heap0)/float64(idleStreams)/1024, heap0/(1<<20), heap1/(1<<20), idleStreams, clients)
}

// statusOf is the status of an answer, without its Retry-After.
func statusOf(status int, _ string) int { return status }

// share is d as a percentage of one core over length.
func share(d, length time.Duration) string {
	return fmt.Sprintf("%.0f%%", 100*d.Seconds()/length.Seconds())
}

// randomToken is a well-formed token (the prefix and 32 random bytes, as auth.Create gives) that
// no desk issued.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "fxd_" + base64.RawURLEncoding.EncodeToString(b)
}

// statusCount counts answers by status (0: no answer); safe for concurrent use.
type statusCount struct {
	mu sync.Mutex
	n  map[int]int
}

func (s *statusCount) add(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[int]int{}
	}
	s.n[code]++
}

func (s *statusCount) of(code int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[code]
}

func (s *statusCount) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.n {
		n += v
	}
	return n
}

func (s *statusCount) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.n)
}

// memory is the holder's resident set and Go heap in use, in bytes, from its /metrics.
func memory(t *testing.T, metrics string) (rss, heap float64) {
	t.Helper()
	for series, v := range map[string]*float64{"process_resident_memory_bytes": &rss, "go_memstats_heap_inuse_bytes": &heap} {
		s, _ := metricValue(metrics, series)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("/metrics has no %s: %q", series, s)
		}
		*v = f
	}
	return rss, heap
}

// renewTimes is the holder's fxdesk_lease_renew_seconds histogram at one moment.
type renewTimes struct {
	ok, failed int             // renews by outcome; failed counts lost ones too
	sum        float64         // seconds, over the ok ones
	atMost     map[float64]int // ok renews at or under each bucket's bound
}

func readRenews(metrics string) renewTimes {
	r := renewTimes{ok: renewCount(metrics, "ok"), failed: renewCount(metrics, "failed") + renewCount(metrics, "lost"), atMost: map[float64]int{}}
	s, _ := metricValue(metrics, `fxdesk_lease_renew_seconds_sum{outcome="ok"}`)
	r.sum, _ = strconv.ParseFloat(s, 64)
	const prefix = `fxdesk_lease_renew_seconds_bucket{outcome="ok",le="`
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		le, count, _ := strings.Cut(rest, `"} `)
		bound, err1 := strconv.ParseFloat(le, 64) // +Inf parses as infinity
		n, err2 := strconv.Atoi(count)
		if err1 == nil && err2 == nil {
			r.atMost[bound] = n
		}
	}
	return r
}

// since describes the renews between b and r: how many, their mean, the bucket bound the slowest
// was under, and how many failed.
func (r renewTimes) since(b renewTimes) string {
	n := r.ok - b.ok
	if n == 0 {
		return fmt.Sprintf("none succeeded, %d failed", r.failed-b.failed)
	}
	slowest := "?"
	for _, le := range slices.Sorted(maps.Keys(r.atMost)) {
		if math.IsInf(le, 1) {
			slowest = "∞ (past the last bucket)"
			break
		}
		if r.atMost[le]-b.atMost[le] == n {
			slowest = (time.Duration(le * float64(time.Second))).String()
			break
		}
	}
	return fmt.Sprintf("%d ok, mean %s, slowest ≤ %s, %d failed", n, time.Duration((r.sum-b.sum)/float64(n)*float64(time.Second)).Round(10*time.Microsecond), slowest, r.failed-b.failed)
}
