package trading

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/lease"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "trading", &testDB)) }

// fixedPrices quotes a fixed set of symbols as QUOTING.
type fixedPrices map[string][2]float64

func (p fixedPrices) LastTick(s string) (tick.Quote, bool) {
	q, ok := p[s]
	return tick.Quote{Bid: q[0], Ask: q[1], ReceivedAt: time.Now()}, ok
}

func (p fixedPrices) SymbolState(s string) tick.State {
	if _, ok := p[s]; ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// switchLease holds the lease, and its fence refuses once fenced is set (another instance took
// the term between the gate and the write).
type switchLease struct {
	fenced atomic.Bool
	calls  atomic.Int64
}

// FenceStatement answers, once fenced, the real fence for a lease row that does not exist, so it
// fails as the real fence does when this process no longer holds the term.
func (l *switchLease) FenceStatement() (string, []any, error) {
	l.calls.Add(1)
	if l.fenced.Load() {
		return lease.FenceSQL, []any{"no-such-lease", "nobody", 0}, nil
	}
	return "DO ?", []any{1}, nil
}

func counts(t *testing.T, account int64) [3]string {
	t.Helper()
	var out [3]string
	testDB.QueryRow("SELECT CONCAT(COUNT(*), '') FROM `fx_order` WHERE `accountId` = ?", account).Scan(&out[0])
	testDB.QueryRow("SELECT CONCAT(COUNT(*), '') FROM `fx_deal` WHERE `accountId` = ?", account).Scan(&out[1])
	testDB.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", account).Scan(&out[2])
	return out
}

// fundedAccount opens a USD account at 1:100 for user with a deposit of 1,000.
func fundedAccount(t *testing.T, svc *Service, user int64) book.Account {
	t.Helper()
	ctx := context.Background()
	a, err := svc.Accounts().Open(ctx, user, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Accounts().Deposit(asAdmin(ctx), a.ID, decimal.NewFromInt(1000), "seed"); err != nil {
		t.Fatal(err)
	}
	return a
}

// A fill or close whose fence refuses rolls back completely and answers the pricing text.
func TestFencedWritesRollBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &switchLease{}
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: l, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9001)
	open, err := svc.PlaceOrder(ctx, 9001, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.1")})
	if err != nil {
		t.Fatal(err)
	}
	before := counts(t, a.ID)

	l.fenced.Store(true)
	calls := l.calls.Load()
	_, err = svc.PlaceOrder(ctx, 9001, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.1")})
	if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
		t.Fatalf("fenced open: %v", err)
	}
	_, err = svc.ClosePosition(ctx, 9001, open.Position.ID, nil, fx.CloseClient)
	if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
		t.Fatalf("fenced close: %v", err)
	}
	_, _, err = svc.Accounts().Withdraw(ctx, 9001, a.ID, decimal.NewFromInt(1), "")
	if fx.ErrorMessage(err) != fx.MsgPositionsUnpriceable {
		t.Fatalf("fenced withdrawal with open positions: %v", err)
	}
	if l.calls.Load()-calls != 3 {
		t.Fatalf("fence consulted %d times for three writes", l.calls.Load()-calls)
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("fenced writes changed the database: %v → %v", before, after)
	}
	p, err := book.LoadPosition(ctx, testDB, 9001, open.Position.ID)
	if err != nil || p.Status != fx.PositionOpen || !p.Volume.Equal(decimal.RequireFromString("0.1")) {
		t.Fatalf("position after fenced close = %+v, %v", p, err)
	}
}

// The real fence, sent just before COMMIT, refuses a fill and a close once another instance has
// taken the term, although this process's gate still trusts its lease: nothing commits.
func TestRealFenceRefusesAtCommitAfterTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	k := lease.New(testDB, rdb, lease.Config{TTL: time.Minute, Fence: 5 * time.Second, Hostname: "fence-test", PID: os.Getpid()},
		slog.New(slog.DiscardHandler))
	if won, err := k.Claim(ctx); !won || err != nil {
		t.Fatalf("claim: won=%v err=%v", won, err)
	}
	t.Cleanup(func() { testDB.Exec("DELETE FROM `engine_lease` WHERE `id` = ?", lease.Key) })
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: k, Gate: newGate(t, k).g})
	a := fundedAccount(t, svc, 9003)
	buy := OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.1")}
	open, err := svc.PlaceOrder(ctx, 9003, buy)
	if err != nil {
		t.Fatalf("fill under the held term: %v", err)
	}
	before := counts(t, a.ID)

	// Another instance takes the row, as its claim would once this one's expiry passed.
	if _, err := testDB.Exec("UPDATE `engine_lease` SET `instanceId` = 'another', `term` = `term` + 1 WHERE `id` = ?", lease.Key); err != nil {
		t.Fatal(err)
	}
	if !k.State().Trusted {
		t.Fatal("the gate no longer trusts the lease; the fence would not be reached")
	}
	_, err = svc.PlaceOrder(ctx, 9003, buy)
	if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
		t.Fatalf("fill after takeover: %v", err)
	}
	_, err = svc.ClosePosition(ctx, 9003, open.Position.ID, nil, fx.CloseClient)
	if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
		t.Fatalf("close after takeover: %v", err)
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("fenced writes changed the database: %v → %v", before, after)
	}
	if p, err := book.LoadPosition(ctx, testDB, 9003, open.Position.ID); err != nil || p.Status != fx.PositionOpen {
		t.Fatalf("position after the refused close = %+v, %v", p, err)
	}
}

// A process with no prices (a follower) refuses every fill before opening a transaction.
func TestNoPricesRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &switchLease{}
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{}, Lease: l, Gate: newGate(t, &gatetest.Lease{}).g})
	a, err := svc.Accounts().Open(ctx, 9002, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.PlaceOrder(ctx, 9002, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.1")})
	if fx.ErrorMessage(err) != fx.MsgPricingUnavailable || l.calls.Load() != 0 {
		t.Fatalf("open without prices: %v (fence calls %d)", err, l.calls.Load())
	}
}

// The margin and profit arithmetic (docs/architecture.md, «Money and the ledger») on hand-checked
// figures.
func TestConversionOnHandCheckedFigures(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Load(context.Background(), testDB)
	if err != nil {
		t.Fatal(err)
	}
	m := book.NewMarket(fixedPrices{"EURUSD": {1.1, 1.1002}, "USDJPY": {150, 150.02}, "GBPUSD": {1.3, 1.3002}}, cat)
	d := decimal.RequireFromString
	for _, tc := range []struct {
		amount, from, to, want string
	}{
		{"100", "USD", "USD", "100.00"},
		{"7", "USD", "EUR", "6.36"},        // 7 / 1.1001
		{"150010", "JPY", "EUR", "909.01"}, // 150010 / (150.010 × 1.1001)
		{"-2000", "JPY", "USD", "-13.33"},  // −2000 / 150.010, half away from zero
		{"1000", "EUR", "GBP", "846.17"},   // 1000 × 1.1001 / 1.3001
		{"0.005", "USD", "USD", "0.01"},    // half away from zero
		{"-0.005", "USD", "USD", "-0.01"},
		// Rounded to the target currency's minor units: JPY has none.
		{"7", "USD", "JPY", "1050"},        // 7 × 150.010 = 1050.07
		{"-3.5", "USD", "JPY", "-525"},     // −525.035
		{"1000", "EUR", "JPY", "165026"},   // 1000 × 1.1001 × 150.010 = 165026.001
		{"10000.5", "JPY", "JPY", "10001"}, // half away from zero, at no places
		{"1500", "JPY", "USD", "10.00"},    // 1500 / 150.010 = 9.9993…
		{"0.0005", "EUR", "EUR", "0.00"},   // EUR keeps two places
		{"-0.005", "GBP", "GBP", "-0.01"},
	} {
		got, ok := m.Convert(d(tc.amount), tc.from, tc.to)
		if !ok || !got.Equal(d(tc.want)) {
			t.Errorf("convert %s %s→%s = %s (%v), want %s", tc.amount, tc.from, tc.to, got, ok, tc.want)
		}
	}
	if _, ok := m.Convert(d("1"), "CHF", "USD"); ok {
		t.Error("converted CHF with no USDCHF quote")
	}
	in := cat.Instruments["EURUSD"]
	for _, tc := range []struct{ long, short, want string }{
		{"1", "0", "1"}, {"1", "1", "1"}, {"2", "1", "2"}, {"0", "0.5", "0.5"},
	} {
		if got := book.MarginVolume(in, d(tc.long), d(tc.short)); !got.Equal(d(tc.want)) {
			t.Errorf("margin volume %s long %s short = %s, want %s", tc.long, tc.short, got, tc.want)
		}
	}
	if err := checkVolume(in, d("0.015")); fx.ErrorCode(err) != fx.EINVALID {
		t.Errorf("off-step volume accepted: %v", err)
	}
	if err := checkStops(in, fx.Sell, d("1.1002"), ptr(d("1.1001")), nil); fx.ErrorCode(err) != fx.EINVALID {
		t.Errorf("a sell's SL below the ask accepted: %v", err)
	}
	if err := checkStops(in, fx.Sell, d("1.1002"), ptr(d("1.2")), ptr(d("1.0"))); err != nil {
		t.Errorf("a sell's good stops refused: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseDecimalAcceptsPlainDecimalsOnly(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"1", "0.1", "-2.50", "100000"} {
		if _, err := fx.ParseDecimal("x", s, 2); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range []string{"", "1e2", "+1", " 1", "1.", ".5", "-.5", "1.234", "1,5", "--1", "0x10", "NaN"} {
		if _, err := fx.ParseDecimal("x", s, 2); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// asAdmin is ctx carrying an actor, as an admin write needs (the audit log records it).
func asAdmin(ctx context.Context) context.Context {
	return audit.WithActor(ctx, audit.Actor{Via: "test"})
}

// adminOf is the catalog admin of svc's process: it shares svc's catalog cache, as the web
// process wires them.
func adminOf(t *testing.T, svc *Service) *catalog.Admin {
	t.Helper()
	a, err := catalog.NewAdmin(catalog.AdminConfig{DB: svc.db, Cache: svc.catalog, Log: svc.log, Venue: svc.venue != nil})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
