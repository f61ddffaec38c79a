package tick

import (
	"context"
	"fxdesk/internal/sim/feedsim"
	"log/slog"
	"math"
	"testing"
	"time"
)

// handSource is a Source the test drives by hand through the engine's feed; it never connects
// anything itself.
type handSource struct{ name string }

func (h handSource) Name() string { return h.name }
func (h handSource) Run(ctx context.Context, _ Feed) error {
	<-ctx.Done()
	return nil
}

// rig is an engine with hand-driven sources on a test clock; it is not Run, so nothing happens
// but what the test does (sweeps included).
type rig struct {
	t     *testing.T
	e     *Engine
	clock *testClock
	sw    <-chan Switch
	upd   <-chan Update
}

func newRig(t *testing.T, cfg Config, names ...string) *rig {
	t.Helper()
	clock := newTestClock()
	cfg.Now = clock.Now
	for _, n := range names {
		cfg.Sources = append(cfg.Sources, handSource{n})
	}
	e := New(cfg, slog.New(slog.DiscardHandler))
	if err := e.SetWanted([]string{"EURUSD", "USDJPY"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.srcs {
		s.SetConnected(true, nil)
	}
	sw, cancelSw := e.Switches()
	upd, cancelUpd := e.Updates([]string{"EURUSD"})
	t.Cleanup(func() { cancelSw(); cancelUpd() })
	return &rig{t: t, e: e, clock: clock, sw: sw, upd: upd}
}

func (r *rig) feed(name string) Feed {
	r.t.Helper()
	i := r.e.sourceIndex(name)
	if i < 0 {
		r.t.Fatalf("no source %q", name)
	}
	return r.e.srcs[i]
}

// tick offers EURUSD at mid with a 0.2-pip spread from source name.
func (r *rig) tick(name string, mid float64) {
	r.feed(name).Offer("EURUSD", mid-0.00001, mid+0.00001, r.clock.Now())
}

// both advances the clock by d and ticks every named source at mid, in order.
func (r *rig) both(d time.Duration, mid float64, names ...string) {
	r.clock.advance(d)
	for _, n := range names {
		r.tick(n, mid)
	}
}

func (r *rig) want(intent, source string, mid float64) {
	r.t.Helper()
	q, ok := r.e.LastTick("EURUSD")
	if !ok || q.Source != source || abs(q.Mid()-mid) > 1e-9 {
		r.t.Fatalf("%s: EURUSD quote %+v (ok %v), want mid %.5f from %s", intent, q, ok, mid, source)
	}
}

func (r *rig) wantSwitch(intent, from, to string) Switch {
	r.t.Helper()
	select {
	case sw := <-r.sw:
		if sw.Symbol != "EURUSD" || sw.From != from || sw.To != to {
			r.t.Fatalf("%s: switch %+v, want %s -> %s", intent, sw, from, to)
		}
		return sw
	default:
		r.t.Fatalf("%s: no switch %s -> %s", intent, from, to)
	}
	return Switch{}
}

func (r *rig) wantNoSwitch(intent string) {
	r.t.Helper()
	select {
	case sw := <-r.sw:
		r.t.Fatalf("%s: unexpected switch %+v", intent, sw)
	default:
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// steady runs n rounds of both sources quoting a quiet market (100ms apart, 0.1-pip moves) and
// returns the last mid.
func (r *rig) steady(n int, mid float64, names ...string) float64 {
	for i := range n {
		if i%2 == 0 {
			mid += 0.00001
		} else {
			mid -= 0.00001
		}
		r.both(100*time.Millisecond, mid, names...)
	}
	return mid
}

func TestFailoverOnDisconnectAndFailBackAfterHoldDown(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(20, 1.1, "primary", "backup")
	r.want("both healthy", "primary", mid)
	r.wantNoSwitch("both healthy")

	// The primary drops: the next instant the backup quotes, with no tick needed.
	r.feed("primary").SetConnected(false, context.Canceled)
	sw := r.wantSwitch("primary disconnected", "primary", "backup")
	if sw.Reason != "primary disconnected" {
		t.Fatalf("reason %q", sw.Reason)
	}
	r.want("at the failover the backup's latest quote", "backup", mid)
	mid = r.steady(5, mid, "backup")
	r.want("backup alone", "backup", mid)

	// The primary returns and quotes: the desk stays on the backup for the hold-down…
	r.feed("primary").SetConnected(true, nil)
	for range 99 { // 9.9s of both quoting
		mid = r.steady(1, mid, "primary", "backup")
	}
	r.wantNoSwitch("inside the hold-down")
	r.want("inside the hold-down", "backup", mid)
	// …and returns once the primary has been healthy for 10s.
	mid = r.steady(2, mid, "primary", "backup")
	sw = r.wantSwitch("after the hold-down", "backup", "primary")
	if sw.Reason != "fail-back after hold-down" {
		t.Fatalf("reason %q", sw.Reason)
	}
	r.want("after the hold-down", "primary", mid)
	sel := r.e.Selections()[0]
	if sel.Symbol != "EURUSD" || sel.Source != "primary" || sel.Failovers != 2 || len(sel.Health) != 2 || !sel.Health[0].Healthy {
		t.Fatalf("selection %+v", sel)
	}
}

func TestFailoverOnSilenceAndFlappingPrimaryDoesNotFailBack(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(20, 1.1, "primary", "backup")
	h := r.e.Selections()[0].Health[0]
	if h.TickInterval != 100*time.Millisecond || h.SilentAfter != time.Second {
		t.Fatalf("derived thresholds %+v, want 100ms interval and 1s (10x, clamped to the 1s minimum)", h)
	}
	// The primary goes quiet; the backup keeps quoting. Silence is noticed on the backup's
	// ticks, past 1s.
	for range 10 {
		mid = r.steady(1, mid, "backup")
	}
	r.wantNoSwitch("1s of silence is not yet past the threshold")
	mid = r.steady(1, mid, "backup")
	sw := r.wantSwitch("primary silent", "primary", "backup")
	if sw.Reason != "primary silent" {
		t.Fatalf("reason %q", sw.Reason)
	}
	r.want("failover on silence", "backup", mid)

	// The primary comes back for 5s, goes quiet for 2s, comes back: the hold-down restarts.
	mid = r.steady(50, mid, "primary", "backup")
	mid = r.steady(20, mid, "backup")
	mid = r.steady(90, mid, "primary", "backup")
	r.wantNoSwitch("a flapping primary")
	mid = r.steady(11, mid, "primary", "backup")
	r.wantSwitch("10s healthy", "backup", "primary")

	// Silence noticed by the sweep alone, when no source ticks at all: none healthy, keep.
	r.clock.advance(20 * time.Second)
	r.e.sweep(r.clock.Now())
	r.wantNoSwitch("both silent")
	if got := r.e.Selections()[0].Health[1].Reason; got != "silent" {
		t.Fatalf("backup reason %q", got)
	}
	_ = mid
}

func TestSweepFailsOverOnSilenceWithoutATick(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(20, 1.1, "primary", "backup")
	r.clock.advance(1500 * time.Millisecond)
	r.tick("backup", mid) // backup fresh, primary 1.5s silent; the backup's tick notices it
	r.wantSwitch("silence on the backup's tick", "primary", "backup")

	r2 := newRig(t, Config{Failover: FailoverConfig{SilentMax: 2 * time.Second}}, "primary", "backup")
	mid = r2.steady(20, 1.1, "primary", "backup")
	r2.clock.advance(500 * time.Millisecond)
	r2.tick("backup", mid)
	r2.clock.advance(700 * time.Millisecond) // primary 1.2s silent, backup 0.7s
	r2.e.sweep(r2.clock.Now())
	r2.wantSwitch("silence on the sweep", "primary", "backup")
}

func TestPinAndHalt(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(20, 1.1, "primary", "backup")
	if err := r.e.Pin("EURUSD", "nosuch"); err == nil {
		t.Fatal("pinned to an unknown source")
	}
	if err := r.e.Pin("GBPUSD", "backup"); err == nil {
		t.Fatal("pinned a symbol the desk does not quote")
	}
	if err := r.e.Pin("EURUSD", "backup"); err != nil {
		t.Fatal(err)
	}
	r.wantSwitch("pinned", "primary", "backup")
	mid = r.steady(3, mid, "primary", "backup")
	r.want("pinned to the backup", "backup", mid)
	// A pinned symbol stays on its source even when it goes silent.
	mid = r.steady(30, mid, "primary")
	r.wantNoSwitch("pinned, backup silent")
	if s := r.e.Selections()[0]; s.Pinned != "backup" || s.Source != "backup" {
		t.Fatalf("selection %+v", s)
	}
	// Unpinned: the primary has been healthy all along, so the symbol returns at once.
	if err := r.e.Pin("EURUSD", ""); err != nil {
		t.Fatal(err)
	}
	r.wantSwitch("unpinned", "backup", "primary")
	r.want("unpinned", "primary", mid)

	if err := r.e.Halt("EURUSD", true); err != nil {
		t.Fatal(err)
	}
	before, _ := r.e.LastTick("EURUSD")
	r.steady(3, mid+0.001, "primary", "backup")
	if q, _ := r.e.LastTick("EURUSD"); q != before || r.e.SymbolState("EURUSD") != QuotingHalted {
		t.Fatalf("halted symbol published %+v, state %s", q, r.e.SymbolState("EURUSD"))
	}
	if !r.e.Selections()[0].Halted {
		t.Fatal("selection not halted")
	}
	if err := r.e.Halt("EURUSD", false); err != nil {
		t.Fatal(err)
	}
	if r.e.SymbolState("EURUSD") != Quoting {
		t.Fatalf("resumed symbol state %s", r.e.SymbolState("EURUSD"))
	}
}

// Two real simulators over websockets as primary and backup: stopping the primary moves the
// symbol to the backup at once, with the backup's latest quote (fail-back is
// TestFailoverOnDisconnectAndFailBackAfterHoldDown's, on a hand-driven feed).
func TestTwoWebsocketSourcesFailOver(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	p := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	b := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	opts := WebsocketOptions{BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
	e := startEngine(t, Config{Now: clock.Now, Sources: []Source{
		NewWebsocketSource("primary", p.URL(), "k", opts),
		NewWebsocketSource("backup", b.URL(), "k", opts),
	}}, "EURUSD")
	sw, cancel := e.Switches()
	defer cancel()
	waitFor(t, "both subscribed", func() bool { return len(clientSubs(p)) == 1 && len(clientSubs(b)) == 1 })
	quote := func(s *sim, bid, ask float64) {
		t.Helper()
		if _, err := s.SetQuote("EURUSD", bid, ask); err != nil {
			t.Fatal(err)
		}
	}
	// The primary's first quote waits for a confirmation (unreferenced: no price before it and
	// no other source yet); the backup's agreeing quote gives it.
	quote(p, 1.1000, 1.1002)
	waitFor(t, "primary quote seen", func() bool { return e.Selections()[0].Health[0].Healthy })
	if _, ok := e.LastTick("EURUSD"); ok {
		t.Fatal("an unreferenced first quote was published before anything confirmed it")
	}
	quote(b, 1.1001, 1.1003)
	waitFor(t, "primary quote", hasTick(e, "EURUSD", 1.1000, 1.1002))
	waitFor(t, "backup quote seen", func() bool {
		h := e.Selections()[0].Health[1]
		return h.Healthy
	})
	if q, _ := e.LastTick("EURUSD"); q.Source != "primary" {
		t.Fatalf("quote from %q while the primary is healthy", q.Source)
	}

	p.stop()
	s := <-sw
	if s.From != "primary" || s.To != "backup" || s.Reason != "primary disconnected" {
		t.Fatalf("switch %+v", s)
	}
	if q, _ := e.LastTick("EURUSD"); q.Source != "backup" || q.Bid != 1.1001 {
		t.Fatalf("after the failover %+v", q)
	}
	st := e.SourceStatuses()
	if st[0].Connected || !st[1].Connected || st[1].Published != 1 {
		t.Fatalf("source statuses %+v", st)
	}
}

// An external source's offers are validated like the websocket's: nothing undated,
// non-positive or crossed is published, and a symbol nobody wants is counted, not stored.
func TestOfferValidatesLikeTheWebsocket(t *testing.T) {
	r := newRig(t, Config{}, "primary", "lp")
	f := r.feed("primary")
	now := r.clock.Now()
	f.Offer("EURUSD", 1.1, 1.1002, time.Time{})
	f.Offer("EURUSD", 1.1, 1.1002, time.UnixMilli(-5))
	f.Offer("EURUSD", 0, 1.1002, now)
	f.Offer("EURUSD", 1.1, math.Inf(1), now)
	f.Offer("EURUSD", 1.1003, 1.1002, now)
	f.Offer("GBPUSD", 1.3, 1.3002, now)
	if _, ok := r.e.LastTick("EURUSD"); ok {
		t.Fatal("an invalid offer was published")
	}
	rj := r.e.Status().Rejected
	if rj.Undated != 2 || rj.NonPositive != 2 || rj.Crossed != 1 || rj.UnknownPair != 1 {
		t.Fatalf("rejections %+v", rj)
	}
	f.Offer("EURUSD", 1.1, 1.1002, now)
	r.feed("lp").Offer("EURUSD", 1.1, 1.1002, now) // confirms the primary's first quote
	if q, ok := r.e.LastTick("EURUSD"); !ok || q.Source != "primary" || !q.ReceivedAt.Equal(now) || !q.ProviderTime.Equal(now) {
		t.Fatalf("valid offer %+v", q)
	}
	// The rejected ring keeps the newest RejectedRing entries, newest first.
	r2 := newRig(t, Config{Filter: FilterConfig{RejectedRing: 3}}, "primary")
	mid := r2.steady(10, 1.1, "primary")
	for i := range 5 {
		r2.both(100*time.Millisecond, mid+float64(100+10*i)*pip, "primary")
		r2.both(100*time.Millisecond, mid, "primary")
	}
	got := r2.e.Rejected(10)
	if len(got) != 3 || abs(got[0].Bid+0.00001-(mid+140*pip)) > 1e-9 || abs(got[2].Bid+0.00001-(mid+120*pip)) > 1e-9 {
		t.Fatalf("ring %+v", got)
	}
	if got := r2.e.Rejected(1); len(got) != 1 || got[0].Outcome != OutcomeDropped {
		t.Fatalf("limit 1: %+v", got)
	}
}

// At a start the sources connect one after another: a backup that quotes first (published once
// ConfirmAfter passed with the primary still silent) is replaced by the primary's first quote at
// once, with no hold-down — only a return after a loss waits.
func TestAPrimaryQuotingLateAtAStartIsTakenAtOnce(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(11, 1.1, "backup")
	r.wantSwitch("the backup quotes first", "primary", "backup")
	r.want("the backup quotes first", "backup", mid)

	mid = r.steady(1, mid, "primary", "backup")
	sw := r.wantSwitch("the primary's first quote", "backup", "primary")
	if sw.Reason != "first quote from a better source" {
		t.Fatalf("reason %q", sw.Reason)
	}
	r.want("the primary's first quote", "primary", mid)

	// Once it has lost its health, its return waits for the hold-down again.
	r.feed("primary").SetConnected(false, context.Canceled)
	r.wantSwitch("primary disconnected", "primary", "backup")
	r.feed("primary").SetConnected(true, nil)
	r.steady(5, mid, "primary", "backup")
	r.wantNoSwitch("a return inside the hold-down")
}

// A process SIGSTOPped for seconds reads each socket's backlog when it resumes, one source's
// before the other's. Judged by the wall clock, the source read second looked silent and the
// first one's backlog stood alone: the soak (seed 221723382888820) saw a resumed holder publish
// the primary's 134-pip offset and stop an account out at it while the backup, its ticks still
// in the socket, quoted the market. Silence is judged on the time the engine ran.
func TestAResumedEngineJudgesSilenceWithoutThePause(t *testing.T) {
	for _, sweepFirst := range []bool{false, true} {
		r := newRig(t, Config{}, "primary", "backup")
		mid := 1.1
		for range 40 { // Run's sweep, every 100ms, beside the ticks
			mid = r.steady(1, mid, "primary", "backup")
			r.e.sweepTick(r.clock.Now())
		}
		r.want("before the pause", "primary", mid)
		r.drain()

		r.clock.advance(5 * time.Second) // SIGSTOP … SIGCONT
		if sweepFirst {
			r.e.sweepTick(r.clock.Now())
		}
		// The primary's backlog first: its offset began during the pause.
		for range 5 {
			r.both(time.Millisecond, mid-134*pip, "primary")
		}
		for range 5 {
			r.both(time.Millisecond, mid, "backup")
		}
		for _, u := range r.drain() {
			if abs(u.Quote.Mid()-mid) > 30*pip {
				t.Fatalf("sweep first %v: published %s's %.5f from a backlog while the backup quoted %.5f", sweepFirst, u.Quote.Source, u.Quote.Mid(), mid)
			}
		}
		for len(r.sw) > 0 {
			if s := <-r.sw; s.Reason == "backup silent" || s.Reason == "primary silent" {
				t.Fatalf("sweep first %v: switch %+v: a source judged silent over the pause", sweepFirst, s)
			}
		}
		r.want("on the backup, the primary off-band", "backup", mid)
	}
}
