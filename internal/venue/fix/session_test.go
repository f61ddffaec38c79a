package fix_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

var (
	testDB       *sql.DB
	testDatabase *dbtest.Database // testDB's database, for a connection through a proxy
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		d, err := dbtest.NewDatabase("venuefix")
		if err != nil {
			panic(err)
		}
		defer d.Drop()
		testDatabase = d
		if testDB, err = store.Connect(d.DSN); err != nil {
			panic(err)
		}
		defer testDB.Close()
		if err := store.Migrate(context.Background(), testDB, slog.New(slog.DiscardHandler)); err != nil {
			panic(err)
		}
		return m.Run()
	}())
}

// prices is a fixed quote book the venue fills at.
type prices map[string][2]string

func (p prices) Quote(symbol string) (bid, ask decimal.Decimal, ok bool) {
	q, ok := p[symbol]
	if !ok {
		return decimal.Zero, decimal.Zero, false
	}
	return decimal.RequireFromString(q[0]), decimal.RequireFromString(q[1]), true
}

var ids atomic.Int64

// rig is one FIX venue and the desk's session to it, with comp ids of their own (the library's
// session registry is per process).
type rig struct {
	venue   *fixvenue.Server
	session *fix.Session
	file    string
	log     *slog.Logger // the desk session's log (testLog when nil)
	db      *sql.DB      // the desk's database (testDB when nil)
	alerts  fix.Alerts   // where the session raises alerts (none when nil)
	stop    context.CancelFunc
	done    chan error
}

func newRig(t *testing.T, timeout time.Duration, latency ...time.Duration) *rig {
	t.Helper()
	var lat time.Duration
	if len(latency) > 0 {
		lat = latency[0]
	}
	return newRigWith(t, timeout, func(c *fixvenue.Config) { c.Latency = lat })
}

// newRigWith is newRig with the venue's Config shaped by venue (its behaviours: how it names its
// own orders, how it reports positions, …).
func newRigWith(t *testing.T, timeout time.Duration, shape func(*fixvenue.Config)) *rig {
	t.Helper()
	n := ids.Add(1)
	desk, ven := fmt.Sprintf("DESK%d%d", os.Getpid(), n), fmt.Sprintf("VENUE%d%d", os.Getpid(), n)
	cfg := fixvenue.Config{VenueCompID: ven, DeskCompID: desk, Prices: prices{"EURUSD": {"1.1000", "1.1002"}, "AUDUSD": {"0.6500", "0.6502"}, "NZDUSD": {"0.6000", "0.6002"}, "USDCHF": {"0.9000", "0.9002"}, "USDCAD": {"1.3500", "1.3502"},
		// One symbol per test of burst_test.go: the journal is the whole database's.
		"EURCHF": {"0.9500", "0.9502"}, "EURGBP": {"0.8500", "0.8502"}, "GBPJPY": {"190.00", "190.02"}, "AUDNZD": {"1.0800", "1.0802"}, "CHFJPY": {"170.00", "170.02"},
		// One symbol per test of whose_test.go.
		"EURJPY": {"160.00", "160.02"}, "EURAUD": {"1.6500", "1.6502"}, "GBPCHF": {"1.1300", "1.1302"}, "AUDJPY": {"98.00", "98.02"}, "CADJPY": {"110.00", "110.02"},
		// paging_test.go's own.
		"NZDJPY": {"90.00", "90.02"},
		// Fills in several executions and lost journal replies (executions_test.go, lost_commit_test.go).
		"GBPAUD": {"1.1200", "1.1203"}, "SGDJPY": {"160.00", "160.03"}, "HKDJPY": {"110.00", "110.02"},
		// A close crossing the venue's own (crossing_test.go).
		"USDSGD": {"1.3400", "1.3402"}, "USDHKD": {"7.8000", "7.8002"},
		// A partial close crossing the venue's own, then the reconciler's plan (crossing_test.go).
		"USDMXN": {"17.0000", "17.0020"}, "USDZAR": {"18.0000", "18.0020"}}}
	shape(&cfg)
	v, err := fixvenue.New(cfg, testLog)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := v.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	host, port, _ := strings.Cut(addr, ":")
	file := fmt.Sprintf("[DEFAULT]\nConnectionType=initiator\nReconnectInterval=1\nHeartBtInt=30\n\n[SESSION]\nBeginString=FIX.4.4\nSenderCompID=%s\nTargetCompID=%s\nSocketConnectHost=%s\nSocketConnectPort=%s\n", desk, ven, host, port)
	r := &rig{venue: v, file: file}
	r.start(t, timeout)
	return r
}

// start runs a new Session on the rig's session file, as a new lease holder would.
func (r *rig) start(t *testing.T, timeout time.Duration, onWrote ...func(time.Duration)) {
	t.Helper()
	var wrote func(time.Duration)
	if len(onWrote) > 0 {
		wrote = onWrote[0]
	}
	log := r.log
	if log == nil {
		log = testLog
	}
	db := r.db
	if db == nil {
		db = testDB
	}
	s, err := fix.New(fix.Config{Settings: strings.NewReader(r.file), DB: db, Account: "acct", Timeout: timeout, Log: log, OnWrote: wrote, Alerts: r.alerts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.session, r.stop, r.done = s, cancel, make(chan error, 1)
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(r.halt)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := s.WaitLoggedOn(wctx); err != nil {
		select {
		case runErr := <-r.done:
			r.done <- runErr
			t.Fatalf("%v: the session stopped: %v", err, runErr)
		default:
			t.Fatal(err)
		}
	}
}

func (r *rig) halt() {
	r.stop()
	err := <-r.done
	r.done <- err // a second halt returns at once
}

func dd(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func orderID() string { return fmt.Sprintf("%d", 1_000_000+ids.Add(1)) }

// A market buy fills at the ask and its close, an opposite order against the net, at the bid;
// the venue's net position goes back to zero.
func TestOpenAndCloseBookTheVenuesPrices(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	id := orderID()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "EURUSD", Units: dd("10000")})
	if err != nil || out.Fill == nil {
		t.Fatalf("place: %+v %v", out, err)
	}
	trade := out.Fill.TradeOpened
	if !out.Fill.Price.Equal(dd("1.1002")) || !out.Fill.Units.Equal(dd("10000")) || trade != strconv.FormatInt(out.Fill.TransactionID, 10) {
		t.Fatalf("fill %+v: want 10000 at the ask 1.1002, the trade named by its opening execution", out.Fill)
	}
	if u, _ := r.venue.NetPosition("EURUSD"); !u.Equal(dd("10000")) {
		t.Fatalf("venue net %s, want 10000", u)
	}
	part := dd("4000")
	out, err = r.session.CloseTrade(ctx, trade, &part)
	if err != nil || out.Fill == nil || out.Fill.TradeReduced != trade || !out.Fill.Price.Equal(dd("1.1")) || !out.Fill.Units.Equal(dd("-4000")) {
		t.Fatalf("partial close: %+v %v", out.Fill, err)
	}
	out, err = r.session.CloseTrade(ctx, trade, nil)
	if err != nil || out.Fill == nil || len(out.Fill.TradesClosed) != 1 || out.Fill.TradesClosed[0] != trade || !out.Fill.Units.Equal(dd("-6000")) {
		t.Fatalf("close: %+v %v", out.Fill, err)
	}
	if u, _ := r.venue.NetPosition("EURUSD"); !u.IsZero() {
		t.Fatalf("venue net %s after the close, want 0", u)
	}
	tr, found, err := r.session.TradeByID(ctx, trade)
	if err != nil || !found || tr.ClientID != id || tr.State != venue.TradeClosed || len(tr.ClosingTransactionIDs) != 2 || !tr.AverageClosePrice.Equal(dd("1.1")) {
		t.Fatalf("trade %+v found=%v err=%v", tr, found, err)
	}
}

// A rejection carries OrdRejReason into the desk's venue reason: "exceeds limit" is the
// trader's "not enough margin".
func TestRejectionIsTheTradersRefusal(t *testing.T) {
	r := newRig(t, 5*time.Second)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultReject, Reason: fixvenue.RejectExceedsLimit, Text: "credit limit"}); err != nil {
		t.Fatal(err)
	}
	out, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("-10000")})
	if err != nil || out.Cancelled == nil || out.Cancelled.Reason != venue.ReasonInsufficientMargin {
		t.Fatalf("want a cancel INSUFFICIENT_MARGIN, got %+v %v", out, err)
	}
	out, err = r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "GBPUSD", Units: dd("10000")})
	if err != nil || out.Cancelled == nil || out.Cancelled.Reason != venue.ReasonMarketHalted {
		t.Fatalf("an unquoted symbol: want MARKET_HALTED, got %+v %v", out, err)
	}
}

// A report lost after execution: the send's outcome is unknown, the order is never sent again,
// and the OrderStatusRequest by ClOrdID finds it filled.
func TestLostReportIsResolvedByOrderStatusNeverResent(t *testing.T) {
	r := newRig(t, 500*time.Millisecond)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	id := orderID()
	_, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: id, Symbol: "EURUSD", Units: dd("10000")})
	if !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("want ErrOutcomeUnknown, got %v", err)
	}
	info, found, err := r.session.OrderByClientID(context.Background(), id)
	if err != nil || !found || info.State != venue.OrderFilled || info.TradeOpenedID == "" {
		t.Fatalf("lookup: %+v found=%v err=%v", info, found, err)
	}
	tr, found, err := r.session.TradeByClientID(context.Background(), id)
	if err != nil || !found || tr.ID != info.TradeOpenedID || tr.ClientID != id || !tr.CurrentUnits.Equal(dd("10000")) || !tr.Price.Equal(dd("1.1002")) {
		t.Fatalf("trade: %+v found=%v err=%v", tr, found, err)
	}
	if n := countOrders(r.venue, id); n != 1 {
		t.Fatalf("the venue holds %d orders %s, want exactly 1", n, id)
	}
	// An order the venue never saw is not found: the reconciler may then mark it NOT_SENT.
	if _, found, err := r.session.OrderByClientID(context.Background(), orderID()); err != nil || found {
		t.Fatalf("an unknown order: found=%v err=%v", found, err)
	}
}

func countOrders(v *fixvenue.Server, clOrdID string) int {
	n := 0
	for _, o := range v.State().Orders {
		if o.ClOrdID == clOrdID {
			n++
		}
	}
	return n
}

// The session dropped in the middle of a burst: the library reconnects and resends what the
// venue missed, the venue executes each ClOrdID once, and the journal records each fill once.
func TestSessionDroppedMidBurstEachFillOnce(t *testing.T) {
	r := newRig(t, 5*time.Second, 30*time.Millisecond)
	const n = 40
	var wg sync.WaitGroup
	clids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		clids[i] = orderID()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: clids[i], Symbol: "EURUSD", Units: dd("1000")})
		}()
	}
	// Cut the connection once the venue has taken half of the burst: reports are in flight
	// both ways.
	for deadline := time.Now().Add(5 * time.Second); len(r.venue.State().Orders) < n/2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if cut := r.venue.Drop(); cut != 1 {
		t.Fatalf("dropped %d connections, want 1", cut)
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.session.WaitLoggedOn(ctx); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for i, id := range clids {
		if errors.Is(errs[i], venue.ErrNotSent) {
			continue // refused before it left: the session was down
		}
		sent++
		if _, _, err := r.session.OrderByClientID(ctx, id); err != nil {
			t.Fatalf("lookup %s: %v", id, err)
		}
		if c := countOrders(r.venue, id); c != 1 {
			t.Fatalf("order %s executed %d times at the venue", id, c)
		}
	}
	var execs int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_fix_execution` WHERE `clOrdId` IN ('" + strings.Join(clids, "','") + "')").Scan(&execs); err != nil {
		t.Fatal(err)
	}
	units, _ := r.venue.NetPosition("EURUSD")
	if execs != sent || !units.Equal(decimal.NewFromInt(int64(1000*sent))) {
		t.Fatalf("%d orders sent, %d executions journaled, venue net %s", sent, execs, units)
	}
	if sent == 0 {
		t.Fatal("no order was sent at all")
	}
}

// A new holder resumes the session: its logon carries the sequence numbers stored in MySQL, it
// does not reset them, and trading goes on.
func TestTakeoverResumesSequenceNumbersFromMySQL(t *testing.T) {
	r := newRig(t, 5*time.Second)
	if _, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("1000")}); err != nil {
		t.Fatal(err)
	}
	id := r.session.SessionID()
	before := seqNums(t, id.SenderCompID)
	r.halt()
	r.start(t, 5*time.Second)
	if _, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("1000")}); err != nil {
		t.Fatal(err)
	}
	// The incoming number is written a few ms after it moves.
	var after [2]int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		after = seqNums(t, id.SenderCompID)
		if before[0] >= 3 && after[0] > before[0] && after[1] > before[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sequence numbers before %v after %v: want them to go on, not reset", before, after)
		}
	}
}

// A session the store created on an earlier day is resumed, not reset: the desk sets no daily
// session schedule (QuickFIX/Go resets both numbers when the store's creation time falls in an
// earlier range of one), so a takeover the next day logs on with the stored numbers.
func TestSessionCreatedOnAnEarlierDayIsResumedNotReset(t *testing.T) {
	r := newRig(t, 5*time.Second)
	if _, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("1000")}); err != nil {
		t.Fatal(err)
	}
	id := r.session.SessionID()
	r.halt()
	created := func() (at time.Time) {
		t.Helper()
		if err := testDB.QueryRow("SELECT `creation_time` FROM `fx_fix_sessions` WHERE `sendercompid` = ?", id.SenderCompID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	if _, err := testDB.Exec("UPDATE `fx_fix_sessions` SET `creation_time` = `creation_time` - INTERVAL 2 DAY WHERE `sendercompid` = ?", id.SenderCompID); err != nil {
		t.Fatal(err)
	}
	before := created()
	r.start(t, 5*time.Second)
	if _, err := r.session.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("1000")}); err != nil {
		t.Fatalf("an order after resuming a session created two days ago: %v", err)
	}
	// A reset writes a new creation time with the numbers at 1.
	if after := created(); !after.Equal(before) {
		t.Fatalf("the session created at %s was reset at %s", before, after)
	}
}

// seqNums is the stored (outgoing, incoming) next sequence numbers of the desk's session.
func seqNums(t *testing.T, sender string) [2]int {
	t.Helper()
	var out [2]int
	if err := testDB.QueryRow("SELECT `outgoing_seqnum`, `incoming_seqnum` FROM `fx_fix_sessions` WHERE `sendercompid` = ?", sender).Scan(&out[0], &out[1]); err != nil {
		t.Fatal(err)
	}
	return out
}

// The venue closing part of its net itself: the desk's trades in that symbol are reduced oldest
// first, each share at the venue's price, and the venue's net equals the desk's open trades.
func TestVenueSideCloseIsAllocatedOldestFirst(t *testing.T) {
	// A symbol no other test trades: the journal's trades are the whole database's.
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	var a, b string // the two trades, oldest first
	for i, units := range []string{"10000", "5000"} {
		out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "AUDUSD", Units: dd(units)})
		if err != nil || out.Fill == nil {
			t.Fatal(out, err)
		}
		if i == 0 {
			a = out.Fill.TradeOpened
		} else {
			b = out.Fill.TradeOpened
		}
	}
	before, _ := r.venue.NetPosition("AUDUSD")
	units := dd("12000")
	if _, err := r.venue.CloseVenueSide("AUDUSD", &units); err != nil {
		t.Fatal(err)
	}
	// The unsolicited report is recorded when it arrives; the trade reads wait for it.
	deadline := time.Now().Add(5 * time.Second)
	var ta, tb venue.Trade
	for {
		ta, _, _ = r.session.TradeByID(ctx, a)
		tb, _, _ = r.session.TradeByID(ctx, b)
		if ta.State == venue.TradeClosed || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ta.State != venue.TradeClosed || !tb.CurrentUnits.Equal(dd("3000")) || !ta.AverageClosePrice.Equal(dd("0.65")) {
		t.Fatalf("after the venue closed 12000: a=%+v b=%+v", ta, tb)
	}
	open, err := r.session.OpenTrades(ctx)
	if err != nil {
		t.Fatal(err)
	}
	net, _ := r.venue.NetPosition("AUDUSD")
	var desk decimal.Decimal
	for _, tr := range open {
		if tr.Symbol != "AUDUSD" {
			continue // other tests' trades, at other venues
		}
		desk = desk.Add(tr.CurrentUnits)
		if tr.Tag != venue.Tag {
			t.Fatalf("untagged exposure %+v; before the close the venue held %s", tr, before)
		}
	}
	if !desk.Equal(net) {
		t.Fatalf("desk trades %s, venue net %s", desk, net)
	}
}

// testLog is quiet unless FXDESK_TEST_VERBOSE is set.
var testLog = func() *slog.Logger {
	if os.Getenv("FXDESK_TEST_VERBOSE") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}()

// Only the lease holder logs on: the session logs out as soon as the lease is lost, and the venue
// sees it go.
func TestSessionLogsOutWhenTheLeaseIsLost(t *testing.T) {
	r := newRig(t, 5*time.Second)
	r.halt() // the rig's own run; this test runs the session as the holder does
	var holding atomic.Bool
	holding.Store(true)
	done := make(chan bool, 1)
	go func() {
		lost, err := r.session.RunWhile(context.Background(), holding.Load, 10*time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		done <- lost
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.session.WaitLoggedOn(ctx); err != nil {
		t.Fatal(err)
	}
	holding.Store(false)
	select {
	case lost := <-done:
		if !lost {
			t.Fatal("RunWhile returned without reporting the lease lost")
		}
	case <-ctx.Done():
		t.Fatal("the session still runs after the lease was lost")
	}
	for r.venue.LoggedOn() {
		if ctx.Err() != nil {
			t.Fatal("the venue still sees the session logged on")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r.session.Reachable() {
		t.Fatal("the desk still counts the venue reachable")
	}
}

// OrderMassStatusRequest: one request brings every order's status; a fill whose report was lost
// is journaled from it, once, however often it is asked.
func TestMassStatusJournalsEveryOrderOnce(t *testing.T) {
	r := newRig(t, 500*time.Millisecond)
	ctx := context.Background()
	if _, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("1000")}); err != nil {
		t.Fatal(err)
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	lost := orderID()
	if _, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: lost, Symbol: "EURUSD", Units: dd("2000")}); !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("want the lost report's outcome unknown, got %v", err)
	}
	for range 2 {
		n, err := r.session.MassStatus(ctx)
		if err != nil || n != 2 {
			t.Fatalf("mass status: %d orders, %v; want 2", n, err)
		}
	}
	var execs int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_fix_execution` WHERE `clOrdId` = ?", lost).Scan(&execs); err != nil {
		t.Fatal(err)
	}
	if execs != 1 {
		t.Fatalf("the lost fill journaled %d times, want once", execs)
	}
}

// A mass status counts every order the venue reports, however many come in one batch of the
// intake: its answers are counted, not queued where a full queue would drop the last report.
func TestMassStatusCountsEveryReportOfABigBook(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	const n = 60
	for range n {
		if _, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "EURUSD", Units: dd("1000")}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.session.MassStatus(ctx)
	if err != nil || got != n {
		t.Fatalf("mass status: %d orders, %v; want %d", got, err, n)
	}
}

// A report the journal could not record keeps the store's incoming number at it: the session
// reconnects and the venue resends it. A venue-side close has no other way back (the desk cannot ask about a
// ClOrdID it never knew), so losing it would leave the venue's net and the desk's apart.
func TestUnjournaledReportIsResentNotLost(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "EURGBP", Units: dd("7000")})
	if err != nil || out.Fill == nil {
		t.Fatal(out, err)
	}
	trade := out.Fill.TradeOpened
	logons := r.session.Logons()
	// The journal's executions table away: the close's report cannot be recorded.
	if _, err := testDB.Exec("RENAME TABLE `fx_fix_execution` TO `fx_fix_execution_away`"); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if _, err := testDB.Exec("RENAME TABLE `fx_fix_execution_away` TO `fx_fix_execution`"); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(restore)
	if _, err := r.venue.CloseVenueSide("EURGBP", nil); err != nil {
		t.Fatal(err)
	}
	// The session drops the connection rather than count the report.
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the session reconnects after a report it could not journal", func() bool {
		return r.session.Logons() > logons
	})
	restore()
	poll.Until(t, 15*time.Second, 20*time.Millisecond, "the resent venue-side close is journaled", func() bool {
		tr, found, err := r.session.TradeByID(ctx, trade)
		return err == nil && found && tr.State == venue.TradeClosed
	})
	open, err := r.session.OpenTrades(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range open {
		if tr.Symbol == "EURGBP" {
			t.Fatalf("the venue's net and the journal disagree after the resend: %+v", tr)
		}
	}
}
