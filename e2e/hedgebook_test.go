package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// The hedge book and HEDGE n% routing end to end (docs/routing.md, «Hedge book»): real
// fxdesk-web, fxdesk-feedsim and fxdesk-venuesim processes.

// hedgeRow is a client position's hedge in the hedge book.
type hedgeRow struct {
	OrderID, PositionID int64
	OrderStatus         string
	Status              sql.NullString
	Units               decimal.NullDecimal
	TradeID             sql.NullString
}

// hedgeOf reads the hedge order (the newest open, not a reduction) of client position id and
// its hedge position.
func (e *deskEnv) hedgeOf(clientPosition int64) (hedgeRow, bool) {
	var h hedgeRow
	var pid sql.NullInt64
	err := e.sql.QueryRow("SELECT o.`id`, o.`status`, p.`id`, p.`status`, p.`units`, p.`venueTradeId` FROM `fx_hedge_order` o "+
		"LEFT JOIN `fx_hedge_position` p ON p.`orderId` = o.`id` WHERE o.`clientPositionId` = ? AND o.`reducesPositionId` IS NULL ORDER BY o.`id` DESC LIMIT 1", clientPosition).
		Scan(&h.OrderID, &h.OrderStatus, &pid, &h.Status, &h.Units, &h.TradeID)
	if err == sql.ErrNoRows {
		return h, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	h.PositionID = pid.Int64
	return h, true
}

// hedgeRule adds {"action":"HEDGE","hedgePercent":percent} to group and returns its id.
func (d *tradingDesk) hedgeRule(group string, percent int) int64 {
	var rule struct {
		Rule struct {
			ID           int64  `json:"id"`
			Action       string `json:"action"`
			HedgePercent *int   `json:"hedgePercent"`
		} `json:"rule"`
	}
	must(d.e.t, d.web, d.admin, "POST", "/api/admin/fx/account-groups/"+group+"/routing", fmt.Sprintf(`{"action":"HEDGE","hedgePercent":%d}`, percent), http.StatusCreated, &rule)
	if rule.Rule.Action != "HEDGE" || rule.Rule.HedgePercent == nil || *rule.Rule.HedgePercent != percent {
		d.e.t.Fatalf("HEDGE rule = %+v", rule.Rule)
	}
	return rule.Rule.ID
}

// openTaggedUnits is the venue's net of open fxdesk-tagged units on symbol.
func (s venueState) openTaggedUnits(symbol string) decimal.Decimal {
	n := decimal.Zero
	for _, tr := range s.Trades {
		if tr.State == "OPEN" && tr.Tag == "fxdesk" && tr.Symbol == symbol {
			n = n.Add(tr.CurrentUnits)
		}
	}
	return n
}

// HEDGE 50%: the client's 2-lot buy is booked on the desk (INTERNAL, the rule's id on the
// order) and answered; then the holder opens 1 lot — 100,000 units — at the venue in the hedge
// book, linked to the client position. The client closing 1 lot reduces the hedge to half of
// what is left — 50,000 units — by a partial close of its venue trade, once; closing the rest
// closes the hedge: the venue holds nothing for the desk afterwards.
func TestHedgeRuleOpensAndClosesItsShareAtTheVenue(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	tok, acct := d.routedTrader(1950, "hedged")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	rule := d.hedgeRule("hedged", 50)
	d.wantAudit("routing_rule", strconv.FormatInt(rule, 10), "routing_rule.create", `"action":"HEDGE"`, `"hedgePercent":50`)

	o := d.order(tok, acct, "2.00", "hedge-1")
	if o.Order.Execution != "INTERNAL" || o.Order.RouteRuleID == nil || *o.Order.RouteRuleID != rule || o.Position == nil {
		t.Fatalf("2-lot order = %+v, want INTERNAL by rule %d with a position", o, rule)
	}
	var h hedgeRow
	eventually(t, 15*time.Second, 20*time.Millisecond, "the hedge share open in the hedge book", func() bool {
		var ok bool
		h, ok = d.e.hedgeOf(o.Position.ID)
		return ok && h.Status.String == "OPEN"
	})
	if h.OrderStatus != "FILLED" || !h.Units.Decimal.Equal(dec("100000")) {
		t.Fatalf("hedge = %+v, want FILLED and 100000 units", h)
	}
	st := d.venue.state()
	cid := "H" + strconv.FormatInt(h.OrderID, 10)
	trades := st.tradesOf(cid)
	if len(trades) != 1 || trades[0].ID != h.TradeID.String || !trades[0].InitialUnits.Equal(dec("100000")) || trades[0].Tag != "fxdesk" || st.OrderRequests[cid] != 1 {
		t.Fatalf("venue trades of %s = %+v (%d requests), want one of 100000 units", cid, trades, st.OrderRequests[cid])
	}
	if n := st.OrderRequests[strconv.FormatInt(o.Order.ID, 10)]; n != 0 {
		t.Fatalf("the client's order itself reached the venue (%d requests)", n)
	}
	// The reconciler leaves it alone (not an orphan) and the hedge monitor expects it.
	d.web.reconciledAgain(15 * time.Second)
	if tr, _ := d.venue.state().trade(h.TradeID.String); tr.State != "OPEN" {
		t.Fatalf("hedge trade after a reconcile = %+v", tr)
	}
	d.wantEveryTaggedTradeBooked()
	// The dealer sees it in the desk's book.
	var view struct {
		Book struct {
			Symbols []struct {
				Symbol             string `json:"symbol"`
				BBookNetLots       string `json:"bBookNetLots"`
				HedgeBookUnits     string `json:"hedgeBookUnits"`
				HedgeBookPositions int    `json:"hedgeBookPositions"`
			} `json:"symbols"`
		} `json:"book"`
	}
	must(t, d.web, d.admin, "GET", "/api/admin/fx/desk", "", http.StatusOK, &view)
	shown := false
	for _, s := range view.Book.Symbols {
		if s.Symbol == "EURUSD" {
			shown = s.HedgeBookUnits == "100000" && s.HedgeBookPositions == 1 && s.BBookNetLots == "-2"
		}
	}
	if !shown {
		t.Fatalf("desk book = %+v; want EURUSD with the desk short 2 lots and 100000 units in the hedge book", view.Book.Symbols)
	}
	var hb struct {
		HedgeBook struct {
			Positions []struct {
				ID               int64  `json:"id"`
				Units            string `json:"units"`
				Why              string `json:"why"`
				ClientPositionID int64  `json:"clientPositionId"`
				VenueTradeID     string `json:"venueTradeId"`
			} `json:"positions"`
			Sending []any             `json:"sending"`
			Net     map[string]string `json:"net"`
		} `json:"hedgeBook"`
	}
	must(t, d.web, d.admin, "GET", "/api/admin/fx/hedge-book", "", http.StatusOK, &hb)
	if ps := hb.HedgeBook.Positions; len(ps) != 1 || ps[0].ID != h.PositionID || ps[0].Units != "100000" || ps[0].Why != "RULE" || ps[0].ClientPositionID != o.Position.ID ||
		ps[0].VenueTradeID != h.TradeID.String || len(hb.HedgeBook.Sending) != 0 || hb.HedgeBook.Net["EURUSD"] != "100000" {
		t.Fatalf("GET /hedge-book = %+v", hb.HedgeBook)
	}

	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), `{"volume":"1.00"}`, http.StatusOK, nil)
	d.web.waitLog(15*time.Second, func(l logLine) bool {
		return l.msg() == "hedge position reduced" && l["hedge_position_id"] == float64(h.PositionID)
	})
	h, _ = d.e.hedgeOf(o.Position.ID)
	st = d.venue.state()
	if tr, _ := st.trade(h.TradeID.String); h.Status.String != "OPEN" || !h.Units.Decimal.Equal(dec("50000")) || tr.State != "OPEN" || !tr.CurrentUnits.Equal(dec("50000")) ||
		!st.openTaggedUnits("EURUSD").Equal(dec("50000")) {
		t.Fatalf("after closing 1 of 2 lots: hedge %+v, venue trade %+v, open tagged EURUSD units %s; want the hedge and the venue at 50000", h, tr, st.openTaggedUnits("EURUSD"))
	}
	// Deciding again (a reconcile, more sweeps) reduces nothing twice.
	d.web.reconciledAgain(15 * time.Second)
	var reductions int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_hedge_order` WHERE `reducesPositionId` = ? AND `status` = 'FILLED'", h.PositionID).Scan(&reductions); err != nil {
		t.Fatal(err)
	}
	if tr, _ := d.venue.state().trade(h.TradeID.String); reductions != 1 || !tr.CurrentUnits.Equal(dec("50000")) {
		t.Fatalf("after a reconcile: %d reductions, venue trade %+v; want one, at 50000", reductions, tr)
	}
	d.wantEveryTaggedTradeBooked()

	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), `{}`, http.StatusOK, nil)
	eventually(t, 15*time.Second, 20*time.Millisecond, "the hedge closed with its client position", func() bool {
		h, _ = d.e.hedgeOf(o.Position.ID)
		return h.Status.String == "CLOSED"
	})
	st = d.venue.state()
	if tr, _ := st.trade(h.TradeID.String); tr.State != "CLOSED" || !st.openTaggedUnits("EURUSD").IsZero() {
		t.Fatalf("venue after the close: hedge trade %+v, open tagged EURUSD units %s; want closed and 0", tr, st.openTaggedUnits("EURUSD"))
	}
	d.checkLedgerBalanced(acct)
}

// The holder is SIGKILLed after the venue filled the hedge order and before the desk heard (the
// venue holds its answer): the hedge order is SENDING. The replacement's boot reconcile adopts
// the trade into the hedge book by its client id; the venue saw one request (never re-sent) and
// the trade stays open (never closed as an orphan); the replacement's HEDGE sweep opens no
// second hedge; closing the client's position then closes it.
func TestHolderKilledAfterHedgeFillAdoptsItIntoTheHedgeBook(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	tok, acct := d.routedTrader(1960, "hedged-kill")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	d.hedgeRule("hedged-kill", 50)

	d.venue.controlJSON("fault", `{"kind":"hold","count":1}`, nil)
	o := d.order(tok, acct, "2.00", "hedge-kill-1")
	if o.Position == nil {
		t.Fatalf("order = %+v", o)
	}
	var h hedgeRow
	eventually(t, 15*time.Second, 10*time.Millisecond, "the hedge order SENDING", func() bool {
		var ok bool
		h, ok = d.e.hedgeOf(o.Position.ID)
		return ok && h.OrderStatus == "SENDING"
	})
	cid := "H" + strconv.FormatInt(h.OrderID, 10)
	eventually(t, 10*time.Second, 10*time.Millisecond, "the venue executed the hedge order and holds its answer", func() bool {
		st := d.venue.state()
		return st.Held == 1 && len(st.tradesOf(cid)) == 1
	})
	d.web.stop(syscall.SIGKILL)
	if h, _ = d.e.hedgeOf(o.Position.ID); h.OrderStatus != "SENDING" || h.PositionID != 0 {
		t.Fatalf("after the kill: %+v, want SENDING with no hedge position", h)
	}

	web := d.e.start("web-2", "fxdesk-web", d.env...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	web.waitLog(15*time.Second, func(l logLine) bool {
		return l.msg() == "adopted a venue trade into the hedge book for the hedge order that sent it; not reopened" && l["hedge_order_id"] == float64(h.OrderID)
	})
	d.web = web
	h, _ = d.e.hedgeOf(o.Position.ID)
	st := d.venue.state()
	trades := st.tradesOf(cid)
	if h.OrderStatus != "FILLED" || h.Status.String != "OPEN" || len(trades) != 1 || h.TradeID.String != trades[0].ID || st.OrderRequests[cid] != 1 {
		t.Fatalf("after adoption: hedge %+v, venue trades %+v, %d requests; want FILLED, one open hedge position on the one trade, one request", h, trades, st.OrderRequests[cid])
	}
	// The old connection's answer reaches nobody; more reconciles and sweeps change nothing.
	d.venue.controlJSON("release", `{}`, nil)
	web.reconciledAgain(15 * time.Second)
	st = d.venue.state()
	var hedges int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_hedge_order` WHERE `clientPositionId` = ?", o.Position.ID).Scan(&hedges); err != nil {
		t.Fatal(err)
	}
	if tr, _ := st.trade(trades[0].ID); tr.State != "OPEN" || st.OrderRequests[cid] != 1 || hedges != 1 || len(st.Trades) != 1 {
		t.Fatalf("after more reconciles: trade %+v, %d requests, %d hedge orders, %d venue trades", tr, st.OrderRequests[cid], hedges, len(st.Trades))
	}
	d.wantEveryTaggedTradeBooked()

	d.setQuote(tok, "EURUSD", "1.10000", "1.10020") // the replacement's own price stream
	must(t, web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), `{}`, http.StatusOK, nil)
	eventually(t, 15*time.Second, 20*time.Millisecond, "the adopted hedge closed with its client position", func() bool {
		h, _ = d.e.hedgeOf(o.Position.ID)
		return h.Status.String == "CLOSED"
	})
	if n := d.venue.state().openTaggedUnits("EURUSD"); !n.IsZero() {
		t.Fatalf("the venue still holds %s EURUSD units for the desk", n)
	}
	d.checkLedgerBalanced(acct)
}

// Over FIX 4.4 (docs/fix.md): the HEDGE share goes out with ClOrdID H<id>, its reduction when the
// client closes 1 of 2 lots as H<id>.c1 and its close as H<id>.c2; the venue's net follows the
// hedge book and is flat once the client closed.
func TestFIXHedgeRuleOpensAndClosesItsShare(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	if code, b := call(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups", `{"name":"hedged-fix"}`); code != http.StatusCreated {
		t.Fatalf("create group = %d %s", code, b)
	}
	tok, acct := d.newTrader(2950, "USD", "100", "100000.00")
	must(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/group", acct), `{"group":"hedged-fix"}`, http.StatusOK, nil)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	d.hedgeRule("hedged-fix", 50)

	var o routedOrder
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "SELL", "2.00", "fix-hedge-1"), http.StatusCreated, &o)
	if o.Order.Execution != "INTERNAL" || o.Position == nil {
		t.Fatalf("order = %+v", o)
	}
	var h hedgeRow
	eventually(t, 15*time.Second, 20*time.Millisecond, "the hedge share open in the hedge book", func() bool {
		var ok bool
		h, ok = d.e.hedgeOf(o.Position.ID)
		return ok && h.Status.String == "OPEN"
	})
	cid := "H" + strconv.FormatInt(h.OrderID, 10)
	st := d.venue.state()
	if vo := st.ordersOf(cid); len(vo) != 1 || !vo[0].CumQty.Equal(dec("100000")) || !h.Units.Decimal.Equal(dec("-100000")) || !st.net("EURUSD").Equal(dec("-100000")) {
		t.Fatalf("venue orders of %s: %+v, net %s, hedge %+v; want one sell of 100000", cid, vo, st.net("EURUSD"), h)
	}
	if h.TradeID.String != d.tradeOf(cid) {
		t.Fatalf("hedge position on trade %s, the journal's trade of %s is %s", h.TradeID.String, cid, d.tradeOf(cid))
	}

	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), `{"volume":"1.00"}`, http.StatusOK, nil)
	d.web.waitLog(15*time.Second, func(l logLine) bool {
		return l.msg() == "hedge position reduced" && l["hedge_position_id"] == float64(h.PositionID)
	})
	h, _ = d.e.hedgeOf(o.Position.ID)
	st = d.venue.state()
	if vo := st.ordersOf(cid + ".c1"); len(vo) != 1 || !vo[0].CumQty.Equal(dec("50000")) || !h.Units.Decimal.Equal(dec("-50000")) || !st.net("EURUSD").Equal(dec("-50000")) {
		t.Fatalf("after closing 1 of 2 lots: venue orders of %s.c1 %+v, net %s, hedge %+v; want one buy of 50000 and the hedge at -50000", cid, vo, st.net("EURUSD"), h)
	}

	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), `{}`, http.StatusOK, nil)
	eventually(t, 15*time.Second, 20*time.Millisecond, "the hedge closed with its client position", func() bool {
		h, _ = d.e.hedgeOf(o.Position.ID)
		return h.Status.String == "CLOSED"
	})
	st = d.venue.state()
	if vo := st.ordersOf(cid + ".c2"); len(vo) != 1 || !vo[0].CumQty.Equal(dec("50000")) || !st.net("EURUSD").IsZero() {
		t.Fatalf("after the close: venue orders of %s.c2 %+v, net %s; want one close of 50000 and a flat venue", cid, vo, st.net("EURUSD"))
	}
	d.checkLedgerBalanced(acct)
}
