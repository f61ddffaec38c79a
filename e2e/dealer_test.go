package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// A gap that stops out two accounts below zero, through HTTP and the simulator: the one in a
// group with negative balance protection (the default) ends at exactly 0.00 with one ADJUSTMENT
// deal, an alert and a count; the one in a group without it keeps its negative balance. Σ deals =
// balance on both.
func TestNBPGapStopOut(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, protected := d.newTrader(1700, "USD", "100", "1000.00")
	var a accountResp
	must(t, d.web, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`, http.StatusCreated, &a)
	bare := a.Account.ID
	must(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", bare), `{"amount":"1000.00"}`, http.StatusCreated, nil)
	// A group without protection, made in SQL (its routes belong elsewhere); the instruments PUT
	// makes the holder re-read its catalog now rather than within 5 s.
	if _, err := d.e.sql.Exec("INSERT INTO `fx_account_group` (`name`, `negativeBalanceProtection`) VALUES ('no-nbp', FALSE)"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.e.sql.Exec("UPDATE `fx_account` SET `accountGroup` = 'no-nbp' WHERE `id` = ?", bare); err != nil {
		t.Fatal(err)
	}
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"EURUSD","status":"ACTIVE"}]}`, http.StatusOK, nil)

	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	p1 := d.openMarket(tok, protected, "BUY", "0.50", "")
	p2 := d.openMarket(tok, bare, "BUY", "0.50", "")
	d.checkLedger(protected, "996.50") // commission 3.50
	// 300 pips down in one tick: 0.5 × 100,000 × (1.07000 − 1.10020) = −1,510.00 each.
	d.setQuote(tok, "EURUSD", "1.07000", "1.07020")
	wantClose(t, "protected account", d.waitClosed(p1), "STOP_OUT", "1.07000")
	wantClose(t, "unprotected account", d.waitClosed(p2), "STOP_OUT", "1.07000")
	d.checkLedger(protected, "0.00")
	d.checkLedger(bare, "-513.50")

	adjustments := func(account int64) (n int, sum decimal.Decimal) {
		if err := d.e.sql.QueryRow("SELECT COUNT(*), COALESCE(SUM(`amount`), 0) FROM `fx_deal` WHERE `accountId` = ? AND `type` = 'ADJUSTMENT'", account).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		return n, sum
	}
	if n, sum := adjustments(protected); n != 1 || !sum.Equal(decimal.RequireFromString("513.50")) {
		t.Fatalf("protected account: %d ADJUSTMENT deals for %s, want one for 513.50", n, sum)
	}
	if n, _ := adjustments(bare); n != 0 {
		t.Fatalf("unprotected account: %d ADJUSTMENT deals", n)
	}
	eventually(t, 5*time.Second, 20*time.Millisecond, "negative-balance-reset raised once", func() bool {
		var count int
		d.e.sql.QueryRow("SELECT COALESCE(SUM(`count`), 0) FROM `fx_execution_alert` WHERE `code` = 'negative-balance-reset'").Scan(&count)
		return count == 1
	})
	eventually(t, 5*time.Second, 20*time.Millisecond, "fxdesk_nbp_resets_total = 1", func() bool {
		n, _ := metricValue(d.web.metrics(), `fxdesk_nbp_resets_total{currency="USD"}`)
		return n == "1"
	})
	var desk struct {
		Book struct {
			NBPToday struct {
				Costs []struct{ Currency, Amount string }
			} `json:"nbpToday"`
		} `json:"book"`
	}
	must(t, d.web, d.admin, "GET", "/api/admin/fx/desk", "", http.StatusOK, &desk)
	if c := desk.Book.NBPToday.Costs; len(c) != 1 || c[0].Currency != "USD" || c[0].Amount != "513.50" {
		t.Fatalf("the desk's book shows NBP today %+v, want 513.50 USD", c)
	}
}

// nbpAdjustments counts an account's ADJUSTMENT deals and sums them.
func (d *tradingDesk) nbpAdjustments(account int64) (n int, sum decimal.Decimal) {
	d.e.t.Helper()
	if err := d.e.sql.QueryRow("SELECT COUNT(*), COALESCE(SUM(`amount`), 0) FROM `fx_deal` WHERE `accountId` = ? AND `type` = 'ADJUSTMENT'", account).Scan(&n, &sum); err != nil {
		d.e.t.Fatal(err)
	}
	return n, sum
}

// The hedged pair on the real holder, through HTTP: a protected account (the default
// group) buys and sells 0.5 lot EURUSD, the price falls 300 pips, and the trader closes the
// losing leg, then the winning one. The first close leaves −517.00 with the winner open — the
// risk engine sees equity 973.00 and does nothing — and resets nothing; the second ends the
// account at its real result, 973.00, with no ADJUSTMENT deal and no alert.
func TestNBPHedgedPairEndsAtTheTradersResult(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1701, "USD", "100", "1000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	buy := d.openMarket(tok, acct, "BUY", "0.50", "")
	sell := d.openMarket(tok, acct, "SELL", "0.50", "")
	d.checkLedger(acct, "993.00")
	d.setQuote(tok, "EURUSD", "1.07000", "1.07020")
	var closed map[string]any
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", buy), "", http.StatusOK, &closed)
	d.checkLedger(acct, "-517.00")
	if n, _ := d.nbpAdjustments(acct); n != 0 {
		t.Fatalf("the losing leg's close posted %d ADJUSTMENT deals while the winning leg was open", n)
	}
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", sell), "", http.StatusOK, &closed)
	d.checkLedger(acct, "973.00")
	if n, sum := d.nbpAdjustments(acct); n != 0 {
		t.Fatalf("%d ADJUSTMENT deals for %s on an account that never lost its funds", n, sum)
	}
	var alerts int
	if err := d.e.sql.QueryRow("SELECT COALESCE(SUM(`count`), 0) FROM `fx_execution_alert` WHERE `code` = 'negative-balance-reset'").Scan(&alerts); err != nil {
		t.Fatal(err)
	}
	if alerts != 0 {
		t.Fatalf("negative-balance-reset raised %d times", alerts)
	}
	if st := d.positionStatus(buy) + " " + d.positionStatus(sell); st != "CLOSED CLOSED" {
		t.Fatalf("positions %s, want both closed by the trader", st)
	}
}

// A stop-out of a hedged book whose winner does not cover the loser: buy 0.5 and sell 0.1 lot
// EURUSD, then 300 pips down (equity −216.20). The engine closes the loser (−514.20 with the
// sell open: no reset), then the sell, and that last close resets the account once, by the
// 216.20 left after the winner's +298.00. Σ deals = balance = 0.00. The per-close rule reset
// 514.20 at the first close and left the trader the sell's 298.00.
func TestNBPStoppedOutHedgeResetsOnceAtTheLastClose(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1702, "USD", "100", "1000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	buy := d.openMarket(tok, acct, "BUY", "0.50", "")
	sell := d.openMarket(tok, acct, "SELL", "0.10", "")
	d.checkLedger(acct, "995.80") // commissions 3.50 and 0.70
	d.setQuote(tok, "EURUSD", "1.07000", "1.07020")
	wantClose(t, "the losing buy", d.waitClosed(buy), "STOP_OUT", "1.07000")
	wantClose(t, "the winning sell", d.waitClosed(sell), "STOP_OUT", "1.07020")
	d.checkLedger(acct, "0.00")
	if n, sum := d.nbpAdjustments(acct); n != 1 || !sum.Equal(decimal.RequireFromString("216.20")) {
		t.Fatalf("%d ADJUSTMENT deals for %s, want one for 216.20", n, sum)
	}
	// The reset follows the account's last close, keyed after it.
	var lastClose, adjKey string
	if err := d.e.sql.QueryRow("SELECT `idempotencyKey` FROM `fx_deal` WHERE `accountId` = ? AND `type` = 'PROFIT' ORDER BY `id` DESC LIMIT 1", acct).Scan(&lastClose); err != nil {
		t.Fatal(err)
	}
	if err := d.e.sql.QueryRow("SELECT `idempotencyKey` FROM `fx_deal` WHERE `accountId` = ? ORDER BY `id` DESC LIMIT 1", acct).Scan(&adjKey); err != nil {
		t.Fatal(err)
	}
	if adjKey != "nbp:"+strings.TrimPrefix(lastClose, "close:") {
		t.Fatalf("the account's last deal is keyed %q, want the reset of its last close %q", adjKey, lastClose)
	}
	eventually(t, 5*time.Second, 20*time.Millisecond, "negative-balance-reset raised once", func() bool {
		var count int
		d.e.sql.QueryRow("SELECT COALESCE(SUM(`count`), 0) FROM `fx_execution_alert` WHERE `code` = 'negative-balance-reset'").Scan(&count)
		return count == 1
	})
}

// A dealer's close and cancel sent to a follower of a web tier are forwarded to the holder (a
// follower cannot price a close) and carried out there with the reason DEALER and one audit row
// each naming the admin.
func TestDealerActionsThroughAFollower(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	tok, acct := w.d.newTrader(1710, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	pos := w.d.openMarket(tok, acct, "BUY", "0.30", "")
	var resting orderResp
	must(t, w.d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.05000"}`, acct),
		http.StatusCreated, &resting)

	var cl closeResp
	must(t, w.follower, w.d.admin, "POST", fmt.Sprintf("/api/admin/fx/positions/%d/close", pos), `{"volume":"0.10"}`, http.StatusOK, &cl)
	if cl.Position.Status != "OPEN" || cl.Position.Volume != "0.2" {
		t.Fatalf("dealer partial close through the follower: %+v", cl.Position)
	}
	must(t, w.follower, w.d.admin, "POST", fmt.Sprintf("/api/admin/fx/positions/%d/close", pos), "", http.StatusOK, &cl)
	wantClose(t, "dealer close through the follower", w.d.waitClosed(pos), "DEALER", "1.10000")
	var o orderResp
	must(t, w.follower, w.d.admin, "POST", fmt.Sprintf("/api/admin/fx/orders/%d/cancel", resting.Order.ID), "", http.StatusOK, &o)
	if o.Order.Status != "CANCELLED" {
		t.Fatalf("dealer cancel through the follower: %+v", o.Order)
	}
	must(t, w.follower, w.d.admin, "POST", fmt.Sprintf("/api/admin/fx/orders/%d/cancel", resting.Order.ID), "", http.StatusConflict, nil)
	// A trader's token is no dealer's, on either process.
	must(t, w.follower, tok, "POST", fmt.Sprintf("/api/admin/fx/orders/%d/cancel", resting.Order.ID), "", http.StatusForbidden, nil)

	var closes, cancels int
	if err := w.d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `action` = 'position.close' AND `entityId` = ? AND `actorUserId` IS NOT NULL AND `requestId` IS NOT NULL",
		fmt.Sprint(pos)).Scan(&closes); err != nil {
		t.Fatal(err)
	}
	if err := w.d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `action` = 'order.cancel' AND `entityId` = ?", fmt.Sprint(resting.Order.ID)).Scan(&cancels); err != nil {
		t.Fatal(err)
	}
	if closes != 2 || cancels != 1 {
		t.Fatalf("audit rows: %d closes and %d cancels, want 2 and 1", closes, cancels)
	}
	w.d.checkLedger(acct, "9991.90") // −2.10 commission, (1.10000 − 1.10020) × 0.30 × 100,000 = −6.00
}

// The dealer's modify of a trader's resting order, audited (docs/orders.md, «Modify a resting
// order»); its body is in e2e/orders_modify_test.go.
func TestDealerModifiesAnOrder(t *testing.T) {
	t.Parallel()
	dealerModifiesAnOrder(t)
}
