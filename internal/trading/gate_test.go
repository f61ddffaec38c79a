package trading

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/testkit/poll"
)

// testGate is a real gate over l, with its log and its series kept for the test to read.
type testGate struct {
	g       *gate.Gate
	logs    *dbtest.LogBuffer
	dropped *prometheus.CounterVec
}

func newGate(t testing.TB, l gate.Lease) testGate {
	t.Helper()
	tg := testGate{logs: &dbtest.LogBuffer{}, dropped: gate.NewDropped()}
	g, err := gate.New(gate.Config{Lease: l, Log: slog.New(slog.NewTextHandler(tg.logs, nil)), Dropped: tg.dropped})
	if err != nil {
		t.Fatal(err)
	}
	tg.g = g
	return tg
}

// newService builds a service for a test. Unless the test sets its own, the caps are the
// defaults but for accounts per user, which is raised: the tests' users are fixed numbers in one
// database that outlives a run, so a test run again (-count) finds its earlier accounts.
func newService(t testing.TB, c Config) *Service {
	t.Helper()
	if c.Settings == nil {
		c.Settings = capsOf(catalog.DefaultMaxPendingOrders, 1000)
	}
	svc, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	runCommits(t, svc)
	return svc
}

// runCommits runs svc's group commit for the rest of the test.
func runCommits(t testing.TB, svc *Service) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err, ok := poll.Receive(t, done, 10*time.Second, "the group commit's Run returning after its context ended"); ok && err != nil {
			t.Errorf("group commit: %v", err)
		}
	})
}

// A fill, a close and a withdrawal on a process whose lease is not confirmed are dropped at the
// gate before a transaction opens: each answers the pricing text (docs/architecture.md, «Who may
// quote»), is logged with its kind and counted, and the database is unchanged.
func TestGateDropsFillsClosesAndWithdrawals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	held := &gatetest.Lease{}
	fence := &switchLease{}
	tg := newGate(t, held)
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: fence, Gate: tg.g})
	a := fundedAccount(t, svc, 9004)
	buy := OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.1")}
	open, err := svc.PlaceOrder(ctx, 9004, buy)
	if err != nil {
		t.Fatal(err)
	}
	before, calls := counts(t, a.ID), fence.calls.Load()

	held.Lose()
	for _, c := range []struct {
		work gate.Work
		msg  string
		do   func() error
	}{
		{gate.Fill, fx.MsgPricingUnavailable, func() error { _, err := svc.PlaceOrder(ctx, 9004, buy); return err }},
		{gate.Close, fx.MsgPricingUnavailable, func() error { _, err := svc.ClosePosition(ctx, 9004, open.Position.ID, nil, "CLIENT"); return err }},
		{gate.Withdrawal, fx.MsgPositionsUnpriceable, func() error {
			_, _, err := svc.Accounts().Withdraw(ctx, 9004, a.ID, decimal.NewFromInt(1), "")
			return err
		}},
	} {
		err := c.do()
		if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != c.msg {
			t.Errorf("%s: %v, want 503 %q", c.work, err, c.msg)
		}
		if n := testutil.ToFloat64(tg.dropped.WithLabelValues(c.work.String(), "gate")); n != 1 {
			t.Errorf("%s: fxdesk_gate_dropped_total = %v, want 1", c.work, n)
		}
		if !strings.Contains(tg.logs.String(), "level=WARN msg=\"lease not confirmed; work not executed\" work="+c.work.String()) {
			t.Errorf("%s: no gate warning in %s", c.work, tg.logs)
		}
	}
	if fence.calls.Load() != calls {
		t.Fatal("the fence was consulted: dropped work reached a transaction")
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("dropped work changed the database: %v → %v", before, after)
	}
}

// A write the fence refuses is reported through the gate: same error, counted at "fence".
func TestFenceRefusalIsCountedAtTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fence := &switchLease{}
	tg := newGate(t, &gatetest.Lease{})
	svc := newService(t, Config{DB: testDB, Prices: fixedPrices{"EURUSD": {1.1, 1.1002}}, Lease: fence, Gate: tg.g})
	a := fundedAccount(t, svc, 9005)
	fence.fenced.Store(true)
	_, err := svc.PlaceOrder(ctx, 9005, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.1")})
	if !errors.Is(err, gate.ErrNotHolder) {
		t.Fatalf("fenced fill: %v", err)
	}
	if n := testutil.ToFloat64(tg.dropped.WithLabelValues("fill", "fence")); n != 1 {
		t.Fatalf("fence refusals counted %v, want 1", n)
	}
}

func TestNewRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	g := newGate(t, &gatetest.Lease{}).g
	for name, c := range map[string]Config{
		"DB":     {Prices: fixedPrices{}, Gate: g},
		"Prices": {DB: testDB, Gate: g},
		"Gate":   {DB: testDB, Prices: fixedPrices{}},
	} {
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v", name, err)
		}
	}
}
