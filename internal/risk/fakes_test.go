package risk

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/tick"
)

type fakePrices struct {
	mu     sync.Mutex
	q      map[string]tick.Quote
	states map[string]tick.State // absent: QUOTING
}

func (p *fakePrices) SymbolState(s string) tick.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.states[s]; ok {
		return st
	}
	return tick.Quoting
}

// setState sets symbol's session state as the tick engine would report it.
func (p *fakePrices) setState(s string, st tick.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.states == nil {
		p.states = map[string]tick.State{}
	}
	p.states[s] = st
}

func (p *fakePrices) LastTick(s string) (tick.Quote, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.q[s]
	return q, ok
}

func (p *fakePrices) set(s string, bid, ask float64) tick.Update {
	q := tick.Quote{Bid: bid, Ask: ask, ReceivedAt: time.Now(), ProviderTime: time.Now()}
	p.mu.Lock()
	if p.q == nil {
		p.q = map[string]tick.Quote{}
	}
	p.q[s] = q
	p.mu.Unlock()
	return tick.Update{Symbol: s, Quote: q}
}

// realGate returns a gate over l that logs to log and counts in dropped (a fresh series if nil).
func realGate(t testing.TB, l gate.Lease, log *slog.Logger, dropped *prometheus.CounterVec) *gate.Gate {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if dropped == nil {
		dropped = gate.NewDropped()
	}
	g, err := gate.New(gate.Config{Lease: l, Log: log, Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type call struct {
	kind    jobKind
	id      int64
	account int64 // a close's account; 0 in a wanted call: not checked
	reason  fx.CloseReason
	at      tick.Quote
	stop    *StopOut // a stop-out's decision
}

// fakeExec records every call. answer, when set, decides the error; block, when set, is waited
// on by every call after entered is signalled.
type fakeExec struct {
	mu      sync.Mutex
	calls   []call
	answer  func(call) error
	entered chan call
	block   chan struct{}
}

func (x *fakeExec) do(c call) error {
	x.mu.Lock()
	x.calls = append(x.calls, c)
	answer, entered, block := x.answer, x.entered, x.block
	x.mu.Unlock()
	if entered != nil {
		select { // never block the engine on a test that stopped reading: it would hang its stop
		case entered <- c:
		default:
		}
	}
	if block != nil {
		<-block
	}
	if answer != nil {
		return answer(c)
	}
	return nil
}

func (x *fakeExec) Close(_ context.Context, id, account int64, reason fx.CloseReason, at tick.Quote) error {
	return x.do(call{kind: jobClose, id: id, account: account, reason: reason, at: at})
}

func (x *fakeExec) StopOut(_ context.Context, id, account int64, at tick.Quote, why StopOut) error {
	return x.do(call{kind: jobClose, id: id, account: account, reason: fx.CloseStopOut, at: at, stop: &why})
}

func (x *fakeExec) Fill(_ context.Context, id int64, at tick.Quote) error {
	return x.do(call{kind: jobFill, id: id, at: at})
}

func (x *fakeExec) got() []call {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]call(nil), x.calls...)
}

// fakeAlerts records every alert; fail, when set, decides from the account and how many alerts
// it has had (this one included) whether this one fails.
type fakeAlerts struct {
	mu      sync.Mutex
	levels  map[int64][]float64
	cleared map[int64][]float64 // the ends of margin calls recorded
	fail    func(id int64, n int) bool
}

func (a *fakeAlerts) MarginCallCleared(_ context.Context, id int64, level float64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cleared == nil {
		a.cleared = map[int64][]float64{}
	}
	a.cleared[id] = append(a.cleared[id], level)
	return nil
}

func (a *fakeAlerts) clears(id int64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cleared[id])
}

func (a *fakeAlerts) MarginCall(_ context.Context, id int64, level float64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.levels == nil {
		a.levels = map[int64][]float64{}
	}
	a.levels[id] = append(a.levels[id], level)
	if a.fail != nil && a.fail(id, len(a.levels[id])) {
		return errors.New("alert channel down")
	}
	return nil
}

func (a *fakeAlerts) count(id int64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.levels[id])
}

type loaderFunc func(context.Context) (Snapshot, error)

func (f loaderFunc) Load(ctx context.Context) (Snapshot, error) { return f(ctx) }

type logBuffer struct{ dbtest.LogBuffer }

// lines counts the log lines that contain every one of parts.
func (l *logBuffer) lines(parts ...string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// recv waits for the next value on ch. The deadline only turns a hang into a failure; nothing
// is synchronised by it.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived within 10s")
		panic("unreachable")
	}
}

// rig is one engine running over fakes. Ticks are evaluated synchronously through onTick, and
// settle waits (on the queue's idle signal, never on a timer) until the workers are done.
type rig struct {
	t           *testing.T
	e           *Engine
	prices      *fakePrices
	gate        *gatetest.Lease
	gateDropped *prometheus.CounterVec // the gate's series
	exec        *fakeExec
	alerts      *fakeAlerts
	logs        *logBuffer
	updates     chan tick.Update
	owns        atomic.Int64
	dropped     atomic.Uint64 // what Config.Dropped answers
}

func instruments() []Instrument {
	return []Instrument{
		{Symbol: "EURUSD", Base: "EUR", Quote: "USD", ContractSize: 100_000, LeverageMax: 500, HedgedMarginRate: 0.5},
		{Symbol: "GBPUSD", Base: "GBP", Quote: "USD", ContractSize: 100_000, LeverageMax: 500, HedgedMarginRate: 0.5},
		{Symbol: "USDJPY", Base: "USD", Quote: "JPY", ContractSize: 100_000, LeverageMax: 500, HedgedMarginRate: 0.5},
	}
}

// rich is an account whose margin never matters.
func rich(id int64) Account {
	return Account{ID: id, Currency: "USD", Balance: 1e9, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
}

func newRig(t *testing.T, snap Snapshot, workers int, prep func(*rig)) *rig {
	t.Helper()
	r := &rig{t: t, prices: &fakePrices{}, gate: &gatetest.Lease{}, exec: &fakeExec{}, alerts: &fakeAlerts{}, logs: &logBuffer{},
		updates: make(chan tick.Update, 16), gateDropped: gate.NewDropped()}
	if prep != nil {
		prep(r)
	}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := New(Config{
		Loader:    loaderFunc(func(context.Context) (Snapshot, error) { return snap, nil }),
		Prices:    r.prices,
		Updates:   r.updates,
		Executor:  r.exec,
		Gate:      realGate(t, r.gate, log, r.gateDropped),
		Alerts:    r.alerts,
		Workers:   workers,
		Log:       log,
		Observe:   func(time.Duration) { r.owns.Add(1) },
		Dropped:   r.dropped.Load,
		DropCheck: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err, ok := poll.Receive(t, done, 10*time.Second, "Run returning after its context ended"); ok && err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	recv(t, e.Ready())
	r.settle()
	return r
}

// tick sets symbol's price and evaluates it as the tick path would.
func (r *rig) tick(symbol string, bid, ask float64) tick.Update {
	u := r.prices.set(symbol, bid, ask)
	r.e.onTick(context.Background(), u, time.Now())
	r.settle()
	return u
}

func (r *rig) settle() {
	r.e.work.waitIdle()
	r.e.alerts.waitIdle()
	r.e.mu.Lock()
	r.e.drainLocked(context.Background())
	r.e.mu.Unlock()
}

func (r *rig) wantCalls(want ...call) {
	r.t.Helper()
	got := r.exec.got()
	if len(got) != len(want) {
		r.t.Fatalf("executor calls = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.kind != w.kind || g.id != w.id || g.reason != w.reason || w.account != 0 && g.account != w.account {
			r.t.Fatalf("executor call %d = %+v, want %+v (all: %+v)", i, g, w, got)
		}
		if w.at != (tick.Quote{}) && (g.at.Bid != w.at.Bid || g.at.Ask != w.at.Ask) {
			r.t.Fatalf("executor call %d at bid/ask %v/%v, want %v/%v", i, g.at.Bid, g.at.Ask, w.at.Bid, w.at.Ask)
		}
	}
}

// listedOn reports whether a tick on symbol would consider account id at all: whether the
// account keeps a margin band in that symbol's heaps.
func listedOn(e *Engine, symbol string, id int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	bi, ok := e.bookBySym[symbol]
	if !ok {
		return false
	}
	for _, it := range e.books[bi].lo.items {
		if e.accts[e.bands[it.ref>>1].acct].ID == id {
			return true
		}
	}
	return false
}

// runHeldLoad runs an engine whose load of positions waits for release to close, until the test
// ends (then Run must return): the boot tests' engine, ticks and changes arriving mid-load.
func runHeldLoad(t *testing.T, release <-chan struct{}, positions []Position, prices *fakePrices, updates chan tick.Update, exec *fakeExec, workers int) *Engine {
	t.Helper()
	e, err := New(Config{
		Loader: loaderFunc(func(context.Context) (Snapshot, error) {
			<-release
			return Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: positions}, nil
		}),
		Prices: prices, Updates: updates, Executor: exec, Gate: realGate(t, &gatetest.Lease{}, nil, nil), Workers: workers,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); poll.Receive(t, done, 10*time.Second, "Run returning after its context ended") })
	return e
}
