package tick

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/testkit/poll"

	"fxdesk/internal/fx"
	"fxdesk/internal/session"
	"fxdesk/internal/sim/feedsim"
)

// testClock is a clock tests move by hand; it starts at a Wednesday noon in New York.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.set(time.Date(2025, 6, 18, 16, 0, 0, 0, time.UTC))
	return c
}
func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

type sim struct {
	*feedsim.Server
	stop func()
}

// startSim runs a simulator on addr until stop or the end of the test.
func startSim(t testing.TB, cfg feedsim.Config, addr string) *sim {
	t.Helper()
	s := feedsim.New(cfg, slog.New(slog.DiscardHandler))
	if _, err := s.Listen(addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once atomic.Bool
	stop := func() {
		if once.Swap(true) {
			return
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("simulator Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("simulator did not stop within 5s")
		}
	}
	t.Cleanup(stop)
	return &sim{Server: s, stop: stop}
}

// startEngine runs an engine against url until the end of the test and checks Run returns nil
// promptly on cancel.
func startEngine(t testing.TB, cfg Config, wanted ...string) *Engine {
	t.Helper()
	if cfg.Key == "" {
		cfg.Key = "test-key"
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	e := New(cfg, slog.New(slog.DiscardHandler))
	if err := e.SetSource("test", wanted); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("engine Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("engine did not stop within 5s of cancel")
		}
	})
	return e
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, what, cond)
}

func hasTick(e *Engine, symbol string, bid, ask float64) func() bool {
	return func() bool {
		q, ok := e.LastTick(symbol)
		return ok && q.Bid == bid && q.Ask == ask
	}
}

func clientSubs(s *sim) []string {
	st := s.State()
	if len(st.Clients) != 1 {
		return nil
	}
	return st.Clients[0].Subscriptions
}

func TestWantedSymbolsReceiveQuotesExactlyAsSent(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, WalkInterval: 20 * time.Millisecond}, "127.0.0.1:0")
	e := startEngine(t, Config{URL: s.URL(), Now: clock.Now}, "EURUSD", "USDJPY", "XAUUSD")

	// The random walk reaches every wanted symbol, and each reads QUOTING.
	for _, sym := range []string{"EURUSD", "USDJPY", "XAUUSD"} {
		waitFor(t, sym+" quoting", func() bool { return e.SymbolState(sym) == Quoting })
		q, _ := e.LastTick(sym)
		if !(q.Bid > 0) || q.Bid > q.Ask || q.ProviderTime.IsZero() || !q.ReceivedAt.Equal(clock.Now()) {
			t.Fatalf("%s quote %+v", sym, q)
		}
	}
	// A symbol nobody wanted is not stored even though the provider has it.
	if _, ok := e.LastTick("GBPUSD"); ok {
		t.Fatal("GBPUSD stored without being wanted")
	}
	// A control quote arrives exactly as set, with the provider's timestamp. The walk keeps
	// moving EURUSD, so catch it on the update stream rather than in the last-tick map.
	updates, cancel := e.Updates([]string{"EURUSD"})
	defer cancel()
	before := time.Now().Add(-time.Second)
	if _, err := s.SetQuote("EURUSD", 1.23450, 1.23470); err != nil {
		t.Fatal(err)
	}
	var q Quote
	timeout := time.After(10 * time.Second)
	for q.Bid != 1.23450 || q.Ask != 1.23470 {
		select {
		case u := <-updates:
			q = u.Quote
		case <-timeout:
			t.Fatal("control quote never reached the engine")
		}
	}
	if q.ProviderTime.Before(before) || q.ProviderTime.After(time.Now().Add(time.Second)) {
		t.Fatalf("provider time %s is not the simulator's now", q.ProviderTime)
	}
	st := e.Status()
	if !st.Connected || st.Connects != 1 || st.Wanted != 3 || st.Quoting != 3 || st.Accepted == 0 || st.LastTickAt.IsZero() {
		t.Fatalf("status %+v", st)
	}
}

func TestSymbolAddedAtRuntimeWithoutReconnect(t *testing.T) {
	t.Parallel()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, WalkInterval: 20 * time.Millisecond}, "127.0.0.1:0")
	e := startEngine(t, Config{URL: s.URL()}, "EURUSD")
	waitFor(t, "EURUSD quoting", func() bool { return e.SymbolState("EURUSD") == Quoting })

	if err := e.Subscribe("GBPUSD"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "GBPUSD quoting", func() bool { return e.SymbolState("GBPUSD") == Quoting })
	if got := slices.Clone(clientSubs(s)); !slices.Equal(got, []string{"EUR/USD", "GBP/USD"}) {
		t.Fatalf("simulator sees subscriptions %v", got)
	}
	// Removing it goes out on the same socket too; a symbol another source wants stays.
	if err := e.Unsubscribe("GBPUSD", "EURUSD"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "GBP/USD unsubscribed", func() bool { return slices.Equal(clientSubs(s), []string{"EUR/USD"}) })
	if n, st := s.Connections(), e.Status(); n != 1 || st.Connects != 1 {
		t.Fatalf("simulator accepted %d connections, engine connected %d times; want 1 and 1", n, st.Connects)
	}
	if err := e.Subscribe("EUR/USD"); err == nil || !strings.Contains(err.Error(), "six upper-case letters") {
		t.Fatalf("provider-form symbol accepted: %v", err)
	}
}

func TestReconnectsAndResubscribesAfterSimulatorRestart(t *testing.T) {
	t.Parallel()
	first := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	addr := first.Addr().String()
	e := startEngine(t, Config{URL: first.URL()}, "EURUSD", "USDJPY")
	waitFor(t, "subscribed on the first simulator", func() bool {
		return slices.Equal(clientSubs(first), []string{"EUR/USD", "USD/JPY"})
	})
	if err := e.Subscribe("XAUUSD"); err != nil { // wanted set grows while connected
		t.Fatal(err)
	}
	waitFor(t, "XAU/USD subscribed", func() bool { return len(clientSubs(first)) == 3 })

	first.stop()
	waitFor(t, "engine to notice the drop", func() bool { return !e.Status().Connected })

	second := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, addr)
	// The whole wanted set is subscribed again, on the new simulator, unprompted.
	waitFor(t, "resubscribed on the restarted simulator", func() bool {
		return slices.Equal(clientSubs(second), []string{"EUR/USD", "USD/JPY", "XAU/USD"})
	})
	if _, err := second.SetQuote("XAUUSD", 4100.10, 4100.35); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "quote from the restarted simulator", hasTick(e, "XAUUSD", 4100.10, 4100.35))
	if st := e.Status(); st.Connects != 2 || !st.Connected || st.LastError == "" {
		t.Fatalf("status after restart %+v", st)
	}
}

func TestSilentStreamIsReconnected(t *testing.T) {
	t.Parallel()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, WalkInterval: 20 * time.Millisecond}, "127.0.0.1:0")
	e := startEngine(t, Config{URL: s.URL(), SilenceAfter: 300 * time.Millisecond}, "EURUSD", "USDJPY")
	waitFor(t, "quoting", func() bool { return e.SymbolState("EURUSD") == Quoting })
	if e.Status().SilentReconnects != 0 || s.Connections() != 1 {
		t.Fatal("reconnected while quotes were flowing")
	}

	// Connected, subscribed, session open — and nothing arrives.
	if err := s.Silence("*", time.Hour); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a silent-stream reconnect", func() bool { return e.Status().SilentReconnects >= 1 && s.Connections() >= 2 })
	lifted := time.Now()
	if err := s.Silence("*", 0); err != nil {
		t.Fatal(err)
	}
	// The engine may be between connections right now, so wait for the walk, not one push.
	waitFor(t, "quotes after the silence lifts", func() bool {
		q, ok := e.LastTick("USDJPY")
		return ok && q.ReceivedAt.After(lifted)
	})
}

func TestSilenceJudgedOnInjectedClockAndOpenSessionsOnly(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	fx := session.Forex()
	e := startEngine(t, Config{URL: s.URL(), Now: clock.Now, SilenceAfter: time.Minute,
		CalendarFor: func(string) *session.Calendar { return fx }}, "EURUSD")
	waitFor(t, "connected", func() bool { return e.Status().Connected })

	// Every wanted symbol closed: a quiet stream is expected, not a fault.
	saturday := time.Date(2025, 6, 21, 16, 0, 0, 0, time.UTC)
	if e.anyWantedOpen(saturday) {
		t.Fatal("a Saturday counts as open")
	}
	// An open session with a clock moved past the window: reconnect, with no real minute passing.
	if !e.anyWantedOpen(clock.Now()) {
		t.Fatal("a Wednesday counts as closed")
	}
	clock.advance(2 * time.Minute)
	waitFor(t, "silence noticed on the moved clock", func() bool { return e.Status().SilentReconnects == 1 })
}

func TestBadTicksAreNeverStored(t *testing.T) {
	t.Parallel()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	e := startEngine(t, Config{URL: s.URL()}, "EURUSD", "USDJPY")
	waitFor(t, "subscribed", func() bool { return len(clientSubs(s)) == 2 })
	if _, err := s.SetQuote("EURUSD", 1.10000, 1.10020); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "good quote", hasTick(e, "EURUSD", 1.10000, 1.10020))

	for _, frame := range []string{
		`[{"ev":"C","p":"EUR/USD","a":1.2,"b":1.1}]`,                    // undated: no t
		`[{"ev":"C","p":"EUR/USD","a":1.2,"b":1.1,"t":0}]`,              // undated: zero
		`[{"ev":"C","p":"EUR/USD","a":1.2,"b":1.1,"t":null}]`,           // undated: null
		`[{"ev":"C","p":"EUR/USD","a":1.2,"b":0,"t":1764450000123}]`,    // non-positive bid
		`[{"ev":"C","p":"EUR/USD","a":-1.2,"b":1.1,"t":1764450000123}]`, // non-positive ask
		`[{"ev":"C","p":"EUR/USD","a":1.1,"b":1.2,"t":1764450000123}]`,  // crossed
		`[{"ev":"C","p":"EUR/USD","a":1.2,"b":1.1,"t":1764450000123}`,   // malformed: truncated
		`[{"ev":"C","p":"EUR/USD","a":"1.2","b":1.1,"t":1}]`,            // malformed: string price
		// A good USDJPY and a crossed EURUSD in one frame: the good one is kept alone.
		`[{"ev":"C","p":"USD/JPY","a":150.02,"b":150.01,"t":1764450000123},{"ev":"C","p":"EUR/USD","a":1.0,"b":1.3,"t":1764450000124}]`,
		// The last frame on the socket, so once it is stored every frame above was processed.
		`[{"ev":"C","p":"USD/JPY","a":151.02,"b":151.01,"t":1764450000125}]`,
	} {
		if n := s.SendRaw(frame); n != 1 {
			t.Fatalf("raw frame reached %d clients", n)
		}
	}
	waitFor(t, "sentinel quote", hasTick(e, "USDJPY", 151.01, 151.02))
	if q, _ := e.LastTick("EURUSD"); q.Bid != 1.10000 || q.Ask != 1.10020 {
		t.Fatalf("EURUSD last tick %+v: a rejected quote was stored", q)
	}
	got := e.Status().Rejected
	want := Rejections{Undated: 3, NonPositive: 2, Crossed: 2, Malformed: 2}
	if got != want {
		t.Fatalf("rejections %+v, want %+v", got, want)
	}
}

func TestSymbolStateFollowsStalenessCalendarAndProvider(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	stale := atomic.Int64{}
	stale.Store(int64(30 * time.Second))
	s := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	reg := session.DefaultRegistry()
	instruments := []fx.Instrument{{Symbol: "EURUSD", SessionCalendar: "forex"}, {Symbol: "XAUUSD", SessionCalendar: "metals"}}
	e := startEngine(t, Config{
		URL:         s.URL(),
		Now:         clock.Now,
		CalendarFor: CalendarLookup(instruments, reg),
		StaleAfter:  func() time.Duration { return time.Duration(stale.Load()) },
		// Prices jump by hand here on a clock that stands still, which the spike filter would
		// hold for ever; the filter has its own tests (filter_test.go).
		Filter: FilterConfig{Disabled: true},
	}, "EURUSD", "GBPUSD", "XAUUSD", "ABCDEF")
	waitFor(t, "subscribed", func() bool { return len(clientSubs(s)) == 4 })
	for _, sym := range []string{"EURUSD", "GBPUSD", "XAUUSD"} {
		if _, err := s.SetQuote(sym, 1.5, 1.6); err != nil {
			t.Fatal(err)
		}
		waitFor(t, sym+" quote", hasTick(e, sym, 1.5, 1.6))
	}

	check := func(intent string, want map[string]State) {
		t.Helper()
		for sym, w := range want {
			if got := e.SymbolState(sym); got != w {
				t.Errorf("%s: %s is %s, want %s", intent, sym, got, w)
			}
		}
	}
	check("fresh quotes midweek", map[string]State{"EURUSD": Quoting, "GBPUSD": Quoting, "XAUUSD": Quoting})
	check("wanted but never quoted", map[string]State{"ABCDEF": QuotingHalted, "NZDUSD": QuotingHalted})

	// Stale past the setting while open: halted; raising the setting applies at once.
	clock.advance(31 * time.Second)
	check("31s without a quote", map[string]State{"EURUSD": QuotingHalted})
	stale.Store(int64(time.Minute))
	check("threshold raised to 60s", map[string]State{"EURUSD": Quoting})
	stale.Store(int64(30 * time.Second))

	// The metals daily break closes gold while FX stays open (17:30 New York, Wednesday).
	clock.set(time.Date(2025, 6, 18, 21, 30, 0, 0, time.UTC))
	check("metals break", map[string]State{"XAUUSD": MarketClosed, "EURUSD": QuotingHalted})

	// The calendar closes everything on Saturday, however fresh the quote.
	clock.set(time.Date(2025, 6, 21, 16, 0, 0, 0, time.UTC))
	if _, err := s.SetQuote("EURUSD", 1.7, 1.8); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "weekend quote", hasTick(e, "EURUSD", 1.7, 1.8))
	check("saturday", map[string]State{"EURUSD": MarketClosed, "GBPUSD": MarketClosed, "ABCDEF": MarketClosed})

	// Back to midweek: the provider announces EURUSD closed; GBPUSD is untouched.
	clock.set(time.Date(2025, 6, 18, 16, 0, 0, 0, time.UTC))
	if _, err := s.SetQuote("GBPUSD", 1.3, 1.31); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "GBPUSD quote", hasTick(e, "GBPUSD", 1.3, 1.31))
	if err := s.SetSession("EURUSD", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "provider closure", func() bool { return e.SymbolState("EURUSD") == MarketClosed })
	check("provider closed EURUSD", map[string]State{"GBPUSD": Quoting})
	st := e.Status()
	// EURUSD closed by the provider; GBPUSD and XAUUSD fresh; ABCDEF never quoted.
	if st.Closed != 1 || st.Quoting != 2 || st.Halted != 1 || st.Wanted != 4 {
		t.Fatalf("status counts %+v", st)
	}
	if err := s.SetSession("EURUSD", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "provider reopening", func() bool { return e.SymbolState("EURUSD") != MarketClosed })
}

func TestSlowSubscriberDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	e := startEngine(t, Config{URL: s.URL(), UpdateBuffer: 4096}, "EURUSD", "USDJPY")
	waitFor(t, "subscribed", func() bool { return len(clientSubs(s)) == 2 })

	slow, cancelSlow := e.Updates(nil) // never read
	defer cancelSlow()
	fast, cancelFast := e.Updates(nil)
	defer cancelFast()
	onlyJPY, cancelJPY := e.Updates([]string{"USDJPY"})
	defer cancelJPY()
	var fastGot, jpyGot, jpyWrong atomic.Int64
	go func() {
		for u := range fast {
			if u.Quote.Bid > 0 {
				fastGot.Add(1)
			}
		}
	}()
	go func() {
		for u := range onlyJPY {
			if u.Symbol != "USDJPY" {
				jpyWrong.Add(1)
			}
			jpyGot.Add(1)
		}
	}()

	before := e.Status().Accepted
	n, err := s.Burst([]string{"EURUSD", "USDJPY"}, 20000, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "burst ingested", func() bool { return e.Status().Accepted-before == uint64(n) })
	// Everything the engine stored reached the fast reader, though the slow one is full.
	waitFor(t, "fast subscriber caught up", func() bool { return fastGot.Load() == int64(n) })
	waitFor(t, "filtered subscriber caught up", func() bool { return jpyGot.Load() == int64(n/2) })
	if jpyWrong.Load() != 0 {
		t.Fatalf("filtered subscriber got %d updates for other symbols", jpyWrong.Load())
	}
	if len(slow) != 4096 {
		t.Fatalf("slow subscriber holds %d updates, want its full buffer of 4096", len(slow))
	}
	if got, want := e.Status().UpdatesDropped, uint64(n-4096); got != want {
		t.Fatalf("updates dropped %d, want %d (only the slow subscriber's overflow)", got, want)
	}
	cancelSlow()
	cancelSlow() // idempotent
	if _, ok := <-slow; !ok {
		t.Fatal("a cancelled subscriber's channel should still drain its buffer before closing")
	}
}

func TestSetSourceUnion(t *testing.T) {
	t.Parallel()
	e := New(Config{URL: "ws://unused"}, slog.New(slog.DiscardHandler))
	// Each source replaces only itself; the wanted set is the union.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.SetSource("instruments", []string{"EURUSD", "USDJPY"}))
	must(e.SetSource("exposed", []string{"GBPJPY", "EURUSD"}))
	must(e.SetSource("pinned", []string{"USDJPY"}))
	if got := e.Wanted(); !slices.Equal(got, []string{"EURUSD", "GBPJPY", "USDJPY"}) {
		t.Fatalf("wanted %v", got)
	}
	must(e.SetSource("exposed", nil))
	if got := e.Wanted(); !slices.Equal(got, []string{"EURUSD", "USDJPY"}) {
		t.Fatalf("wanted after clearing a source %v", got)
	}
	if err := e.SetSource("pinned", []string{"USDJPY", "eurusd"}); err == nil {
		t.Fatal("lower-case symbol accepted")
	}
	if got := e.Wanted(); !slices.Equal(got, []string{"EURUSD", "USDJPY"}) {
		t.Fatalf("a rejected SetSource changed the set: %v", got)
	}
}

func TestPairMappingRoundTripsAndRefusesMalformedPairs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		symbol, pair string
	}{
		// Both directions for an FX pair and a metal.
		{"EURUSD", "EUR/USD"},
		{"XAUUSD", "XAU/USD"},
	}
	for _, tt := range tests {
		if p, err := ProviderPair(tt.symbol); err != nil || p != tt.pair {
			t.Errorf("ProviderPair(%s) = %q, %v", tt.symbol, p, err)
		}
		if s, err := DeskSymbol(tt.pair); err != nil || s != tt.symbol {
			t.Errorf("DeskSymbol(%s) = %q, %v", tt.pair, s, err)
		}
	}
	for _, bad := range []string{"EURUSDX", "EUR-USD", "eur/usd", "EURUS"} {
		if _, err := DeskSymbol(bad); err == nil {
			t.Errorf("DeskSymbol(%q) accepted", bad)
		}
	}
}

func TestReconnectsAfterDroppedSocket(t *testing.T) {
	t.Parallel()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, DisableWalk: true}, "127.0.0.1:0")
	e := startEngine(t, Config{URL: s.URL()}, "EURUSD")
	waitFor(t, "subscribed", func() bool { return slices.Equal(clientSubs(s), []string{"EUR/USD"}) })
	// A dropped socket on a live simulator: the engine dials again and resubscribes.
	if n := s.DisconnectAll(); n != 1 {
		t.Fatalf("dropped %d sockets", n)
	}
	waitFor(t, "second connection subscribed", func() bool {
		return s.Connections() == 2 && slices.Equal(clientSubs(s), []string{"EUR/USD"})
	})
	if _, err := s.SetQuote("EURUSD", 1.01, 1.02); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "quote after reconnect", hasTick(e, "EURUSD", 1.01, 1.02))
}

func TestConcurrentSubscribeLosesNothing(t *testing.T) {
	t.Parallel()
	e := New(Config{URL: "ws://unused"}, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	var want []string
	for i := range 64 {
		sym := "AAA" + string(rune('A'+i/26%26)) + string(rune('A'+i%26)) + "X"
		want = append(want, sym)
		wg.Go(func() {
			if err := e.Subscribe(sym); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	slices.Sort(want)
	if got := e.Wanted(); !slices.Equal(got, want) {
		t.Fatalf("after 64 concurrent subscribes the wanted set has %d symbols", len(got))
	}
}

// Updates a full subscriber loses are logged at debug, once per dropLogEvery and subscriber
// whatever the rate, with how many it lost since the last line; DroppedFor counts them.
func TestDroppedUpdatesLoggedOncePerPeriod(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := New(Config{URL: "ws://unused", UpdateBuffer: 1, Now: func() time.Time { return now }},
		slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ch, cancel := e.Updates(nil)
	defer cancel()
	q := &Quote{Bid: 1.1, Ask: 1.1002}
	publish := func(n int) {
		e.subsMu.RLock()
		defer e.subsMu.RUnlock()
		for range n {
			e.publishLocked("EURUSD", q)
		}
	}
	publish(5) // one buffered, four dropped
	if got := strings.Count(buf.String(), "tick updates dropped"); got != 1 {
		t.Fatalf("%d lines for four drops in one period, want 1:\n%s", got, &buf)
	}
	now = now.Add(dropLogEvery - time.Millisecond)
	publish(3)
	if got := strings.Count(buf.String(), "tick updates dropped"); got != 1 {
		t.Fatalf("%d lines before the period ended, want 1:\n%s", got, &buf)
	}
	now = now.Add(time.Millisecond)
	publish(1)
	if got := strings.Count(buf.String(), "tick updates dropped"); got != 2 {
		t.Fatalf("%d lines once the period ended, want 2:\n%s", got, &buf)
	}
	if !strings.Contains(buf.String(), "level=DEBUG") || !strings.Contains(buf.String(), "droppedSinceLastLine=7 droppedBySubscriber=8") {
		t.Fatalf("second line should be debug and count the 7 drops since the first:\n%s", &buf)
	}
	if got := e.DroppedFor(ch); got != 8 {
		t.Fatalf("DroppedFor = %d, want 8", got)
	}
	if other, cancelOther := e.Updates(nil); e.DroppedFor(other) != 0 {
		t.Fatal("a new subscription reports drops")
	} else {
		cancelOther()
	}
}

// A provider that refuses the key session after session ends Run with ErrKeyRefused, so the part
// fails loudly instead of reconnecting for ever; the refusals before the limit are retried.
func TestRefusedKeyEndsRun(t *testing.T) {
	t.Parallel()
	s := startSim(t, feedsim.Config{AlwaysOpen: true, Key: "the-account-key"}, "127.0.0.1:0")
	e := New(Config{URL: s.URL(), Key: "a-wrong-key", KeyRefusals: 3, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond},
		slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.Run(ctx)
	if !errors.Is(err, ErrKeyRefused) || !strings.Contains(err.Error(), "3 sessions in a row") {
		t.Fatalf("Run = %v, want ErrKeyRefused after 3 sessions", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when the test's deadline passed")
	}
}
