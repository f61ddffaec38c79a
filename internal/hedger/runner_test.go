package hedger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/catalog"
	"fxdesk/internal/gate"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// The runner's tests put a stand-in for the hedge book (this package's Book) and for the
// B-book's reads (Desk) under a real gate and the real alert inbox. They share the inbox's
// exposure-limit-breached row, so they do not run in parallel.

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "hedger", &testDB)) }

// bookDouble is a hedge book in memory: Open and Close fill at once unless the symbol is told to
// fail; an unknown outcome leaves a SENDING order until resolve.
type bookDouble struct {
	mu        sync.Mutex
	next      int64
	open      map[int64]HedgePosition
	symbolOf  map[int64]string
	ruleUnits map[string]decimal.Decimal // routing rules' hedges (HEDGE n%)
	sending   map[string]decimal.Decimal
	fail      map[string]error
	sent      []string // every Open and Close asked, in order
}

func newBook() *bookDouble {
	return &bookDouble{open: map[int64]HedgePosition{}, symbolOf: map[int64]string{}, ruleUnits: map[string]decimal.Decimal{},
		sending: map[string]decimal.Decimal{}, fail: map[string]error{}}
}

func (b *bookDouble) Open(_ context.Context, symbol string, units decimal.Decimal) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent = append(b.sent, fmt.Sprintf("open %s %s", symbol, units))
	if err := b.fail[symbol]; err != nil {
		if errors.Is(err, venue.ErrOutcomeUnknown) {
			b.sending[symbol] = units
		}
		return err
	}
	b.next++
	b.open[b.next] = HedgePosition{ID: b.next, Units: units}
	b.symbolOf[b.next] = symbol
	return nil
}

func (b *bookDouble) Close(_ context.Context, id int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent = append(b.sent, fmt.Sprintf("close %d", id))
	if err := b.fail[b.symbolOf[id]]; err != nil {
		return err
	}
	delete(b.open, id)
	return nil
}

func (b *bookDouble) State(context.Context) (map[string]BookState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]BookState{}
	for id, p := range b.open {
		s := out[b.symbolOf[id]]
		s.Units = s.Units.Add(p.Units)
		s.Positions = append(s.Positions, p)
		out[b.symbolOf[id]] = s
	}
	for sym, u := range b.ruleUnits {
		s := out[sym]
		s.Units = s.Units.Add(u)
		out[sym] = s
	}
	for sym := range b.sending {
		s := out[sym]
		s.Unresolved++
		out[sym] = s
	}
	return out, nil
}

// resolve ends symbol's SENDING order: filled (a position opens) or not.
func (b *bookDouble) resolve(symbol string, filled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if filled {
		b.next++
		b.open[b.next] = HedgePosition{ID: b.next, Units: b.sending[symbol]}
		b.symbolOf[b.next] = symbol
	}
	delete(b.sending, symbol)
}

func (b *bookDouble) setFail(symbol string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail[symbol] = err
}

func (b *bookDouble) asked() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.sent...)
}

// deskDouble is the traders' net INTERNAL lots per symbol (buys positive).
type deskDouble struct {
	mu      sync.Mutex
	clients map[string]decimal.Decimal
}

func (d *deskDouble) set(symbol, lots string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clients[symbol] = dec(lots)
}

func (d *deskDouble) Exposures(context.Context) ([]trading.SymbolExposure, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []trading.SymbolExposure
	for sym, lots := range d.clients {
		out = append(out, trading.SymbolExposure{Symbol: sym, InternalLots: lots, ExternalLots: dec("3")})
	}
	return out, nil
}

func (d *deskDouble) ContractSizes(context.Context) (map[string]decimal.Decimal, error) {
	return map[string]decimal.Decimal{"EURUSD": dec("100000"), "GBPUSD": dec("100000"), "XAUUSD": dec("100")}, nil
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type rig struct {
	runner *Runner
	book   *bookDouble
	desk   *deskDouble
	lease  *gatetest.Lease
	clock  *clock
	inbox  *alert.Inbox
	orders *prometheus.CounterVec
	net    *prometheus.GaugeVec

	closedMu sync.Mutex
	closed   map[string]bool // markets not quoting
}

func (r *rig) setClosed(symbol string, closed bool) {
	r.closedMu.Lock()
	defer r.closedMu.Unlock()
	r.closed[symbol] = closed
}

// newRig is a runner over EURUSD and GBPUSD limited to 10 lots (band 2, minimum 0.5); XAUUSD
// has no limit.
func newRig(t *testing.T) *rig {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	r := &rig{book: newBook(), desk: &deskDouble{clients: map[string]decimal.Decimal{}}, lease: &gatetest.Lease{},
		clock: &clock{now: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}, inbox: alert.NewInbox(testDB, log), closed: map[string]bool{}}
	g, err := gate.New(gate.Config{Lease: r.lease, Log: log, Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	r.orders = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "o"}, []string{"kind", "result"})
	r.net = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "n"}, []string{"symbol"})
	terms := &catalog.HedgeTerms{Limits: map[string]decimal.Decimal{"EURUSD": dec("10"), "GBPUSD": dec("10")}, Band: dec("2"), Min: dec("0.5")}
	r.runner, err = New(Config{Book: r.book, Desk: r.desk, Terms: func() *catalog.HedgeTerms { return terms }, Gate: g, Alerts: r.inbox,
		Every: 8 * time.Second, Orders: r.orders, Net: r.net, Now: r.clock.Now, Log: log,
		Quoting: func(symbol string) bool {
			r.closedMu.Lock()
			defer r.closedMu.Unlock()
			return !r.closed[symbol]
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.inbox.Resolve(context.Background(), AlertBreached) })
	return r
}

func (r *rig) pass(t *testing.T) PassResult {
	t.Helper()
	res, err := r.runner.Pass(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func requireAsked(t *testing.T, b *bookDouble, want ...string) {
	t.Helper()
	// The symbols' orders of one pass go out together, in no fixed order: the lists compare
	// sorted (a test that needs one symbol's sequence checks it pass by pass).
	got := b.asked()
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("orders asked of the hedge book:\n\t%s\nwant:\n\t%s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}

// openBreach is the open exposure-limit-breached alert, if any.
func openBreach(t *testing.T, in *alert.Inbox) *alert.Alert {
	t.Helper()
	as, err := in.List(context.Background(), alert.Filter{Code: AlertBreached, Statuses: []alert.Status{alert.Open, alert.Acknowledged}})
	if err != nil {
		t.Fatal(err)
	}
	if len(as) == 0 {
		return nil
	}
	return &as[0]
}

func TestRunnerHedgesPastTheLimitOnceAndUnwindsWhenTheExposureFalls(t *testing.T) {
	r := newRig(t)
	// Traders net long 12 EURUSD: the desk buys 4 lots at the venue. XAUUSD has no limit.
	r.desk.set("EURUSD", "12")
	r.desk.set("XAUUSD", "-500")
	if res := r.pass(t); res.Done != 1 || len(res.Breached) != 0 {
		t.Fatalf("pass: %+v", res)
	}
	requireAsked(t, r.book, "open EURUSD 400000")
	if got := testutil.ToFloat64(r.net.WithLabelValues("EURUSD")); got != -8 {
		t.Fatalf("net exposure gauge %v lots, want -8", got)
	}
	// The next pass, and one after a small move inside the band, send nothing.
	r.pass(t)
	r.desk.set("EURUSD", "13.5")
	r.pass(t)
	requireAsked(t, r.book, "open EURUSD 400000")
	// Traders close down to 7 lots: without the hedge the desk is short 7, inside the target.
	r.desk.set("EURUSD", "7")
	r.pass(t)
	requireAsked(t, r.book, "open EURUSD 400000", "close 1")
	if got := testutil.ToFloat64(r.orders.WithLabelValues("open", "filled")) + testutil.ToFloat64(r.orders.WithLabelValues("close", "filled")); got != 2 {
		t.Fatalf("orders counted %v, want 2", got)
	}
	if a := openBreach(t, r.inbox); a != nil {
		t.Fatalf("an alert with nothing breached: %+v", a)
	}
}

// The venue down for EURUSD: GBPUSD is still hedged in the same pass, EURUSD raises
// exposure-limit-breached and is not asked again before its backoff; when the venue is back the
// hedge goes through and the alert is resolved.
func TestOneSymbolsFailureRaisesTheBreachAndStopsNoOther(t *testing.T) {
	r := newRig(t)
	r.book.setFail("EURUSD", fmt.Errorf("hedge order 7: %w: connection refused", venue.ErrNotSent))
	r.desk.set("EURUSD", "-15")
	r.desk.set("GBPUSD", "11")
	res := r.pass(t)
	if res.Done != 1 || res.Failed != 1 || strings.Join(res.Breached, ",") != "EURUSD" || !res.Again.Equal(r.clock.Now().Add(time.Second)) {
		t.Fatalf("pass: %+v", res)
	}
	requireAsked(t, r.book, "open EURUSD -700000", "open GBPUSD 300000")
	a := openBreach(t, r.inbox)
	if a == nil || a.Severity != alert.Critical || !strings.Contains(a.Message, "EURUSD net 1500000 units, limit 1000000") ||
		!strings.Contains(a.Message, "connection refused") || strings.Contains(a.Message, "GBPUSD") {
		t.Fatalf("alert: %+v", a)
	}
	// A fill of the traders' wakes the hedger at once: EURUSD waits out its backoff.
	res = r.pass(t)
	if res.Held != 1 || res.Failed != 0 || strings.Join(res.Breached, ",") != "EURUSD" {
		t.Fatalf("pass in the backoff: %+v", res)
	}
	requireAsked(t, r.book, "open EURUSD -700000", "open GBPUSD 300000")
	// Past it, still down: asked again, and the next wait is twice as long.
	r.clock.advance(time.Second)
	if res = r.pass(t); res.Failed != 1 || !res.Again.Equal(r.clock.Now().Add(2*time.Second)) {
		t.Fatalf("second failure: %+v", res)
	}
	// The venue is back: hedged, and the alert resolved.
	r.book.setFail("EURUSD", nil)
	r.clock.advance(2 * time.Second)
	if res = r.pass(t); res.Done != 1 || len(res.Breached) != 0 {
		t.Fatalf("pass with the venue back: %+v", res)
	}
	requireAsked(t, r.book, "open EURUSD -700000", "open GBPUSD 300000", "open EURUSD -700000", "open EURUSD -700000")
	if a := openBreach(t, r.inbox); a != nil {
		t.Fatalf("alert still open with every symbol inside: %+v", a)
	}
	if got := testutil.ToFloat64(r.orders.WithLabelValues("open", "not_filled")); got != 2 {
		t.Fatalf("orders not filled counted %v, want 2", got)
	}
}

// A hedge whose answer never came is never sent again: the symbol is held until the reconciler
// resolves it, looked at again after Recheck; still held at that look, the breach is raised.
func TestAnUnknownOutcomeHoldsTheSymbolUntilResolved(t *testing.T) {
	r := newRig(t)
	r.book.setFail("EURUSD", fmt.Errorf("hedge order 9: %w", venue.ErrOutcomeUnknown))
	r.desk.set("EURUSD", "14")
	if res := r.pass(t); res.Failed != 1 || strings.Join(res.Breached, ",") != "EURUSD" {
		t.Fatalf("pass: %+v", res)
	}
	r.book.setFail("EURUSD", nil)
	r.clock.advance(time.Minute) // past any backoff: only the SENDING order holds it
	for range 3 {
		if res := r.pass(t); res.Held != 1 || res.Done != 0 || !res.Again.Equal(r.clock.Now().Add(time.Second)) || strings.Join(res.Breached, ",") != "EURUSD" {
			t.Fatalf("held pass: %+v", res)
		}
	}
	requireAsked(t, r.book, "open EURUSD 600000")
	// The reconciler finds it filled: inside the limit, nothing to send, the alert resolved.
	r.book.resolve("EURUSD", true)
	if res := r.pass(t); res.Done != 0 || res.Held != 0 || len(res.Breached) != 0 {
		t.Fatalf("pass after the resolution: %+v", res)
	}
	requireAsked(t, r.book, "open EURUSD 600000")
	if a := openBreach(t, r.inbox); a != nil {
		t.Fatalf("alert still open: %+v", a)
	}
}

// A routing rule's hedge in flight (SENDING for milliseconds) holds the symbol for one look
// without raising anything.
func TestARulesHedgeInFlightIsNoBreach(t *testing.T) {
	r := newRig(t)
	r.desk.set("EURUSD", "14")
	r.book.mu.Lock()
	r.book.sending["EURUSD"] = dec("700000")
	r.book.mu.Unlock()
	if res := r.pass(t); res.Held != 1 || len(res.Breached) != 0 {
		t.Fatalf("pass: %+v", res)
	}
	r.book.resolve("EURUSD", false)
	r.book.mu.Lock()
	r.book.ruleUnits["EURUSD"] = dec("700000")
	r.book.mu.Unlock()
	if res := r.pass(t); res.Done != 0 || res.Held != 0 || len(res.Breached) != 0 {
		t.Fatalf("pass after the rule's hedge filled: %+v", res)
	}
	requireAsked(t, r.book)
}

func TestNothingIsSentOffTheLeaseHolder(t *testing.T) {
	r := newRig(t)
	r.desk.set("EURUSD", "20")
	r.lease.Lose()
	if _, err := r.runner.Pass(context.Background(), "test"); !errors.Is(err, gate.ErrNotHolder) {
		t.Fatalf("pass off the holder: %v", err)
	}
	requireAsked(t, r.book)
}

// Run passes on Notify, not only on its timer, and stops with its context.
func TestRunPassesOnEveryChange(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.runner.Run(ctx) }()
	r.desk.set("EURUSD", "12")
	r.runner.Notify()
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "the hedge after a change", func() bool { return len(r.book.asked()) == 1 })
	r.desk.set("EURUSD", "4")
	r.runner.Notify()
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "the unwind after a change", func() bool { return len(r.book.asked()) == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	requireAsked(t, r.book, "open EURUSD 400000", "close 1")
}

// A symbol whose market is not quoting is not sent (the venue would refuse it, every pass);
// past its limit it is a breach, until the market quotes again and the hedge goes through.
func TestAMarketNotQuotingHoldsTheHedge(t *testing.T) {
	r := newRig(t)
	r.setClosed("EURUSD", true)
	r.desk.set("EURUSD", "12")
	r.desk.set("GBPUSD", "-12")
	res := r.pass(t)
	if res.Held != 1 || res.Done != 1 || strings.Join(res.Breached, ",") != "EURUSD" || !res.Again.IsZero() {
		t.Fatalf("pass: %+v", res)
	}
	requireAsked(t, r.book, "open GBPUSD -400000")
	if a := openBreach(t, r.inbox); a == nil || !strings.Contains(a.Message, "EURUSD net -1200000 units, limit 1000000 (its market is not quoting") {
		t.Fatalf("alert: %+v", a)
	}
	r.setClosed("EURUSD", false)
	if res = r.pass(t); res.Done != 1 || len(res.Breached) != 0 {
		t.Fatalf("pass with the market open: %+v", res)
	}
	requireAsked(t, r.book, "open GBPUSD -400000", "open EURUSD 400000")
	if a := openBreach(t, r.inbox); a != nil {
		t.Fatalf("alert still open: %+v", a)
	}
}

// The lease lost between the pass's gate and the send: the hedge book's send is dropped at the
// gate; that is no breach of the venue's and no reason to back off.
func TestALeaseLostMidPassRaisesNothing(t *testing.T) {
	r := newRig(t)
	r.book.setFail("EURUSD", fmt.Errorf("hedge order 3: %w", gate.ErrNotHolder))
	r.desk.set("EURUSD", "12")
	if res := r.pass(t); res.Failed != 1 || len(res.Breached) != 0 || !res.Again.IsZero() {
		t.Fatalf("pass: %+v", res)
	}
	if a := openBreach(t, r.inbox); a != nil {
		t.Fatalf("alert raised for a dropped send: %+v", a)
	}
	r.book.setFail("EURUSD", nil)
	if res := r.pass(t); res.Done != 1 {
		t.Fatalf("next pass on the holder: %+v", res)
	}
	requireAsked(t, r.book, "open EURUSD 400000", "open EURUSD 400000")
}
