package trading

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/routing"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/testkit/sqlsource"
	"fxdesk/internal/tick"
	"fxdesk/internal/venue"
	"fxdesk/migrations"
)

// clock is a settable clock for the group commit (Config.Now): a close's holding time is its
// batch's time less the position's openedAt.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// profileRow reads account's fx_account_profile row as text.
func profileRow(t *testing.T, account int64) string {
	t.Helper()
	var trades, wins, hold, under int64
	var gp, gl string
	if err := testDB.QueryRow("SELECT `trades`, `wins`, `grossProfit`, `grossLoss`, `holdMillis`, `underMinute` FROM `fx_account_profile` WHERE `accountId` = ?", account).
		Scan(&trades, &wins, &gp, &gl, &hold, &under); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("trades=%d wins=%d gross=+%s/-%s hold=%dms under=%d", trades, wins, gp, gl, hold, under)
}

// Four trades crafted by hand — one full close, a position closed in two parts (each part is a
// trade), and a losing sell — give the profile's figures to the cent and the millisecond, in
// the row the closes wrote and in the holder's memory alike. Commission is not a trade's profit.
func TestProfileAfterCraftedCloses(t *testing.T) {
	t.Parallel()
	const user = 9901
	ctx := context.Background()
	prices := newLiveQuotes()
	clk := &clock{t: time.Now().UTC()}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, Now: clk.now})
	a := fundedAccount(t, svc, user)
	prices.set("EURUSD", "1.1", "1.1002")
	open := func(side fx.Side, lots string) int64 {
		t.Helper()
		res, err := svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: side, Type: fx.Market, Volume: dd(lots)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Position.ID
	}
	p1, p2, p3 := open(fx.Buy, "0.1"), open(fx.Buy, "0.2"), open(fx.Sell, "0.1") // buys at 1.1002, the sell at 1.1
	opened := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	if _, err := testDB.Exec("UPDATE `fx_position` SET `openedAt` = ? WHERE `accountId` = ?", opened, a.ID); err != nil {
		t.Fatal(err)
	}
	// Read before any close, so the memory must follow the closes to stay right.
	if p, err := svc.profileFor(ctx, a.ID); err != nil || p.Trades != 0 {
		t.Fatalf("profile before any close: %+v %v", p, err)
	}
	closeAt := func(id int64, lots string, bid, ask string, held time.Duration, want string) {
		t.Helper()
		prices.set("EURUSD", bid, ask)
		clk.set(opened.Add(held))
		var vol = dd(lots)
		res, err := svc.ClosePosition(ctx, user, id, &vol, fx.CloseClient)
		if err != nil {
			t.Fatal(err)
		}
		if got := fx.FormatMoney("USD", res.Deal.Amount); got != want {
			t.Fatalf("close of %s lots of position %d: profit %s, want %s", lots, id, got, want)
		}
	}
	closeAt(p1, "0.1", "1.1032", "1.1034", 10*time.Second, "30.00")                      // 0.1 × 100,000 × (1.1032 − 1.1002)
	closeAt(p2, "0.1", "1.1022", "1.1024", 50*time.Second, "20.00")                      // 0.1 × 100,000 × (1.1022 − 1.1002): a partial close
	closeAt(p2, "0.1", "1.0992", "1.0994", 200*time.Second, "-10.00")                    // the rest: 0.1 × 100,000 × (1.0992 − 1.1002)
	closeAt(p3, "0.1", "1.1003", "1.1005", 61*time.Second+500*time.Millisecond, "-5.00") // a sell closes at the ask: 0.1 × 100,000 × (1.1 − 1.1005)

	// 4 trades, 2 wins; +30 +20 = 50.00 won, 10 + 5 = 15.00 lost; 10 + 50 + 200 + 61.5 s held,
	// two of them under a minute.
	if got, want := profileRow(t, a.ID), "trades=4 wins=2 gross=+50.000/-15.000 hold=321500ms under=2"; got != want {
		t.Fatalf("profile row %s, want %s", got, want)
	}
	_, p, err := svc.Accounts().Profile(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ name, got, want string }{
		{"net", p.NetProfit().StringFixed(2), "35.00"},
		{"win rate", p.WinRate().StringFixed(2), "50.00"},
		{"profit factor", p.ProfitFactor().StringFixed(4), "3.3333"},     // 50 / 15
		{"average hold", p.AvgHoldSeconds().StringFixed(3), "80.375"},    // 321.5 / 4
		{"under a minute", p.UnderMinuteShare().StringFixed(2), "50.00"}, // 2 / 4
	} {
		if f.got != f.want {
			t.Errorf("%s = %s, want %s", f.name, f.got, f.want)
		}
	}
	mem, _, ok := svc.profiles.get(svc.term(), a.ID)
	if !ok || mem.Trades != p.Trades || mem.Wins != p.Wins || !mem.GrossProfit.Equal(p.GrossProfit) || !mem.GrossLoss.Equal(p.GrossLoss) ||
		mem.HoldMillis != p.HoldMillis || mem.UnderMinute != p.UnderMinute {
		t.Fatalf("the holder's memory %+v (kept %v) differs from the row %+v", mem, ok, p)
	}
	wantLedgerBalanced(t, a.ID)

	// The migration's backfill, run on these closes, finds the same trades (its holding times
	// are the database's clock at each deal, not this test's).
	body, err := fs.ReadFile(migrations.FS, "000019_routing.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	_, backfill, ok := strings.Cut(string(body), "`lastTradeAt`)\nSELECT ")
	if !ok {
		t.Fatal("the migration's backfill SELECT is not where this test looks for it")
	}
	rows, err := testDB.Query("SELECT " + strings.TrimSuffix(strings.TrimSpace(backfill), ";"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var acct, trades, wins, hold, under int64
		var gp, gl string
		var last time.Time
		if err := rows.Scan(&acct, &trades, &wins, &gp, &gl, &hold, &under, &last); err != nil {
			t.Fatal(err)
		}
		if acct == a.ID {
			found = true
			if got := fmt.Sprintf("trades=%d wins=%d gross=+%s/-%s", trades, wins, gp, gl); got != "trades=4 wins=2 gross=+50.000/-15.000" {
				t.Errorf("backfill of the account: %s", got)
			}
		}
	}
	if !found {
		t.Error("the backfill found no trade of the account")
	}
}

// A batch's trades are one statement, one row per account: two accounts' trades, three of them,
// cost a single INSERT, and the sums land on both of its paths — an account with a profile row
// (the update) and one without (the insert).
func TestBatchTradesAreOneUpsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: newLiveQuotes(), Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	old, fresh := fundedAccount(t, svc, 9907), fundedAccount(t, svc, 9908)
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	trade := func(profit string, held time.Duration) routing.Profile {
		t.Helper()
		tr := routing.Trade(dd(profit), held)
		tr.LastTradeAt = &at
		return tr
	}
	seed := &book.Batch{}
	addTrade(seed, old.ID, trade("12.5", 90*time.Second))
	if err := seed.Run(ctx, testDB); err != nil {
		t.Fatal(err)
	}

	conn, err := testDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inserts := func() int64 {
		t.Helper()
		var name string
		var n int64
		if err := conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_insert'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	b := &book.Batch{}
	addTrade(b, old.ID, trade("-4", 30*time.Second))
	addTrade(b, fresh.ID, trade("7.25", 2*time.Minute))
	addTrade(b, old.ID, trade("3", 10*time.Second))
	before := inserts()
	if err := b.Run(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if n := inserts() - before; n != 1 {
		t.Fatalf("the batch's three trades took %d INSERTs, want 1", n)
	}
	for _, c := range []struct {
		account int64
		want    string
	}{
		{old.ID, "trades=3 wins=2 gross=+15.500/-4.000 hold=130000ms under=2"},
		{fresh.ID, "trades=1 wins=1 gross=+7.250/-0.000 hold=120000ms under=0"},
	} {
		if got := profileRow(t, c.account); got != c.want {
			t.Errorf("account %d: profile %s, want %s", c.account, got, c.want)
		}
	}
}

// Closes of one account in one batch each add their trade: the batch's one row for the account
// carries all of them, and the holder's memory follows.
func TestProfileAfterClosesInOneBatch(t *testing.T) {
	t.Parallel()
	const user = 9909
	ctx := context.Background()
	prices := newLiveQuotes()
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	prices.set("EURUSD", "1.1", "1.1002")
	var ids []int64
	for range 3 {
		res, err := svc.PlaceOrder(ctx, user, marketBuy(a.ID, "0.1", ""))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Position.ID)
	}
	if _, err := svc.profileFor(ctx, a.ID); err != nil { // read, so the memory must follow the closes
		t.Fatal(err)
	}
	prices.set("EURUSD", "1.1022", "1.1024") // +20.00 on each
	inOneBatch(svc, len(ids))
	errs := make([]error, len(ids))
	var fns []func()
	for i, id := range ids {
		fns = append(fns, func() { _, errs[i] = svc.ClosePosition(ctx, user, id, nil, fx.CloseClient) })
	}
	concurrently(fns...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("close %d: %v", ids[i], err)
		}
	}
	if st := svc.CommitStats(); st.LastSize != int64(len(ids)) {
		t.Fatalf("committer %+v, want the closes in one batch", st)
	}
	if got, want := profileRow(t, a.ID), "trades=3 wins=3 gross=+60.000/-0.000"; !strings.HasPrefix(got, want) {
		t.Fatalf("profile row %s, want %s…", got, want)
	}
	if mem, _, ok := svc.profiles.get(svc.term(), a.ID); !ok || mem.Trades != 3 || !mem.GrossProfit.Equal(dd("60")) {
		t.Fatalf("the holder's memory %+v (kept %v), want the three trades", mem, ok)
	}
	wantLedgerBalanced(t, a.ID)
}

// routedGroup puts a funded account of user (deposit 20,000 USD at 1:100) into an INTERNAL
// account group of its own and returns both.
func routedGroup(t *testing.T, svc *Service, user int64) (book.Account, string) {
	t.Helper()
	group := fmt.Sprintf("route-%d", user)
	if _, err := testDB.Exec("INSERT IGNORE INTO `fx_account_group` (`name`) VALUES (?)", group); err != nil {
		t.Fatal(err)
	}
	a := fundedAccount(t, svc, user)
	if _, _, err := svc.Accounts().Deposit(asAdmin(context.Background()), a.ID, dd("19000"), "seed-routing"); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, a.ID); err != nil {
		t.Fatal(err)
	}
	a.Group = group
	return a, group
}

// On an INTERNAL group, a rule volume ≥ 5 → A_BOOK sends a 5-lot order to the venue and books a
// 1-lot order on the desk; each order records what routed it; the routed position closes at
// the venue although its group is INTERNAL; a resting order is routed once, at its placement.
func TestRoutingByVolumeAtAcceptance(t *testing.T) {
	b := newABook(t)
	const user = 9902
	ctx := context.Background()
	a, group := routedGroup(t, b.svc, user)
	admin := adminOf(t, b.svc)
	rule, err := admin.CreateRoutingRule(asAdmin(ctx), group, routing.Rule{VolumeMin: ptr(dd("5")), Action: routing.ABook, Note: "big tickets"})
	if err != nil {
		t.Fatal(err)
	}
	small, err := b.buy(user, a, "EURUSD", "1")
	if err != nil {
		t.Fatal(err)
	}
	if small.Order.Execution != fx.Internal || small.Order.RouteRuleID != nil || small.Position == nil || small.Position.VenueTradeID != nil {
		t.Fatalf("1 lot: %+v", small)
	}
	big, err := b.buy(user, a, "EURUSD", "5")
	if err != nil {
		t.Fatal(err)
	}
	tr := b.venueTrade(big.Order.ID)
	if big.Order.Execution != fx.External || big.Order.RouteRuleID == nil || *big.Order.RouteRuleID != rule.ID || big.Position == nil ||
		big.Position.VenueTradeID == nil || *big.Position.VenueTradeID != tr.ID {
		t.Fatalf("5 lots: %+v (venue trade %s)", big, tr.ID)
	}
	stored, err := book.LoadOrder(ctx, testDB, user, big.Order.ID)
	if err != nil || stored.RouteRuleID == nil || *stored.RouteRuleID != rule.ID || stored.Execution != fx.External {
		t.Fatalf("stored 5-lot order %+v %v", stored, err)
	}
	if stored, err := book.LoadOrder(ctx, testDB, user, small.Order.ID); err != nil || stored.RouteRuleID != nil || stored.Execution != fx.Internal {
		t.Fatalf("stored 1-lot order %+v %v", stored, err)
	}
	// The rule goes; the open A-book position still closes through the venue it was opened at.
	if _, err := admin.DeleteRoutingRule(asAdmin(ctx), group, rule.ID); err != nil {
		t.Fatal(err)
	}
	closes := b.requests("PUT /trades/{trade}/close")
	if _, err := b.svc.ClosePosition(ctx, user, big.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if b.requests("PUT /trades/{trade}/close") != closes+1 || b.venueTrade(big.Order.ID).State != venue.TradeClosed {
		t.Fatalf("the routed position did not close at the venue: %v", b.sim.State().Requests)
	}
	if _, err := b.svc.ClosePosition(ctx, user, small.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	if b.requests("PUT /trades/{trade}/close") != closes+1 {
		t.Fatal("the desk's position was closed at the venue")
	}

	// Resting orders: one a rule routes to the venue is refused (the venue takes MARKET orders
	// only); one a B_BOOK rule routes rests with the rule's id and fills on the desk.
	abook, err := admin.CreateRoutingRule(asAdmin(ctx), group, routing.Rule{Symbols: []string{"GBPUSD"}, Action: routing.ABook})
	if err != nil {
		t.Fatal(err)
	}
	bbook, err := admin.CreateRoutingRule(asAdmin(ctx), group, routing.Rule{Symbols: []string{"EURUSD"}, Action: routing.BBook})
	if err != nil {
		t.Fatal(err)
	}
	b.prices.set("GBPUSD", "1.3", "1.3002")
	limit := func(symbol, price string) (OrderResult, error) {
		p := dd(price)
		return b.svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: symbol, Side: fx.Buy, Type: fx.Limit, Volume: dd("1"), Price: &p})
	}
	if _, err := limit("GBPUSD", "1.2"); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("a resting order routed to the venue: %v", err)
	}
	rest, err := limit("EURUSD", "1.09")
	if err != nil {
		t.Fatal(err)
	}
	if rest.Order.RouteRuleID == nil || *rest.Order.RouteRuleID != bbook.ID || rest.Order.Execution != fx.Internal {
		t.Fatalf("resting order %+v", rest.Order)
	}
	_ = abook
}

// A profile rule moves a profitable account's next order to the A-book, and only once the
// account's record says so: the memory follows the close that made it profitable.
func TestRoutingByProfile(t *testing.T) {
	b := newABook(t)
	const user = 9903
	ctx := context.Background()
	a, group := routedGroup(t, b.svc, user)
	if _, err := adminOf(t, b.svc).CreateRoutingRule(asAdmin(ctx), group, routing.Rule{MinTrades: ptr(int64(1)), ProfitFactorMin: ptr(dd("2")), Action: routing.ABook}); err != nil {
		t.Fatal(err)
	}
	first, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	if first.Order.Execution != fx.Internal || first.Order.RouteRuleID != nil {
		t.Fatalf("an account with no record was routed: %+v", first.Order)
	}
	b.prices.set("EURUSD", "1.1030", "1.1032") // +28.00 on the close: a profit and no loss
	if _, err := b.svc.ClosePosition(ctx, user, first.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	next, err := b.buy(user, a, "EURUSD", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	if next.Order.Execution != fx.External || next.Order.RouteRuleID == nil {
		t.Fatalf("the profitable account's next order: %+v", next.Order)
	}
	b.venueTrade(next.Order.ID)
}

// The profile has one writer: the only statement in the module's non-test sources that writes
// fx_account_profile is the close path's profileAddSQL (the migration's backfill aside), so a
// trade is added where its deal is booked and nowhere else.
func TestOnlyTheClosePathWritesTheProfile(t *testing.T) {
	t.Parallel()
	writes := sqlsource.WritesTable("fx_account_profile")
	found := 0
	for _, s := range sqlsource.ModuleTexts(t) {
		if !writes.MatchString(s.Text) {
			continue
		}
		if s.File == "internal/trading/profile.go" && s.Text == profileAddSQL {
			found++
			continue
		}
		t.Errorf("%s writes fx_account_profile other than through the close path: %s", s.Where(), s.Text)
	}
	if found != 1 {
		t.Errorf("found %d texts of profileAddSQL, want 1: the walk is not seeing it", found)
	}
}

// A resting order keeps the decision made when it was placed: on an EXTERNAL group, a B_BOOK
// rule rests it on the desk, and when it triggers it fills there — the venue never hears of it —
// although the group's mode and a rule added meanwhile would send a new order to the venue.
func TestRestingOrderKeepsItsRouting(t *testing.T) {
	b := newABook(t)
	const user = 9904
	ctx := context.Background()
	a := b.externalAccount(user)
	admin := adminOf(t, b.svc)
	rule, err := admin.CreateRoutingRule(asAdmin(ctx), a.Group, routing.Rule{Symbols: []string{"EURUSD"}, Action: routing.BBook})
	if err != nil {
		t.Fatal(err)
	}
	price := dd("1.0900")
	rest, err := b.svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Limit, Volume: dd("0.1"), Price: &price})
	if err != nil {
		t.Fatal(err)
	}
	if rest.Order.Execution != fx.Internal || rest.Order.RouteRuleID == nil || *rest.Order.RouteRuleID != rule.ID {
		t.Fatalf("resting order %+v", rest.Order)
	}
	// The rule goes: the group's mode (EXTERNAL) would route a new order to the venue.
	if _, err := admin.DeleteRoutingRule(asAdmin(ctx), a.Group, rule.ID); err != nil {
		t.Fatal(err)
	}
	orders := b.requests("POST /orders")
	b.prices.set("EURUSD", "1.0898", "1.0900")
	if err := NewRiskDesk(b.svc, nil).Fill(ctx, rest.Order.ID, tick.Quote{}); err != nil {
		t.Fatal(err)
	}
	o, err := book.LoadOrder(ctx, testDB, user, rest.Order.ID)
	if err != nil || o.Status != fx.OrderFilled || o.Execution != fx.Internal || o.PositionID == nil || o.RouteRuleID == nil || *o.RouteRuleID != rule.ID {
		t.Fatalf("the triggered order %+v %v", o, err)
	}
	p, err := book.LoadPosition(ctx, testDB, user, *o.PositionID)
	if err != nil || p.VenueTradeID != nil {
		t.Fatalf("its position %+v %v: want one on the desk", p, err)
	}
	if n := b.requests("POST /orders"); n != orders {
		t.Fatalf("the venue received %d orders for a resting order routed to the desk", n-orders)
	}
}

// A HEDGE rule's order is booked on the desk with the rule's percent, market or resting, and
// the position it opens carries the percent (what the holder's hedge rules find it by), even
// once the rule changed: the decision was made at acceptance. The venue hears nothing from the
// desk's fill itself.
func TestHedgeRoutedOrderKeepsItsPercent(t *testing.T) {
	b := newABook(t)
	const user = 9906
	ctx := context.Background()
	a, group := routedGroup(t, b.svc, user)
	admin := adminOf(t, b.svc)
	pct := 40
	rule, err := admin.CreateRoutingRule(asAdmin(ctx), group, routing.Rule{Symbols: []string{"EURUSD"}, Action: routing.Hedge, HedgePercent: &pct})
	if err != nil {
		t.Fatal(err)
	}
	orders := b.requests("POST /orders")
	market, err := b.buy(user, a, "EURUSD", "1")
	if err != nil {
		t.Fatal(err)
	}
	if market.Order.Execution != fx.Internal || market.Order.RouteRuleID == nil || *market.Order.RouteRuleID != rule.ID || market.Order.HedgePercent == nil ||
		*market.Order.HedgePercent != pct || market.Position == nil || market.Position.VenueTradeID != nil {
		t.Fatalf("market order %+v position %+v", market.Order, market.Position)
	}
	price := dd("1.0900")
	rest, err := b.svc.PlaceOrder(ctx, user, OrderRequest{AccountID: a.ID, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Limit, Volume: dd("0.5"), Price: &price})
	if err != nil {
		t.Fatal(err)
	}
	other := 90
	if _, err := admin.UpdateRoutingRule(asAdmin(ctx), group, rule.ID, routing.Rule{Symbols: []string{"EURUSD"}, Action: routing.Hedge, HedgePercent: &other}); err != nil {
		t.Fatal(err)
	}
	b.prices.set("EURUSD", "1.0898", "1.0900")
	if err := NewRiskDesk(b.svc, nil).Fill(ctx, rest.Order.ID, tick.Quote{}); err != nil {
		t.Fatal(err)
	}
	o, err := book.LoadOrder(ctx, testDB, user, rest.Order.ID)
	if err != nil || o.Status != fx.OrderFilled || o.HedgePercent == nil || *o.HedgePercent != pct || o.PositionID == nil {
		t.Fatalf("the triggered HEDGE order %+v %v", o, err)
	}
	for _, id := range []int64{market.Position.ID, *o.PositionID} {
		var got sql.NullInt64
		if err := testDB.QueryRow("SELECT `hedgePercent` FROM `fx_position` WHERE `id` = ?", id).Scan(&got); err != nil || !got.Valid || got.Int64 != int64(pct) {
			t.Fatalf("position %d hedgePercent %v %v, want %d", id, got, err, pct)
		}
	}
	if n := b.requests("POST /orders"); n != orders {
		t.Fatalf("the desk's fills sent %d orders to the venue; the hedge is the holder's sweep's to send", n-orders)
	}
}
