package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// simSession announces symbol's session closed or open at the simulator.
func (d *tradingDesk) simSession(symbol string, open bool) {
	d.e.t.Helper()
	d.simControl("session", fmt.Sprintf(`{"symbol":%q,"open":%v}`, symbol, open))
}

// Stop-out behind a closed market (docs/architecture.md, «The risk engine»: the largest loser that
// can be closed now), through HTTP and the simulator: gold is the account's largest loser and its
// session is closed, so the tick that takes the account below its stop-out level closes EURUSD — at
// that tick, not at a later, deeper one — and gold stays open and watched; once its session
// reopens, its first tick below the level closes it. Σ deals = balance throughout.
func TestRiskStopOutPassesOverClosedMarket(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1600, "USD", "100", "1000.00")
	d.setQuote(tok, "XAUUSD", "2000.00", "2000.50")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders",
		fmt.Sprintf(`{"accountId":%d,"symbol":"XAUUSD","side":"BUY","type":"MARKET","volume":"0.20"}`, acct), http.StatusCreated, &o)
	if o.Position == nil {
		t.Fatalf("gold opened no position: %+v", o)
	}
	gold := o.Position.ID
	eur := d.openMarket(tok, acct, "BUY", "0.30", "")
	d.checkLedger(acct, "995.90") // commissions 2.00 and 2.10

	// Gold −510 (from 2000.50): equity 479.90 over margin 395.05 + 330.03 is 66 %, above the
	// stop-out level. Then its session closes.
	d.setQuote(tok, "XAUUSD", "1975.00", "1975.50")
	d.simSession("XAUUSD", false)
	d.web.waitLog(10*time.Second, func(l logLine) bool {
		return l.msg() == "provider changed a symbol's session" && l["symbol"] == "XAUUSD" && l["open"] == false
	})
	if s := d.positionStatus(gold); s != "OPEN" {
		t.Fatalf("gold is %s before the stop-out tick", s)
	}

	// EURUSD −186.00: 299.90 over 723.28 is 41 %. Gold cannot be closed; EURUSD is, at this
	// very quote, for −186.00, and the level is back at 76 %.
	d.setQuote(tok, "EURUSD", "1.09400", "1.09420")
	wantClose(t, "EURUSD behind closed gold", d.waitClosed(eur), "STOP_OUT", "1.09400")
	if s := d.positionStatus(gold); s != "OPEN" {
		t.Fatalf("gold is %s while its market is closed", s)
	}
	d.web.waitLog(5*time.Second, func(l logLine) bool {
		return strings.HasPrefix(l.msg(), "stop-out passed over a position it cannot close now") && l["symbol"] == "XAUUSD"
	})
	if n := d.web.countLog(func(l logLine) bool { return l.msg() == "close failed; the position stays under watch" }); n != 0 {
		t.Fatalf("%d close failures logged for a closed market", n)
	}
	d.checkLedger(acct, "809.90")

	// The session reopens and gold ticks far below the level (equity −0.10): it is closed at
	// that tick.
	d.simSession("XAUUSD", true)
	d.setQuote(tok, "XAUUSD", "1960.00", "1960.50")
	wantClose(t, "gold after its market reopened", d.waitClosed(gold), "STOP_OUT", "1960.00")
	d.checkLedgerBalanced(acct)
}
