package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// The hedger end to end (docs/routing.md, «The hedger»): real fxdesk-web, fxdesk-feedsim and
// fxdesk-venuesim processes; the limits set over the admin API, the traders' orders over the
// trading API, the hedge read back from the venue and the hedge book's rows.

// hedgeRows is the hedge book's rows: every hedge order's status, and the open hedge positions'
// units.
type hedgeRows struct {
	orders []string          // "<status> <units>", by id
	open   []decimal.Decimal // by id
}

func (e *deskEnv) hedgeRows() hedgeRows {
	e.t.Helper()
	var h hedgeRows
	rows, err := e.sql.Query("SELECT `status`, `units` FROM `fx_hedge_order` ORDER BY `id`")
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var status string
		var units decimal.Decimal
		if err := rows.Scan(&status, &units); err != nil {
			e.t.Fatal(err)
		}
		h.orders = append(h.orders, status+" "+units.String())
	}
	rows.Close()
	rows, err = e.sql.Query("SELECT `units` FROM `fx_hedge_position` WHERE `status` = 'OPEN' ORDER BY `id`")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var units decimal.Decimal
		if err := rows.Scan(&units); err != nil {
			e.t.Fatal(err)
		}
		h.open = append(h.open, units)
	}
	return h
}

// hedgeTrades are the venue's open trades of the hedge book (client id H<id>).
func (v *venueSim) hedgeTrades() []venueTrade {
	var out []venueTrade
	for _, tr := range v.state().Trades {
		if strings.HasPrefix(tr.ClientID, "H") && tr.State == "OPEN" {
			out = append(out, tr)
		}
	}
	return out
}

// passAfter waits for the hedger's next pass of reason that starts after log line index from.
func (p *proc) passAfter(from int, reason string) int {
	p.t.Helper()
	_, i := p.waitNth(15*time.Second, from, 1, func(l logLine) bool { return l.msg() == "hedger pass" && l["reason"] == reason })
	return i
}

// Traders push EURUSD's B-book net past its limit: exactly one hedge order at the venue brings
// it back to the limit less the band, and the next passes send nothing (an A-book trader's
// position, which the venue carries already, changes nothing). With the venue down, the next
// breach raises exposure-limit-breached and writes nothing but the hedge orders' NOT_SENT rows;
// when the venue returns, the hedge goes through and the alert resolves. When the traders close,
// the hedges the exposure no longer needs are closed at the venue, whole.
func TestHedgerKeepsTheNetInsideItsLimit(t *testing.T) {
	t.Parallel()
	// A hedge order whose answer the outage cut off is resolved NOT_SENT within seconds.
	d := newABookDesk(t, "FXDESK_HEDGE_INTERVAL=500ms", "FXDESK_VENUE_TIMEOUT=2s", "FXDESK_VENUE_NOT_SENT_AFTER=3s")
	tok, acct := d.newTrader(2600, "USD", "100", "500000.00")
	extTok, extAcct := d.externalTrader(2601, "500000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/settings", `{"fxHedgeLimitLots.EURUSD":"10","fxHedgeBandLots":"2","fxHedgeMinLots":"0.5"}`, http.StatusOK, nil)
	d.wantAudit("setting", "fxHedgeLimitLots.EURUSD", "setting.update", `"value":"10"`)

	// 9 lots: inside the limit, nothing.
	nine := d.openMarket(tok, acct, "BUY", "9.00", "")
	d.web.passAfter(d.web.passAfter(d.web.lineCount(), "scheduled"), "scheduled")
	if h := d.e.hedgeRows(); len(h.orders) != 0 {
		t.Fatalf("hedge orders inside the limit: %v", h.orders)
	}
	// 3 more: traders long 12, the desk short 12 — the hedger buys 4 lots at the venue.
	d.openMarket(tok, acct, "BUY", "3.00", "")
	eventually(t, 15*time.Second, 20*time.Millisecond, "the hedge", func() bool { return len(d.e.hedgeRows().open) == 1 })
	// The A-book trader's 3 lots are the venue's already; more passes, nothing sent.
	d.openMarket(extTok, extAcct, "BUY", "3.00", "")
	from := d.web.lineCount()
	d.web.passAfter(d.web.passAfter(from, "scheduled"), "scheduled")
	h := d.e.hedgeRows()
	if strings.Join(h.orders, ",") != "FILLED 400000" || len(h.open) != 1 || !h.open[0].Equal(dec("400000")) {
		t.Fatalf("hedge book after the breach: orders %v, open %v; want one filled order of 400000", h.orders, h.open)
	}
	trades := d.venue.hedgeTrades()
	if len(trades) != 1 || !trades[0].CurrentUnits.Equal(dec("400000")) || trades[0].Tag != "fxdesk" {
		t.Fatalf("hedge trades at the venue: %+v; want one of 400000 units", trades)
	}
	if _, open := d.web.openAlert("exposure-limit-breached"); open {
		t.Fatal("exposure-limit-breached open with the net inside the limit")
	}

	// The venue goes down; traders add 3 lots: net −11 past the limit, the hedge cannot go.
	d.venue.controlJSON("fault", `{"kind":"outage","seconds":6}`, nil)
	d.openMarket(tok, acct, "BUY", "3.00", "")
	msg := d.web.waitAlert("exposure-limit-breached", true, 10*time.Second)
	if !strings.Contains(msg, "EURUSD net -1100000 units, limit 1000000") {
		t.Fatalf("alert message %q; want EURUSD's net and limit", msg)
	}
	// A try that found the venue gone wrote NOT_SENT; one made after the desk's probe saw it
	// gone is refused before any row.
	h = d.e.hedgeRows()
	if len(h.open) != 1 || h.orders[0] != "FILLED 400000" {
		t.Fatalf("hedge book with the venue down: orders %v, open %v", h.orders, h.open)
	}
	for _, o := range h.orders[1:] {
		if o != "NOT_SENT 300000" && o != "SENDING 300000" {
			t.Fatalf("a hedge order with the venue down is %q; want NOT_SENT (or SENDING in flight)", o)
		}
	}
	// The venue is back: the next try hedges 3 lots, and the alert resolves.
	eventually(t, 20*time.Second, 50*time.Millisecond, "the hedge after the outage", func() bool { return len(d.e.hedgeRows().open) == 2 })
	d.web.waitAlert("exposure-limit-breached", false, 10*time.Second)
	h = d.e.hedgeRows()
	if !h.open[1].Equal(dec("300000")) || h.orders[len(h.orders)-1] != "FILLED 300000" {
		t.Fatalf("hedge book after the outage: orders %v, open %v", h.orders, h.open)
	}
	for _, o := range h.orders[1 : len(h.orders)-1] {
		if o != "NOT_SENT 300000" {
			t.Fatalf("hedge orders of the outage: %v; want NOT_SENT only", h.orders)
		}
	}
	if trades := d.venue.hedgeTrades(); len(trades) != 2 {
		t.Fatalf("hedge trades at the venue after the outage: %+v", trades)
	}
	// At most a handful of tries in the outage (1 s backoff, capped at max(interval, 1 s)).
	if n := len(h.orders) - 2; n > 10 {
		t.Fatalf("%d NOT_SENT hedge orders in a 6 s outage; the backoff should keep it to a few", n)
	}
	// The operator's log says what happened.
	if len(d.web.matching(0, func(l logLine) bool {
		return l.msg() == "hedge not done; the next pass decides again" && l["symbol"] == "EURUSD"
	})) == 0 ||
		len(d.web.matching(0, msgIs("hedge done"))) != 2 {
		t.Fatal("the holder's log does not tell the hedges done and the one that could not be")
	}

	// The traders close 9 lots: the desk is short 6 with 7 lots of hedges, net long 1. Without
	// the 4-lot hedge it is short 3, then without the 3-lot one short 6: both closed, one per
	// pass, and the venue holds no hedge trade.
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", nine), "{}", http.StatusOK, nil)
	eventually(t, 15*time.Second, 20*time.Millisecond, "the unwind", func() bool { return len(d.e.hedgeRows().open) == 0 })
	if trades := d.venue.hedgeTrades(); len(trades) != 0 {
		t.Fatalf("hedge trades at the venue after the unwind: %+v", trades)
	}
	var closed []string
	rows, err := d.e.sql.Query("SELECT `units`, `closeReason` FROM `fx_hedge_position` WHERE `status` = 'CLOSED' ORDER BY `closedAt`, `id`")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var units decimal.Decimal
		var reason string
		if err := rows.Scan(&units, &reason); err != nil {
			t.Fatal(err)
		}
		closed = append(closed, units.String()+" "+reason)
	}
	if strings.Join(closed, ",") != "400000 DESK,300000 DESK" {
		t.Fatalf("hedge positions closed: %v; want the 4-lot one, then the 3-lot one, by the desk", closed)
	}
}
