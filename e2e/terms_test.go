package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// lastAudit is the id of the newest audit row, read with SQL as an operator would.
func (d *tradingDesk) lastAudit() int64 {
	d.e.t.Helper()
	var id int64
	if err := d.e.sql.QueryRow("SELECT COALESCE(MAX(`id`), 0) FROM `fx_audit`").Scan(&id); err != nil {
		d.e.t.Fatal(err)
	}
	return id
}

// waitTerms waits until the holder's risk engine has the terms of every audit row in (from,
// to] that changes how accounts are marked: the holder logs the audit ids it handed over.
func (d *tradingDesk) waitTerms(from, to int64) {
	t := d.e.t
	t.Helper()
	rows, err := d.e.sql.Query("SELECT `id` FROM `fx_audit` WHERE `id` > ? AND `id` <= ? AND `entityType` IN "+
		"('account', 'account_group', 'instrument', 'symbol_group', 'symbol_override')", from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want[id] = true
	}
	rows.Close()
	d.web.waitLog(15*time.Second, func(l logLine) bool {
		if l.msg() != "risk engine has the terms of admin changes" {
			return false
		}
		ids, _ := l["audit"].([]any)
		for _, v := range ids {
			if n, ok := v.(float64); ok {
				delete(want, int64(n))
			}
		}
		return len(want) == 0
	})
}

// Every admin change that alters how an account is marked, made on a FOLLOWER of a web tier,
// changes the holder's stop-out decision at once (docs/groups.md, «How a change reaches the risk
// engine»): a move out of a group whose EURUSD is capped at 1:10 into one without, the reverse
// move, an override set on a symbol, an instrument's leverage cap. Five USD accounts at 1:100 hold
// 1 lot bought at 1.10002 with 11,993.00 (12,000 less 7.00 commission); at a bid of 1.03000 each
// has 4,991.00 of equity, over 1,030.01 of margin at 1:100 (485 %) or 10,300.10 at 1:10 (48.5 %),
// and the stop-out level is 50 %.
func TestWebTierFollowerTermsChangesReachTheHoldersStopOut(t *testing.T) {
	t.Parallel()
	w := newWebTier(t)
	d, f := w.d, w.follower
	waitRiskReady(d.web)
	tok := d.e.issueToken(3600, false)
	for _, s := range []string{"EURUSD", "GBPUSD", "AUDUSD", "NZDUSD"} {
		d.setQuote(tok, s, "1.10000", "1.10002")
	}

	// The desk as it stands before: default's EURUSD capped at 1:10, capped's GBPUSD too.
	from := d.lastAudit()
	must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups", `{"name":"capped"}`, http.StatusCreated, nil)
	must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups", `{"name":"plain"}`, http.StatusCreated, nil)
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/account-groups/default/overrides/symbols/EURUSD", `{"leverageMax":10}`, http.StatusCreated, nil)
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/account-groups/capped/overrides/symbols/GBPUSD", `{"leverageMax":10}`, http.StatusCreated, nil)
	d.waitTerms(from, d.lastAudit())

	trader := func(user int64, symbol string) (int64, int64) {
		tok, acct := d.newTrader(user, "USD", "100", "12000.00")
		return acct, d.open(tok, acct, symbol, "BUY", "1.00")
	}
	moved, movedPos := trader(3601, "EURUSD")     // default (EURUSD 1:10) → plain: not stopped out
	_, sentinel := trader(3602, "EURUSD")         // stays in default: stopped out at the same tick
	movedIn, movedInPos := trader(3603, "GBPUSD") // default → capped (GBPUSD 1:10): stopped out
	_, overridden := trader(3604, "AUDUSD")       // default gets an AUDUSD cap of 1:10: stopped out
	_, capped := trader(3605, "NZDUSD")           // NZDUSD's own cap lowered to 1:10: stopped out

	// The dealer, on the follower.
	from = d.lastAudit()
	must(t, f, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/group", moved), `{"group":"plain"}`, http.StatusOK, nil)
	must(t, f, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/group", movedIn), `{"group":"capped"}`, http.StatusOK, nil)
	must(t, f, d.admin, "PUT", "/api/admin/fx/account-groups/default/overrides/symbols/AUDUSD", `{"leverageMax":10}`, http.StatusCreated, nil)
	must(t, f, d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"NZDUSD","leverageMax":10}]}`, http.StatusOK, nil)
	d.waitTerms(from, d.lastAudit())

	for _, s := range []string{"EURUSD", "GBPUSD", "AUDUSD", "NZDUSD"} {
		d.setQuote(tok, s, "1.03000", "1.03002")
	}
	for name, id := range map[string]int64{"the sentinel in default": sentinel, "the account moved into capped": movedInPos,
		"the AUDUSD override's": overridden, "NZDUSD's": capped} {
		wantClose(t, name, d.waitClosed(id), "STOP_OUT", "1.03000")
	}
	// The sentinel's close committed after the tick that decided it had been evaluated whole, so
	// the moved account's decision was made in it too: exactly four stop-outs, and it is open.
	if got, _ := metricValue(d.web.metrics(), `fxdesk_risk_work_total{kind="stop_out"}`); got != "4" {
		t.Fatalf("stop-outs decided: %s, want 4 (the account moved out of the 1:10 group is at 485 %%)", got)
	}
	if s := d.positionStatus(movedPos); s != "OPEN" {
		t.Fatalf("the account moved into plain: position %s, want OPEN", s)
	}
}
