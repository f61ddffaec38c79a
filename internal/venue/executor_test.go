package venue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/venue"
)

// observer records what an executor measures. connected is signalled on every dial, owned on
// every own time, so tests wait on them instead of on the clock.
type observer struct {
	mu         sync.Mutex
	own        []time.Duration
	queuedWait []time.Duration
	warm, cold int
	dialedAt   []time.Time
	owned      chan time.Duration
	onDial     func(warm bool)
}

func newObserver() *observer { return &observer{owned: make(chan time.Duration, 1024)} }

func (o *observer) ObserveOwnTime(d time.Duration) {
	o.mu.Lock()
	o.own = append(o.own, d)
	o.mu.Unlock()
	select { // never block the executor on a test that stopped reading (own is the full record)
	case o.owned <- d:
	default:
	}
}

func (o *observer) ObserveQueued(d time.Duration) {
	o.mu.Lock()
	o.queuedWait = append(o.queuedWait, d)
	o.mu.Unlock()
}

func (o *observer) ObserveConnection(warm bool) {
	o.mu.Lock()
	if warm {
		o.warm++
	} else {
		o.cold++
	}
	o.dialedAt = append(o.dialedAt, time.Now())
	fn := o.onDial
	o.mu.Unlock()
	if fn != nil {
		fn(warm)
	}
}

func (o *observer) setOnDial(fn func(warm bool)) {
	o.mu.Lock()
	o.onDial = fn
	o.mu.Unlock()
}

func (o *observer) snapshot() observer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return observer{own: append([]time.Duration(nil), o.own...), queuedWait: append([]time.Duration(nil), o.queuedWait...),
		warm: o.warm, cold: o.cold, dialedAt: append([]time.Time(nil), o.dialedAt...)}
}

func newExecutor(t *testing.T, cfg venue.ExecutorConfig) *venue.Executor {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	e, err := venue.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// execClient is a client of sim whose calls go over e's connections.
func execClient(t *testing.T, sim *venuesim.Server, e *venue.Executor) *venue.Client {
	t.Helper()
	c, err := venue.NewClient(venue.ClientConfig{BaseURL: sim.URL(), AccountID: sim.AccountID(), Token: token, HTTP: e.HTTPClient(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func summaryProbe(c *venue.Client) func(context.Context) error {
	return func(ctx context.Context) error { _, err := c.Summary(ctx); return err }
}

// blocker is a call that holds its worker until released, and says when it started.
type blocker struct {
	started, released chan struct{}
	once              *sync.Once
}

// newBlocker's call is released at the latest when the test ends, so that a failed test does
// not leave Close waiting for it.
func newBlocker(t *testing.T) blocker {
	b := blocker{started: make(chan struct{}), released: make(chan struct{}), once: &sync.Once{}}
	t.Cleanup(b.release)
	return b
}

func (b blocker) release() { b.once.Do(func() { close(b.released) }) }

func (b blocker) fn(context.Context) error {
	close(b.started)
	<-b.released
	return nil
}

func wait(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitErr(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

// warnings counts the warnings logged, by message.
type warnings struct {
	mu  sync.Mutex
	msg map[string]int
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		w.mu.Lock()
		w.msg[r.Message]++
		w.mu.Unlock()
	}
	return nil
}

func (w *warnings) count(msg string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.msg[msg]
}

// The job re-sizes the executor every interval: a worst case above the cap is warned about when
// it changes, not on every Ensure that finds it unchanged.
func TestCappedWarnsOncePerWorstCase(t *testing.T) {
	t.Parallel()
	const capped = "venue executor capped below the worst case: calls past the cap will queue"
	w := &warnings{msg: map[string]int{}}
	e := newExecutor(t, venue.ExecutorConfig{Cap: 2, Log: slog.New(w)})
	ctx := context.Background()
	for i, step := range []struct {
		n, warned int
	}{
		{n: 5, warned: 1},
		{n: 5, warned: 1}, // unchanged: no new warning
		{n: 7, warned: 2},
		{n: 2, warned: 2}, // fits the cap
		{n: 7, warned: 3}, // capped again after it fit
	} {
		if err := e.Ensure(ctx, step.n, nil); err != nil {
			t.Fatal(err)
		}
		if got := w.count(capped); got != step.warned {
			t.Fatalf("step %d, Ensure(%d): %d capped warnings, want %d", i, step.n, got, step.warned)
		}
	}
}

// Ensure(n) dials n distinct connections before the burst; a burst of n calls at once, every one
// holding its connection until all are in flight, then finds them all idle and dials none.
func TestEnsureWarmsDistinctConnectionsAndTheBurstDialsNone(t *testing.T) {
	t.Parallel()
	const n = 8
	sim := startVenue(t)
	obs := newObserver()
	e := newExecutor(t, venue.ExecutorConfig{Cap: 32, Observer: obs})
	c := execClient(t, sim, e)
	ctx := context.Background()

	if err := e.Ensure(ctx, n, summaryProbe(c)); err != nil {
		t.Fatal(err)
	}
	st, es := sim.State(), e.Stats()
	if st.Connections != n || st.OpenConnections != n || venue.OpenConnections(e) != n {
		t.Fatalf("after Ensure(%d): the venue accepted %d, holds %d open, the executor counts %d", n, st.Connections, st.OpenConnections, venue.OpenConnections(e))
	}
	if es.Workers != n || es.Connections != n || es.ConnectionsWarm != n || es.ConnectionsOnDemand != 0 || !es.Reachable {
		t.Fatalf("stats after Ensure: %+v", es)
	}
	// Ensure again with the connections open dials nothing.
	if err := e.Ensure(ctx, n, summaryProbe(c)); err != nil || e.Stats().Connections != n {
		t.Fatalf("a second Ensure: %v, %+v", err, e.Stats())
	}

	// The burst: n orders whose answers the venue holds, so all n are on their own connection
	// at once before any is answered.
	if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultHold, Count: n}); err != nil {
		t.Fatal(err)
	}
	sender := venue.NewSender(c, e, sim.AccountID(), nil)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := sender.PlaceMarket(ctx, market(fmt.Sprintf("B%d", i), "1000"), time.Now())
			errs <- err
		}()
	}
	waitFor(t, "every order of the burst held at the venue", func() bool { return sim.State().Held == n })
	if es := e.Stats(); es.InFlight != n {
		t.Fatalf("in flight during the burst: %+v", es)
	}
	sim.Release()
	for range n {
		if err := waitErr(t, "a burst answer", errs); err != nil {
			t.Fatal(err)
		}
	}
	st, es = sim.State(), e.Stats()
	if st.Connections != n || es.Connections != n || es.ConnectionsOnDemand != 0 || st.OrdersExecuted != n {
		t.Fatalf("after the burst: venue accepted %d connections, executed %d; executor %+v", st.Connections, st.OrdersExecuted, es)
	}
	if o := obs.snapshot(); o.warm != n || o.cold != 0 {
		t.Fatalf("observed %d warm and %d on-demand connections", o.warm, o.cold)
	}
}

// Calls past the cap wait in arrival order, and the wait is measured. One worker, so that the
// order calls start in is the order they were taken in.
func TestCallsPastTheCapQueueFIFO(t *testing.T) {
	t.Parallel()
	obs := newObserver()
	e := newExecutor(t, venue.ExecutorConfig{Cap: 1, Observer: obs})
	ctx := context.Background()
	if err := e.Ensure(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	b := newBlocker(t)
	done := make(chan error, 8)
	go func() { done <- e.Do(ctx, b.fn) }()
	wait(t, "the worker busy", b.started)

	const queued = 5
	var mu sync.Mutex
	var order []int
	for i := range queued {
		go func() {
			done <- e.Do(ctx, func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			})
		}()
		// One at a time, so that arrival order is known.
		waitFor(t, fmt.Sprintf("call %d queued", i), func() bool { return e.Stats().Queued == int64(i+1) })
	}
	allQueued := time.Now()
	if st := e.Stats(); st.InFlight != 1 || st.Queued != queued {
		t.Fatalf("while the worker is busy: %+v", st)
	}
	releaseAt := time.Now()
	b.release()
	for range queued + 1 {
		if err := waitErr(t, "a call to answer", done); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := fmt.Sprint(order)
	mu.Unlock()
	if got != "[0 1 2 3 4]" {
		t.Fatalf("queued calls ran in order %s, want FIFO", got)
	}
	o := obs.snapshot()
	if len(o.queuedWait) != queued+1 {
		t.Fatalf("ObserveQueued called %d times for %d calls", len(o.queuedWait), queued+1)
	}
	// Every queued call was queued before allQueued and taken after releaseAt: its wait is at
	// least that long.
	var waited int
	for _, d := range o.queuedWait {
		if d >= releaseAt.Sub(allQueued) && d > 0 {
			waited++
		}
	}
	if waited < queued {
		t.Fatalf("queue waits %v: only %d of %d queued calls show their wait", o.queuedWait, waited, queued)
	}
	if st := e.Stats(); st.Queued != 0 || st.InFlight != 0 || st.Calls != queued+1 {
		t.Fatalf("after the queue drained: %+v", st)
	}
}

// A queued call whose context ends answers ErrNotSent at once, while the workers are still busy,
// and never runs.
func TestQueuedCallCancelledIsNotSent(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, venue.ExecutorConfig{Cap: 1})
	ctx := context.Background()
	if err := e.Ensure(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	b := newBlocker(t)
	first := make(chan error, 1)
	go func() { first <- e.Do(ctx, b.fn) }()
	wait(t, "the worker busy", b.started)

	qctx, cancel := context.WithCancel(ctx)
	var ran atomic.Bool
	queued := make(chan error, 1)
	go func() { queued <- e.Do(qctx, func(context.Context) error { ran.Store(true); return nil }) }()
	waitFor(t, "the call queued", func() bool { return e.Stats().Queued == 1 })
	cancel()
	err := waitErr(t, "the cancelled call to answer while the worker is still busy", queued)
	if !errors.Is(err, venue.ErrNotSent) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued call: %v, want ErrNotSent", err)
	}
	if st := e.Stats(); st.Queued != 0 {
		t.Fatalf("the abandoned call still counts as queued: %+v", st)
	}
	b.release()
	if err := waitErr(t, "the first call", first); err != nil {
		t.Fatal(err)
	}
	// The worker is free and takes the next call; the abandoned one was never run.
	if err := e.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if ran.Load() || e.Stats().Calls != 2 {
		t.Fatalf("the cancelled call ran (%v) or was counted: %+v", ran.Load(), e.Stats())
	}
}

// Close lets the call in flight answer, answers every queued call ErrNotSent without running
// it, and refuses calls after it.
func TestCloseAnswersQueuedCallsNotSent(t *testing.T) {
	t.Parallel()
	e, err := venue.NewExecutor(venue.ExecutorConfig{Cap: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Ensure(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	b := newBlocker(t)
	first := make(chan error, 1)
	go func() {
		first <- e.Do(ctx, func(ctx context.Context) error { b.fn(ctx); return errors.New("the in-flight answer") })
	}()
	wait(t, "the worker busy", b.started)

	const queued = 6
	var ran atomic.Int32
	answers := make(chan error, queued)
	for range queued {
		go func() { answers <- e.Do(ctx, func(context.Context) error { ran.Add(1); return nil }) }()
	}
	waitFor(t, "the calls queued", func() bool { return e.Stats().Queued == queued })
	closed := make(chan struct{})
	go func() { e.Close(); close(closed) }()
	// Close has stopped the executor once Ensure refuses; the call in flight is still running.
	waitFor(t, "the executor stopped", func() bool { return e.Ensure(ctx, 0, nil) != nil })
	b.release()
	wait(t, "Close to return", closed)
	if err := waitErr(t, "the in-flight call", first); err == nil || err.Error() != "the in-flight answer" {
		t.Fatalf("the call in flight answered %v, want its own answer", err)
	}
	for range queued {
		if err := waitErr(t, "a queued call", answers); !errors.Is(err, venue.ErrNotSent) {
			t.Fatalf("a queued call after Close: %v, want ErrNotSent", err)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d queued calls ran after Close", n)
	}
	if err := e.Do(ctx, func(context.Context) error { ran.Add(1); return nil }); !errors.Is(err, venue.ErrNotSent) || ran.Load() != 0 {
		t.Fatalf("a call after Close: %v (ran %d)", err, ran.Load())
	}
	e.Close() // twice is harmless
}

// A refused connection (an outage) makes the venue unreachable; Probe notices it is back.
func TestReachableFollowsAnOutageAndProbe(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	e := newExecutor(t, venue.ExecutorConfig{Cap: 4})
	c := execClient(t, sim, e)
	ctx := context.Background()
	if err := e.Ensure(ctx, 2, summaryProbe(c)); err != nil || !e.Reachable() {
		t.Fatalf("Ensure: %v, reachable %v", err, e.Reachable())
	}
	if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultOutage, Duration: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// The outage cut the pooled connections; once the transport has seen them close, the next
	// call must dial, and the dial is refused.
	waitFor(t, "the cut connections counted closed", func() bool { return venue.OpenConnections(e) == 0 })
	err := e.Do(ctx, summaryProbe(c))
	if !errors.Is(err, venue.ErrNotSent) {
		t.Fatalf("a call during the outage: %v, want ErrNotSent (refused)", err)
	}
	if e.Reachable() || e.Stats().Reachable {
		t.Fatal("still reachable after a refused connection")
	}

	// Probe until a probe succeeds; the successful probe ends the Probe loop, which must have
	// set Reachable before it looks at its context again.
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var probes, failed atomic.Int32
	probe := func(ctx context.Context) error {
		probes.Add(1)
		err := summaryProbe(c)(ctx)
		if err != nil {
			failed.Add(1)
		} else {
			stop()
		}
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- e.Probe(pctx, 10*time.Millisecond, probe) }()
	if err := waitErr(t, "Probe to see the venue back", ended); err != nil {
		t.Fatal(err)
	}
	if !e.Reachable() {
		t.Fatalf("not reachable after a successful probe (%d probes, %d failed)", probes.Load(), failed.Load())
	}
	if sim.State().OutageUntil != nil {
		t.Fatal("a probe succeeded during the outage")
	}
	// Ensure dials replacements for the cut connections.
	before := e.Stats().ConnectionsWarm
	if err := e.Ensure(ctx, 2, summaryProbe(c)); err != nil || venue.OpenConnections(e) < 2 || e.Stats().ConnectionsWarm <= before {
		t.Fatalf("re-warm after the outage: %v, open %d, %+v", err, venue.OpenConnections(e), e.Stats())
	}
}

// Own time is reported once per send, positive, at the moment the request is written: a send
// whose answer the venue holds reports before the answer comes. Reads report nothing.
func TestOwnTimeObservedOncePerSend(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	obs := newObserver()
	e := newExecutor(t, venue.ExecutorConfig{Cap: 4, Observer: obs})
	c := execClient(t, sim, e)
	s := venue.NewSender(c, e, sim.AccountID(), nil)
	ctx := context.Background()
	if err := e.Ensure(ctx, 2, summaryProbe(c)); err != nil {
		t.Fatal(err)
	}

	var trade string
	const sends = 4
	for i := range sends {
		trigger := time.Now()
		out, err := s.PlaceMarket(ctx, market(fmt.Sprintf("O%d", i), "1000"), trigger)
		if err != nil || out.Fill == nil {
			t.Fatalf("send %d: %+v %v", i, out, err)
		}
		trade = out.Fill.TradeOpened
		select {
		case d := <-obs.owned:
			if d <= 0 || d > time.Since(trigger) {
				t.Fatalf("send %d: own time %v outside (0, %v]", i, d, time.Since(trigger))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("send %d: no own time observed", i)
		}
	}
	if _, err := s.CloseTrade(ctx, trade, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	<-obs.owned

	// A held answer: the own time arrives while the answer is still held.
	if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultHold}); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { _, err := s.PlaceMarket(ctx, market("H1", "1000"), time.Now()); held <- err }()
	select {
	case <-obs.owned:
	case <-time.After(5 * time.Second):
		t.Fatal("no own time while the answer was held: it measured the answer, not the write")
	}
	waitFor(t, "the answer held", func() bool { return sim.State().Held == 1 })
	sim.Release()
	if err := waitErr(t, "the held send", held); err != nil {
		t.Fatal(err)
	}

	// Reads, untimed calls and a send with no trigger report nothing.
	if _, _, err := s.TradeByID(ctx, trade); err != nil {
		t.Fatal(err)
	}
	if err := e.Do(ctx, summaryProbe(c)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PlaceMarket(ctx, market("Z1", "1000"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if o := obs.snapshot(); len(o.own) != sends+2 {
		t.Fatalf("own time observed %d times for %d timed sends: %v", len(o.own), sends+2, o.own)
	}
}

// With a connection rate the dials are spaced: while warming, the first dial happens alone and
// the others wait for their turn (a warm cancelled at the first dial has dialled one), and the
// rest follow one per turn. Unpaced, the same warm dials them all.
func TestConnectRatePacesDials(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	const n = 4
	// Two dials a second: the second turn is half a second after the first, far longer than it
	// takes to dial loopback and cancel.
	obs := newObserver()
	e := newExecutor(t, venue.ExecutorConfig{Cap: n, ConnectRate: 2, Observer: obs})
	c := execClient(t, sim, e)
	ctx, cancel := context.WithCancel(context.Background())
	obs.setOnDial(func(bool) { cancel() })
	err := e.Ensure(ctx, n, summaryProbe(c))
	if err == nil {
		t.Fatal("Ensure cancelled after its first dial reported success")
	}
	if got := obs.snapshot(); got.warm != 1 || got.cold != 0 {
		t.Fatalf("paced warm cancelled after the first dial: %d warm and %d cold dials, want 1 and 0", got.warm, got.cold)
	}
	if st := sim.State(); st.Connections > 1 {
		t.Fatalf("the venue accepted %d connections from a paced warm cancelled after one dial", st.Connections)
	}
	// Dials continue at the pace afterwards: a full warm reaches n, one dial per turn.
	obs.setOnDial(nil)
	began := time.Now()
	if err := e.Ensure(context.Background(), n, summaryProbe(c)); err != nil {
		t.Fatal(err)
	}
	got := obs.snapshot()
	if venue.OpenConnections(e) != n || got.warm < n {
		t.Fatalf("paced warm: %d open, %d dials", venue.OpenConnections(e), got.warm)
	}
	for i := 1; i < len(got.dialedAt); i++ {
		if !got.dialedAt[i].After(got.dialedAt[i-1]) {
			t.Fatalf("dials %d and %d at the same instant: %v", i-1, i, got.dialedAt)
		}
	}
	// At most one token is banked, so the dials after the first cost a turn each.
	if elapsed := time.Since(began); elapsed < time.Duration(got.warm-2)*500*time.Millisecond {
		t.Fatalf("%d paced dials took %v, faster than two a second", got.warm, elapsed)
	}

	// Unpaced: all n at once.
	sim2 := startVenue(t)
	obs2 := newObserver()
	e2 := newExecutor(t, venue.ExecutorConfig{Cap: n, Observer: obs2})
	if err := e2.Ensure(context.Background(), n, summaryProbe(execClient(t, sim2, e2))); err != nil {
		t.Fatal(err)
	}
	if got := obs2.snapshot(); got.warm != n || sim2.State().Connections != n {
		t.Fatalf("unpaced warm: %d dials, %d accepted", got.warm, sim2.State().Connections)
	}
}
