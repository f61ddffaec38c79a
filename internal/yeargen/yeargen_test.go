package yeargen

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"fxdesk/internal/auth"
	"fxdesk/internal/eod"
	"fxdesk/internal/testkit/dbtest"
)

var testDB *sql.DB

func TestMain(m *testing.M) {
	os.Exit(func() int {
		db, closeDB, err := dbtest.NewMigrated("yeargen")
		if err != nil {
			panic(err)
		}
		defer closeDB()
		testDB = db
		return m.Run()
	}())
}

// testEnd is a Friday afternoon: the range holds whole weeks, weekends and a day not yet frozen.
var testEnd = time.Date(2026, 3, 13, 15, 30, 0, 0, time.UTC)

// The same seed and size plan the same history: what a benchmark measures can be measured again.
func TestPlanIsDeterministic(t *testing.T) {
	ctx := context.Background()
	size := Small()
	size.Accounts, size.ClosedPositions, size.OpenPositions, size.BigClosed = 40, 2000, 100, 300
	plans := make([]*plan, 2)
	for i := range plans {
		p, err := newPlan(ctx, testDB, size, 7, testEnd)
		if err != nil {
			t.Fatal(err)
		}
		p.build(discard())
		plans[i] = p
	}
	if !slices.Equal(plans[0].deals, plans[1].deals) || !slices.Equal(plans[0].positions, plans[1].positions) || !slices.Equal(plans[0].events, plans[1].events) {
		t.Fatal("two plans of one seed differ")
	}
	other, err := newPlan(ctx, testDB, size, 8, testEnd)
	if err != nil {
		t.Fatal(err)
	}
	other.build(discard())
	if slices.Equal(plans[0].deals, other.deals) {
		t.Fatal("two seeds planned the same deals")
	}
}

// Small() filled into a migrated database holds what the desk's own writers would have left:
// the invariants the soak checks, the end of day's reconciliation, the sizes asked for.
func TestFillSmall(t *testing.T) {
	ctx := context.Background()
	size := Small()
	res, err := Fill(ctx, testDB, size, 42, testEnd, discard())
	if err != nil {
		t.Fatal(err)
	}
	count := func(q string, args ...any) int64 {
		t.Helper()
		var n sql.NullInt64
		if err := testDB.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n.Int64
	}
	// Sizes.
	for _, c := range []struct {
		what string
		got  int64
		want int64
	}{
		{"accounts", count("SELECT COUNT(*) FROM `fx_account`"), int64(size.Accounts)},
		{"closed positions", count("SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'CLOSED'"), int64(size.ClosedPositions)},
		{"open positions", count("SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'OPEN'"), int64(size.OpenPositions)},
		{"resting orders", count("SELECT COUNT(*) FROM `fx_order` WHERE `status` = 'PENDING'"), int64(size.RestingOrders)},
		{"events", count("SELECT COUNT(*) FROM `fx_event`"), int64(size.Events)},
		{"audit rows", count("SELECT COUNT(*) FROM `fx_audit` WHERE `action` <> 'token.create'"), res.Audit},
		{"big trader's closed trades", count("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ? AND `status` = 'CLOSED'", res.BigAccount), int64(size.BigClosed)},
		{"small trader's closed trades", count("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ? AND `status` = 'CLOSED'", res.SmallAccount), int64(size.SmallClosed)},
		{"deals", count("SELECT COUNT(*) FROM `fx_deal`"), res.Deals},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	if res.Audit < int64(size.Audit)*8/10 {
		t.Errorf("audit rows: %d, want about %d", res.Audit, size.Audit)
	}
	// The ledger: every account's deals add up to its balance, each balanceAfter follows the
	// one before it, no balance goes below zero, balanceVersion counts the changes.
	for _, c := range []struct{ what, q string }{
		{"accounts whose deals do not add up to the balance", "SELECT COUNT(*) FROM `fx_account` a WHERE a.`balance` <> (SELECT COALESCE(SUM(d.`amount`), 0) FROM `fx_deal` d WHERE d.`accountId` = a.`id`) " +
			"OR a.`balanceVersion` <> (SELECT COUNT(*) FROM `fx_deal` d WHERE d.`accountId` = a.`id`)"},
		{"deals off their account's chain", "SELECT COUNT(*) FROM (SELECT `balanceAfter`, `amount`, COALESCE(LAG(`balanceAfter`) OVER (PARTITION BY `accountId` ORDER BY `id`), 0) AS `prev` " +
			"FROM `fx_deal`) x WHERE x.`balanceAfter` <> x.`prev` + x.`amount`"},
		{"negative balances", "SELECT COUNT(*) FROM `fx_deal` WHERE `balanceAfter` < 0"},
		{"accounts not starting with a deposit", "SELECT COUNT(*) FROM `fx_deal` d WHERE d.`id` = (SELECT MIN(f.`id`) FROM `fx_deal` f WHERE f.`accountId` = d.`accountId`) AND d.`type` <> 'DEPOSIT'"},
		{"deals out of time order", "SELECT COUNT(*) FROM (SELECT `createdAt`, LAG(`createdAt`) OVER (ORDER BY `id`) AS `prev` FROM `fx_deal`) x WHERE x.`createdAt` < x.`prev`"},
		// Positions and their deals.
		{"positions without their opening commission", "SELECT COUNT(*) FROM `fx_position` p WHERE NOT EXISTS (SELECT 1 FROM `fx_deal` d WHERE d.`positionId` = p.`id` " +
			"AND d.`type` = 'COMMISSION' AND d.`amount` = -p.`commission` AND d.`idempotencyKey` = CONCAT('commission:order:', p.`orderId`))"},
		{"closed positions without their profit", "SELECT COUNT(*) FROM `fx_position` p WHERE p.`status` = 'CLOSED' AND NOT EXISTS (SELECT 1 FROM `fx_deal` d " +
			"WHERE d.`positionId` = p.`id` AND d.`type` = 'PROFIT' AND d.`amount` = p.`realizedProfit` AND d.`createdAt` = p.`closedAt`)"},
		{"closed positions badly shaped", "SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'CLOSED' AND (`volume` <> 0 OR `closedAt` <= `openedAt` OR `closePrice` IS NULL OR `closeReason` IS NULL)"},
		{"open positions badly shaped", "SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'OPEN' AND (`volume` <> `openVolume` OR `closedAt` IS NOT NULL)"},
		{"positions whose swap is not their swap deals'", "SELECT COUNT(*) FROM `fx_position` p WHERE p.`swap` <> (SELECT COALESCE(SUM(d.`amount`), 0) FROM `fx_deal` d WHERE d.`positionId` = p.`id` AND d.`type` = 'SWAP')"},
		{"swap deals without their charge", "SELECT COUNT(*) FROM `fx_deal` d WHERE d.`type` = 'SWAP' AND NOT EXISTS (SELECT 1 FROM `fx_swap_charge` c WHERE c.`positionId` = d.`positionId` " +
			"AND d.`idempotencyKey` = CONCAT('swap:', c.`positionId`, ':', DATE_FORMAT(c.`rolloverDate`, '%Y-%m-%d')) AND c.`amount` = d.`amount` AND c.`status` = 'CHARGED')"},
		{"positions whose order is not their filled order", "SELECT COUNT(*) FROM `fx_position` p JOIN `fx_order` o ON o.`id` = p.`orderId` WHERE o.`status` <> 'FILLED' OR o.`accountId` <> p.`accountId` OR o.`fillPrice` <> p.`openPrice`"},
		{"trades on a weekend", "SELECT COUNT(*) FROM `fx_position` WHERE DAYOFWEEK(`openedAt`) = 7"},
		// Events: ids in commit order, the sequence and the relay past the last.
		{"events out of time order", "SELECT COUNT(*) FROM (SELECT `createdAt`, LAG(`createdAt`) OVER (ORDER BY `id`) AS `prev` FROM `fx_event`) x WHERE x.`createdAt` < x.`prev`"},
		{"events not ending at the sequence", "SELECT COUNT(*) FROM `fx_event_seq` s WHERE s.`last` <> (SELECT MAX(`id`) FROM `fx_event`)"},
		{"relay cursors behind the last event", "SELECT COUNT(*) FROM `fx_event_relay` WHERE `position` < (SELECT MAX(`id`) FROM `fx_event`)"},
		{"events of another user's account", "SELECT COUNT(*) FROM `fx_event` e JOIN `fx_account` a ON a.`id` = e.`accountId` WHERE a.`userId` <> e.`userId`"},
	} {
		if n := count(c.q); n != 0 {
			t.Errorf("%d %s", n, c.what)
		}
	}
	// The end of day: every frozen day reconciles, and the desk's figures are the day's deals.
	var first, last string
	if err := testDB.QueryRowContext(ctx, "SELECT DATE_FORMAT(MIN(`tradingDay`), '%Y-%m-%d'), DATE_FORMAT(MAX(`tradingDay`), '%Y-%m-%d') FROM `fx_eod_day`").Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	bad, err := eod.Reconcile(ctx, testDB, first, last)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%d snapshots do not reconcile, the first %+v", len(bad), bad[0])
	}
	if n := count("SELECT COUNT(*) FROM `fx_eod_day`"); n != res.EODDays || n < 15 {
		t.Errorf("%d frozen days, result says %d", n, res.EODDays)
	}
	if n := count("SELECT COUNT(*) FROM (SELECT d.`tradingDay`, (SELECT COALESCE(SUM(-x.`amount`), 0) FROM `fx_deal` x WHERE x.`type` = 'COMMISSION' " +
		"AND x.`createdAt` >= (SELECT MAX(p.`rolloverAt`) FROM `fx_eod_day` p WHERE p.`tradingDay` < d.`tradingDay`) AND x.`createdAt` < d.`rolloverAt`) AS `deals`, " +
		"(SELECT COALESCE(SUM(s.`commission`), 0) FROM `fx_eod_symbol` s WHERE s.`tradingDay` = d.`tradingDay`) AS `desk` FROM `fx_eod_day` d " +
		"WHERE d.`tradingDay` > (SELECT MIN(`tradingDay`) FROM `fx_eod_day`)) x WHERE x.`deals` <> x.`desk`"); n != 0 {
		t.Errorf("%d days whose desk commission is not the day's commission deals", n)
	}
	// The tokens act as the named users.
	for _, c := range []struct {
		token string
		user  int64
		role  string
	}{{res.BigToken, res.BigUser, "trader"}, {res.SmallToken, res.SmallUser, "trader"}, {res.DealerToken, dealerUser, "dealer"}} {
		if n := count("SELECT COUNT(*) FROM `fx_api_token` WHERE `tokenHash` = ? AND `userId` = ? AND `role` = ?", auth.Hash(c.token), c.user, c.role); n != 1 {
			t.Errorf("token for user %d (%s) not stored", c.user, c.role)
		}
	}
	// A second fill is refused: the generator never writes over a desk's data.
	if _, err := Fill(ctx, testDB, size, 42, testEnd, discard()); err == nil {
		t.Error("a second fill of the same database was accepted")
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
