package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/tcpproxy"
)

// A-book execution end to end (docs/architecture.md, «A-book execution and the reconciler»): real
// fxdesk-web processes trading through a real fxdesk-venuesim, both priced by one fxdesk-feedsim;
// faults are the venue simulator's and real signals to the desk's processes.

// An EXTERNAL account's open, partial close and close are booked at the venue's prices plus the
// group's markup, not at the desk's quote: each is sent while the venue's latency is long and the
// market is moved during it, so the venue fills at a price the desk did not quote when the
// request arrived (and, for the open, no longer quotes when the answer comes). P&L is exact, Σ
// deals = balance. An INTERNAL account on the same desk fills at the desk's quote and the venue
// never hears of it.
func TestExternalOpenAndCloseBookTheVenuesPrices(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	v := d.venue
	// Two points of markup on EURUSD's symbol group, re-read by the desk through an admin change.
	if _, err := d.e.sql.Exec("UPDATE `fx_symbol_group` g JOIN `fx_instrument` i ON i.`symbolGroup` = g.`name` SET g.`markupPoints` = 2 WHERE i.`symbol` = 'EURUSD'"); err != nil {
		t.Fatal(err)
	}
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"EURUSD","status":"ACTIVE"}]}`, http.StatusOK, nil)
	markup := dec("0.00002")

	tok, ext := d.externalTrader(1800, "10000.00")
	itok, internal := d.newTrader(1801, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	// The open: the venue executes after 2 s; the market moves to 1.10100/1.10120 meanwhile, and
	// on to 1.10300/1.10320 before the held answer is released.
	v.controlJSON("latency", `{"ms":2000}`, nil)
	v.controlJSON("fault", `{"kind":"hold","count":1}`, nil)
	opened := sendAsync(d.web, tok, "POST", "/api/fx/orders", marketOrder(ext, "BUY", "1.00", "ext-open"))
	var cid string
	eventually(t, 10*time.Second, 10*time.Millisecond, "the open reached the venue", func() bool {
		for k := range v.state().OrderRequests {
			cid = k
			return true
		}
		return false
	})
	d.setQuote(tok, "EURUSD", "1.10100", "1.10120")
	eventually(t, 10*time.Second, 10*time.Millisecond, "the venue executed the open and holds its answer", func() bool {
		st := v.state()
		return st.Held == 1 && len(st.tradesOf(cid)) == 1
	})
	d.setQuote(tok, "EURUSD", "1.10300", "1.10320")
	v.controlJSON("latency", `{"ms":20}`, nil)
	v.controlJSON("release", `{}`, nil)
	a := awaitAnswer(t, opened, 30*time.Second)
	if a.err != nil || a.code != http.StatusCreated {
		t.Fatalf("EXTERNAL open = %d %s (%v)", a.code, a.body, a.err)
	}
	var o orderResp
	if err := json.Unmarshal(a.body, &o); err != nil {
		t.Fatal(err)
	}
	trades := v.state().tradesOf(cid)
	if len(trades) != 1 || cid != strconv.FormatInt(o.Order.ID, 10) {
		t.Fatalf("venue trades of client id %s = %+v, desk order %d", cid, trades, o.Order.ID)
	}
	tr := trades[0]
	if !tr.Price.Equal(dec("1.1012")) || !tr.InitialUnits.Equal(dec("100000")) || tr.Tag != "fxdesk" {
		t.Fatalf("venue trade = %+v, want 100000 units filled at the ask 1.10120 the venue saw after its latency", tr)
	}
	open := tr.Price.Add(markup) // 1.10122
	if o.Order.Status != "FILLED" || o.Order.FillPrice == nil || !dec(*o.Order.FillPrice).Equal(open) || o.Position == nil ||
		!dec(o.Position.OpenPrice).Equal(open) || o.Commission == nil || o.Commission.Amount != "-7.00" {
		t.Fatalf("EXTERNAL fill = %+v position %+v commission %+v; want FILLED at the venue's %s + markup = %s", o.Order, o.Position, o.Commission, tr.Price, open)
	}
	if p := d.e.positionRow(o.Position.ID); !p.VenueTrade.Valid || p.VenueTrade.String != tr.ID {
		t.Fatalf("position %d links venue trade %v, want %s", o.Position.ID, p.VenueTrade, tr.ID)
	}
	d.checkLedger(ext, "9993.00")

	// A partial close of 0.40: sent while the venue's latency is 2 s, the market moves from
	// 1.10500/1.10520 (the desk's quote when the close arrived) to 1.10600/1.10620 meanwhile.
	pos := fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID)
	d.setQuote(tok, "EURUSD", "1.10500", "1.10520")
	v.controlJSON("latency", `{"ms":2000}`, nil)
	closesBefore := v.state().Requests["PUT /trades/{trade}/close"]
	closing := sendAsync(d.web, tok, "POST", pos, `{"volume":"0.40"}`)
	eventually(t, 10*time.Second, 10*time.Millisecond, "the partial close reached the venue", func() bool {
		return v.state().Requests["PUT /trades/{trade}/close"] > closesBefore
	})
	d.setQuote(tok, "EURUSD", "1.10600", "1.10620")
	a = awaitAnswer(t, closing, 30*time.Second)
	v.controlJSON("latency", `{"ms":20}`, nil)
	if a.err != nil || a.code != http.StatusOK {
		t.Fatalf("partial close = %d %s (%v)", a.code, a.body, a.err)
	}
	var c closeResp
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatal(err)
	}
	tr, _ = v.state().trade(tr.ID)
	// The venue closed 40,000 units at its bid 1.10600: realized (1.10600 − 1.10120) × 40,000.
	if !tr.CurrentUnits.Equal(dec("60000")) || !tr.RealizedPL.Equal(dec("192")) {
		t.Fatalf("venue trade after the partial close = %+v, want 60000 units left and 192 realized at 1.10600", tr)
	}
	// The desk books the venue's 1.10600 − markup = 1.10598: (1.10598 − 1.10122) × 40,000 = 190.40.
	if c.Deal.Amount != "190.40" || c.Position.Volume != "0.6" || c.Position.Status != "OPEN" {
		t.Fatalf("partial close = %+v, want 190.40 booked at the venue's price less markup", c)
	}
	d.checkLedger(ext, "10183.40")

	// The rest, at 1.09900/1.09920: the venue closes at its bid, the desk books 1.09898.
	d.setQuote(tok, "EURUSD", "1.09900", "1.09920")
	must(t, d.web, tok, "POST", pos, "", http.StatusOK, &c)
	tr, _ = v.state().trade(tr.ID)
	if tr.State != "CLOSED" || !tr.CurrentUnits.IsZero() || !tr.RealizedPL.Equal(dec("60")) {
		t.Fatalf("venue trade after the close = %+v, want CLOSED with 192 − 132 = 60 realized", tr)
	}
	// (1.09898 − 1.10122) × 60,000 = −134.40; the position's P&L 190.40 − 134.40 = 56.00.
	if c.Deal.Amount != "-134.40" || c.Position.Status != "CLOSED" || c.Position.RealizedProfit != "56.00" ||
		!d.e.positionRow(o.Position.ID).ClosePrice.Decimal.Equal(dec("1.09898")) {
		t.Fatalf("close = %+v, want −134.40 at 1.09898", c)
	}
	d.checkLedger(ext, "10049.00")

	// The INTERNAL account fills at the desk's own quote plus markup; the venue never hears of it.
	before := v.state()
	var intl orderResp
	must(t, d.web, itok, "POST", "/api/fx/orders", marketOrder(internal, "BUY", "0.50", "int-open"), http.StatusCreated, &intl)
	if intl.Order.FillPrice == nil || !dec(*intl.Order.FillPrice).Equal(dec("1.09922")) || intl.Position == nil {
		t.Fatalf("INTERNAL fill = %+v, want the desk's ask 1.09920 + markup", intl.Order)
	}
	if p := d.e.positionRow(intl.Position.ID); p.VenueTrade.Valid {
		t.Fatalf("INTERNAL position linked to venue trade %s", p.VenueTrade.String)
	}
	d.setQuote(itok, "EURUSD", "1.10000", "1.10020")
	must(t, d.web, itok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", intl.Position.ID), "", http.StatusOK, &c)
	// (1.09998 − 1.09922) × 50,000 = 38.00; commission 3.50.
	if c.Deal.Amount != "38.00" {
		t.Fatalf("INTERNAL close = %+v, want 38.00", c)
	}
	d.checkLedger(internal, "10034.50")
	after := v.state()
	if after.Requests["POST /orders"] != before.Requests["POST /orders"] || after.Requests["PUT /trades/{trade}/close"] != before.Requests["PUT /trades/{trade}/close"] ||
		len(after.Trades) != len(before.Trades) || after.OrderRequests[strconv.FormatInt(intl.Order.ID, 10)] != 0 {
		t.Fatalf("the venue saw the INTERNAL account's trading: requests %v → %v, trades %d → %d", before.Requests, after.Requests, len(before.Trades), len(after.Trades))
	}
	var execution string
	d.e.sql.QueryRow("SELECT `execution` FROM `fx_order` WHERE `id` = ?", intl.Order.ID).Scan(&execution)
	if execution != "INTERNAL" || d.e.orderRow(o.Order.ID).Execution != "EXTERNAL" {
		t.Fatalf("orders' execution: INTERNAL account's %q, EXTERNAL account's %q", execution, d.e.orderRow(o.Order.ID).Execution)
	}
}

// The holder is SIGKILLed after the venue filled an EXTERNAL order and before the desk heard
// (the venue holds its answer): the order is SENDING with no trade id. A replacement on the same
// host takes the lease at once and its boot reconcile adopts the venue trade by its tag: the
// order FILLED, one position linked to the trade, and the venue saw one request and holds one
// trade for that client id — nothing was sent again.
func TestHolderKilledAfterVenueFillIsAdoptedByTag(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(1810, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	v.controlJSON("fault", `{"kind":"hold","count":1}`, nil)
	pending := sendAsync(d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.50", "kill-1"))
	var id int64
	eventually(t, 10*time.Second, 10*time.Millisecond, "the order SENDING", func() bool {
		return d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ? AND `status` = 'SENDING'", acct).Scan(&id) == nil
	})
	cid := strconv.FormatInt(id, 10)
	eventually(t, 10*time.Second, 10*time.Millisecond, "the venue executed the order and holds its answer", func() bool {
		st := v.state()
		return st.Held == 1 && len(st.tradesOf(cid)) == 1
	})
	d.web.stop(syscall.SIGKILL)
	if a := awaitAnswer(t, pending, 10*time.Second); a.err == nil {
		t.Fatalf("the killed holder answered the order: %d %s", a.code, a.body)
	}
	if o := d.e.orderRow(id); o.Status != "SENDING" || len(d.e.positionsOfOrder(id)) != 0 {
		t.Fatalf("after the kill: order %+v with %d positions, want SENDING with none", o, len(d.e.positionsOfOrder(id)))
	}

	web := d.e.start("web-2", "fxdesk-web", d.env...)
	web.waitLog(5*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	if _, ok := web.findLog(msgHas("holder on this host is dead")); !ok {
		t.Error("the replacement did not reclaim the lease from the dead pid")
	}
	web.waitLog(10*time.Second, func(l logLine) bool {
		return l.msg() == "adopted a venue trade for the desk order that sent it; not reopened" && l["order_id"] == float64(id)
	})
	st := v.state()
	trades := st.tradesOf(cid)
	if len(trades) != 1 || st.OrderRequests[cid] != 1 {
		t.Fatalf("venue: %d trades and %d order requests for client id %s, want 1 and 1", len(trades), st.OrderRequests[cid], cid)
	}
	o := d.e.orderRow(id)
	ps := d.e.positionsOfOrder(id)
	if o.Status != "FILLED" || !o.FillPrice.Decimal.Equal(trades[0].Price) || len(ps) != 1 || ps[0].Status != "OPEN" ||
		ps[0].VenueTrade.String != trades[0].ID || !ps[0].Volume.Equal(dec("0.5")) || !ps[0].OpenPrice.Equal(trades[0].Price) {
		t.Fatalf("after adoption: order %+v positions %+v; want FILLED at %s with one open 0.5-lot position linked to trade %s", o, ps, trades[0].Price, trades[0].ID)
	}
	// Opened when the venue opened the trade, seconds before the replacement adopted it (a
	// rollover in between is charged), and the order keeps the venue's order id, as a fill booked
	// from its own answer does.
	if want := trades[0].OpenTime.UTC().Truncate(time.Millisecond); !ps[0].OpenedAt.Equal(want) {
		t.Errorf("adopted position opened at %s, the venue opened its trade at %s", ps[0].OpenedAt.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
	if !o.VenueOrderID.Valid || o.VenueOrderID.String == "" {
		t.Errorf("adopted order: venueOrderId %+v, want the venue's order id", o.VenueOrderID)
	}
	// Released now, the old connection's answer reaches nobody, and the next runs change nothing.
	v.controlJSON("release", `{}`, nil)
	web.reconciledAgain(10 * time.Second)
	d.wantEveryTaggedTradeBooked()
	if st := v.state(); st.OrderRequests[cid] != 1 || len(st.Trades) != 1 {
		t.Fatalf("after more reconciles: %d requests, %d trades", st.OrderRequests[cid], len(st.Trades))
	}
	d.web = web
	d.checkLedger(acct, "9996.50")
}

// The venue executes an order and its answer never comes (the client times out after 1 s):
// the trader hears 504 outcome_unknown, the row stays SENDING (no interval run can interfere:
// the interval is an hour), a resubmit with the same requestNonce answers the original order
// and sends nothing, and the reconciler (the boot run of a restarted holder) adopts the one
// trade. The venue saw one request for that client id throughout.
func TestTimeoutAfterExecutionIsResolvedNeverResent(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t, "FXDESK_VENUE_TIMEOUT=1s", "FXDESK_VENUE_INTERVAL=1h")
	v := d.venue
	tok, acct := d.externalTrader(1820, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	d.web.waitLog(10*time.Second, func(l logLine) bool { return l.msg() == "execution reconciler ran" && l["reason"] == "boot" })

	v.controlJSON("fault", `{"kind":"timeout","count":1,"seconds":5}`, nil)
	body := marketOrder(acct, "SELL", "0.20", "timeout-1")
	var e errorResp
	must(t, d.web, tok, "POST", "/api/fx/orders", body, http.StatusGatewayTimeout, &e)
	if e.Error.Code != fx.EUNKNOWN || e.Error.Message != fx.MsgVenueOutcomeUnknown {
		t.Fatalf("timeout answered %+v", e)
	}
	var id int64
	if err := d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", acct).Scan(&id); err != nil {
		t.Fatal(err)
	}
	cid := strconv.FormatInt(id, 10)
	if o := d.e.orderRow(id); o.Status != "SENDING" || len(d.e.positionsOfOrder(id)) != 0 {
		t.Fatalf("after the timeout: order %+v, want SENDING with no position", o)
	}
	if b := d.web.book(); len(b.Book.Sending) != 1 || b.Book.Sending[0].OrderID != id {
		t.Fatalf("desk book sending = %+v, want order %d", b.Book.Sending, id)
	}
	if st := v.state(); len(st.tradesOf(cid)) != 1 || st.OrderRequests[cid] != 1 {
		t.Fatalf("venue: %d trades and %d requests for %s, want the one executed", len(st.tradesOf(cid)), st.OrderRequests[cid], cid)
	}

	// The trader retries with the same nonce: the original order, nothing sent.
	var again orderResp
	code, b := call(t, d.web, tok, "POST", "/api/fx/orders", body)
	if err := json.Unmarshal(b, &again); err != nil || code != http.StatusOK || !again.Replayed || again.Order.ID != id || again.Order.Status != "SENDING" {
		t.Fatalf("resubmit = %d %s, want the original SENDING order replayed", code, b)
	}
	if st := v.state(); st.OrderRequests[cid] != 1 || st.Requests["POST /orders"] != 1 {
		t.Fatalf("the resubmit reached the venue: requests %v, for %s: %d", st.Requests, cid, st.OrderRequests[cid])
	}

	// A restarted holder's boot reconcile resolves it by the client id.
	d.web.stop(syscall.SIGTERM)
	web := d.e.start("web-2", "fxdesk-web", d.env...)
	web.waitLog(5*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	web.waitLog(10*time.Second, func(l logLine) bool {
		return l.msg() == "adopted a venue trade for the desk order that sent it; not reopened" && l["order_id"] == float64(id)
	})
	d.web = web
	st := v.state()
	trades := st.tradesOf(cid)
	ps := d.e.positionsOfOrder(id)
	if o := d.e.orderRow(id); o.Status != "FILLED" || len(trades) != 1 || len(ps) != 1 || ps[0].VenueTrade.String != trades[0].ID ||
		!o.FillPrice.Decimal.Equal(dec("1.1")) || !trades[0].CurrentUnits.Equal(dec("-20000")) {
		t.Fatalf("after the reconcile: order %+v, positions %+v, venue trades %+v", o, ps, trades)
	}
	if st.OrderRequests[cid] != 1 || st.Requests["POST /orders"] != 1 {
		t.Fatalf("the order was sent again: %d requests for %s, %d orders", st.OrderRequests[cid], cid, st.Requests["POST /orders"])
	}
	must(t, web, tok, "POST", "/api/fx/orders", body, http.StatusOK, &again)
	if !again.Replayed || again.Order.ID != id || again.Order.Status != "FILLED" || again.Position == nil || again.Position.ID != ps[0].ID {
		t.Fatalf("resubmit after the reconcile = %+v", again)
	}
	if st := v.state(); st.OrderRequests[cid] != 1 {
		t.Fatalf("%d requests for %s after the last resubmit", st.OrderRequests[cid], cid)
	}
	d.checkLedger(acct, "9998.60")
}

// The venue process is SIGKILLed. The first EXTERNAL open finds it unreachable (503 with the
// venue text, its identity row removed); from then the desk shows the venue unreachable and
// every EXTERNAL open is refused with the same text before anything is written: orders,
// positions, deals and accounts are as they were. INTERNAL opens still fill. Once a venue
// listens at the URL again the desk's probe notices and EXTERNAL opens fill through it.
func TestVenueDownRefusesExternalOpensAndWritesNothing(t *testing.T) {
	t.Parallel()
	// No scheduler in this process: its 5-minute reconcile marks accounts between snapshots.
	d := newABookDesk(t, "CRON_MODE=off")
	v := d.venue
	tok, acct := d.externalTrader(1830, "10000.00")
	itok, internal := d.newTrader(1831, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	if b := d.web.book(); !b.Book.Venue.Reachable {
		t.Fatal("the desk shows the venue unreachable before it went down")
	}

	v.kill()
	before := d.snapshot()
	refused := func(nonce string) {
		t.Helper()
		code, a := callHeaders(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", nonce))
		var e errorResp
		json.Unmarshal(a.body, &e)
		if code != http.StatusServiceUnavailable || e.Error.Message != fx.MsgVenueUnavailable || a.header.Get("Retry-After") == "" {
			t.Fatalf("EXTERNAL open %s with the venue down = %d %s (Retry-After %q), want 503 with the venue text", nonce, code, a.body, a.header.Get("Retry-After"))
		}
		if after := d.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("EXTERNAL open %s with the venue down changed the database:\nbefore %v\nafter  %v", nonce, before, after)
		}
	}
	refused("down-1") // discovers the venue is gone: connection refused, provably not sent
	if b := d.web.book(); b.Book.Venue.Reachable {
		t.Fatal("the desk shows the venue reachable after a refused connection")
	}
	d.web.waitLog(5*time.Second, msgHas("venue unreachable"))
	refused("down-2")
	refused("down-3")
	var n int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ?", acct).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d order rows for the EXTERNAL account", n)
	}

	// B-book trading does not need the venue.
	var intl orderResp
	must(t, d.web, itok, "POST", "/api/fx/orders", marketOrder(internal, "BUY", "0.10", "int-1"), http.StatusCreated, &intl)
	if intl.Order.Status != "FILLED" || intl.Position == nil {
		t.Fatalf("INTERNAL open with the venue down = %+v", intl)
	}
	d.checkLedger(internal, "9999.30")

	v.restart()
	eventually(t, 10*time.Second, 50*time.Millisecond, "the desk shows the venue reachable again", func() bool {
		return d.web.book().Book.Venue.Reachable
	})
	// The kill, the refusals and the restart can outlast the 30 s quote staleness on a loaded
	// machine: this open must fill, so it waits for the desk to show a fresh quote.
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "up-1"), http.StatusCreated, &o)
	st := v.state()
	trades := st.tradesOf(strconv.FormatInt(o.Order.ID, 10))
	if o.Order.Status != "FILLED" || o.Position == nil || len(trades) != 1 || d.e.positionRow(o.Position.ID).VenueTrade.String != trades[0].ID {
		t.Fatalf("EXTERNAL open with the venue back = %+v, venue trades %+v", o, trades)
	}
	d.checkLedger(acct, "9999.30")
}

// The venue closes an EXTERNAL position's trade itself (a venue stop-out): the reconciler
// closes the desk position with closeReason VENUE at the venue's close price, and the profit
// deal is exact.
func TestVenueStopOutClosesTheDeskPositionAtTheVenuesPrice(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(1840, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	id := d.openMarket(tok, acct, "BUY", "1.00", "")
	p := d.e.positionRow(id)
	if !p.VenueTrade.Valid || !p.OpenPrice.Equal(dec("1.1002")) {
		t.Fatalf("EXTERNAL position = %+v", p)
	}
	d.setQuote(tok, "EURUSD", "1.09500", "1.09520")
	var vc struct {
		TradeID string          `json:"tradeId"`
		Price   decimal.Decimal `json:"price"`
		Units   decimal.Decimal `json:"units"`
	}
	v.controlJSON("close-trade", fmt.Sprintf(`{"tradeId":%q}`, p.VenueTrade.String), &vc)
	if !vc.Price.Equal(dec("1.095")) || !vc.Units.Equal(dec("-100000")) {
		t.Fatalf("venue close = %+v, want all 100000 units at the bid 1.09500", vc)
	}
	closed := d.waitClosed(id)
	wantClose(t, "venue stop-out", closed, "VENUE", vc.Price.String())
	// (1.09500 − 1.10020) × 100,000 = −520.00.
	var amount decimal.Decimal
	if err := d.e.sql.QueryRow("SELECT `amount` FROM `fx_deal` WHERE `accountId` = ? AND `type` = 'PROFIT'", acct).Scan(&amount); err != nil {
		t.Fatal(err)
	}
	if !amount.Equal(dec("-520.00")) {
		t.Fatalf("profit deal = %s, want -520.00", amount)
	}
	d.checkLedger(acct, "9473.00")
	if st := v.state(); st.Requests["PUT /trades/{trade}/close"] != 0 {
		t.Fatalf("the desk sent %d closes for a trade the venue had closed", st.Requests["PUT /trades/{trade}/close"])
	}
	// Logged after the booking committed: wait for the line rather than look for it at once.
	d.web.waitLog(10*time.Second, msgIs("closed the desk side of a trade the venue closed, at the venue's price"))
}

// A trade opened at the venue by hand (no client extensions) raises venue-untagged-trade and is
// never touched: after more reconciles it is still open, with all its units, and the desk sent
// no close.
func TestUntaggedVenueTradeRaisesAnAlertAndIsNeverTouched(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	v := d.venue
	tok := d.e.issueToken(1850, false)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var u struct {
		TradeID string `json:"tradeId"`
	}
	v.controlJSON("untagged", `{"symbol":"EURUSD","units":"-10000"}`, &u)
	msg := d.web.waitAlert("venue-untagged-trade", true, 10*time.Second)
	if !strings.Contains(msg, u.TradeID) {
		t.Errorf("alert %q does not name trade %s", msg, u.TradeID)
	}
	for range 3 {
		d.web.reconciledAgain(10 * time.Second)
	}
	st := v.state()
	tr, ok := st.trade(u.TradeID)
	if !ok || tr.State != "OPEN" || !tr.CurrentUnits.Equal(dec("-10000")) || tr.Tag != "" {
		t.Fatalf("untagged trade after three reconciles = %+v (found %v), want open with -10000 units", tr, ok)
	}
	if st.Requests["PUT /trades/{trade}/close"] != 0 {
		t.Fatalf("the desk sent %d closes to the venue", st.Requests["PUT /trades/{trade}/close"])
	}
	var n int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `venueTradeId` = ?", u.TradeID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the desk booked the untagged trade as %d positions", n)
	}
}

// The holder (box-a) is SIGSTOPped past the TTL with two EXTERNAL requests on their way and a
// third arriving while it is frozen; box-b takes the lease over. Resumed, box-a must neither
// reach the venue nor write:
//
//   - a trader's close of an EXTERNAL position had passed the close gate and was reading the
//     position (its query stalled at a proxy, the only connection held) when box-a froze: on
//     resume its venue send is dropped at the gate (work=venue_send) and the venue sees no close;
//   - an EXTERNAL open of another account was in its batch's transaction (its lock round trip
//     stalled the same way): on resume its writes and the fence go in after the term moved and
//     the fence refuses them (work=fill, at=fence): no SENDING row, nothing sent;
//   - an EXTERNAL open sent to box-a while frozen is dropped at the fill gate on resume.
//
// The stalls are what make this deterministic: each request is held at a byte the test
// recognises, after the gate it passed and before the step under test, for as long as the test
// needs; box-a's other connections (its lease renewals) flow until the SIGSTOP. What this cannot
// force is a freeze in the microseconds between an open's committed SENDING row and its venue
// send: that window is covered by the same gate.Admit(VenueSend) the close hits here.
//
// By the end, after box-b's reconciles, every fxdesk-tagged open trade at the venue is linked to
// exactly one open desk position, and box-b closes the position through the venue.
func TestHolderStoppedPastTheTTLDropsLateVenueSendsAndWrites(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	feed := startFeedSim(t)
	v := startVenueSim(t, feed, "20ms")
	mp, err := tcpproxy.Start("127.0.0.1:3306")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mp.Close() })
	var (
		mu      sync.Mutex
		conn    int
		stallOn []func(query string) bool
		stalled []string
	)
	queries := tcpproxy.MySQLQueries(func(q string) {
		for i, match := range stallOn {
			if match != nil && match(q) {
				mp.HoldConn(conn)
				stalled, stallOn[i] = append(stalled, q), nil
			}
		}
	})
	mp.Tap(func(c int, b []byte) {
		mu.Lock()
		defer mu.Unlock()
		conn = c
		queries(c, b)
	})

	d := startABookDesk(e, feed, v, "web-a", "FXDESK_HOSTNAME=box-a", "FXDESK_MYSQL_DSN="+e.db.DSNVia(mp.Addr()))
	a := d.web
	tok, x1 := d.externalTrader(1860, "10000.00")
	var second accountResp
	must(t, a, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`, http.StatusCreated, &second)
	x2 := second.Account.ID
	must(t, a, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", x2), `{"amount":"10000.00"}`, http.StatusCreated, nil)
	d.moveToABook(x2)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	p1 := d.openMarket(tok, x1, "BUY", "0.10", "")
	t1 := e.positionRow(p1).VenueTrade.String
	venueBefore := v.state()
	if t1 == "" || len(venueBefore.Trades) != 1 {
		t.Fatalf("EXTERNAL position %d links %q; venue trades %+v", p1, t1, venueBefore.Trades)
	}

	// Stall the close at its read of the position and the open at its batch's row locks.
	mu.Lock()
	stallOn = []func(string) bool{
		func(q string) bool {
			return strings.Contains(q, "JOIN `fx_account` a ON a.`id` = p.`accountId` WHERE p.`id` = "+strconv.FormatInt(p1, 10)+" ")
		},
		func(q string) bool {
			return strings.Contains(q, "START TRANSACTION") && strings.Contains(q, "'late-2'")
		},
	}
	mu.Unlock()
	closing := sendAsync(a, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", p1), "")
	opening := sendAsync(a, tok, "POST", "/api/fx/orders", marketOrder(x2, "BUY", "0.10", "late-2"))
	eventually(t, 10*time.Second, 5*time.Millisecond, "the close and the open stalled on their way to MySQL", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(stalled) == 2
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.waitRowExpired(10 * time.Second)
	bEnv := append([]string{"FXDESK_FEED=" + feed.url, "FXDESK_FEED_KEY=test", "FXDESK_HOSTNAME=box-b"}, v.env()...)
	b := e.start("web-b", "fxdesk-web", bEnv...)
	b.waitLog(5*time.Second, msgHas("role: holder"))
	b.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	b.waitLog(10*time.Second, func(l logLine) bool { return l.msg() == "execution reconciler ran" && l["reason"] == "boot" })
	// Sent to the frozen process: it waits in box-a's socket (or, if the goroutine is slower
	// than the SIGCONT, arrives just after it; the gate is shut either way).
	queued := sendAsync(a, tok, "POST", "/api/fx/orders", marketOrder(x1, "BUY", "0.10", "late-3"))

	mp.Release()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.waitLog(10*time.Second, func(l logLine) bool {
		return l.msg() == "lease not confirmed; work not executed" && l["work"] == "venue_send" && l["position_id"] == float64(p1)
	})
	a.waitLog(10*time.Second, func(l logLine) bool {
		return l.msg() == "lease fence refused the write; work not executed" && l["work"] == "fill"
	})
	a.waitLog(10*time.Second, msgHas("lease lost"))
	for what, ch := range map[string]<-chan reply{"close": closing, "stalled open": opening, "open sent while frozen": queued} {
		r := awaitAnswer(t, ch, 30*time.Second)
		if r.err != nil || r.code != http.StatusServiceUnavailable {
			t.Errorf("%s answered by the resumed holder = %d %s (%v), want 503", what, r.code, r.body, r.err)
		}
	}
	m := a.metrics()
	for _, series := range []string{`fxdesk_gate_dropped_total{at="gate",work="venue_send"}`, `fxdesk_gate_dropped_total{at="fence",work="fill"}`, `fxdesk_gate_dropped_total{at="gate",work="fill"}`} {
		if val, ok := metricValue(m, series); !ok || val == "0" {
			t.Errorf("box-a %s = %q (present %v), want at least 1", series, val, ok)
		}
	}

	// Nothing of box-a's late work reached the venue or the database.
	st := v.state()
	if st.Requests["PUT /trades/{trade}/close"] != 0 || st.Requests["POST /orders"] != venueBefore.Requests["POST /orders"] || len(st.Trades) != 1 {
		t.Fatalf("the venue saw box-a's late work: requests %v (before %v), %d trades", st.Requests, venueBefore.Requests, len(st.Trades))
	}
	if tr, _ := st.trade(t1); tr.State != "OPEN" || !tr.CurrentUnits.Equal(dec("10000")) {
		t.Fatalf("venue trade %s = %+v, want still open", t1, tr)
	}
	var late int
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ? OR `requestNonce` IN ('late-2', 'late-3')", x2).Scan(&late); err != nil {
		t.Fatal(err)
	}
	if late != 0 || e.positionRow(p1).Status != "OPEN" {
		t.Fatalf("box-a's late work was written: %d orders, position %d %s", late, p1, e.positionRow(p1).Status)
	}
	if h, _ := e.row(); h.Hostname != "box-b" || h.PID != b.pid() || h.Term != 2 {
		t.Fatalf("row = %+v, want box-b term 2", h)
	}
	b.reconciledAgain(10 * time.Second)
	d.wantEveryTaggedTradeBooked()
	d.checkLedger(x1, "9999.30")
	d.checkLedger(x2, "10000.00")

	// The new holder closes it through the venue.
	d.web = b
	d.setQuote(tok, "EURUSD", "1.10100", "1.10120")
	var c closeResp
	must(t, b, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", p1), "", http.StatusOK, &c)
	// (1.10100 − 1.10020) × 10,000 = 8.00.
	if c.Deal.Amount != "8.00" || c.Position.Status != "CLOSED" {
		t.Fatalf("close through box-b = %+v", c)
	}
	if tr, _ := v.state().trade(t1); tr.State != "CLOSED" {
		t.Fatalf("venue trade %s after box-b's close = %+v", t1, tr)
	}
	d.checkLedger(x1, "10007.30")
}
