package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Accounts hold fiat currencies: a metal (XAU and XAG are bases of …USD pairs the desk quotes,
// so the hub could convert them) or an unknown code is refused at creation with a 400 that names
// the code and says why, and nothing is written.
func TestTradingMetalAccountsAreRefused(t *testing.T) {
	t.Parallel()
	// No scheduler in this process: its 5-minute reconcile marks accounts between snapshots.
	d := newTradingDesk(t, "CRON_MODE=off")
	tok := d.e.issueToken(1400, false)
	before := d.snapshot()
	for _, tc := range []struct{ currency, says string }{
		{"XAU", "XAU is gold, not a currency: accounts hold fiat currencies"},
		{"XAG", "XAG is silver, not a currency: accounts hold fiat currencies"},
		{"XPT", "XPT is platinum, not a currency: accounts hold fiat currencies"},
		{"XYZ", `"XYZ" is not a fiat currency the desk knows: accounts hold fiat currencies`},
	} {
		code, b := call(t, d.web, tok, "POST", "/api/fx/accounts", fmt.Sprintf(`{"currency":%q,"leverage":100}`, tc.currency))
		var e errorResp
		if code != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Code != "invalid" || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("%s account: %d %s, want 400 saying %q", tc.currency, code, b, tc.says)
		}
		if after := d.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refusing a %s account changed the database:\nbefore %v\nafter  %v", tc.currency, before, after)
		}
	}
	var n int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_account` WHERE `userId` = 1400").Scan(&n); err != nil || n != 0 {
		t.Fatalf("user 1400 has %d accounts (%v), want none", n, err)
	}
	// A fiat currency is still opened.
	var a accountResp
	must(t, d.web, tok, "POST", "/api/fx/accounts", `{"currency":"CHF","leverage":100}`, http.StatusCreated, &a)
	if a.Account.Currency != "CHF" {
		t.Fatalf("CHF account = %+v", a.Account)
	}
}

// A JPY account over HTTP: money is whole yen in and out. The commission of 7 USD at USDJPY mid
// 150.010 (1050.07 yen) is booked and shown as "-1050"; the marks and the profit deals are whole
// yen; Σ deals = balance throughout; and a deposit of 100.5 yen is a 400 that says so and
// changes nothing.
func TestTradingJPYAccountIsWholeYen(t *testing.T) {
	t.Parallel()
	// No scheduler in this process: its 5-minute reconcile marks accounts between snapshots.
	d := newTradingDesk(t, "CRON_MODE=off")
	tok, acct := d.newTrader(1401, "JPY", "100", "")
	deposit := fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", acct)
	d.fund(acct, "1000000")
	d.checkLedger(acct, "1000000")
	d.setQuote(tok, "USDJPY", "150.000", "150.020")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1.00"}`, acct), http.StatusCreated, &o)
	if o.Commission == nil || o.Commission.Amount != "-1050" || o.Commission.BalanceAfter != "998950" || o.Position.Commission != "1050" {
		t.Fatalf("fill commission %+v position %+v, want -1050 yen", o.Commission, o.Position)
	}
	d.checkLedger(acct, "998950")
	// Floating −20 USD = −3000.2 yen; margin 1100.10 USD = 165026.001 yen; level 603.51 %.
	wantMetrics(t, d.account(tok, acct), "998950", "995950", "165026", "830924", "603.51")

	d.setQuote(tok, "EURUSD", "1.10050", "1.10070")
	var c closeResp
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), `{"volume":"0.30"}`, http.StatusOK, &c)
	if c.Deal.Amount != "1350" { // 9 USD = 1350.09 yen
		t.Fatalf("partial close deal %+v, want 1350 yen", c.Deal)
	}
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusOK, &c)
	if c.Deal.Amount != "3150" || c.Position.RealizedProfit != "4500" { // 21 USD = 3150.21 yen
		t.Fatalf("close %+v, want 3150 yen", c)
	}
	d.checkLedger(acct, "1003450")
	var fractional int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` = ? AND `amount` <> ROUND(`amount`, 0)", acct).Scan(&fractional); err != nil || fractional != 0 {
		t.Fatalf("%d deals carry a fraction of a yen (%v)", fractional, err)
	}

	before := d.snapshot()
	code, b := call(t, d.web, d.admin, "POST", deposit, `{"amount":"100.5"}`)
	var e errorResp
	if code != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, "JPY amounts are whole numbers") {
		t.Fatalf("deposit of 100.5 yen: %d %s, want 400 naming whole yen", code, b)
	}
	if after := d.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the refused deposit changed the database:\nbefore %v\nafter  %v", before, after)
	}
}
