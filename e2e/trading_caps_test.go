package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// wantRefusal fails the test unless the answer is status with error code code and a message
// holding every fragment.
func wantRefusal(t *testing.T, what string, code int, body []byte, status int, errCode string, fragments ...string) {
	t.Helper()
	var e errorResp
	if code != status || json.Unmarshal(body, &e) != nil || e.Error.Code != errCode {
		t.Fatalf("%s: %d %s, want %d %s", what, code, body, status, errCode)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error.Message, f) {
			t.Fatalf("%s: %q does not say %q", what, e.Error.Message, f)
		}
	}
}

// The caps an admin sets apply at once on the process that took them, and past them a trader
// hears which cap and which setting: accounts per user, pending orders per account. A resting
// order beyond the account's free margin is refused at placement.
func TestTradingCapsAtTheDoor(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(1601, "USD", "100", "1000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/settings", `{"fxMaxPendingOrdersPerAccount":"2","fxMaxAccountsPerUser":"2"}`, http.StatusOK, nil)

	var second accountResp
	must(t, d.web, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`, http.StatusCreated, &second)
	code, b := call(t, d.web, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`)
	wantRefusal(t, "a third account", code, b, http.StatusConflict, "conflict", "fxMaxAccountsPerUser = 2")

	limit := func(account int64, volume string) string {
		return fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":%q,"price":"1.09000"}`, account, volume)
	}
	code, b = call(t, d.web, tok, "POST", "/api/fx/orders", limit(second.Account.ID, "0.01"))
	wantRefusal(t, "a resting order on an empty account", code, b, http.StatusConflict, "conflict", "Not enough free margin")
	code, b = call(t, d.web, tok, "POST", "/api/fx/orders", limit(acct, "100"))
	wantRefusal(t, "100 lots resting on 1,000 USD", code, b, http.StatusConflict, "conflict", "Not enough free margin")
	var first orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", limit(acct, "0.10"), http.StatusCreated, &first)
	must(t, d.web, tok, "POST", "/api/fx/orders", limit(acct, "0.10"), http.StatusCreated, nil)
	code, b = call(t, d.web, tok, "POST", "/api/fx/orders", limit(acct, "0.10"))
	wantRefusal(t, "a third resting order", code, b, http.StatusConflict, "conflict", "fxMaxPendingOrdersPerAccount = 2", "2 pending orders")
	must(t, d.web, tok, "DELETE", fmt.Sprintf("/api/fx/orders/%d", first.Order.ID), "", http.StatusOK, nil)
	must(t, d.web, tok, "POST", "/api/fx/orders", limit(acct, "0.10"), http.StatusCreated, nil)
}

// A stop-loss change racing a close of the same position (a deadlock on the server, which the
// trading package's TestModifyRacingCloseIsRetried shows happening) is never an internal error:
// the change lands before the close or finds the position closed.
func TestTradingModifyRacingCloseIsNeverInternal(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t, unlimitedRates...) // one token races as fast as it can
	tok, acct := d.newTrader(1602, "USD", "100", "100000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	for i := range 40 {
		var o orderResp
		must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.01"}`, acct), http.StatusCreated, &o)
		var codes [2]int
		var bodies [2][]byte
		done := make(chan struct{})
		go func() {
			defer close(done)
			codes[0], bodies[0] = call(t, d.web, tok, "PATCH", fmt.Sprintf("/api/fx/positions/%d", o.Position.ID), `{"sl":"1.05000"}`)
		}()
		codes[1], bodies[1] = call(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "")
		<-done
		if codes[1] != http.StatusOK || (codes[0] != http.StatusOK && codes[0] != http.StatusConflict) {
			t.Fatalf("race %d: modify %d %s, close %d %s", i, codes[0], bodies[0], codes[1], bodies[1])
		}
	}
	d.checkLedger(acct, d.account(tok, acct).Account.Balance)
}

// A requestNonce binds its request on the holder and through a follower's forward alike: the
// same request again replays (200, replayed), another request under the same nonce — a MARKET
// SELL after a BUY LIMIT, a withdrawal of another amount — answers 422 idempotency_key_reused
// naming the key, and nothing is written.
func TestTradingNonceBindsItsRequest(t *testing.T) {
	t.Parallel()
	// No scheduler: its reconcile marks accounts, which a snapshot would take for a write.
	w := newWebTier(t, "CRON_MODE=off")
	d := w.d
	tok, acct := d.newTrader(1603, "USD", "100", "1000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	limit := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.05000","requestNonce":"bind-1"}`, acct)
	sell := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"SELL","type":"MARKET","volume":"0.10","requestNonce":"bind-1"}`, acct)
	withdraw := func(amount string) string { return fmt.Sprintf(`{"amount":%q,"requestNonce":"bind-2"}`, amount) }
	path := fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct)

	var orig orderResp
	must(t, w.follower, tok, "POST", "/api/fx/orders", limit, http.StatusCreated, &orig)
	must(t, w.follower, tok, "POST", path, withdraw("5.00"), http.StatusCreated, nil)
	before := d.snapshot()
	for _, via := range []*proc{w.follower, d.web} {
		var again struct {
			orderResp
			Replayed bool `json:"replayed"`
		}
		must(t, via, tok, "POST", "/api/fx/orders", limit, http.StatusOK, &again)
		if !again.Replayed || again.Order.ID != orig.Order.ID {
			t.Fatalf("retry via %s: %+v, want a replay of order %d", via.name, again, orig.Order.ID)
		}
		must(t, via, tok, "POST", path, withdraw("5.00"), http.StatusOK, nil)
		code, b := call(t, via, tok, "POST", "/api/fx/orders", sell)
		wantRefusal(t, "a MARKET SELL under the BUY LIMIT's nonce via "+via.name, code, b, http.StatusUnprocessableEntity, "idempotency_key_reused", `"bind-1"`)
		code, b = call(t, via, tok, "POST", path, withdraw("6.00"))
		wantRefusal(t, "a withdrawal of another amount via "+via.name, code, b, http.StatusUnprocessableEntity, "idempotency_key_reused", `"bind-2"`)
	}
	if after := d.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("replays and refused reuses changed the database:\nbefore %v\nafter  %v", before, after)
	}
}
