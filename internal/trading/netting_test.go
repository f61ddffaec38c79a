package trading

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// movingPrices quotes EURUSD at a price a test moves between orders.
type movingPrices struct {
	mu       sync.Mutex
	bid, ask float64
}

func (p *movingPrices) set(bid, ask float64) {
	p.mu.Lock()
	p.bid, p.ask = bid, ask
	p.mu.Unlock()
}

func (p *movingPrices) LastTick(s string) (tick.Quote, bool) {
	if s != "EURUSD" {
		return tick.Quote{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return tick.Quote{Bid: p.bid, Ask: p.ask, ReceivedAt: time.Now()}, true
}

func (p *movingPrices) SymbolState(s string) tick.State {
	if s == "EURUSD" {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// modeAccount is a funded USD account (10,000) of user in a new account group of mode.
func modeAccount(t *testing.T, svc *Service, user int64, mode fx.PositionMode) book.Account {
	t.Helper()
	ctx := asAdmin(context.Background())
	admin := adminOf(t, svc)
	group := fmt.Sprintf("%s-%d", strings.ToLower(string(mode)), time.Now().UnixNano()%1e9)
	if _, err := admin.CreateAccountGroup(ctx, group, catalog.AccountGroupPatch{PositionMode: &mode}); err != nil {
		t.Fatal(err)
	}
	a := fundedAccount(t, svc, user)
	if _, _, err := svc.Accounts().Deposit(ctx, a.ID, decimal.NewFromInt(9000), fmt.Sprintf("more-%d", a.ID)); err != nil {
		t.Fatal(err)
	}
	if err := admin.MoveAccount(ctx, a.ID, group); err != nil {
		t.Fatal(err)
	}
	a.Group = group
	return a
}

func market(account int64, side fx.Side, volume string) OrderRequest {
	return OrderRequest{AccountID: account, Symbol: "EURUSD", Side: side, Type: fx.Market, Volume: decimal.RequireFromString(volume)}
}

// openOf is account's open positions, oldest first.
func openOf(t *testing.T, account int64) []book.Position {
	t.Helper()
	rows, err := testDB.Query("SELECT "+book.PositionCols+" FROM `fx_position` p WHERE p.`accountId` = ? AND p.`status` = 'OPEN' ORDER BY p.`openedAt`, p.`id`", account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []book.Position
	for rows.Next() {
		p, err := book.ScanPosition(rows)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func positionOf(t *testing.T, id int64) book.Position {
	t.Helper()
	p, err := book.LoadPosition(context.Background(), testDB, 0, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ledgerBalanced fails unless account's deals add up to its balance.
func ledgerBalanced(t *testing.T, account int64) {
	t.Helper()
	var sum, balance decimal.Decimal
	if err := testDB.QueryRow("SELECT COALESCE(SUM(`amount`), 0) FROM `fx_deal` WHERE `accountId` = ?", account).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if err := testDB.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", account).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	if !sum.Equal(balance) {
		t.Fatalf("account %d: Σ deals %s ≠ balance %s", account, sum, balance)
	}
}

func wantDecimal(t *testing.T, what string, got decimal.Decimal, want string) {
	t.Helper()
	if !got.Equal(decimal.RequireFromString(want)) {
		t.Fatalf("%s = %s, want %s", what, got, want)
	}
}

// A NETTING account holds one position per symbol: a same-side order adds to it at the
// volume-weighted open price (commission on the added lots), an opposite order reduces it
// (profit realised at the fill, reason NETTED), closes it when equal and reverses it when larger.
func TestNettingAddReduceCloseReverse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9901
	prices := &movingPrices{bid: 1.1000, ask: 1.1002}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.Netting)

	first, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	prices.set(1.1010, 1.1012)
	added, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if added.Position == nil || added.Position.ID != first.Position.ID {
		t.Fatalf("a same-side order on a NETTING account answered position %+v, want %d", added.Position, first.Position.ID)
	}
	open := openOf(t, a.ID)
	if len(open) != 1 {
		t.Fatalf("%d open positions after two buys, want 1", len(open))
	}
	p := open[0]
	wantDecimal(t, "volume after the add", p.Volume, "0.2")
	wantDecimal(t, "openVolume after the add", p.OpenVolume, "0.2")
	wantDecimal(t, "volume-weighted open price", p.OpenPrice, "1.1007")
	wantDecimal(t, "commission of both fills", p.Commission, "1.40")
	ledgerBalanced(t, a.ID)

	// Reduce: 0.05 lots sold at 1.1010 against 1.1007 realise 0.0003 × 5,000 = 1.50.
	if _, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.05")); err != nil {
		t.Fatal(err)
	}
	p = positionOf(t, p.ID)
	wantDecimal(t, "volume after the reduce", p.Volume, "0.15")
	wantDecimal(t, "realised profit of the reduce", p.RealizedProfit, "1.5")
	if n := len(openOf(t, a.ID)); n != 1 {
		t.Fatalf("%d open positions after a reduce", n)
	}
	var netted int
	testDB.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `positionId` = ? AND `type` = 'PROFIT' AND `comment` = 'close netted'", p.ID).Scan(&netted)
	if netted != 1 {
		t.Fatalf("%d NETTED profit deals on position %d, want 1", netted, p.ID)
	}
	ledgerBalanced(t, a.ID)

	// Reverse: selling 0.35 closes the 0.15 and opens a SELL of 0.2.
	rev, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.35"))
	if err != nil {
		t.Fatal(err)
	}
	p = positionOf(t, p.ID)
	if p.Status != fx.PositionClosed || p.CloseReason == nil || *p.CloseReason != string(fx.CloseNetted) {
		t.Fatalf("the reversed position is %s (%v), want CLOSED NETTED", p.Status, p.CloseReason)
	}
	open = openOf(t, a.ID)
	if len(open) != 1 || open[0].Side != fx.Sell || rev.Position == nil || open[0].ID != rev.Position.ID {
		t.Fatalf("after the reverse: %+v (answered %+v), want one SELL", open, rev.Position)
	}
	wantDecimal(t, "the reversal's volume", open[0].Volume, "0.2")
	wantDecimal(t, "the reversal's commission (its own lots only)", open[0].Commission, "1.40")
	ledgerBalanced(t, a.ID)

	// Close: buying exactly what is open closes it and opens nothing.
	if _, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.2")); err != nil {
		t.Fatal(err)
	}
	if n := len(openOf(t, a.ID)); n != 0 {
		t.Fatalf("%d open positions after an equal opposite order", n)
	}
	ledgerBalanced(t, a.ID)
}

// Two same-side orders of one NETTING account in one batch still make one position: the
// second adds to the position the first opened in the same transaction.
func TestNettingTwoFillsInOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9902
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.Netting)
	inOneBatch(svc, 3)
	var errs [3]error
	concurrently(
		func() { _, errs[0] = svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1")) },
		func() { _, errs[1] = svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1")) },
		func() { _, errs[2] = svc.PlaceOrder(ctx, user, market(a.ID, fx.Sell, "0.05")) },
	)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	open := openOf(t, a.ID)
	if len(open) != 1 {
		t.Fatalf("%d open positions after three orders in one batch, want 1", len(open))
	}
	wantDecimal(t, "volume", open[0].Volume, "0.15")
	ledgerBalanced(t, a.ID)
}

// A resting order that triggers on a NETTING account nets like a market order.
func TestNettingRestingOrderNets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9903
	prices := &movingPrices{bid: 1.1000, ask: 1.1002}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := modeAccount(t, svc, user, fx.Netting)
	buy, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.3"))
	if err != nil {
		t.Fatal(err)
	}
	limit := decimal.RequireFromString("1.1050")
	sell, err := svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Sell, Type: fx.Limit, Volume: decimal.RequireFromString("0.1"), Price: &limit})
	if err != nil {
		t.Fatal(err)
	}
	prices.set(1.1050, 1.1052)
	if err := svc.fillPending(ctx, sell.Order.ID, tick.Quote{}); err != nil {
		t.Fatal(err)
	}
	open := openOf(t, a.ID)
	if len(open) != 1 || open[0].ID != buy.Position.ID {
		t.Fatalf("open after the limit's fill: %+v", open)
	}
	wantDecimal(t, "volume", open[0].Volume, "0.2")
	wantDecimal(t, "profit realised at the limit", open[0].RealizedProfit, "48") // (1.1050 − 1.1002) × 10,000 units
	ledgerBalanced(t, a.ID)
}

// A position mode changes only while the group's accounts hold no open position; an EXTERNAL
// group stays HEDGING.
func TestPositionModeChangeNeedsNoPositions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9904
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	admin := adminOf(t, svc)
	a := modeAccount(t, svc, user, fx.Hedging)
	open, err := svc.PlaceOrder(ctx, user, market(a.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	netting := fx.Netting
	_, err = admin.UpdateAccountGroup(asAdmin(ctx), a.Group, catalog.AccountGroupPatch{PositionMode: &netting})
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), "1 open positions") {
		t.Fatalf("mode change with an open position: %v, want ECONFLICT naming it", err)
	}
	if g, _ := admin.AccountGroup(ctx, a.Group); g.PositionMode != fx.Hedging {
		t.Fatalf("refused change left the group %s", g.PositionMode)
	}
	// Nor may the account move into a group of another mode while it holds the position.
	other := fmt.Sprintf("netting-mv-%d", time.Now().UnixNano()%1e9)
	if _, err := admin.CreateAccountGroup(asAdmin(ctx), other, catalog.AccountGroupPatch{PositionMode: &netting}); err != nil {
		t.Fatal(err)
	}
	if err := admin.MoveAccount(asAdmin(ctx), a.ID, other); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("move into a NETTING group with an open position: %v, want ECONFLICT", err)
	}
	if _, err := svc.ClosePosition(ctx, user, open.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	g, err := admin.UpdateAccountGroup(asAdmin(ctx), a.Group, catalog.AccountGroupPatch{PositionMode: &netting})
	if err != nil || g.PositionMode != fx.Netting {
		t.Fatalf("mode change with no position: %+v, %v", g, err)
	}
	external := fx.External
	_, err = admin.UpdateAccountGroup(asAdmin(ctx), a.Group, catalog.AccountGroupPatch{Execution: &external})
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), "HEDGING") {
		t.Fatalf("a NETTING group made EXTERNAL: %v, want ECONFLICT", err)
	}
	bad := fx.PositionMode("NETTED")
	if _, err := admin.UpdateAccountGroup(asAdmin(ctx), a.Group, catalog.AccountGroupPatch{PositionMode: &bad}); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("unknown mode: %v, want EINVALID", err)
	}
}

// planNet's decisions, without a database.
func TestPlanNet(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	held := func(id int64, side fx.Side, vol string) *book.Held {
		return &book.Held{Position: &book.Position{ID: id, Side: side, Volume: d(vol), Status: fx.PositionOpen}}
	}
	type leg struct {
		id  int64
		vol string
	}
	for _, c := range []struct {
		name   string
		mode   fx.PositionMode
		side   fx.Side
		volume string
		held   []*book.Held
		legs   []leg
		addTo  int64
		rest   string
	}{
		{"first fill opens", fx.Netting, fx.Buy, "1", nil, nil, 0, "1"},
		{"netting adds", fx.Netting, fx.Buy, "1", []*book.Held{held(1, fx.Buy, "2")}, nil, 1, "1"},
		{"netting reduces", fx.Netting, fx.Sell, "0.5", []*book.Held{held(1, fx.Buy, "2")}, []leg{{1, "0.5"}}, 0, "0"},
		{"netting closes", fx.Netting, fx.Sell, "2", []*book.Held{held(1, fx.Buy, "2")}, []leg{{1, "2"}}, 0, "0"},
		{"netting reverses", fx.Netting, fx.Sell, "3", []*book.Held{held(1, fx.Buy, "2")}, []leg{{1, "2"}}, 0, "1"},
		{"fifo opens another", fx.FIFO, fx.Buy, "1", []*book.Held{held(1, fx.Buy, "2")}, nil, 0, "1"},
		{"fifo takes the oldest first", fx.FIFO, fx.Sell, "1.5", []*book.Held{held(1, fx.Buy, "1"), held(2, fx.Buy, "1"), held(3, fx.Buy, "1")},
			[]leg{{1, "1"}, {2, "0.5"}}, 0, "0"},
		{"fifo reverses", fx.FIFO, fx.Sell, "2.5", []*book.Held{held(1, fx.Buy, "1"), held(2, fx.Buy, "1")}, []leg{{1, "1"}, {2, "1"}}, 0, "0.5"},
	} {
		p := planNet(c.mode, c.side, d(c.volume), c.held)
		var legs []leg
		for _, l := range p.legs {
			legs = append(legs, leg{l.h.ID, l.volume.String()})
		}
		var addTo int64
		if p.addTo != nil {
			addTo = p.addTo.ID
		}
		if fmt.Sprint(legs) != fmt.Sprint(c.legs) || addTo != c.addTo || !p.rest.Equal(d(c.rest)) {
			t.Errorf("%s: legs %v addTo %d rest %s; want %v %d %s", c.name, legs, addTo, p.rest, c.legs, c.addTo, c.rest)
		}
	}
}

// changeLog records the changes a service reports to the risk engine.
type changeLog struct {
	mu sync.Mutex
	cs []risk.Change
}

func (l *changeLog) add(_ context.Context, cs ...risk.Change) {
	l.mu.Lock()
	l.cs = append(l.cs, cs...)
	l.mu.Unlock()
}

// last is the latest change reported.
func (l *changeLog) last() risk.Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cs[len(l.cs)-1]
}

func (l *changeLog) take() []risk.Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.cs
	l.cs = nil
	return cs
}

// The risk engine learns what a netting fill did: an add re-indexes the position whole (its
// volume and open price moved), a reduce reports the volume left, a reversal the close and the
// new position; a FIFO stop redirected to the oldest closes it and re-adds the stopped position
// without its stop.
func TestModesTellTheRiskEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9905
	log := &changeLog{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, OnChange: log.add})
	kinds := func(cs []risk.Change) string {
		var out []string
		for _, c := range cs {
			if c.Kind == risk.BalanceChanged {
				continue
			}
			out = append(out, fmt.Sprintf("%d:%d:%g:%g", c.Kind, c.Position.ID, c.Position.Volume, c.Position.SL))
		}
		return strings.Join(out, " ")
	}
	n := modeAccount(t, svc, user, fx.Netting)
	first, err := svc.PlaceOrder(ctx, user, market(n.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.Position.ID
	log.take()
	for _, c := range []struct {
		side   fx.Side
		volume string
		want   func(id, opened int64) string
	}{
		{fx.Buy, "0.1", func(id, _ int64) string {
			return fmt.Sprintf("%d:%d:0:0 %d:%d:0.2:0", risk.PositionClosed, id, risk.PositionOpened, id)
		}},
		{fx.Sell, "0.05", func(id, _ int64) string { return fmt.Sprintf("%d:%d:0.15:0", risk.PositionReduced, id) }},
		{fx.Sell, "0.25", func(id, opened int64) string {
			return fmt.Sprintf("%d:%d:0:0 %d:%d:0.1:0", risk.PositionClosed, id, risk.PositionOpened, opened)
		}},
	} {
		res, err := svc.PlaceOrder(ctx, user, market(n.ID, c.side, c.volume))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := kinds(log.take()), c.want(id, res.Position.ID); got != want {
			t.Fatalf("%s %s: changes %q, want %q", c.side, c.volume, got, want)
		}
	}

	f := modeAccount(t, svc, user, fx.FIFO)
	old, err := svc.PlaceOrder(ctx, user, market(f.ID, fx.Buy, "0.1"))
	if err != nil {
		t.Fatal(err)
	}
	sl := decimal.RequireFromString("1.0900")
	req := market(f.ID, fx.Buy, "0.1")
	req.SL = &sl
	stopped, err := svc.PlaceOrder(ctx, user, req)
	if err != nil {
		t.Fatal(err)
	}
	log.take()
	if _, err := svc.closePosition(ctx, 0, f.ID, stopped.Position.ID, nil, fx.CloseSL, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d:%d:0:0 %d:%d:0.1:0", risk.PositionClosed, old.Position.ID, risk.PositionOpened, stopped.Position.ID)
	if got := kinds(log.take()); got != want {
		t.Fatalf("FIFO stop redirected: changes %q, want %q", got, want)
	}
}
