package trading

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/testkit/poll"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
	"fxdesk/internal/venue"
)

// liveQuotes are the desk's prices (tick.Prices) and, through venueQuotes, the venue's: the
// same quotes, plus a per-symbol slip the venue adds to both sides, so a test can tell the
// venue's fill price from the desk's.
type liveQuotes struct {
	mu   sync.Mutex
	q    map[string][2]decimal.Decimal
	slip map[string]decimal.Decimal
}

func newLiveQuotes() *liveQuotes {
	return &liveQuotes{q: map[string][2]decimal.Decimal{}, slip: map[string]decimal.Decimal{}}
}

func (p *liveQuotes) set(symbol, bid, ask string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.q[symbol] = [2]decimal.Decimal{decimal.RequireFromString(bid), decimal.RequireFromString(ask)}
}

func (p *liveQuotes) setSlip(symbol, slip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slip[symbol] = decimal.RequireFromString(slip)
}

func (p *liveQuotes) LastTick(s string) (tick.Quote, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.q[s]
	return tick.Quote{Bid: q[0].InexactFloat64(), Ask: q[1].InexactFloat64(), ReceivedAt: time.Now()}, ok
}

func (p *liveQuotes) SymbolState(s string) tick.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.q[s]; ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// venueQuotes is the venue's view of liveQuotes (venuesim.PriceSource).
type venueQuotes struct{ *liveQuotes }

func (v venueQuotes) Quote(s string) (bid, ask decimal.Decimal, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	q, ok := v.q[s]
	return q[0].Add(v.slip[s]), q[1].Add(v.slip[s]), ok
}

// The venue simulator the EXTERNAL tests share. One venue for the package's database: every
// simulator numbers its trades from the same start and fx_position.venueTradeId is unique across
// the table, so two simulators' trades would collide in one database. The tests that use it run
// one at a time (no t.Parallel) and measure the venue by differences from their start.
var shared struct {
	once   sync.Once
	sim    *venuesim.Server
	prices *liveQuotes
	err    error
}

func sharedVenue(t *testing.T) (*venuesim.Server, *liveQuotes) {
	t.Helper()
	shared.once.Do(func() {
		shared.prices = newLiveQuotes()
		shared.sim, shared.err = venuesim.New(venuesim.Config{AccountID: "101-001-trading-001", Latency: venuesim.NoLatency,
			Prices: venueQuotes{shared.prices}, Instruments: venueInstruments(),
			Now: func() time.Time { return time.Now().Add(time.Duration(venueSkew.Load())) }}, slog.New(slog.DiscardHandler))
		if shared.err == nil {
			_, shared.err = shared.sim.Listen("127.0.0.1:0")
		}
		if shared.err == nil {
			go shared.sim.Run(context.Background()) // until the test binary exits
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.sim, shared.prices
}

// venueSkew moves the shared venue's clock (a time.Duration): a test sets it to make the
// venue's times tell apart from the desk's, and resets it when it ends.
var venueSkew atomic.Int64

// notAtTheVenue is a symbol the desk lists and the shared venue does not offer.
const notAtTheVenue = "USDHKD"

// venueInstruments is what the shared venue offers: its default, less notAtTheVenue.
func venueInstruments() []string {
	var out []string
	for _, s := range venuesim.DefaultInstruments {
		if s != notAtTheVenue {
			out = append(out, s)
		}
	}
	return out
}

// abook is a desk whose EXTERNAL groups trade through the in-process venue simulator on a real
// loopback socket, through an executor and the Sender the web process uses.
type abook struct {
	t      *testing.T
	svc    *Service
	sim    *venuesim.Server
	base   venuesim.State // the venue when the test began
	exec   *venue.Executor
	client *venue.Client
	prices *liveQuotes
}

// newABook builds a service trading through the shared venue with an executor of its own (no
// connection yet); EURUSD quotes 1.1/1.1002 at the desk and the venue.
// newABook is the EXTERNAL desk on the shared venue; with, when given, changes the service's
// configuration before it is built.
func newABook(t *testing.T, with ...func(*Config)) *abook {
	t.Helper()
	sim, prices := sharedVenue(t)
	prices.mu.Lock()
	prices.q, prices.slip = map[string][2]decimal.Decimal{}, map[string]decimal.Decimal{}
	prices.mu.Unlock()
	prices.set("EURUSD", "1.1", "1.1002")
	exec, err := venue.NewExecutor(venue.ExecutorConfig{Cap: 4, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Close)
	client, err := venue.NewClient(venue.ClientConfig{BaseURL: sim.URL(), AccountID: sim.AccountID(), Token: "test-token", HTTP: exec.HTTPClient(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g,
		Venue: venue.NewSender(client, exec, sim.AccountID(), nil)}
	for _, f := range with {
		f(&cfg)
	}
	svc := newService(t, cfg)
	return &abook{t: t, svc: svc, sim: sim, base: sim.State(), exec: exec, client: client, prices: prices}
}

// requests is how many requests the venue received on endpoint since the test began.
func (b *abook) requests(endpoint string) int {
	return b.sim.State().Requests[endpoint] - b.base.Requests[endpoint]
}

// externalAccount opens a funded USD account (1,000 at 1:100) for user in an account group of
// its own, switched to EXTERNAL.
func (b *abook) externalAccount(user int64) book.Account {
	b.t.Helper()
	ctx := context.Background()
	group := fmt.Sprintf("ext-%d", user)
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_account_group` (`name`) VALUES (?)", group); err != nil {
		b.t.Fatal(err)
	}
	a := fundedAccount(b.t, b.svc, user)
	if _, err := testDB.Exec("UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, a.ID); err != nil {
		b.t.Fatal(err)
	}
	if g, err := adminOf(b.t, b.svc).SetExecutionMode(asAdmin(ctx), group, fx.External); err != nil || g.Execution != fx.External {
		b.t.Fatalf("switch %s to EXTERNAL: %+v %v", group, g, err)
	}
	a.Group = group
	return a
}

func (b *abook) buy(user int64, a book.Account, symbol, lots string) (OrderResult, error) {
	return b.svc.PlaceOrder(context.Background(), user, OrderRequest{AccountID: a.ID, Symbol: symbol, Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString(lots)})
}

// venueTrade is the simulator's trade for desk order id.
func (b *abook) venueTrade(orderID int64) venuesim.TradeState {
	b.t.Helper()
	var found []venuesim.TradeState
	for _, tr := range b.sim.State().Trades {
		if tr.ClientID == ClientID(orderID) {
			found = append(found, tr)
		}
	}
	if len(found) != 1 {
		b.t.Fatalf("the venue holds %d trades for order %d, want 1", len(found), orderID)
	}
	return found[0]
}

func dd(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func orderRow(t *testing.T, id int64) (status, execution string, reason *string) {
	t.Helper()
	if err := testDB.QueryRow("SELECT `status`, `execution`, `venueReason` FROM `fx_order` WHERE `id` = ?", id).Scan(&status, &execution, &reason); err != nil {
		t.Fatalf("order %d: %v", id, err)
	}
	return status, execution, reason
}

// An EXTERNAL open fills at the venue's price (not the desk's), links its position to the
// venue trade and charges the commission; its close books the venue's price and the exact P&L.
func TestExternalOpenAndCloseBookTheVenuePrices(t *testing.T) {
	b := newABook(t)
	const user = 9701
	a := b.externalAccount(user)
	b.prices.setSlip("EURUSD", "0.00005") // the venue fills 1.10025, the desk would 1.1002

	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	tr := b.venueTrade(res.Order.ID)
	if res.Order.Status != fx.OrderFilled || res.Order.FillPrice == nil || !res.Order.FillPrice.Equal(dd("1.10025")) || res.Position == nil {
		t.Fatalf("open: %+v", res)
	}
	p := *res.Position
	if p.VenueTradeID == nil || *p.VenueTradeID != tr.ID || !p.OpenPrice.Equal(dd("1.10025")) || !p.Volume.Equal(dd("0.1")) ||
		res.Commission == nil || !res.Commission.Amount.Equal(dd("-0.70")) {
		t.Fatalf("position %+v (venue trade %s), commission %+v", p, tr.ID, res.Commission)
	}
	if !tr.CurrentUnits.Equal(dd("10000")) || tr.Tag != venue.Tag || !tr.Price.Equal(dd("1.10025")) {
		t.Fatalf("venue trade: %+v", tr)
	}
	if st, exe, _ := orderRow(t, res.Order.ID); st != fx.OrderFilled || exe != "EXTERNAL" {
		t.Fatalf("order row: %s %s", st, exe)
	}
	stored, err := book.LoadPosition(context.Background(), testDB, user, p.ID)
	if err != nil || stored.VenueTradeID == nil || *stored.VenueTradeID != tr.ID {
		t.Fatalf("stored position %+v %v", stored, err)
	}
	if deals, bal := ledgerOf(t, a.ID); !bal.Equal(dd("999.30")) || fmt.Sprint(deals) != "[1000 -0.7]" {
		t.Fatalf("after the open: balance %s, deals %v", bal, deals)
	}

	// The venue's bid is 1.1010 + slip: the desk books the venue's, 1.10105.
	b.prices.set("EURUSD", "1.1010", "1.1012")
	cl, err := b.svc.ClosePosition(context.Background(), user, p.ID, nil, fx.CloseClient)
	if err != nil {
		t.Fatal(err)
	}
	// (1.10105 − 1.10025) × 10,000 = 8.00
	if cl.Position.Status != fx.PositionClosed || cl.Position.ClosePrice == nil || !cl.Position.ClosePrice.Equal(dd("1.10105")) ||
		!cl.Deal.Amount.Equal(dd("8.00")) || cl.Position.CloseReason == nil || *cl.Position.CloseReason != string(fx.CloseClient) {
		t.Fatalf("close: %+v", cl)
	}
	if tr := b.venueTrade(res.Order.ID); tr.State != venue.TradeClosed || tr.AverageClosePrice == nil || !tr.AverageClosePrice.Equal(dd("1.10105")) {
		t.Fatalf("venue trade after the close: %+v", tr)
	}
	if deals, bal := ledgerOf(t, a.ID); !bal.Equal(dd("1007.30")) || len(deals) != 3 {
		t.Fatalf("after the close: balance %s, deals %v", bal, deals)
	}
	if st := b.sim.State(); st.OrderRequests[ClientID(res.Order.ID)] != 1 || b.requests("PUT /trades/{trade}/close") != 1 {
		t.Fatalf("venue requests: %v %v", st.OrderRequests, st.Requests)
	}
}

// The symbol group's markup is added to the venue's price both ways.
func TestExternalFillsCarryTheMarkup(t *testing.T) {
	// AUDUSD, which no other test in this package trades, in a symbol group with 20 points.
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_symbol_group` (`name`, `markupPoints`, `commissionPerLot`, `commissionCurrency`) VALUES ('ext-markup', 20, 7, 'USD')"); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_instrument` SET `symbolGroup` = 'ext-markup' WHERE `symbol` = 'AUDUSD'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDB.Exec("UPDATE `fx_instrument` SET `symbolGroup` = 'majors' WHERE `symbol` = 'AUDUSD'") })
	b := newABook(t)
	b.prices.set("AUDUSD", "0.65", "0.6502")
	const user = 9702
	a := b.externalAccount(user)
	res, err := b.buy(user, a, "AUDUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	// Venue ask 0.6502 + 20 points (0.0002).
	if !res.Position.OpenPrice.Equal(dd("0.6504")) || !b.venueTrade(res.Order.ID).Price.Equal(dd("0.6502")) {
		t.Fatalf("open with markup: %s, venue %s", res.Position.OpenPrice, b.venueTrade(res.Order.ID).Price)
	}
	cl, err := b.svc.ClosePosition(context.Background(), user, res.Position.ID, nil, fx.CloseClient)
	if err != nil {
		t.Fatal(err)
	}
	// Venue bid 0.6500 − 0.0002 = 0.6498; (0.6498 − 0.6504) × 10,000 = −6.00.
	if !cl.Position.ClosePrice.Equal(dd("0.6498")) || !cl.Deal.Amount.Equal(dd("-6.00")) {
		t.Fatalf("close with markup: %s, P&L %s", cl.Position.ClosePrice, cl.Deal.Amount)
	}
	if _, bal := ledgerOf(t, a.ID); !bal.Equal(dd("993.30")) {
		t.Fatalf("balance %s", bal)
	}
}

// A partial close closes that many units at the venue and books them at the venue's price.
// closeInFlightVenue is the shared venue with every close answered as the FIX venue answers a
// close of a trade whose other close has no final report yet: 409 CLOSE_IN_FLIGHT, nothing sent.
type closeInFlightVenue struct{ Venue }

func (closeInFlightVenue) CloseTrade(context.Context, string, *decimal.Decimal, time.Time) (venue.Outcome, error) {
	return venue.Outcome{}, &venue.Error{Status: 409, Code: venue.CodeCloseInFlight, Message: "trade 1 is being closed (order 1.c1 has no final report yet); nothing sent"}
}

// A close refused because another close of the trade is in flight is the trader's 409, and an
// expected race, not a fault: it is logged at info, never as an error (the other close books the
// position).
func TestExternalCloseInFlightIsNotLoggedAsAnError(t *testing.T) {
	var logs dbtest.LogBuffer
	b := newABook(t, func(c *Config) {
		c.Venue = closeInFlightVenue{c.Venue}
		c.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const user = 9731
	a := b.externalAccount(user)
	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.ClosePosition(context.Background(), user, res.Position.ID, nil, fx.CloseClient)
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(err.Error(), "is being closed") {
		t.Fatalf("a close refused CLOSE_IN_FLIGHT: want the trader's 409 naming it, got %v", err)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"venue refused a close"`) {
			line = l
		}
	}
	if !strings.Contains(line, `"level":"INFO"`) {
		t.Fatalf("the refusal logged as %q, want one line at INFO", line)
	}
}

func TestExternalPartialClose(t *testing.T) {
	b := newABook(t)
	const user = 9703
	a := b.externalAccount(user)
	res, err := b.buy(user, a, "EURUSD", "0.3")
	if err != nil {
		t.Fatal(err)
	}
	b.prices.set("EURUSD", "1.1010", "1.1012")
	part := dd("0.1")
	cl, err := b.svc.ClosePosition(context.Background(), user, res.Position.ID, &part, fx.CloseClient)
	if err != nil {
		t.Fatal(err)
	}
	// (1.1010 − 1.1002) × 10,000 = 8.00
	if cl.Position.Status != fx.PositionOpen || !cl.Position.Volume.Equal(dd("0.2")) || !cl.Deal.Amount.Equal(dd("8.00")) ||
		cl.Deal.Price == nil || !cl.Deal.Price.Equal(dd("1.1010")) {
		t.Fatalf("partial close: %+v", cl)
	}
	if tr := b.venueTrade(res.Order.ID); tr.State != venue.TradeOpen || !tr.CurrentUnits.Equal(dd("20000")) {
		t.Fatalf("venue trade after the partial close: %+v", tr)
	}
	b.prices.set("EURUSD", "1.1020", "1.1022")
	cl, err = b.svc.ClosePosition(context.Background(), user, res.Position.ID, nil, fx.CloseClient)
	if err != nil {
		t.Fatal(err)
	}
	// (1.1020 − 1.1002) × 20,000 = 36.00
	if cl.Position.Status != fx.PositionClosed || !cl.Deal.Amount.Equal(dd("36.00")) || !cl.Position.RealizedProfit.Equal(dd("44.00")) {
		t.Fatalf("final close: %+v", cl)
	}
	if tr := b.venueTrade(res.Order.ID); tr.State != venue.TradeClosed {
		t.Fatalf("venue trade: %+v", tr)
	}
	// 1000 − 2.10 commission + 8 + 36
	if _, bal := ledgerOf(t, a.ID); !bal.Equal(dd("1041.90")) {
		t.Fatalf("balance %s", bal)
	}
}

// A venue cancel answers ECONFLICT and leaves the order REJECTED with the venue's reason; no
// position, no deal.
func TestExternalVenueCancelRejects(t *testing.T) {
	b := newABook(t)
	const user = 9704
	a := b.externalAccount(user)
	if err := b.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultCancel, Reason: venue.ReasonInsufficientMargin}); err != nil {
		t.Fatal(err)
	}
	_, err := b.buy(user, a, "EURUSD", "0.1")
	if fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("cancelled open: %v, want ECONFLICT", err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if st, _, reason := orderRow(t, id); st != fx.OrderRejected || reason == nil || *reason != venue.ReasonInsufficientMargin {
		t.Fatalf("order %d: %s %v", id, st, reason)
	}
	var positions int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ?", a.ID).Scan(&positions); err != nil {
		t.Fatal(err)
	}
	if deals, bal := ledgerOf(t, a.ID); positions != 0 || !bal.Equal(dd("1000")) || len(deals) != 1 {
		t.Fatalf("after a cancel: %d positions, balance %s, deals %v", positions, bal, deals)
	}
}

// An EXTERNAL position opened when the venue filled it — the venue's record of its trade, and
// of the rollovers it is charged — not when the desk booked the answer; the row and the answer
// agree.
func TestExternalPositionOpensWhenTheVenueFilled(t *testing.T) {
	b := newABook(t)
	const user = 9715
	a := b.externalAccount(user)
	venueSkew.Store(int64(-90 * time.Minute)) // the venue's clock behind: its times cannot pass for the desk's
	t.Cleanup(func() { venueSkew.Store(0) })
	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := b.venueTrade(res.Order.ID).OpenTime.UTC().Truncate(time.Millisecond)
	var openedAt time.Time
	if err := testDB.QueryRow("SELECT `openedAt` FROM `fx_position` WHERE `id` = ?", res.Position.ID).Scan(&openedAt); err != nil {
		t.Fatal(err)
	}
	if !openedAt.Equal(want) || !res.Position.OpenedAt.Equal(want) {
		t.Fatalf("position openedAt %s (answer %s), the venue filled at %s", openedAt.Format(time.RFC3339Nano),
			res.Position.OpenedAt.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

// An instrument the desk lists and the venue does not offer: the venue answers 400 and creates
// nothing (as OANDA does), and the trader reads a clear refusal, not an unknown outcome — the
// order is REJECTED with the venue's code, nothing is booked and nothing waits for the reconciler.
func TestExternalOpenOfAnInstrumentTheVenueDoesNotOfferIsRefused(t *testing.T) {
	b := newABook(t)
	const user = 9714
	a := b.externalAccount(user)
	b.prices.set(notAtTheVenue, "7.8", "7.8010") // the desk quotes it, and so could the venue
	_, err := b.buy(user, a, notAtTheVenue, "0.1")
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(err.Error(), "unknown to this account") {
		t.Fatalf("open of an instrument the venue does not offer: %v, want ECONFLICT with the venue's words", err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if st, _, reason := orderRow(t, id); st != fx.OrderRejected || reason == nil || *reason != "INSTRUMENT_UNKNOWN" {
		t.Fatalf("order %d: %s %v, want REJECTED INSTRUMENT_UNKNOWN", id, st, reason)
	}
	var positions int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ?", a.ID).Scan(&positions); err != nil {
		t.Fatal(err)
	}
	if st := b.sim.State(); positions != 0 || st.LastTransactionID != b.base.LastTransactionID || len(st.Trades) != len(b.base.Trades) {
		t.Fatalf("after the refusal: %d desk positions, venue transactions %d→%d, trades %d→%d",
			positions, b.base.LastTransactionID, st.LastTransactionID, len(b.base.Trades), len(st.Trades))
	}
}

// The venue down: the open answers EUNAVAILABLE with the venue text and nothing is left
// written; once the executor knows, the next open is refused before any row is written.
func TestExternalVenueOutageWritesNothing(t *testing.T) {
	b := newABook(t) // no call made yet: no pooled connection to find dead
	const user = 9705
	a := b.externalAccount(user)
	before := counts(t, a.ID)
	if err := b.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultOutage, Duration: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// The venue is shared: the next test must find it up.
	t.Cleanup(func() { waitUntil(t, "the outage over", func() bool { return b.sim.State().OutageUntil == nil }) })
	for i := range 2 {
		_, err := b.buy(user, a, "EURUSD", "0.1")
		if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgVenueUnavailable {
			t.Fatalf("open %d during the outage: %v", i, err)
		}
		if after := counts(t, a.ID); after != before {
			t.Fatalf("open %d during the outage wrote: %v → %v", i, before, after)
		}
	}
	if b.exec.Reachable() {
		t.Fatal("the executor still thinks the venue is reachable")
	}
	if n := b.requests("POST /orders"); n != 0 {
		t.Fatalf("%d orders reached a venue that was down", n)
	}
}

// An answer lost after the venue executed: EUNKNOWN, the order stays SENDING for the reconciler,
// and the venue saw exactly one request for its client id.
func TestExternalTimeoutStaysSending(t *testing.T) {
	b := newABook(t)
	const user = 9706
	a := b.externalAccount(user)
	if err := b.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_, err := b.buy(user, a, "EURUSD", "0.1")
	if fx.ErrorCode(err) != fx.EUNKNOWN || fx.ErrorMessage(err) != fx.MsgVenueOutcomeUnknown {
		t.Fatalf("open whose answer was lost: %v", err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := orderRow(t, id); st != fx.OrderSending {
		t.Fatalf("order %d is %s, want SENDING", id, st)
	}
	st := b.sim.State()
	if st.OrderRequests[ClientID(id)] != 1 || b.requests("POST /orders") != 1 || st.OrdersExecuted-b.base.OrdersExecuted != 1 {
		t.Fatalf("venue: %v %v executed %d", st.OrderRequests, st.Requests, st.OrdersExecuted)
	}
	var positions int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ?", a.ID).Scan(&positions); err != nil {
		t.Fatal(err)
	}
	if _, bal := ledgerOf(t, a.ID); positions != 0 || !bal.Equal(dd("1000")) {
		t.Fatalf("an unknown outcome booked: %d positions, balance %s", positions, bal)
	}
	if sending, err := b.svc.ABook().SendingOrders(context.Background()); err != nil || !containsOrder(sending, id) {
		t.Fatalf("SendingOrders: %+v %v", sending, err)
	}
}

// waitUntil polls observable state until ok, failing after 5s.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, 5*time.Millisecond, what, ok)
}

func containsOrder(list []SendingOrder, id int64) bool {
	for _, o := range list {
		if o.OrderID == id {
			return true
		}
	}
	return false
}

// A retried submit with the same request nonce answers the original order and sends nothing.
func TestExternalReplaySendsNothing(t *testing.T) {
	b := newABook(t)
	const user = 9707
	a := b.externalAccount(user)
	req := OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: dd("0.1"), RequestNonce: "ext-replay-1"}
	first, err := b.svc.PlaceOrder(context.Background(), user, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.svc.PlaceOrder(context.Background(), user, req)
	if err != nil || !again.Replayed || again.Order.ID != first.Order.ID || again.Position == nil || again.Position.ID != first.Position.ID {
		t.Fatalf("replay: %+v %v (first %d)", again, err, first.Order.ID)
	}
	if st := b.sim.State(); b.requests("POST /orders") != 1 || len(st.Trades)-len(b.base.Trades) != 1 {
		t.Fatalf("the replay reached the venue: %v, %d trades", st.Requests, len(st.Trades)-len(b.base.Trades))
	}
	if deals, bal := ledgerOf(t, a.ID); !bal.Equal(dd("999.30")) || len(deals) != 2 {
		t.Fatalf("after the replay: %s %v", bal, deals)
	}
}

// Resting orders are not routed to the venue.
func TestExternalRefusesRestingOrders(t *testing.T) {
	b := newABook(t)
	const user = 9708
	a := b.externalAccount(user)
	for _, r := range []OrderRequest{
		{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Limit, Volume: dd("0.1"), Price: ptr(dd("1.09"))},
		{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Stop, Volume: dd("0.1"), Price: ptr(dd("1.11"))},
	} {
		if _, err := b.svc.PlaceOrder(context.Background(), user, r); fx.ErrorCode(err) != fx.EINVALID {
			t.Fatalf("%s on an EXTERNAL account: %v, want EINVALID", r.Type, err)
		}
	}
	var orders int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != 0 || b.requests("POST /orders") != 0 {
		t.Fatalf("%d orders written, venue requests %v", orders, b.sim.State().Requests)
	}
}

// A group with an open EXTERNAL position keeps its mode; once it is closed it may switch.
func TestExecutionModeSwitchRefusedWhileExternalOpen(t *testing.T) {
	b := newABook(t)
	const user = 9709
	a := b.externalAccount(user)
	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adminOf(t, b.svc).SetExecutionMode(asAdmin(context.Background()), a.Group, fx.Internal); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("switch with an open EXTERNAL position: %v, want ECONFLICT", err)
	}
	if _, err := b.svc.ClosePosition(context.Background(), user, res.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	g, err := adminOf(t, b.svc).SetExecutionMode(asAdmin(context.Background()), a.Group, fx.Internal)
	if err != nil || g.Execution != fx.Internal {
		t.Fatalf("switch after the close: %+v %v", g, err)
	}
	// Now INTERNAL: the next order fills on the desk and never reaches the venue.
	orders := b.requests("POST /orders")
	next, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil || next.Position == nil || next.Position.VenueTradeID != nil || b.requests("POST /orders") != orders {
		t.Fatalf("order after the switch: %+v %v, venue %v", next, err, b.sim.State().Requests)
	}
}

// The venue closed the trade itself (a venue stop-out); the trader's close is told so and books
// nothing, the reconciler's booking of the venue's fill closes it with reason VENUE at the
// venue's price, once, and no second close executes at the venue.
func TestExternalClosedAtVenueIsBookedAtTheVenuePrice(t *testing.T) {
	b := newABook(t)
	const user = 9710
	a := b.externalAccount(user)
	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	b.prices.set("EURUSD", "1.0990", "1.0992")
	vc, err := b.sim.CloseTradeAtVenue(*res.Position.VenueTradeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.prices.set("EURUSD", "1.1050", "1.1052") // the desk's price now is not what the venue did
	// The trader's close finds the trade gone: it is told so, nothing is sent again, and the
	// risk engine stops watching (ErrAlreadyClosed) until the booking reports the close.
	_, err = b.svc.ClosePosition(context.Background(), user, res.Position.ID, nil, fx.CloseClient)
	if fx.ErrorCode(err) != fx.ECONFLICT || !errors.Is(err, risk.ErrAlreadyClosed) || !strings.Contains(err.Error(), "already closed at the venue") {
		t.Fatalf("close of a trade the venue closed: %v", err)
	}
	if p, _ := book.LoadPosition(context.Background(), testDB, user, res.Position.ID); p.Status != fx.PositionOpen {
		t.Fatalf("the desk booked a close it does not know the fill of: %+v", p)
	}
	// The reconciler books the venue's fill at its own price (as BookVenueClose does for it).
	if err := b.svc.ABook().BookVenueClose(context.Background(), res.Position.ID, nil, vc.Price, vc.TransactionID); err != nil {
		t.Fatal(err)
	}
	// A second booking of the same fill changes nothing.
	if err := b.svc.ABook().BookVenueClose(context.Background(), res.Position.ID, nil, vc.Price, vc.TransactionID); !errors.Is(err, risk.ErrAlreadyClosed) {
		t.Fatalf("the fill booked twice: %v", err)
	}
	cl, err := book.LoadPosition(context.Background(), testDB, user, res.Position.ID)
	if err != nil {
		t.Fatal(err)
	}
	// (1.0990 − 1.1002) × 10,000 = −12.00
	if !vc.Price.Equal(dd("1.099")) || cl.ClosePrice == nil || !cl.ClosePrice.Equal(vc.Price) || cl.CloseReason == nil ||
		*cl.CloseReason != string(fx.CloseVenue) || !cl.RealizedProfit.Equal(dd("-12.00")) {
		t.Fatalf("close after the venue's: %+v (venue %+v)", cl, vc)
	}
	if n := b.sim.State().ClosesExecuted - b.base.ClosesExecuted; n != 1 || b.requests("PUT /trades/{trade}/close") != 1 {
		t.Fatalf("the venue executed %d closes, want its own one", n)
	}
	if _, bal := ledgerOf(t, a.ID); !bal.Equal(dd("987.30")) {
		t.Fatalf("balance %s", bal)
	}
}

// The risk engine's close of an EXTERNAL position (a stop-out, an SL) goes to the venue.
func TestRiskDeskCloseOfExternalGoesToTheVenue(t *testing.T) {
	b := newABook(t)
	const user = 9711
	a := b.externalAccount(user)
	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	b.prices.set("EURUSD", "1.0980", "1.0982")
	rd := NewRiskDesk(b.svc, nil)
	if err := rd.Close(context.Background(), res.Position.ID, res.Position.AccountID, fx.CloseSL, tick.Quote{Bid: 1.098, Ask: 1.0982, ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	p, err := book.LoadPosition(context.Background(), testDB, user, res.Position.ID)
	if err != nil || p.Status != fx.PositionClosed || p.CloseReason == nil || *p.CloseReason != string(fx.CloseSL) ||
		p.ClosePrice == nil || !p.ClosePrice.Equal(dd("1.098")) {
		t.Fatalf("position after the engine's close: %+v %v", p, err)
	}
	if tr := b.venueTrade(res.Order.ID); tr.State != venue.TradeClosed {
		t.Fatalf("venue trade after the engine's close: %+v", tr)
	}
	if st := b.sim.State(); b.requests("PUT /trades/{trade}/close") != 1 {
		t.Fatalf("venue requests: %v", st.Requests)
	}
	ledgerOf(t, a.ID)
}

// INTERNAL accounts on a desk with a venue trade as before: nothing reaches the venue.
func TestInternalAccountsNeverReachTheVenue(t *testing.T) {
	b := newABook(t)
	const user = 9712
	a := fundedAccount(t, b.svc, user)
	res, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil || res.Position == nil || res.Position.VenueTradeID != nil || !res.Position.OpenPrice.Equal(dd("1.1002")) {
		t.Fatalf("INTERNAL open: %+v %v", res, err)
	}
	if st, exe, _ := orderRow(t, res.Order.ID); st != fx.OrderFilled || exe != "INTERNAL" {
		t.Fatalf("order row %s %s", st, exe)
	}
	part := dd("0.05")
	if _, err := b.svc.ClosePosition(context.Background(), user, res.Position.ID, &part, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if err := NewRiskDesk(b.svc, nil).Close(context.Background(), res.Position.ID, res.Position.AccountID, fx.CloseStopOut, tick.Quote{ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if st := b.sim.State(); fmt.Sprint(st.Requests) != fmt.Sprint(b.base.Requests) || st.Connections != b.base.Connections || b.exec.Stats().Connections != 0 {
		t.Fatalf("INTERNAL trading reached the venue: %v, %d connections", st.Requests, st.Connections-b.base.Connections)
	}
	ledgerOf(t, a.ID)
}
