package execution_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/execution"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/swaps"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/tick"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "execution", &testDB)) }

// deskPrices quote EURUSD 1.1/1.1002 at the desk and at the venue.
type deskPrices struct{}

func (deskPrices) LastTick(s string) (tick.Quote, bool) {
	if s != "EURUSD" {
		return tick.Quote{}, false
	}
	return tick.Quote{Bid: 1.1, Ask: 1.1002, ReceivedAt: time.Now()}, true
}

func (deskPrices) SymbolState(s string) tick.State {
	if s == "EURUSD" {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

func (deskPrices) Quote(s string) (bid, ask decimal.Decimal, ok bool) {
	if s != "EURUSD" {
		return decimal.Decimal{}, decimal.Decimal{}, false
	}
	return decimal.RequireFromString("1.1"), decimal.RequireFromString("1.1002"), true
}

// heldLease is the fence of a process that holds its term.
type heldLease struct{}

func (heldLease) FenceStatement() (string, []any, error) { return "DO ?", []any{1}, nil }

// One venue for the package's database (venue trade ids are unique across fx_position, and every
// simulator numbers from the same start), so the tests here run one after the other.
var shared struct {
	once sync.Once
	sim  *venuesim.Server
	err  error
}

// venueSkew moves the shared venue's clock (a time.Duration): a test sets it to make the
// venue's times tell apart from the desk's, and resets it when it ends.
var venueSkew atomic.Int64

type env struct {
	t      *testing.T
	sim    *venuesim.Server
	client *venue.Client
	sender *venue.Sender
	desk   *trading.Service
	admin  *catalog.Admin
	gate   *gate.Gate
	inbox  *alert.Inbox
}

func newEnv(t *testing.T) *env {
	t.Helper()
	shared.once.Do(func() {
		shared.sim, shared.err = venuesim.New(venuesim.Config{AccountID: "101-001-exec-001", Latency: venuesim.NoLatency, Prices: deskPrices{},
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
	sim := shared.sim
	exec, err := venue.NewExecutor(venue.ExecutorConfig{Cap: 4, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Close)
	client, err := venue.NewClient(venue.ClientConfig{BaseURL: sim.URL(), AccountID: sim.AccountID(), Token: "t", HTTP: exec.HTTPClient(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(gate.Config{Lease: &gatetest.Lease{}, Log: slog.New(slog.DiscardHandler), Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	sender := venue.NewSender(client, exec, sim.AccountID(), nil)
	cache := catalog.NewCache(testDB, 5*time.Second)
	desk, err := trading.New(trading.Config{DB: testDB, Prices: deskPrices{}, Lease: heldLease{}, Gate: g, Venue: sender, Catalog: cache})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := catalog.NewAdmin(catalog.AdminConfig{DB: testDB, Cache: cache, Venue: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	committing := make(chan error, 1)
	go func() { committing <- desk.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		poll.Receive(t, committing, 10*time.Second, "the desk's Run returning after its context ended")
	})
	return &env{t: t, sim: sim, client: client, sender: sender, desk: desk, admin: admin, gate: g, inbox: alert.NewInbox(testDB, slog.New(slog.DiscardHandler))}
}

func (e *env) reconciler(now func() time.Time) *execution.Reconciler {
	e.t.Helper()
	r, err := execution.NewReconciler(execution.ReconcilerConfig{Venue: e.client, Closer: e.sender, Desk: e.desk.ABook(), Gate: e.gate, Alerts: e.inbox,
		Account: e.sim.AccountID(), Plan: execution.Config{NotSentAfter: time.Minute}, Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// externalAccount opens a funded EXTERNAL account (10,000 USD at 1:100) for user in a group of its own.
func (e *env) externalAccount(user int64) book.Account {
	e.t.Helper()
	ctx := context.Background()
	group := fmt.Sprintf("ext-%d", user)
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_account_group` (`name`) VALUES (?)", group); err != nil {
		e.t.Fatal(err)
	}
	a, err := e.desk.Accounts().Open(ctx, user, "USD", 100)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.desk.Accounts().Deposit(asAdmin(ctx), a.ID, decimal.NewFromInt(10000), "seed"); err != nil {
		e.t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, a.ID); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.admin.SetExecutionMode(asAdmin(ctx), group, fx.External); err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) buy(user int64, a book.Account, lots string) (trading.OrderResult, error) {
	return e.desk.PlaceOrder(context.Background(), user, trading.OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString(lots)})
}

func (e *env) trades(clientID string) []venuesim.TradeState {
	var out []venuesim.TradeState
	for _, tr := range e.sim.State().Trades {
		if tr.ClientID == clientID {
			out = append(out, tr)
		}
	}
	return out
}

func (e *env) tradeByID(id string) venuesim.TradeState {
	e.t.Helper()
	for _, tr := range e.sim.State().Trades {
		if tr.ID == id {
			return tr
		}
	}
	e.t.Fatalf("the venue has no trade %s", id)
	return venuesim.TradeState{}
}

func orderStatus(t *testing.T, id int64) (status string, position *int64, trade *string) {
	t.Helper()
	err := testDB.QueryRow("SELECT o.`status`, p.`id`, p.`venueTradeId` FROM `fx_order` o LEFT JOIN `fx_position` p ON p.`orderId` = o.`id` WHERE o.`id` = ?", id).
		Scan(&status, &position, &trade)
	if err != nil {
		t.Fatalf("order %d: %v", id, err)
	}
	return status, position, trade
}

func cursor(t *testing.T, account string) int64 {
	t.Helper()
	var c int64
	if err := testDB.QueryRow("SELECT COALESCE(MAX(`lastTransactionId`), 0) FROM `fx_venue_cursor` WHERE `venueAccount` = ?", account).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// deskState is every row the reconciler may write, as text, to compare two moments.
func deskState(t *testing.T) string {
	t.Helper()
	var out string
	for _, q := range []string{
		"SELECT CONCAT(COUNT(*), ':', COALESCE(GROUP_CONCAT(CONCAT(`id`, `status`) ORDER BY `id`), '')) FROM `fx_order`",
		"SELECT CONCAT(COUNT(*), ':', COALESCE(GROUP_CONCAT(CONCAT(`id`, `status`, `volume`, COALESCE(`venueTradeId`, '-')) ORDER BY `id`), '')) FROM `fx_position`",
		"SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(`amount`), 0)) FROM `fx_deal`",
		"SELECT COALESCE(GROUP_CONCAT(CONCAT(`venueAccount`, '=', `lastTransactionId`)), '') FROM `fx_venue_cursor`",
	} {
		var s string
		if err := testDB.QueryRow(q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		out += s + "\n"
	}
	return out
}

func openAlerts(t *testing.T, inbox *alert.Inbox, code string) []alert.Alert {
	t.Helper()
	list, err := inbox.List(context.Background(), alert.Filter{Statuses: []alert.Status{alert.Open}, Code: code})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// One run repairs every case at once from state: the order whose answer was lost is adopted, a
// tagged trade no desk order explains is closed, a trade the venue closed is closed on the desk
// at the venue's price, an untagged trade is alerted and left alone; the cursor advances with
// the effects, and a second run changes nothing.
func TestReconcilerRepairsFromState(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 9801
	a := e.externalAccount(user)

	// A position the venue then closes itself.
	stopped, err := e.buy(user, a, "0.2")
	if err != nil {
		t.Fatal(err)
	}
	venueClose, err := e.sim.CloseTradeAtVenue(*stopped.Position.VenueTradeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Lost answer: the venue executed, the connection was cut before the answer. (Last of the
	// desk's sends: an unknown outcome makes the executor count the venue unreachable until a
	// probe answers.)
	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.buy(user, a, "0.1"); fx.ErrorCode(err) != fx.EUNKNOWN {
		t.Fatalf("open whose answer is lost: %v", err)
	}
	var lost int64
	if err := testDB.QueryRow("SELECT MAX(`id`) FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	// An orphan: tagged, with a client id no desk order has.
	orphan, err := e.client.PlaceMarket(ctx, venue.MarketOrder{ClientID: "987654321", Symbol: "EURUSD", Units: decimal.NewFromInt(-3000)})
	if err != nil || orphan.Fill == nil {
		t.Fatalf("orphan: %+v %v", orphan, err)
	}
	// An untagged trade, opened by hand at the venue.
	untagged, err := e.sim.OpenUntagged("EURUSD", decimal.NewFromInt(5000))
	if err != nil {
		t.Fatal(err)
	}
	cursorBefore := cursor(t, e.sim.AccountID())

	res, err := e.reconciler(nil).Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Planned[execution.Adopt] != 1 || res.Planned[execution.CloseOrphan] != 1 ||
		res.Planned[execution.CloseDeskSide] != 1 || res.Planned[execution.AlertUntagged] != 1 {
		t.Fatalf("planned %v, %d failed", res.Planned, res.Failed)
	}

	// Adopted: FILLED, linked, one venue trade for its client id, never re-sent.
	st, pos, trade := orderStatus(t, lost)
	vt := e.trades(trading.ClientID(lost))
	if st != fx.OrderFilled || pos == nil || trade == nil || len(vt) != 1 || vt[0].ID != *trade || vt[0].State != venue.TradeOpen {
		t.Fatalf("lost order after the run: %s, position %v, trade %v; venue trades %+v", st, pos, trade, vt)
	}
	if n := e.sim.State().OrderRequests[trading.ClientID(lost)]; n != 1 {
		t.Fatalf("the venue received %d requests for the lost order", n)
	}
	// Closed on the desk at the venue's price, reason VENUE.
	var reason string
	var closePrice decimal.Decimal
	if err := testDB.QueryRow("SELECT `status`, `closeReason`, `closePrice` FROM `fx_position` WHERE `id` = ?", stopped.Position.ID).Scan(&st, &reason, &closePrice); err != nil {
		t.Fatal(err)
	}
	if st != fx.PositionClosed || reason != string(fx.CloseVenue) || !closePrice.Equal(venueClose.Price) {
		t.Fatalf("venue-closed position: %s %s %s (venue %s)", st, reason, closePrice, venueClose.Price)
	}
	// The orphan is closed at the venue; the untagged trade is open and alerted.
	if tr := e.tradeByID(orphan.Fill.TradeOpened); tr.State != venue.TradeClosed {
		t.Fatalf("orphan after the run: %+v", tr)
	}
	if tr := e.tradeByID(untagged); tr.State != venue.TradeOpen || !tr.CurrentUnits.Equal(decimal.NewFromInt(5000)) {
		t.Fatalf("untagged trade touched: %+v", tr)
	}
	if al := openAlerts(t, e.inbox, execution.AlertUntaggedTrade); len(al) != 1 {
		t.Fatalf("untagged alerts: %+v", al)
	}
	if c := cursor(t, e.sim.AccountID()); c <= cursorBefore || c < venueClose.TransactionID {
		t.Fatalf("cursor %d after the run (before %d, venue close %d)", c, cursorBefore, venueClose.TransactionID)
	}

	// Again at once: nothing to do but the (deduplicated) alert.
	before, venueBefore := deskState(t), e.sim.State()
	res, err = e.reconciler(nil).Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	delete(res.Planned, execution.AlertUntagged)
	if len(res.Planned) != 0 || res.Failed != 0 {
		t.Fatalf("second run planned %v", res.Planned)
	}
	venueAfter := e.sim.State()
	if after := deskState(t); after != before || venueAfter.LastTransactionID != venueBefore.LastTransactionID ||
		venueAfter.Requests["POST /orders"] != venueBefore.Requests["POST /orders"] {
		t.Fatalf("second run changed state:\n%s→\n%s", before, after)
	}
	if al := openAlerts(t, e.inbox, execution.AlertUntaggedTrade); len(al) != 1 || al[0].Count < 2 {
		t.Fatalf("untagged alert after the second run: %+v", al)
	}
	// The untagged trade stays someone else's: close it so the hedge test starts clean.
	if _, err := e.sim.CloseTradeAtVenue(untagged, nil); err != nil {
		t.Fatal(err)
	}
}

// A SENDING row with no trace at the venue is left alone while young and marked NOT_SENT once
// older than NotSentAfter; it is never sent.
func TestReconcilerMarksNotSentPastTheThreshold(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 9802
	a := e.externalAccount(user)
	// The identity row of a send that never left (a crash between the write and the send).
	res, err := testDB.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`, `execution`, `sentAt`) "+
		"VALUES (?, 'EURUSD', 'BUY', 'MARKET', 0.1, 'SENDING', 'EXTERNAL', NOW(3))", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	orders := e.sim.State().Requests["POST /orders"]

	if r, err := e.reconciler(nil).Reconcile(ctx, "test"); err != nil || r.Planned[execution.MarkNotSent] != 0 {
		t.Fatalf("young SENDING row: %v %v", r.Planned, err)
	}
	if st, _, _ := orderStatus(t, id); st != fx.OrderSending {
		t.Fatalf("young SENDING row is %s", st)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Minute) }
	if r, err := e.reconciler(later).Reconcile(ctx, "test"); err != nil || r.Planned[execution.MarkNotSent] != 1 || r.Failed != 0 {
		t.Fatalf("old SENDING row: %v %v", r, err)
	}
	if st, _, _ := orderStatus(t, id); st != fx.OrderNotSent {
		t.Fatalf("old SENDING row is %s, want NOT_SENT", st)
	}
	if n := e.sim.State().Requests["POST /orders"]; n != orders || e.sim.State().OrderRequests[trading.ClientID(id)] != 0 {
		t.Fatalf("the reconciler sent an order (%d → %d)", orders, n)
	}
}

// A trade the reconciler adopts opened when the venue says it did, not when the desk learned of
// it — a 17:00 New York rollover in between is charged, as the venue charges it — and its order
// keeps the venue's order id, as an order booked from its own answer does. Both ways a trade is
// adopted: listed open (the answer was lost), and found closed by the order's client id (the
// desk wrote SENDING, the venue filled and then closed the trade, the desk never heard).
func TestAdoptionKeepsTheVenuesOpenTimeAndOrderID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 9804
	a := e.externalAccount(user)
	// The venue's clock 90 minutes behind the desk's: its times cannot pass for the desk's.
	venueSkew.Store(int64(-90 * time.Minute))
	t.Cleanup(func() { venueSkew.Store(0) })

	// Listed open: the answer lost after execution.
	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.buy(user, a, "0.1"); fx.ErrorCode(err) != fx.EUNKNOWN {
		t.Fatalf("open whose answer is lost: %v", err)
	}
	var open int64
	if err := testDB.QueryRow("SELECT MAX(`id`) FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&open); err != nil {
		t.Fatal(err)
	}
	// Found closed by its client id: the identity row, the send (its answer never read), the
	// venue's own close.
	row, err := testDB.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`, `execution`, `sentAt`) "+
		"VALUES (?, 'EURUSD', 'BUY', 'MARKET', 0.2, 'SENDING', 'EXTERNAL', NOW(3))", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	closed, _ := row.LastInsertId()
	sent, err := e.client.PlaceMarket(ctx, venue.MarketOrder{ClientID: trading.ClientID(closed), Symbol: "EURUSD", Units: decimal.NewFromInt(20000)})
	if err != nil || sent.Fill == nil {
		t.Fatalf("send of the SENDING row: %+v %v", sent, err)
	}
	if _, err := e.sim.CloseTradeAtVenue(sent.Fill.TradeOpened, nil); err != nil {
		t.Fatal(err)
	}

	res, err := e.reconciler(nil).Reconcile(ctx, "test")
	if err != nil || res.Failed != 0 || res.Planned[execution.Adopt] != 1 || res.Planned[execution.AdoptClosed] != 1 {
		t.Fatalf("planned %v, %d failed, %v", res.Planned, res.Failed, err)
	}
	for _, id := range []int64{open, closed} {
		cid := trading.ClientID(id)
		vt := e.trades(cid)
		info, found, err := e.client.OrderByClientID(ctx, cid)
		if len(vt) != 1 || !found || err != nil || info.ID == "" {
			t.Fatalf("order %d at the venue: trades %+v, order %+v %v %v", id, vt, info, found, err)
		}
		var openedAt time.Time
		var venueOrderID *string
		if err := testDB.QueryRow("SELECT p.`openedAt`, o.`venueOrderId` FROM `fx_order` o JOIN `fx_position` p ON p.`orderId` = o.`id` WHERE o.`id` = ?", id).
			Scan(&openedAt, &venueOrderID); err != nil {
			t.Fatalf("order %d: %v", id, err)
		}
		if want := vt[0].OpenTime.UTC().Truncate(time.Millisecond); !openedAt.Equal(want) {
			t.Errorf("order %d: position openedAt %s, the venue opened its trade at %s", id, openedAt.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
		if venueOrderID == nil || *venueOrderID != info.ID {
			t.Errorf("order %d: venueOrderId %v, the venue's order id is %s", id, venueOrderID, info.ID)
		}
	}
}

// What an adoption stamped with its own time cost: a trade the venue opened before a 17:00 New
// York rollover and the desk adopted after it is charged that rollover by the next swaps run, as
// the venue charges it its financing.
func TestAdoptedPositionIsChargedTheRolloverBeforeItsAdoption(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 9805
	a := e.externalAccount(user)
	now := time.Now()
	ro, err := fx.LastRollover(now)
	if err != nil {
		t.Fatal(err)
	}
	for ro.Weekday() == time.Saturday || ro.Weekday() == time.Sunday { // FX is charged on weekdays
		ro = ro.Previous()
	}
	// The venue opened the trade two minutes before that rollover; the desk adopts it now.
	venueSkew.Store(int64(ro.At.Add(-2 * time.Minute).Sub(now)))
	t.Cleanup(func() { venueSkew.Store(0) })
	if err := e.sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.buy(user, a, "0.1"); fx.ErrorCode(err) != fx.EUNKNOWN {
		t.Fatalf("open whose answer is lost: %v", err)
	}
	var id int64
	if err := testDB.QueryRow("SELECT MAX(`id`) FROM `fx_order` WHERE `accountId` = ?", a.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if res, err := e.reconciler(nil).Reconcile(ctx, "test"); err != nil || res.Failed != 0 || res.Planned[execution.Adopt] != 1 {
		t.Fatalf("planned %v, %v", res.Planned, err)
	}
	_, pos, _ := orderStatus(t, id)
	if pos == nil {
		t.Fatalf("order %d was not adopted", id)
	}

	job := swaps.New(swaps.Config{DB: testDB, Prices: func() tick.Prices { return deskPrices{} }}, slog.New(slog.DiscardHandler))
	if _, err := job.Run(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	var charged int
	var through *string
	if err := testDB.QueryRow("SELECT (SELECT COUNT(*) FROM `fx_deal` WHERE `positionId` = p.`id` AND `type` = 'SWAP'), DATE_FORMAT(p.`swapThrough`, '%Y-%m-%d') "+
		"FROM `fx_position` p WHERE p.`id` = ?", *pos).Scan(&charged, &through); err != nil {
		t.Fatal(err)
	}
	if charged < 1 || through == nil || *through < ro.Date {
		t.Fatalf("position %d, opened at the venue before the %s rollover: %d swap deals, charged through %v", *pos, ro.Date, charged, through)
	}
}

// The hedge monitor raises venue-exposure-mismatch while the desk's EXTERNAL units differ from
// the venue's tagged units and resolves it once they agree; venue-margin-low follows its
// threshold.
func TestHedgeMonitorAlerts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 9803
	a := e.externalAccount(user)
	monitor := func(warn string) *execution.HedgeMonitor {
		h, err := execution.NewHedgeMonitor(execution.HedgeConfig{Venue: e.client, Desk: e.desk.ABook(), Gate: e.gate, Alerts: e.inbox, MarginWarn: decimal.RequireFromString(warn)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	lenient, strict := monitor("0.99"), monitor("0.000001")

	res, err := e.buy(user, a, "0.5")
	if err != nil {
		t.Fatal(err)
	}
	if err := lenient.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if al := openAlerts(t, e.inbox, execution.AlertExposureMismatch); len(al) != 0 {
		t.Fatalf("mismatch raised while desk and venue agree: %+v (book %+v)", al, lenient.Last())
	}
	// The venue closes part of the trade and nobody booked it.
	part := decimal.NewFromInt(20000)
	if _, err := e.sim.CloseTradeAtVenue(*res.Position.VenueTradeID, &part); err != nil {
		t.Fatal(err)
	}
	if err := lenient.Check(ctx); err != nil {
		t.Fatal(err)
	}
	al := openAlerts(t, e.inbox, execution.AlertExposureMismatch)
	if len(al) != 1 {
		t.Fatalf("mismatch alerts after an unbooked partial: %+v", al)
	}
	var sym execution.HedgeSymbol
	for _, s := range lenient.Last().Symbols {
		if s.Symbol == "EURUSD" {
			sym = s
		}
	}
	if !sym.Mismatch || !sym.VenueUnits.Add(part).Equal(sym.DeskUnits) {
		t.Fatalf("EURUSD in the book: %+v", sym)
	}
	// The reconciler books the partial; the next run resolves the alert.
	if r, err := e.reconciler(nil).Reconcile(ctx, "test"); err != nil || r.Planned[execution.BookPartial] != 1 || r.Failed != 0 {
		t.Fatalf("reconcile the partial: %v %v", r, err)
	}
	if err := lenient.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if al := openAlerts(t, e.inbox, execution.AlertExposureMismatch); len(al) != 0 {
		t.Fatalf("mismatch still open once desk and venue agree: %+v (book %+v)", al, lenient.Last().Symbols)
	}

	// Margin: any open trade crosses a tiny warning level; a lenient one resolves it.
	if err := strict.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if al := openAlerts(t, e.inbox, execution.AlertMarginLow); len(al) != 1 || al[0].Severity != alert.Critical {
		t.Fatalf("margin-low at a tiny threshold: %+v (closeout %s)", al, strict.Last().MarginCloseoutPercent)
	}
	if err := lenient.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if al := openAlerts(t, e.inbox, execution.AlertMarginLow); len(al) != 0 {
		t.Fatalf("margin-low still open under a lenient threshold: %+v", al)
	}
}

// asAdmin is ctx carrying an actor, as an admin write needs (the audit log records it).
func asAdmin(ctx context.Context) context.Context {
	return audit.WithActor(ctx, audit.Actor{Via: "test"})
}
