package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"

	"fxdesk/internal/swaps"
)

// A desk whose database sessions default to a zone other than UTC — the operator's DSN sets
// time_zone, as a DSN for a server in Tokyo or Anchorage might — still stores every time as UTC
// and charges exactly the rollovers a position held: the real fxdesk-web and fxdesk-cron run on
// that DSN, a position is opened and closed through HTTP, and its times, its account's, its
// order's and its deals' are the UTC instants they happened at; a run an hour after the next
// weekday rollover charges that rollover alone (−7.50 USD for 1.00 lot long EURUSD, −22.50 on
// Wednesday). Before the desk pinned its sessions to UTC, openedAt was stored nine hours off in
// both zones, so east of UTC a rollover within nine hours went uncharged, and west of UTC a
// position was charged for a rollover before it opened.
func TestSwapsSessionZoneStoresUTC(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"+09:00", "-09:00"} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			e := newDeskEnv(t)
			cfg, err := mysql.ParseDSN(e.db.DSN)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Params["time_zone"] = "'" + zone + "'"
			e.mysqlDSN = cfg.FormatDSN()

			// The DSN does put a plain session in zone: the test can fail.
			plain, err := sql.Open("mysql", e.mysqlDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			var got string
			var offset int
			if err := plain.QueryRow("SELECT @@session.time_zone, TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW())").Scan(&got, &offset); err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"+09:00": 540, "-09:00": -540}[zone]; got != zone || offset != want {
				t.Fatalf("a plain session on the operator's DSN runs in %s, %d minutes from UTC; want %s, %d", got, offset, zone, want)
			}

			d := newSplitDeskIn(e)
			utcNow := func() time.Time {
				var now time.Time
				if err := e.sql.QueryRow("SELECT UTC_TIMESTAMP(3)").Scan(&now); err != nil {
					t.Fatal(err)
				}
				return now
			}
			start := utcNow().Add(-time.Second) // a second either side for rounding to milliseconds
			tok, usd := d.newTrader(401, "USD", "100", "10000")
			d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
			pos := d.open(tok, usd, "EURUSD", "BUY", "1.00")
			var openedAt time.Time
			if err := e.sql.QueryRow("SELECT `openedAt` FROM `fx_position` WHERE `id` = ?", pos).Scan(&openedAt); err != nil {
				t.Fatal(err)
			}
			if opened := utcNow().Add(time.Second); openedAt.Before(start) || openedAt.After(opened) {
				t.Errorf("position opened between %s and %s (UTC) is stored as opened at %s", start.Format(time.RFC3339Nano),
					opened.Format(time.RFC3339Nano), openedAt.Format(time.RFC3339Nano))
			}

			ro := firstWeekdayRolloverAfter(start)
			counts := e.cronRun(swaps.JobName, ro.At.Add(time.Hour))
			want := decimal.RequireFromString("-7.50").Mul(decimal.NewFromInt(int64(swaps.DayMultiplier(ro.Weekday(), time.Wednesday))))
			deals := e.swapDeals(pos)
			if amount, ok := deals[ro.Date]; len(deals) != 1 || !ok || !amount.Equal(want) {
				t.Fatalf("run at %s (%v): swap deals %v, want only %s: %s", ro.At.Add(time.Hour).UTC().Format(time.RFC3339), counts, deals, ro.Date, want.StringFixed(2))
			}

			var c closeResp
			must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", pos), "", http.StatusOK, &c)
			end := utcNow().Add(time.Second)
			// Every time the desk wrote for this account, by default or by NOW(3), lies between
			// the test's start and end on the UTC clock.
			var outside int
			if err := e.sql.QueryRow("SELECT "+
				"(SELECT COUNT(*) FROM `fx_account` WHERE `id` = ? AND (`createdAt` NOT BETWEEN ? AND ? OR `markedAt` NOT BETWEEN ? AND ?)) + "+
				"(SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ? AND `createdAt` NOT BETWEEN ? AND ?) + "+
				"(SELECT COUNT(*) FROM `fx_position` WHERE `id` = ? AND (`openedAt` NOT BETWEEN ? AND ? OR `closedAt` IS NULL OR `closedAt` NOT BETWEEN ? AND ?)) + "+
				"(SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` = ? AND `createdAt` NOT BETWEEN ? AND ?)",
				usd, start, end, start, end, usd, start, end, pos, start, end, start, end, usd, start, end).Scan(&outside); err != nil {
				t.Fatal(err)
			}
			if outside != 0 {
				t.Fatalf("%d stored time(s) outside [%s, %s] UTC", outside, start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
			}
			e.checkAllLedgers()
		})
	}
}
