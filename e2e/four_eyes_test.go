package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Four eyes on client money over HTTP, against the real fxdesk-web and tokens issued by its
// command line with --role finance (docs/identity.md, «Four eyes on client money»): finance user
// A's deposit above the threshold answers 202 with a PENDING request and moves nothing; A cannot
// approve it (403); finance user B's approval answers 200 with the deal; B approving again makes
// no second deal; the trader's deals show one deposit, its balance event is told once, and the
// account's balance is Σ deals.
func TestFourEyesOnClientMoney(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	alice, bob := d.e.issueRoleToken(3101, "finance"), d.e.issueRoleToken(3102, "finance")
	tok, acct := d.newTrader(3100, "USD", "100", "")

	type answer struct {
		MoneyRequest *struct {
			ID          int64  `json:"id"`
			AccountID   int64  `json:"accountId"`
			Kind        string `json:"kind"`
			Amount      string `json:"amount"`
			State       string `json:"state"`
			RequestedBy int64  `json:"requestedBy"`
			DealID      *int64 `json:"dealId"`
			ExpiresAt   string `json:"expiresAt"`
		} `json:"moneyRequest"`
		Deal *struct {
			ID     int64  `json:"id"`
			Type   string `json:"type"`
			Amount string `json:"amount"`
		} `json:"deal"`
		Replayed bool `json:"replayed"`
	}
	var pending answer
	must(t, d.web, alice, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", acct), `{"amount":"25000.00","requestNonce":"e2e-four-eyes"}`, http.StatusAccepted, &pending)
	r := pending.MoneyRequest
	if r == nil || pending.Deal != nil || r.AccountID != acct || r.Kind != "DEPOSIT" || r.Amount != "25000.00" || r.State != "PENDING" || r.RequestedBy != 3101 ||
		r.DealID != nil || r.ExpiresAt == "" {
		t.Fatalf("the deposit above the threshold: %+v", pending)
	}
	var deals struct {
		Deals []struct {
			ID     int64  `json:"id"`
			Type   string `json:"type"`
			Amount string `json:"amount"`
		} `json:"deals"`
	}
	must(t, d.web, tok, "GET", fmt.Sprintf("/api/fx/deals?accountId=%d", acct), "", http.StatusOK, &deals)
	if len(deals.Deals) != 0 {
		t.Fatalf("a pending deposit moved money: %+v", deals.Deals)
	}

	approve := fmt.Sprintf("/api/admin/fx/money-requests/%d/approve", r.ID)
	code, b := call(t, d.web, alice, "POST", approve, "")
	if code != http.StatusForbidden || !strings.Contains(string(b), "another finance user must approve it") {
		t.Fatalf("the asker approving: %d %s, want 403", code, b)
	}
	var approved answer
	must(t, d.web, bob, "POST", approve, "", http.StatusOK, &approved)
	if approved.Replayed || approved.Deal == nil || approved.Deal.Type != "DEPOSIT" || approved.Deal.Amount != "25000.00" ||
		approved.MoneyRequest.State != "APPROVED" || approved.MoneyRequest.DealID == nil || *approved.MoneyRequest.DealID != approved.Deal.ID {
		t.Fatalf("B's approval: %+v", approved)
	}
	var again answer
	must(t, d.web, bob, "POST", approve, "", http.StatusOK, &again)
	if !again.Replayed || again.Deal == nil || again.Deal.ID != approved.Deal.ID {
		t.Fatalf("B approving again: %+v, want the first deal replayed", again)
	}

	must(t, d.web, tok, "GET", fmt.Sprintf("/api/fx/deals?accountId=%d", acct), "", http.StatusOK, &deals)
	if len(deals.Deals) != 1 || deals.Deals[0].ID != approved.Deal.ID || deals.Deals[0].Type != "DEPOSIT" || deals.Deals[0].Amount != "25000.00" {
		t.Fatalf("the trader's deals: %+v, want the one deposit", deals.Deals)
	}
	d.checkLedger(acct, "25000.00")
	var events, rows int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `accountId` = ? AND `type` = 'balance.deposit'", acct).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `entityType` = 'money_request' AND `entityId` = ? AND `actorUserId` IS NOT NULL AND `requestId` IS NOT NULL",
		fmt.Sprint(r.ID)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if events != 1 || rows != 2 {
		t.Fatalf("%d balance.deposit events and %d audit rows of the request, want 1 and 2 (create, approve)", events, rows)
	}
}
