package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A-book over FIX end to end (docs/fix.md): real fxdesk-web processes trading over a FIX 4.4
// session with a real fxdesk-fixvenue, both priced by one fxdesk-feedsim; faults are the FIX
// venue's and real signals to the desk's processes.

// An EXTERNAL open and close over FIX book the venue's prices: the open fills at the venue's ask,
// its ClOrdID is the desk's order id and the position is linked to it; the close is an opposite
// order against the venue's net, booked at the venue's bid; the venue's net is back to zero.
func TestFIXExternalOpenAndCloseBookTheVenuesPrices(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(2800, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fix-open"), http.StatusCreated, &o)
	cid := strconv.FormatInt(o.Order.ID, 10)
	st := v.state()
	vo := st.ordersOf(cid)
	if len(vo) != 1 || vo[0].Status != "2" || !vo[0].AvgPx.Equal(dec("1.1002")) || !vo[0].CumQty.Equal(dec("10000")) {
		t.Fatalf("venue orders with ClOrdID %s: %+v; want one filled 10000 at the ask 1.10020", cid, vo)
	}
	if o.Order.Status != "FILLED" || o.Order.FillPrice == nil || !dec(*o.Order.FillPrice).Equal(vo[0].AvgPx) || o.Position == nil {
		t.Fatalf("EXTERNAL fill over FIX = %+v; want FILLED at the venue's %s", o.Order, vo[0].AvgPx)
	}
	if p := d.e.positionRow(o.Position.ID); p.VenueTrade.String != d.tradeOf(cid) {
		t.Fatalf("position %d links venue trade %v, want the opening execution of ClOrdID %s", o.Position.ID, p.VenueTrade, cid)
	}
	if !st.net("EURUSD").Equal(dec("10000")) {
		t.Fatalf("venue net %s, want 10000", st.net("EURUSD"))
	}

	d.setQuote(tok, "EURUSD", "1.09900", "1.09920")
	var c closeResp
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusOK, &c)
	st = v.state()
	if c.Position.Status != "CLOSED" || !d.e.positionRow(o.Position.ID).ClosePrice.Decimal.Equal(dec("1.099")) || !st.net("EURUSD").IsZero() || len(st.Orders) != 2 {
		t.Fatalf("close over FIX = %+v; venue %+v; want CLOSED at the venue's bid 1.09900 and the venue flat after 2 orders", c, st)
	}
	d.checkLedgerBalanced(acct)
}

// The holder is SIGKILLed after the venue filled an EXTERNAL order and before the desk heard (the
// venue holds the report): a replacement takes the lease, logs the session on with the stored
// sequence numbers, asks the venue about the journal's unanswered order by its ClOrdID and
// adopts the fill. One order at the venue; the report released later changes nothing.
func TestFIXHolderKilledAfterVenueFillIsAdoptedByClOrdID(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(2810, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	v.post("fault", `{"kind":"hold"}`)
	pending := sendAsync(d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.50", "fix-kill"))
	var id int64
	eventually(t, 10*time.Second, 10*time.Millisecond, "the order SENDING", func() bool {
		return d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ? AND `status` = 'SENDING'", acct).Scan(&id) == nil
	})
	cid := strconv.FormatInt(id, 10)
	eventually(t, 10*time.Second, 10*time.Millisecond, "the venue filled the order and holds its report", func() bool {
		st := v.state()
		return len(st.Held) == 1 && len(st.ordersOf(cid)) == 1 && st.ordersOf(cid)[0].Status == "2"
	})
	d.web.stop(syscall.SIGKILL)
	if a := awaitAnswer(t, pending, 10*time.Second); a.err == nil {
		t.Fatalf("the killed holder answered the order: %d %s", a.code, a.body)
	}

	web := d.e.start("web-2", "fxdesk-web", d.env...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	// A status request sent while the library still answers the venue's resend request may be
	// gap-filled and never answered: the desk asks it again after its patience (2 s at the
	// default FXDESK_VENUE_TIMEOUT of 10 s), within the same reconciler run (docs/fix.md).
	web.waitLog(15*time.Second, func(l logLine) bool {
		return l.msg() == "adopted a venue trade for the desk order that sent it; not reopened" && l["order_id"] == float64(id)
	})
	o, ps := d.e.orderRow(id), d.e.positionsOfOrder(id)
	if o.Status != "FILLED" || !o.FillPrice.Decimal.Equal(dec("1.1002")) || len(ps) != 1 || ps[0].VenueTrade.String != d.tradeOf(cid) || !ps[0].Volume.Equal(dec("0.5")) {
		t.Fatalf("after adoption: order %+v positions %+v; want FILLED at 1.10020, one 0.5-lot position linked to %s", o, ps, cid)
	}
	v.post("release", `{}`)
	web.reconciledAgain(10 * time.Second)
	web.reconciledAgain(10 * time.Second)
	st := v.state()
	if len(st.ordersOf(cid)) != 1 || len(st.Orders) != 1 || !st.net("EURUSD").Equal(dec("50000")) || len(d.e.positionsOfOrder(id)) != 1 {
		t.Fatalf("after the late report: venue %+v, desk positions %+v; want one order, 50000 net, one position", st, d.e.positionsOfOrder(id))
	}
	d.web = web
	d.checkLedgerBalanced(acct)
}

// A report lost after execution: the trader hears that the outcome is unknown, the order stays
// SENDING, and the reconciler resolves it with an OrderStatusRequest by ClOrdID — the order is
// never sent again.
func TestFIXLostReportIsResolvedByOrderStatusNeverResent(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t, "FXDESK_VENUE_TIMEOUT=1s")
	v := d.venue
	tok, acct := d.externalTrader(2820, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	// Desk order ids far above the venue's execution ids: an adoption must advance the venue
	// cursor by the execution it books, never by the order id (the reconciler would then see
	// every later snapshot as stale and plan nothing).
	if _, err := d.e.sql.Exec("ALTER TABLE `fx_order` AUTO_INCREMENT = 1000000"); err != nil {
		t.Fatal(err)
	}
	v.post("fault", `{"kind":"lose"}`)
	a := send(d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.20", "fix-lost"))
	if a.err != nil || a.code != http.StatusGatewayTimeout {
		t.Fatalf("order with its report lost = %d %s (%v); want 504", a.code, a.body, a.err)
	}
	var id int64
	if err := d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", acct).Scan(&id); err != nil {
		t.Fatal(err)
	}
	cid := strconv.FormatInt(id, 10)
	eventually(t, 15*time.Second, 50*time.Millisecond, "the reconciler resolved the order", func() bool {
		return d.e.orderRow(id).Status == "FILLED"
	})
	if st := v.state(); len(st.ordersOf(cid)) != 1 || len(st.Orders) != 1 {
		t.Fatalf("venue orders %+v; want exactly one, ClOrdID %s", st.Orders, cid)
	}
	if ps := d.e.positionsOfOrder(id); len(ps) != 1 || ps[0].VenueTrade.String != d.tradeOf(cid) || !ps[0].OpenPrice.Equal(dec("1.1002")) {
		t.Fatalf("positions %+v", ps)
	}
	var cursor, last int64
	if err := d.e.sql.QueryRow("SELECT (SELECT MAX(`lastTransactionId`) FROM `fx_venue_cursor`), (SELECT MAX(`id`) FROM `fx_fix_execution`)").Scan(&cursor, &last); err != nil {
		t.Fatal(err)
	}
	if cursor > last {
		t.Fatalf("venue cursor %d past the venue's last execution %d", cursor, last)
	}
	d.web.reconciledAgain(10 * time.Second)
	if _, ok := d.web.findLog(msgHas("venue snapshot older than")); ok {
		t.Fatal("the reconciler sees the venue's snapshots as stale after the adoption")
	}
}

// A takeover resumes the session: the holder stops (SIGTERM, the lease released), a new one
// logs on with the sequence numbers stored in MySQL — the venue, which kept its side of the
// session, accepts it only so — and closes the first holder's position over the same session.
func TestFIXTakeoverResumesSequenceNumbersFromMySQL(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	tok, acct := d.externalTrader(2830, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "SELL", "0.10", "fix-seq"), http.StatusCreated, &o)
	d.web.stop(syscall.SIGTERM)
	out1, in1 := d.seqNums()

	web := d.e.start("web-2", "fxdesk-web", d.env...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	d.web = web
	d.setQuote(tok, "EURUSD", "1.09900", "1.09920")
	var c closeResp
	must(t, web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusOK, &c)
	// The incoming number is written a few ms after it moves.
	var out2, in2 int
	eventually(t, 5*time.Second, 10*time.Millisecond, "the sequence numbers stored past the first holder's", func() bool {
		out2, in2 = d.seqNums()
		return out2 > out1 && in2 > in1
	})
	if out1 < 3 {
		t.Fatalf("stored sequence numbers out/in %d/%d before the takeover, %d/%d after: want them carried on, not reset", out1, in1, out2, in2)
	}
	if _, refused := web.findLog(msgHas("FIX session logged out")); refused {
		t.Fatal("the new holder's session was refused before it logged on (its sequence numbers)")
	}
	if st := d.venue.state(); !st.net("EURUSD").IsZero() || len(st.Orders) != 2 {
		t.Fatalf("venue %+v; want flat after two orders", st)
	}
	d.checkLedgerBalanced(acct)
}

// The venue closes positions itself: all of its net position's share of one desk trade and part
// of another's (the venue reduces its net oldest trade first). The reconciler closes the first
// desk position and books the second's partial close, each at the venue's price, once.
func TestFIXVenueSideCloseAndPartialAreBookedAtTheVenuesPrice(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(2840, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var a, b orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fix-vs-a"), http.StatusCreated, &a)
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fix-vs-b"), http.StatusCreated, &b)

	d.setQuote(tok, "EURUSD", "1.09800", "1.09820")
	v.post("close", `{"symbol":"EURUSD","units":"14000"}`)
	eventually(t, 15*time.Second, 50*time.Millisecond, "the reconciler booked the venue's closes", func() bool {
		pa, pb := d.e.positionRow(a.Position.ID), d.e.positionRow(b.Position.ID)
		return pa.Status == "CLOSED" && pb.Volume.Equal(dec("0.06"))
	})
	d.web.reconciledAgain(10 * time.Second)
	pa, pb := d.e.positionRow(a.Position.ID), d.e.positionRow(b.Position.ID)
	if !pa.ClosePrice.Decimal.Equal(dec("1.098")) || pa.CloseReason.String != "VENUE" || pb.Status != "OPEN" || !pb.Volume.Equal(dec("0.06")) {
		t.Fatalf("after the venue's close of 14000: %+v and %+v; want the first CLOSED (VENUE) at the bid 1.09800, the second 0.06 open", pa, pb)
	}
	var closes int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` = ? AND `positionId` IN (?, ?) AND `type` = 'PROFIT'", acct, a.Position.ID, b.Position.ID).Scan(&closes); err != nil {
		t.Fatal(err)
	}
	if closes != 2 {
		t.Fatalf("%d close deals booked, want 2 (one per position share)", closes)
	}
	if st := v.state(); !st.net("EURUSD").Equal(dec("6000")) || len(st.Orders) != 3 {
		t.Fatalf("venue %+v; want net 6000 after 3 orders (the desk sent nothing more)", st)
	}
	d.checkLedgerBalanced(acct)
}

// The session dropped in the middle of a burst of closes: the library reconnects and resends what
// the venue missed, the venue executes each close once, and the desk books each position's close
// once. Closes refused while the session was down are refused to the trader (nothing sent) and
// succeed when asked again.
func TestFIXSessionDroppedMidBurstBooksEachFillOnce(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(2850, "100000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	const n = 24
	ids := make([]int64, n)
	for i := range n {
		var o orderResp
		must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.01", fmt.Sprintf("fix-burst-%d", i)), http.StatusCreated, &o)
		ids[i] = o.Position.ID
	}
	// The closes need a fresh quote (a loaded machine may have spent the 30 s staleness on the
	// opens): the desk showing it again is the signal that it is.
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	answers := make([]<-chan reply, n)
	for i, id := range ids {
		answers[i] = sendAsync(d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", id), "")
		if i == n/2 {
			v.post("drop", `{}`)
		}
	}
	refused := 0
	for i := range ids {
		a := awaitAnswer(t, answers[i], 30*time.Second)
		switch {
		case a.err == nil && a.code == http.StatusOK:
		case a.err == nil && a.code == http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("close %d = %d %s (%v)", i, a.code, a.body, a.err)
		}
	}
	d.web.waitLog(15*time.Second, msgHas("FIX session logged out"))
	eventually(t, 10*time.Second, 20*time.Millisecond, "the session back", func() bool { return v.state().LoggedOn })
	// These closes must succeed, and on a loaded machine the drop, the answers and the reconnect
	// can outlast the quote's staleness or a renew of the lease (a lapsed holder refuses at its
	// gate with the same 503 text): they wait for a fresh quote and a trusted lease.
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	eventually(t, 20*time.Second, 20*time.Millisecond, "the holder trusting its lease", func() bool { return d.web.desk().Lease.Trusted })
	for _, id := range ids {
		if d.e.positionRow(id).Status == "OPEN" {
			must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", id), "", http.StatusOK, nil)
		}
	}
	st := v.state()
	if !st.net("EURUSD").IsZero() || len(st.Orders) != 2*n {
		t.Fatalf("venue net %s after %d orders; want flat after %d (%d closes were refused while the session was down)", st.net("EURUSD"), len(st.Orders), 2*n, refused)
	}
	for _, id := range ids {
		var deals int
		if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `positionId` = ? AND `type` = 'PROFIT'", id).Scan(&deals); err != nil {
			t.Fatal(err)
		}
		if p := d.e.positionRow(id); p.Status != "CLOSED" || deals != 1 {
			t.Fatalf("position %d: %s with %d close deals; want CLOSED with one", id, p.Status, deals)
		}
	}
	d.checkLedgerBalanced(acct)
}

// FXDESK_FIX_SESSION=sim: the bundled FIX venue runs inside the web process, priced from the
// desk's quotes, for single-process installs and demos. A restarted process starts a new venue,
// and its session starts over with it instead of being refused for its stored sequence numbers.
func TestFIXInProcessVenueTradesAndSurvivesARestart(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	feed := startFeedSim(t)
	td, env := startExternalDesk(e, feed, []string{"FXDESK_VENUE=fix", "FXDESK_FIX_SESSION=sim", "FXDESK_VENUE_INTERVAL=500ms"}, "web")
	td.web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	tok, acct := td.externalTrader(2860, "10000.00")
	td.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, td.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fix-sim-1"), http.StatusCreated, &o)
	if o.Order.FillPrice == nil || !dec(*o.Order.FillPrice).Equal(dec("1.1002")) {
		t.Fatalf("in-process FIX venue fill = %+v, want the desk's ask 1.10020", o.Order)
	}
	// Enough traffic that a session which did not start over could not catch up with the new
	// venue's sequence numbers by reconnecting a few times.
	for i := range 10 {
		must(t, td.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.01", fmt.Sprintf("fix-sim-more-%d", i)), http.StatusCreated, nil)
	}
	td.web.stop(syscall.SIGTERM)
	fd := &fixDesk{tradingDesk: td}
	out1, _ := fd.seqNums()
	web := e.start("web-2", "fxdesk-web", env...)
	web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	if _, refused := web.findLog(msgHas("FIX session logged out")); refused {
		t.Fatal("the restarted desk's session was refused before it logged on: it did not start over with the new venue")
	}
	td.web = web
	td.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	must(t, web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fix-sim-2"), http.StatusCreated, &o)
	if o.Order.Status != "FILLED" {
		t.Fatalf("after the restart: %+v", o.Order)
	}
	// The stored outgoing number is a reservation ahead of what was sent: the numbers the new
	// session sent are read from its stored messages (written a few ms after they leave).
	var last int
	eventually(t, 5*time.Second, 10*time.Millisecond, "the restarted session's messages stored", func() bool {
		err := e.sql.QueryRow("SELECT COALESCE(MAX(`msgseqnum`), 0) FROM `fx_fix_messages`").Scan(&last)
		return err == nil && last > 0
	})
	if last >= out1 {
		t.Fatalf("the restarted session sent up to sequence number %d, the first stopped at %d: it did not start over", last, out1)
	}
}
