package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/testkit/tcpproxy"
)

// The risk engine end to end (docs/architecture.md, «The risk engine»): the real fxdesk-web holder
// fed by a test-driven simulator; every outcome is read from the database the engine writes to.

// waitRiskReady waits for the engine's boot sweep: from then on every tick is evaluated.
func waitRiskReady(p *proc) {
	p.waitLog(10*time.Second, func(l logLine) bool { return l.msg() == "risk sweep" && l["reason"] == "boot" })
	p.waitLog(10*time.Second, msgIs(msgRiskWatching))
}

// msgRiskWatching is the holder's line once its risk view is loaded and swept: from then on it
// admits fills and its /readyz is ready.
const msgRiskWatching = "risk engine watching the desk"

// openMarket opens a MARKET position and returns its id.
func (d *tradingDesk) openMarket(tok string, acct int64, side, volume, stops string) int64 {
	t := d.e.t
	t.Helper()
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders",
		fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":%q,"type":"MARKET","volume":%q%s}`, acct, side, volume, stops), http.StatusCreated, &o)
	if o.Position == nil {
		t.Fatalf("market %s opened no position: %+v", side, o)
	}
	return o.Position.ID
}

// closedPosition is what the engine (or a trader) wrote when it closed a position.
type closedPosition struct {
	Reason string
	Price  decimal.Decimal
}

// waitClosed polls the position row until it is CLOSED, failing at the deadline.
func (d *tradingDesk) waitClosed(id int64) closedPosition {
	t := d.e.t
	t.Helper()
	var status string
	var reason sql.NullString
	var price decimal.NullDecimal
	eventually(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("position %d closed", id), func() bool {
		if err := d.e.sql.QueryRow("SELECT `status`, `closeReason`, `closePrice` FROM `fx_position` WHERE `id` = ?", id).Scan(&status, &reason, &price); err != nil {
			t.Fatal(err)
		}
		return status == "CLOSED"
	})
	return closedPosition{Reason: reason.String, Price: price.Decimal}
}

// positionStatus reads a position's status now.
func (d *tradingDesk) positionStatus(id int64) string {
	var s string
	if err := d.e.sql.QueryRow("SELECT `status` FROM `fx_position` WHERE `id` = ?", id).Scan(&s); err != nil {
		d.e.t.Fatal(err)
	}
	return s
}

// waitFilled polls the order row until it leaves PENDING and returns its fill price and the
// open price of the position it opened.
func (d *tradingDesk) waitFilled(id int64) (fill, open decimal.Decimal) {
	t := d.e.t
	t.Helper()
	var status string
	var fp decimal.NullDecimal
	eventually(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("order %d out of PENDING", id), func() bool {
		if err := d.e.sql.QueryRow("SELECT `status`, `fillPrice` FROM `fx_order` WHERE `id` = ?", id).Scan(&status, &fp); err != nil {
			t.Fatal(err)
		}
		return status != "PENDING"
	})
	if status != "FILLED" {
		t.Fatalf("order %d is %s, want FILLED", id, status)
	}
	if err := d.e.sql.QueryRow("SELECT `openPrice` FROM `fx_position` WHERE `orderId` = ?", id).Scan(&open); err != nil {
		t.Fatalf("order %d filled without a position: %v", id, err)
	}
	return fp.Decimal, open
}

func (d *tradingDesk) orderStatus(id int64) string {
	var s string
	if err := d.e.sql.QueryRow("SELECT `status` FROM `fx_order` WHERE `id` = ?", id).Scan(&s); err != nil {
		d.e.t.Fatal(err)
	}
	return s
}

func wantClose(t *testing.T, what string, got closedPosition, reason, price string) {
	t.Helper()
	if got.Reason != reason || !got.Price.Equal(decimal.RequireFromString(price)) {
		t.Fatalf("%s closed with reason %q at %s, want %s at %s", what, got.Reason, got.Price, reason, price)
	}
}

// SL and TP on both sides: a buy's on the bid, a sell's on the ask, each closed at the market
// price that triggered it; Σ deals = balance after each move.
func TestRiskStopsBothSides(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1100, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	buySL := d.openMarket(tok, acct, "BUY", "0.10", `,"sl":"1.09500"`)
	buyTP := d.openMarket(tok, acct, "BUY", "0.10", `,"tp":"1.10500"`)
	sellSL := d.openMarket(tok, acct, "SELL", "0.10", `,"sl":"1.10500"`)
	sellTP := d.openMarket(tok, acct, "SELL", "0.10", `,"tp":"1.09600"`)
	d.checkLedger(acct, "9997.20") // four commissions of 0.70

	// Down: the buy's SL (bid 1.09500 ≤ 1.09500) and the sell's TP (ask 1.09520 ≤ 1.09600).
	d.setQuote(tok, "EURUSD", "1.09500", "1.09520")
	wantClose(t, "buy SL", d.waitClosed(buySL), "SL", "1.09500")   // (1.09500 − 1.10020) × 10,000 = −52.00
	wantClose(t, "sell TP", d.waitClosed(sellTP), "TP", "1.09520") // (1.10000 − 1.09520) × 10,000 = 48.00
	if s := d.positionStatus(buyTP) + d.positionStatus(sellSL); s != "OPENOPEN" {
		t.Fatalf("untriggered positions = %s", s)
	}
	d.checkLedger(acct, "9993.20")

	// Up: the buy's TP (bid 1.10600 ≥ 1.10500) and the sell's SL (ask 1.10620 ≥ 1.10500).
	d.setQuote(tok, "EURUSD", "1.10600", "1.10620")
	wantClose(t, "buy TP", d.waitClosed(buyTP), "TP", "1.10600")   // +58.00
	wantClose(t, "sell SL", d.waitClosed(sellSL), "SL", "1.10620") // −62.00
	d.checkLedger(acct, "9989.20")
}

// A gap through a stop closes at the gapped price, never at the stop.
func TestRiskGapThroughStop(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1200, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	id := d.openMarket(tok, acct, "BUY", "0.10", `,"sl":"1.09500"`)
	d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
	wantClose(t, "gapped buy", d.waitClosed(id), "SL", "1.08000")
	d.checkLedger(acct, "9797.30") // −0.70 commission, (1.08000 − 1.10020) × 10,000 = −202.00

	// The close is counted by reason and result, and its own time is in the histogram (observed
	// before the close was handed to the database, so already there).
	body := d.web.metrics()
	if n, _ := metricValue(body, "fxdesk_risk_own_time_seconds_count"); n != "1" {
		t.Fatalf("fxdesk_risk_own_time_seconds_count = %q, want 1", n)
	}
	// Counted when the executor returns, just after the commit the test already saw.
	eventually(t, 5*time.Second, 20*time.Millisecond, `fxdesk_closes_total{reason="SL",result="closed"} = 1`, func() bool {
		n, _ := metricValue(d.web.metrics(), `fxdesk_closes_total{reason="SL",result="closed"}`)
		return n == "1"
	})
}

// Each resting type fills when its side of the market reaches it, at the market price (the
// sell stop is gapped through and fills below its price).
func TestRiskPendingOrdersFill(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1300, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	place := func(side, typ, price string) int64 {
		var o orderResp
		must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":%q,"type":%q,"volume":"0.10","price":%q}`,
			acct, side, typ, price), http.StatusCreated, &o)
		return o.Order.ID
	}
	buyLimit := place("BUY", "LIMIT", "1.09000")
	sellStop := place("SELL", "STOP", "1.09500")
	sellLimit := place("SELL", "LIMIT", "1.10800")
	buyStop := place("BUY", "STOP", "1.11000")

	steps := []struct {
		bid, ask string
		order    int64
		fill     string
	}{
		{"1.09400", "1.09420", sellStop, "1.09400"},  // bid ≤ 1.09500, gapped: fills at the bid
		{"1.08900", "1.08920", buyLimit, "1.08920"},  // ask ≤ 1.09000
		{"1.10900", "1.10920", sellLimit, "1.10900"}, // bid ≥ 1.10800
		{"1.11100", "1.11120", buyStop, "1.11120"},   // ask ≥ 1.11000
	}
	for i, s := range steps {
		d.setQuote(tok, "EURUSD", s.bid, s.ask)
		fill, open := d.waitFilled(s.order)
		if want := decimal.RequireFromString(s.fill); !fill.Equal(want) || !open.Equal(want) {
			t.Fatalf("step %d: order %d filled at %s, position opened at %s; want %s", i, s.order, fill, open, s.fill)
		}
		// The orders of later steps were not reached yet.
		for _, later := range steps[i+1:] {
			if st := d.orderStatus(later.order); st != "PENDING" {
				t.Fatalf("step %d: order %d is %s before its price", i, later.order, st)
			}
		}
	}
	d.checkLedger(acct, "9997.20") // four commissions of 0.70
}

// Stop-out closes the largest loser first and stops once the level is back above the
// stop-out level; the margin call is raised on the way down.
func TestRiskStopOutLargestLoserFirst(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1400, "USD", "100", "1000.00")
	watchTok, watcher := d.newTrader(1401, "USD", "100", "1000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	small := d.openMarket(tok, acct, "BUY", "0.20", "")
	large := d.openMarket(tok, acct, "BUY", "0.50", "")
	// A sentinel on another account: its TP is reached only by the last move, so once it has
	// closed, every close due at the earlier tick has been handed to the database before it.
	sentinel := d.openMarket(watchTok, watcher, "SELL", "0.01", `,"tp":"1.09100"`)
	d.checkLedger(acct, "995.10")

	// Bid 1.09120: equity 995.10 − 0.7 × 100,000 × 0.009 = 365.10 over margin 700 × 1.0913 =
	// 763.91 is 47.79 % ≤ 50 %. Closing the large buy (−450.00) leaves 0.20 lots: 365.10 over
	// 218.26 is 167 %, above the stop-out level, so the small buy stays open.
	d.setQuote(tok, "EURUSD", "1.09120", "1.09140")
	wantClose(t, "largest loser", d.waitClosed(large), "STOP_OUT", "1.09120")
	d.checkLedger(acct, "545.10")

	d.setQuote(tok, "EURUSD", "1.09080", "1.09100")
	wantClose(t, "sentinel", d.waitClosed(sentinel), "TP", "1.09100")
	if s := d.positionStatus(small); s != "OPEN" {
		t.Fatalf("the smaller loser is %s after the level recovered", s)
	}
	var stopOuts int
	d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ? AND `closeReason` = 'STOP_OUT'", acct).Scan(&stopOuts)
	if stopOuts != 1 {
		t.Fatalf("%d stop-out closes, want 1", stopOuts)
	}
	d.checkLedger(acct, "545.10")

	// The engine raises the alert on its alert worker, after the tick that crossed the level:
	// it lands in the inbox shortly after, not necessarily before the closes are read.
	eventually(t, 10*time.Second, 50*time.Millisecond, "a margin-call alert in the inbox", func() bool {
		var alerts struct {
			Alerts []struct{ Code, Message string }
		}
		must(t, d.web, d.admin, "GET", "/api/admin/fx/alerts", "", http.StatusOK, &alerts)
		for _, a := range alerts.Alerts {
			if a.Code == "margin-call" {
				return true
			}
		}
		return false
	})
	// The account's own record: one stop-out told beside its close, and the margin call told
	// once when it began and once when the close brought the level back above it.
	eventually(t, 10*time.Second, 50*time.Millisecond, "the margin call's start and end told", func() bool {
		var n int
		d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `accountId` = ? AND `type` = 'account.margin_call_cleared'", acct).Scan(&n)
		return n > 0
	})
	var told []string
	rows, err := d.e.sql.Query("SELECT `type` FROM `fx_event` WHERE `accountId` = ? AND `type` LIKE 'account.%' ORDER BY `id`", acct)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ty string
		rows.Scan(&ty)
		told = append(told, ty)
	}
	rows.Close()
	var called bool
	d.e.sql.QueryRow("SELECT `marginCallAt` IS NOT NULL FROM `fx_account` WHERE `id` = ?", acct).Scan(&called)
	stops, calls := 0, []string{}
	for _, ty := range told {
		if ty == "account.stop_out" {
			stops++
		} else {
			calls = append(calls, ty)
		}
	}
	if stops != 1 || len(calls) != 2 || calls[0] != "account.margin_call" || calls[1] != "account.margin_call_cleared" || called {
		t.Fatalf("account events %v (margin call recorded now: %v), want one account.stop_out and the margin call's start and end", told, called)
	}
}

// A trader's close racing a triggered stop: each position ends with exactly one close and one
// PROFIT deal, and Σ deals = balance.
func TestRiskTraderCloseRacesStop(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1500, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	ids := make([]int64, 10)
	for i := range ids {
		ids[i] = d.openMarket(tok, acct, "BUY", "0.10", `,"sl":"1.09500"`)
	}
	var wg sync.WaitGroup
	codes := make([]int, len(ids))
	wg.Go(func() { d.setQuote(tok, "EURUSD", "1.09400", "1.09420") })
	for i, id := range ids {
		wg.Go(func() { codes[i], _ = call(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", id), "") })
	}
	wg.Wait()
	for i, id := range ids {
		if codes[i] != http.StatusOK && codes[i] != http.StatusConflict {
			t.Fatalf("trader close of %d = %d", id, codes[i])
		}
		c := d.waitClosed(id)
		if c.Reason != "CLIENT" && c.Reason != "SL" {
			t.Fatalf("position %d closed with reason %q", id, c.Reason)
		}
		if codes[i] == http.StatusOK && c.Reason != "CLIENT" || codes[i] == http.StatusConflict && c.Reason != "SL" {
			t.Fatalf("position %d: trader close answered %d but the close reason is %s", id, codes[i], c.Reason)
		}
		var profits int
		d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `positionId` = ? AND `type` = 'PROFIT'", id).Scan(&profits)
		if profits != 1 {
			t.Fatalf("position %d has %d PROFIT deals, want 1", id, profits)
		}
	}
	d.checkLedgerBalanced(acct)
}

// checkLedgerBalanced asserts Σ deals = balance = the last deal's balanceAfter.
func (d *tradingDesk) checkLedgerBalanced(account int64) {
	t := d.e.t
	t.Helper()
	var bal decimal.Decimal
	if err := d.e.sql.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", account).Scan(&bal); err != nil {
		t.Fatal(err)
	}
	d.checkLedger(account, bal.String())
}

// The lease gate: with the holder's database cut past its trust deadline, a move through a
// stop executes nothing; once the connection returns and a renew succeeds, the lease_restored
// sweep closes the position at the price of that moment.
func TestRiskLeaseGapThenRestoredSweep(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	sim := startFeedSim(t)
	mp, err := tcpproxy.Start("127.0.0.1:3306")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mp.Close() })
	web := e.start("web", "fxdesk-web", "FXDESK_FEED="+sim.url, "FXDESK_FEED_KEY=test", "FXDESK_MYSQL_DSN="+e.db.DSNVia(mp.Addr()))
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	// The gap below is the row's to open and close: the holder must hold by the row first (a boot
	// claim MySQL answered late is granted by Redis until the next renew).
	web.waitRowGrant(10 * time.Second)
	d := &tradingDesk{e: e, sim: sim, web: web, admin: e.adminToken()}
	waitRiskReady(web)
	tok, acct := d.newTrader(1600, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	// A desk-priced order needs the lease trusted now, not only won at boot.
	eventually(t, 10*time.Second, 20*time.Millisecond, "the holder trusts its lease", func() bool {
		s := web.desk()
		return s.Lease != nil && s.Lease.Trusted
	})
	id := d.openMarket(tok, acct, "BUY", "0.10", `,"sl":"1.09500"`)

	// The rail is opened while MySQL answers (it reads the instrument list once) and then
	// shows, through the outage, each quote the desk accepted.
	rail := d.openRail(tok, "EURUSD")
	// A slow renew under load may have lapsed the lease (and restored it) before the cut: the
	// waits for the cut's own lapse, restore and sweep count past the lines already read.
	lapsed := msgHas("not confirmed past its trust window")
	restored := msgHas("confirmed again after a gap")
	sweep := func(l logLine) bool { return l.msg() == "risk sweep" && l["reason"] == "lease_restored" }
	nLapsed, nRestored, nSweep := web.countLog(lapsed), web.countLog(restored), web.countLog(sweep)
	mp.Cut()
	web.waitNth(10*time.Second, 0, nLapsed+1, lapsed)
	d.simQuote("EURUSD", "1.09400", "1.09420")
	rail.await(t, "EURUSD", "1.09400", "1.09420")
	drop := web.waitLog(5*time.Second, func(l logLine) bool {
		return l.msg() == "lease not confirmed; close not executed" && l["position_id"] == float64(id)
	})
	if drop["reason"] != "SL" {
		t.Fatalf("dropped close = %v", drop)
	}
	// The price moves on while the lease is unconfirmed; the sweep must use the latest one.
	d.simQuote("EURUSD", "1.09300", "1.09320")
	rail.await(t, "EURUSD", "1.09300", "1.09320")
	if s := d.positionStatus(id); s != "OPEN" {
		t.Fatalf("position %d is %s while the lease was not confirmed", id, s)
	}

	mp.Restore()
	web.waitNth(15*time.Second, 0, nRestored+1, restored)
	web.waitNth(10*time.Second, 0, nSweep+1, sweep)
	wantClose(t, "swept buy", d.waitClosed(id), "SL", "1.09300")
	d.checkLedger(acct, "9927.30") // −0.70 commission, (1.09300 − 1.10020) × 10,000 = −72.00
	if _, ok := web.findLog(msgIs("lease not confirmed; risk sweep not executed")); ok {
		t.Fatal("the lease_restored sweep was dropped")
	}
}

// marketsRail is an open subscription to the desk's markets rail.
type marketsRail struct{ sc *bufio.Scanner }

// openRail subscribes to symbol on the desk's rail until the test ends.
func (d *tradingDesk) openRail(token, symbol string) *marketsRail {
	t := d.e.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.web.addr+"/api/fx/markets/stream?symbols="+symbol, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("markets rail = %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("markets rail closed before its greeting")
	}
	return &marketsRail{sc: sc}
}

// await reads the rail until the desk shows symbol at exactly bid/ask.
func (r *marketsRail) await(t *testing.T, symbol, bid, ask string) {
	t.Helper()
	for r.sc.Scan() {
		line := r.sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var ev struct{ Symbol, Bid, Ask string }
		json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
		if ev.Symbol == symbol && ev.Bid == bid && ev.Ask == ask {
			return
		}
	}
	t.Fatalf("the desk never showed %s %s/%s", symbol, bid, ask)
}

// simQuote sets a price at the simulator without waiting for the desk.
func (d *tradingDesk) simQuote(symbol, bid, ask string) {
	d.e.t.Helper()
	d.simControl("quote", quoteBody(symbol, bid, ask))
}

// quoteBody is the simulator's /control/quote body for one price.
func quoteBody(symbol, bid, ask string) string {
	return fmt.Sprintf(`{"symbol":%q,"bid":%s,"ask":%s}`, symbol, bid, ask)
}

// simControl posts a JSON body to the simulator's /control/<what> endpoint.
func (d *tradingDesk) simControl(what, body string) {
	d.e.t.Helper()
	if err := d.sim.control(what, body); err != nil {
		d.e.t.Fatal(err)
	}
}

// control posts a JSON body to /control/<what>. It only returns the error, so a goroutine other
// than the test's own may call it.
func (s *feedSim) control(what, body string) error {
	r, err := http.Post(s.base+"/control/"+what, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("control/%s %s = %d", what, body, r.StatusCode)
	}
	return nil
}
