package venue

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Venue calls block for the venue's answer, so a gap that closes thousands of EXTERNAL
// positions needs as many calls in flight as it can have, and every one of them needs a worker
// and a connection at that moment. Paying for either in the middle of the burst multiplies a
// call's own time many times over, so both are made before the burst: the workers are started
// and the connections dialled up front, sized from the worst case and capped by configuration,
// and the effective sizes are logged. A configured size that cannot apply (the process's file
// limit, the venue's connection rate) is capped with a warning, never silently.

// ExecutorConfig builds an Executor.
type ExecutorConfig struct {
	// Cap is the most venue calls in flight at once: workers and connections. Calls beyond it
	// wait in a FIFO queue (ExecutorStats.Queued, ObserveQueued).
	Cap int
	// ConnectRate is how many new connections per second the venue accepts (OANDA: 2); warming
	// is paced to it. 0: unpaced (the bundled simulator).
	ConnectRate float64
	// Timeout bounds one call.
	Timeout time.Duration
	// Observer receives the executor's measurements; nil: none.
	Observer ExecutorObserver
	Log      *slog.Logger
}

// ExecutorObserver receives what the executor measures (metrics.Metrics). Its methods run on
// the measured path and must not block or log.
type ExecutorObserver interface {
	// ObserveOwnTime records one call's own time: from its trigger (the tick, or the request's
	// arrival) to the moment its request was written to the socket.
	ObserveOwnTime(d time.Duration)
	// ObserveQueued records how long a call waited for a free worker.
	ObserveQueued(d time.Duration)
	// ObserveConnection records one new connection to the venue; warm is true while warming.
	ObserveConnection(warm bool)
}

// ExecutorStats are the executor's counters.
type ExecutorStats struct {
	Workers             int    `json:"workers"`
	Connections         int64  `json:"connections"`         // dialled since start
	ConnectionsWarm     int64  `json:"connectionsWarm"`     // of them, while warming
	ConnectionsOnDemand int64  `json:"connectionsOnDemand"` // of them, by a call that found none idle
	InFlight            int64  `json:"inFlight"`
	Queued              int64  `json:"queued"`
	Calls               uint64 `json:"calls"`
	Reachable           bool   `json:"reachable"` // the last call or probe reached the venue
}

// Executor runs venue calls on workers started before they are needed, over a transport whose
// connections were dialled before they are needed.
type Executor struct {
	cfg       ExecutorConfig
	log       *slog.Logger
	transport *http.Transport
	client    *http.Client

	jobs    chan *call
	mu      sync.Mutex
	workers int
	// cappedAt is the worst case last warned about as capped (0: none since it fit), so a
	// worst case that stays the same is warned about once, not on every Ensure.
	cappedAt int
	stopped  bool
	stop     chan struct{}
	wg       sync.WaitGroup

	dials, closed, warmDials, demandDials atomic.Int64
	inFlight, queued                      atomic.Int64
	calls                                 atomic.Uint64
	unreachable                           atomic.Bool
	pace                                  chan struct{} // one token per allowed dial when ConnectRate > 0

	burst Burst // own times since the executor was last idle
}

// ownTime records one call's own time (Sender's measure).
func (e *Executor) ownTime(d time.Duration) {
	if e.cfg.Observer != nil {
		e.cfg.Observer.ObserveOwnTime(d)
	}
	e.burst.Observe(d, e.demandDials.Load())
}

// idle ends the current burst: with enough calls in it, one line says what it cost.
func (e *Executor) idle() { e.burst.Idle(e.log, e.demandDials.Load(), e.Stats().Workers) }

type warmKey struct{}

type call struct {
	ctx    context.Context
	fn     func(context.Context) error
	queued time.Time
	done   chan error
	// state decides, once, who answers a queued call: a worker that takes it (callTaken) or
	// its caller giving up on it (callAbandoned: its ctx ended, or the executor stopped).
	state atomic.Int32
}

const (
	callQueued int32 = iota
	callTaken
	callAbandoned
)

// take claims c for the worker or the drain that answers it; false: its caller already gave up.
func (c *call) take() bool { return c.state.CompareAndSwap(callQueued, callTaken) }

// abandon claims c for its caller; false: a worker already took it and will answer.
func (c *call) abandon() bool { return c.state.CompareAndSwap(callQueued, callAbandoned) }

// countedConn counts its Close, so the executor knows how many connections are still open.
type countedConn struct {
	net.Conn
	once   sync.Once
	closed *atomic.Int64
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.closed.Add(1) })
	return c.Conn.Close()
}

// NewExecutor builds an executor with no workers yet; Ensure starts them.
func NewExecutor(cfg ExecutorConfig) (*Executor, error) {
	if cfg.Cap < 1 {
		return nil, fmt.Errorf("venue executor: the cap must be at least 1, got %d", cfg.Cap)
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("venue executor: the call timeout must be positive, got %s", cfg.Timeout)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Executor{cfg: cfg, log: cfg.Log, jobs: make(chan *call, 1<<16), stop: make(chan struct{})}
	if limit, ok := fileLimit(); ok {
		// Every connection is a descriptor; leave half the limit to the database pool, Redis,
		// the listeners and the clients being served.
		if room := int(limit / 2); cfg.Cap > room {
			e.log.Warn("venue executor cap lowered to fit the process's file limit",
				slog.Int("configured", cfg.Cap), slog.Int("effective", room), slog.Uint64("nofile", limit))
			e.cfg.Cap = max(room, 1)
		}
	}
	if cfg.ConnectRate > 0 {
		e.pace = make(chan struct{}, 1)
		go e.paceDials(cfg.ConnectRate)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	e.transport = &http.Transport{
		Proxy: nil, // the venue is dialled directly: a proxy would hide the connections counted here
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			warm := ctx.Value(warmKey{}) != nil
			if e.pace != nil {
				select {
				case <-e.pace:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			e.dials.Add(1)
			conn = &countedConn{Conn: conn, closed: &e.closed}
			if warm {
				e.warmDials.Add(1)
			} else {
				e.demandDials.Add(1)
			}
			if e.cfg.Observer != nil {
				e.cfg.Observer.ObserveConnection(warm)
			}
			return conn, nil
		},
		// Go keeps 2 idle connections per host unless told otherwise: every connection past the
		// second would be closed after its call and dialled again by the next.
		MaxIdleConns:        e.cfg.Cap,
		MaxIdleConnsPerHost: e.cfg.Cap,
		MaxConnsPerHost:     e.cfg.Cap,
		IdleConnTimeout:     0, // kept until the venue closes them; Ensure dials replacements
		// HTTP/1.1 only: one call per connection at a time, so the pool size is the concurrency.
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	// No Timeout here: the venue client bounds each call (ClientConfig.Timeout), which is where
	// a call's failure is classified; ResponseHeaderTimeout bounds a written request's wait.
	e.client = &http.Client{Transport: e.transport}
	return e, nil
}

// HTTPClient is the client the venue's Client must use, so its calls go over these connections.
func (e *Executor) HTTPClient() *http.Client { return e.client }

// Cap is the effective cap (after the file limit).
func (e *Executor) Cap() int { return e.cfg.Cap }

func (e *Executor) paceDials(rate float64) {
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			select {
			case e.pace <- struct{}{}:
			default:
			}
		}
	}
}

// Ensure grows the workers to n (capped) and dials connections until n are open, before the
// calls that need them arrive. probe is a cheap call (the account summary) run on every
// connection at once, each holding its connection until all have one, so that n distinct
// connections are dialled and left idle in the pool. It never shrinks.
func (e *Executor) Ensure(ctx context.Context, n int, probe func(context.Context) error) error {
	want := min(n, e.cfg.Cap)
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return errors.New("venue executor: stopped")
	}
	warnCapped := n > e.cfg.Cap && n != e.cappedAt
	if n > e.cfg.Cap {
		e.cappedAt = n
	} else {
		e.cappedAt = 0
	}
	for e.workers < want {
		e.workers++
		e.wg.Add(1)
		go e.work()
	}
	e.mu.Unlock()
	if warnCapped {
		e.log.WarnContext(ctx, "venue executor capped below the worst case: calls past the cap will queue",
			slog.Int("worst_case", n), slog.Int("cap", e.cfg.Cap))
	}
	open := e.openConnections()
	if open >= want || probe == nil {
		return nil
	}
	if e.pace != nil {
		e.log.InfoContext(ctx, "venue connections warming at the venue's connection rate",
			slog.Int("to_open", want-open), slog.Float64("per_second", e.cfg.ConnectRate),
			slog.Duration("expected", time.Duration(float64(want-open)/e.cfg.ConnectRate*float64(time.Second))))
	}
	err := e.warm(ctx, want, probe)
	if got := e.openConnections(); got < want && ctx.Err() == nil {
		// The pool did not keep what was dialled (the venue closes idle connections, or a limit
		// applied that this process does not see): the burst will pay for the difference.
		e.log.WarnContext(ctx, "venue connection pool smaller than sized: the missing ones will be dialled mid-burst",
			slog.Int("wanted", want), slog.Int("open", got), slog.Any("err", err))
	}
	return err
}

// openConnections is how many connections the pool holds or has lent out: dialled, not yet
// closed. The transport does not say, so the transport's DialContext counts the dials and
// countedConn.Close the closes.
func (e *Executor) openConnections() int { return int(e.dials.Load() - e.closed.Load()) }

func (e *Executor) warm(ctx context.Context, want int, probe func(context.Context) error) error {
	// Every probe holds its connection until all have one. Paced to the venue's connection
	// rate, the last one is dialled want/rate after the first, so the hold — and the probe's
	// own bound, which is the caller's client's — must outlast that.
	hold := e.cfg.Timeout
	if e.cfg.ConnectRate > 0 {
		hold += time.Duration(float64(want) / e.cfg.ConnectRate * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, hold)
	defer cancel()
	var got sync.WaitGroup
	got.Add(want)
	all := make(chan struct{})
	go func() { got.Wait(); close(all) }()
	ctx = context.WithValue(ctx, warmKey{}, true)
	errs := make(chan error, want)
	for range want {
		go func() {
			once := sync.Once{}
			gotConn := func() { once.Do(got.Done) }
			trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
				gotConn()
				// Hold this connection until every probe has one, so each probe dials its own.
				select {
				case <-all:
				case <-ctx.Done():
				}
			}}
			err := probe(httptrace.WithClientTrace(ctx, trace))
			gotConn()
			errs <- err
		}()
	}
	var first error
	for range want {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	e.noteReach(ctx, first)
	return first
}

// noteReach follows what one call says about the venue. Only a connection that could not be
// made says it is unreachable; a lost answer (a timeout, a reset, a 5xx) came from a venue that
// took the request, and a send refused before it left (the gate, a malformed order) says
// nothing about the venue.
func (e *Executor) noteReach(ctx context.Context, err error) {
	switch {
	case isDialError(err):
		e.setReachable(ctx, false)
	case err == nil || !errors.Is(err, ErrNotSent):
		e.setReachable(ctx, true)
	}
}

// Do runs fn on a worker and returns its error. The call waits in a FIFO queue while every
// worker is busy. A call whose ctx ends before a worker takes it is not run and answers
// ErrNotSent at once, as does a queued call when the executor stops. The executor never asks
// the gate: a caller that must not send after the lease moved asks it in fn, as Sender does for
// a queued send (NewSender's admit).
func (e *Executor) Do(ctx context.Context, fn func(context.Context) error) error {
	c := &call{ctx: ctx, fn: fn, queued: time.Now(), done: make(chan error, 1)}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return fmt.Errorf("venue executor stopped: %w", ErrNotSent)
	}
	if e.workers == 0 {
		// Not warmed yet (a call at startup): one worker, so the call is not stranded.
		e.workers++
		e.wg.Add(1)
		go e.work()
	}
	e.queued.Add(1)
	e.mu.Unlock()
	e.jobs <- c
	// The caller waits for its answer, not for the queue: a caller whose deadline passes while
	// every worker is busy is told at once, and a call queued when Close runs is not stranded
	// (Close may drain the queue before this call reached it).
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		if c.abandon() {
			e.queued.Add(-1)
			return fmt.Errorf("venue call not started: %w: %w", ctx.Err(), ErrNotSent)
		}
	case <-e.stop:
		if c.abandon() {
			e.queued.Add(-1)
			return fmt.Errorf("venue executor stopped: %w", ErrNotSent)
		}
	}
	return <-c.done
}

func (e *Executor) work() {
	defer e.wg.Done()
	for {
		select {
		case <-e.stop:
			return
		case c := <-e.jobs:
			if !c.take() {
				continue // its caller gave up and was answered
			}
			e.queued.Add(-1)
			if e.cfg.Observer != nil {
				e.cfg.Observer.ObserveQueued(time.Since(c.queued))
			}
			// select picks at random among ready cases: a worker that finds both a call and
			// the stop must not run the call after Close said queued calls are not sent.
			select {
			case <-e.stop:
				c.done <- fmt.Errorf("venue executor stopped: %w", ErrNotSent)
				return
			default:
			}
			if err := c.ctx.Err(); err != nil {
				c.done <- fmt.Errorf("venue call not started: %w: %w", err, ErrNotSent)
				continue
			}
			e.inFlight.Add(1)
			e.calls.Add(1)
			err := c.fn(c.ctx)
			left := e.inFlight.Add(-1)
			e.noteReach(c.ctx, err)
			c.done <- err
			if left == 0 && e.queued.Load() == 0 {
				e.idle()
			}
		}
	}
}

// Reachable is false after a call or probe could not reach the venue, until one does again.
func (e *Executor) Reachable() bool { return !e.unreachable.Load() }

func (e *Executor) setReachable(ctx context.Context, ok bool) {
	if was := !e.unreachable.Swap(!ok); was != ok {
		if ok {
			e.log.InfoContext(ctx, "venue reachable again")
		} else {
			e.log.WarnContext(ctx, "venue unreachable: EXTERNAL opens are refused until it answers again")
		}
	}
}

// Probe runs probe every interval while the venue is unreachable, so Reachable turns true again
// without waiting for a trader's order to find out. It returns when ctx ends.
func (e *Executor) Probe(ctx context.Context, every time.Duration, probe func(context.Context) error) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if e.Reachable() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		err := probe(pctx)
		cancel()
		e.noteReach(ctx, err)
	}
}

// Stats returns the executor's counters.
func (e *Executor) Stats() ExecutorStats {
	e.mu.Lock()
	w := e.workers
	e.mu.Unlock()
	return ExecutorStats{Workers: w, Connections: e.dials.Load(), ConnectionsWarm: e.warmDials.Load(),
		ConnectionsOnDemand: e.demandDials.Load(), InFlight: e.inFlight.Load(), Queued: e.queued.Load(),
		Calls: e.calls.Load(), Reachable: e.Reachable()}
}

// Run holds the executor open until ctx ends, then closes it: the executor as a part of the
// process, stopped after the work that sends through it.
func (e *Executor) Run(ctx context.Context) error {
	<-ctx.Done()
	e.Close()
	return nil
}

// Close stops the workers once the calls in flight have answered, and closes idle connections.
// Calls still queued are answered ErrNotSent.
func (e *Executor) Close() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	close(e.stop)
	e.mu.Unlock()
	e.wg.Wait()
	for {
		select {
		case c := <-e.jobs:
			if c.take() {
				e.queued.Add(-1)
				c.done <- fmt.Errorf("venue executor stopped: %w", ErrNotSent)
			}
			continue
		default:
		}
		break
	}
	e.transport.CloseIdleConnections()
}

// fileLimit is the process's soft limit on open files.
func fileLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return l.Cur, true
}
