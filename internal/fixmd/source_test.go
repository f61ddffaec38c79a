package fixmd_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/fixmd"
	"fxdesk/internal/sim/feedsim"
	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/sim/venuesim"
)

// wait bounds every wait on a signal: far above what loopback needs, so only a defect hits it.
const wait = 10 * time.Second

// testFeed is the engine's side of one source as a test sees it: every call recorded on a
// channel the test waits on.
type testFeed struct {
	mu        sync.Mutex
	wanted    []string
	changed   chan struct{}
	offers    chan offered
	connected chan connection
}

type offered struct {
	symbol   string
	bid, ask float64
	at       time.Time
}

type connection struct {
	up  bool
	why error
}

func newTestFeed(wanted ...string) *testFeed {
	slices.Sort(wanted)
	return &testFeed{wanted: wanted, changed: make(chan struct{}, 1), offers: make(chan offered, 10000), connected: make(chan connection, 100)}
}

func (f *testFeed) Wanted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.wanted)
}
func (f *testFeed) WantedChanged() <-chan struct{} { return f.changed }
func (f *testFeed) Offer(symbol string, bid, ask float64, at time.Time) {
	f.offers <- offered{symbol, bid, ask, at}
}
func (f *testFeed) SetMarketOpen(string, bool) {}
func (f *testFeed) SetConnected(up bool, why error) {
	select {
	case f.connected <- connection{up, why}:
	default:
	}
}

func (f *testFeed) want(symbols ...string) {
	slices.Sort(symbols)
	f.mu.Lock()
	f.wanted = symbols
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// awaitOffer waits for an offer that match accepts and returns it.
func (f *testFeed) awaitOffer(t testing.TB, what string, match func(offered) bool) offered {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case o := <-f.offers:
			if match(o) {
				return o
			}
		case <-deadline:
			t.Fatalf("no offer %s within %s", what, wait)
		}
	}
}

// awaitOffers waits until every one of matches accepted an offer, in any order (the source
// offers the symbols of one round in no particular order).
func (f *testFeed) awaitOffers(t testing.TB, what string, matches ...func(offered) bool) {
	t.Helper()
	deadline := time.After(wait)
	seen := make([]bool, len(matches))
	for left := len(matches); left > 0; {
		select {
		case o := <-f.offers:
			for i, m := range matches {
				if !seen[i] && m(o) {
					seen[i] = true
					left--
				}
			}
		case <-deadline:
			t.Fatalf("no offers %s within %s (matched %v)", what, wait, seen)
		}
	}
}

// awaitConnected waits until the source reports the session up (true) or down (false).
func (f *testFeed) awaitConnected(t *testing.T, up bool) connection {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case c := <-f.connected:
			if c.up == up {
				return c
			}
		case <-deadline:
			t.Fatalf("the source never reported connected=%v within %s", up, wait)
		}
	}
}

// rigCount makes every rig's comp ids unique: the library keeps one registry of sessions per
// process, so parallel tests need their own pairs.
var rigCount atomic.Int64

type rig struct {
	feed  *feedsim.Server
	venue *fixvenue.Server
	cfg   fixmd.Config
}

// newRig starts the bundled venue priced by an in-process feed simulator that quotes only when
// the test sets a price, and the source's configuration to reach its market-data session.
func newRig(t testing.TB) *rig {
	t.Helper()
	n := rigCount.Add(1)
	feed := feedsim.New(feedsim.Config{AlwaysOpen: true, DisableWalk: true}, nil)
	deskMD, venueMD := "DESK-MD-"+itoa(n), "VENUE-MD-"+itoa(n)
	v, err := fixvenue.New(fixvenue.Config{VenueCompID: "VENUE-" + itoa(n), DeskCompID: "DESK-" + itoa(n),
		MDVenueCompID: venueMD, MDDeskCompID: deskMD, Prices: venuesim.FeedPrices(feed)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := v.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	cfg, err := fixmd.ParseURL("lpfix", "fix://"+addr+"?sender="+deskMD+"&target="+venueMD)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BackoffMin, cfg.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	return &rig{feed: feed, venue: v, cfg: cfg}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// run starts src on feed until the test ends.
func run(t testing.TB, src *fixmd.Source, feed *testFeed) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, feed) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func quoteIs(symbol string, bid, ask float64) func(offered) bool {
	return func(o offered) bool { return o.symbol == symbol && o.bid == bid && o.ask == ask }
}

// A subscription's snapshot reaches the engine at the venue's price, and every price change
// after it as an incremental, with the provider's time.
func TestSnapshotThenIncrementalsReachTheFeed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.feed.SetQuote("EURUSD", 1.10000, 1.10010); err != nil {
		t.Fatal(err)
	}
	if _, err := r.feed.SetQuote("USDJPY", 150.000, 150.020); err != nil {
		t.Fatal(err)
	}
	src, err := fixmd.New(r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed := newTestFeed("EURUSD", "USDJPY")
	run(t, src, feed)
	feed.awaitConnected(t, true)
	before := time.Now()
	feed.awaitOffers(t, "of the EURUSD and USDJPY snapshots", quoteIs("EURUSD", 1.10000, 1.10010), quoteIs("USDJPY", 150.000, 150.020))
	if st := r.venue.MarketData(); st.Snapshots != 2 || st.Incrementals != 0 {
		t.Fatalf("venue sent %d snapshots and %d incrementals, want 2 and 0 before any change", st.Snapshots, st.Incrementals)
	}
	for i, px := range []float64{1.10020, 1.10035, 1.09990} {
		if _, err := r.feed.SetQuote("EURUSD", px, px+0.0001); err != nil {
			t.Fatal(err)
		}
		o := feed.awaitOffer(t, "of change "+itoa(int64(i)), quoteIs("EURUSD", px, px+0.0001))
		if d := o.at.Sub(before); d < -time.Second || d > wait {
			t.Errorf("provider time %s is not the venue's time now (%s)", o.at, before)
		}
	}
	if st := r.venue.MarketData(); st.Incrementals < 3 {
		t.Fatalf("venue sent %d incrementals, want one per change (3)", st.Incrementals)
	}
}

// Only the side that changed comes as an incremental; the source completes the quote from the
// book it keeps.
func TestIncrementalOfOneSideKeepsTheOther(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.feed.SetQuote("GBPUSD", 1.25000, 1.25020); err != nil {
		t.Fatal(err)
	}
	src, err := fixmd.New(r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed := newTestFeed("GBPUSD")
	run(t, src, feed)
	feed.awaitOffer(t, "of the snapshot", quoteIs("GBPUSD", 1.25000, 1.25020))
	if _, err := r.feed.SetQuote("GBPUSD", 1.25000, 1.25030); err != nil {
		t.Fatal(err)
	}
	feed.awaitOffer(t, "with the new ask and the old bid", quoteIs("GBPUSD", 1.25000, 1.25030))
}

// A dropped connection is reported down, the source reconnects (through an outage: every
// reconnect cut for a while) and subscribes again: a new snapshot, then changes again.
func TestReconnectResubscribes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.feed.SetQuote("EURUSD", 1.10000, 1.10010); err != nil {
		t.Fatal(err)
	}
	src, err := fixmd.New(r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed := newTestFeed("EURUSD")
	run(t, src, feed)
	feed.awaitConnected(t, true)
	feed.awaitOffer(t, "of the first snapshot", quoteIs("EURUSD", 1.10000, 1.10010))
	r.venue.DropFor(300 * time.Millisecond)
	if c := feed.awaitConnected(t, false); c.why == nil {
		t.Error("the source reported the session down without a reason")
	}
	// Changed while down: the new session's snapshot carries it.
	if _, err := r.feed.SetQuote("EURUSD", 1.10500, 1.10510); err != nil {
		t.Fatal(err)
	}
	feed.awaitConnected(t, true)
	feed.awaitOffer(t, "of the snapshot after the reconnect", quoteIs("EURUSD", 1.10500, 1.10510))
	if st := r.venue.MarketData(); st.Snapshots != 2 || len(st.Subscriptions) != 1 {
		t.Fatalf("venue: %d snapshots, subscriptions %v; want 2 (one per logon) and the one subscription of the new session", st.Snapshots, st.Subscriptions)
	}
	if _, err := r.feed.SetQuote("EURUSD", 1.10600, 1.10610); err != nil {
		t.Fatal(err)
	}
	feed.awaitOffer(t, "of a change after the reconnect", quoteIs("EURUSD", 1.10600, 1.10610))
}

// A symbol the venue does not list is refused (35=Y, unknown symbol) and reported; the others
// are quoted.
func TestUnknownSymbolRefusedAndReported(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.feed.SetQuote("EURUSD", 1.10000, 1.10010); err != nil {
		t.Fatal(err)
	}
	src, err := fixmd.New(r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed := newTestFeed("ABCXYZ", "EURUSD") // sorted: ABCXYZ is asked for first, answered first
	run(t, src, feed)
	feed.awaitOffer(t, "of EURUSD", quoteIs("EURUSD", 1.10000, 1.10010))
	why, refused := src.Refused()["ABCXYZ"]
	if !refused || !strings.Contains(why, "MDReqRejReason 0") || !strings.Contains(why, "unknown symbol") {
		t.Fatalf("refusals %v: want ABCXYZ refused as an unknown symbol (MDReqRejReason 0)", src.Refused())
	}
	if got := src.Subscribed(); !slices.Equal(got, []string{"EURUSD"}) {
		t.Fatalf("subscribed %v, want [EURUSD]", got)
	}
	if st := r.venue.MarketData(); st.Rejected != 1 {
		t.Fatalf("venue rejected %d requests, want 1", st.Rejected)
	}
}

// WantedChanged is followed live: a new symbol is subscribed, one no longer wanted is
// unsubscribed at the venue (263=2).
func TestFollowsWantedChanges(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, q := range []struct {
		sym      string
		bid, ask float64
	}{{"EURUSD", 1.1, 1.1001}, {"GBPUSD", 1.25, 1.2502}, {"USDCHF", 0.9, 0.9002}} {
		if _, err := r.feed.SetQuote(q.sym, q.bid, q.ask); err != nil {
			t.Fatal(err)
		}
	}
	src, err := fixmd.New(r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed := newTestFeed("EURUSD")
	run(t, src, feed)
	feed.awaitOffer(t, "of EURUSD", quoteIs("EURUSD", 1.1, 1.1001))
	feed.want("EURUSD", "GBPUSD")
	feed.awaitOffer(t, "of GBPUSD once wanted", quoteIs("GBPUSD", 1.25, 1.2502))
	// The unsubscribe goes out before the new subscription on the same session: once USDCHF's
	// snapshot is here, the venue has ended EURUSD's.
	feed.want("GBPUSD", "USDCHF")
	feed.awaitOffer(t, "of USDCHF once wanted", quoteIs("USDCHF", 0.9, 0.9002))
	st := r.venue.MarketData()
	if len(st.Subscriptions) != 2 || slices.ContainsFunc(st.Subscriptions, func(s string) bool { return strings.HasSuffix(s, ":EURUSD") }) {
		t.Fatalf("venue subscriptions %v: want GBPUSD and USDCHF only", st.Subscriptions)
	}
}

// The source refuses a configuration it cannot run and reads the URL the desk configures.
func TestParseURL(t *testing.T) {
	t.Parallel()
	cfg, err := fixmd.ParseURL("lpfix", "fix://127.0.0.1:9880?sender=DESK&target=LP&username=u&password=p&symbols=slash&heartbeat=10s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "lpfix" || cfg.Addr != "127.0.0.1:9880" || cfg.SenderCompID != "DESK" || cfg.TargetCompID != "LP" ||
		cfg.Username != "u" || cfg.Password != "p" || cfg.Symbols != fixmd.SymbolsSlash || cfg.HeartBeat != 10*time.Second {
		t.Fatalf("parsed %+v", cfg)
	}
	// Each bad URL is refused with a text naming what is wrong.
	for _, c := range []struct{ url, want string }{
		{"ws://127.0.0.1:9880?sender=D&target=L", "fix://host:port"},
		{"fix://127.0.0.1:9880?target=L", "SenderCompID"},
		{"fix://127.0.0.1?sender=D&target=L", "host:port"},
		{"fix://127.0.0.1:9880?sender=D&target=L&symbols=dash", "symbols"},
		{"fix://127.0.0.1:9880?sender=D&target=L&heartbeat=1500ms", "heartbeat"},
		{"fix://127.0.0.1:9880?sender=D&target=L&bogus=1", `"bogus"`},
		{"fix://127.0.0.1:9880?sender=D&target=L&username=u", "password"},
	} {
		if _, err := fixmd.ParseURL("lpfix", c.url); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.url, err, c.want)
		}
	}
}

// A venue that is not there is reported down with why, attempt after attempt (the back-off
// retries); a venue that refuses the logon is reported with its Logout's text.
func TestConnectFailureAndRefusedLogonReported(t *testing.T) {
	t.Parallel()
	// Port 1 (tcpmux), where nothing here listens: a port freed by closing a listener of our own
	// was taken by another test's FIX acceptor in CI, which answered with a logout.
	const closed = "127.0.0.1:1"
	src, err := fixmd.New(fixmd.Config{Name: "lpfix", Addr: closed, SenderCompID: "D", TargetCompID: "L",
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed := newTestFeed("EURUSD")
	run(t, src, feed)
	for range 3 {
		if c := feed.awaitConnected(t, false); c.why == nil || !strings.Contains(c.why.Error(), "connect") {
			t.Fatalf("down with %v; want the failed connect", c.why)
		}
	}

	n := rigCount.Add(1)
	v, err := fixvenue.New(fixvenue.Config{VenueCompID: "PV-" + itoa(n), DeskCompID: "PD-" + itoa(n),
		MDVenueCompID: "PVMD-" + itoa(n), MDDeskCompID: "PDMD-" + itoa(n), Username: "desk", Password: "right"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := v.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	cfg, err := fixmd.ParseURL("lpfix", "fix://"+addr+"?sender=PDMD-"+itoa(n)+"&target=PVMD-"+itoa(n)+"&username=desk&password=wrong")
	if err != nil {
		t.Fatal(err)
	}
	cfg.BackoffMin, cfg.BackoffMax = 10*time.Millisecond, 50*time.Millisecond
	refused, err := fixmd.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed = newTestFeed("EURUSD")
	run(t, refused, feed)
	if c := feed.awaitConnected(t, false); c.why == nil || !strings.Contains(c.why.Error(), "invalid username or password") {
		t.Fatalf("down with %v; want the venue's refusal", c.why)
	}
}
