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
	d := newTradingDesk(t)
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
