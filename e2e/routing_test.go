package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
)

// Routing end to end (docs/routing.md): real fxdesk-web, fxdesk-feedsim and fxdesk-venuesim
// processes; rules set over the admin API and the orders they route read back from the venue
// and the database.

// routedOrder is an order answer with its routing.
type routedOrder struct {
	Order struct {
		ID          int64  `json:"id"`
		Status      string `json:"status"`
		Execution   string `json:"execution"`
		RouteRuleID *int64 `json:"routeRuleId"`
	} `json:"order"`
	Position *positionJSON `json:"position"`
}

type ruleResp struct {
	Rule struct {
		ID int64 `json:"id"`
	} `json:"rule"`
}

// routedTrader opens a funded USD account for user in account group group (made INTERNAL if new).
func (d *abookDesk) routedTrader(user int64, group string) (string, int64) {
	t := d.e.t
	t.Helper()
	if code, b := call(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups", fmt.Sprintf(`{"name":%q}`, group)); code != http.StatusCreated && code != http.StatusConflict {
		t.Fatalf("create group %s = %d %s", group, code, b)
	}
	tok, acct := d.newTrader(user, "USD", "100", "100000.00")
	must(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/group", acct), fmt.Sprintf(`{"group":%q}`, group), http.StatusOK, nil)
	return tok, acct
}

func (d *abookDesk) order(tok string, acct int64, lots, nonce string) routedOrder {
	var o routedOrder
	must(d.e.t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", lots, nonce), http.StatusCreated, &o)
	return o
}

// On an INTERNAL group, the rule volume ≥ 5 → A_BOOK sends a 5-lot order to the venue and books
// a 1-lot order on the desk; each order shows what routed it; the venue position closes at the
// venue; the rule's creation is audited.
func TestRoutingByVolume(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	tok, acct := d.routedTrader(1900, "routed")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var rule ruleResp
	must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups/routed/routing", `{"volumeMin":"5","action":"A_BOOK","note":"big tickets"}`, http.StatusCreated, &rule)
	d.wantAudit("routing_rule", strconv.FormatInt(rule.Rule.ID, 10), "routing_rule.create", `"volumeMin":"5"`, `"action":"A_BOOK"`)

	big := d.order(tok, acct, "5.00", "route-big")
	if big.Order.Execution != "EXTERNAL" || big.Order.RouteRuleID == nil || *big.Order.RouteRuleID != rule.Rule.ID || big.Position == nil {
		t.Fatalf("5 lots = %+v, want EXTERNAL by rule %d", big, rule.Rule.ID)
	}
	small := d.order(tok, acct, "1.00", "route-small")
	if small.Order.Execution != "INTERNAL" || small.Order.RouteRuleID != nil || small.Position == nil {
		t.Fatalf("1 lot = %+v, want INTERNAL by the group's mode", small)
	}
	st := d.venue.state()
	if trades := st.tradesOf(strconv.FormatInt(big.Order.ID, 10)); len(trades) != 1 || !trades[0].InitialUnits.Equal(dec("500000")) {
		t.Fatalf("venue trades of the 5-lot order = %+v", trades)
	}
	if n := len(st.tradesOf(strconv.FormatInt(small.Order.ID, 10))); n != 0 || st.OrderRequests[strconv.FormatInt(small.Order.ID, 10)] != 0 {
		t.Fatalf("the venue heard of the 1-lot order: %d trades", n)
	}
	if r := d.e.orderRow(big.Order.ID); r.Execution != "EXTERNAL" {
		t.Fatalf("5-lot order row = %+v", r)
	}
	var list struct {
		Orders []struct {
			ID          int64  `json:"id"`
			RouteRuleID *int64 `json:"routeRuleId"`
		} `json:"orders"`
	}
	must(t, d.web, tok, "GET", fmt.Sprintf("/api/fx/orders?accountId=%d", acct), "", http.StatusOK, &list)
	for _, o := range list.Orders {
		if routed := o.RouteRuleID != nil && *o.RouteRuleID == rule.Rule.ID; routed != (o.ID == big.Order.ID) {
			t.Fatalf("order %d lists routeRuleId %v", o.ID, o.RouteRuleID)
		}
	}
	// The routed position closes where it was opened, whatever its INTERNAL group says.
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", big.Position.ID), `{}`, http.StatusOK, nil)
	if trades := d.venue.state().tradesOf(strconv.FormatInt(big.Order.ID, 10)); len(trades) != 1 || trades[0].State != "CLOSED" {
		t.Fatalf("venue trade after the close = %+v", trades)
	}
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", small.Position.ID), `{}`, http.StatusOK, nil)
	d.checkLedgerBalanced(acct)
}

// A profile rule moves a profitable account's next order to the A-book: its first order is
// booked on the desk; once a close makes its record profitable, the next goes to the venue.
func TestRoutingByProfile(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	tok, acct := d.routedTrader(1901, "profiled")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups/profiled/routing", `{"minTrades":1,"profitFactorMin":"1.5","action":"A_BOOK"}`, http.StatusCreated, nil)

	first := d.order(tok, acct, "0.10", "profile-1")
	if first.Order.Execution != "INTERNAL" || first.Order.RouteRuleID != nil {
		t.Fatalf("the first order of an account with no record = %+v", first)
	}
	d.setQuote(tok, "EURUSD", "1.10300", "1.10320")
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", first.Position.ID), `{}`, http.StatusOK, nil)
	var prof struct {
		Profile struct {
			ClosedTrades int64   `json:"closedTrades"`
			NetProfit    string  `json:"netProfit"`
			ProfitFactor *string `json:"profitFactor"`
		} `json:"profile"`
	}
	must(t, d.web, d.admin, "GET", fmt.Sprintf("/api/admin/fx/accounts/%d/profile", acct), "", http.StatusOK, &prof)
	// 0.10 × 100,000 × (1.10300 − 1.10020) = 28.00, no loss: an unbounded profit factor.
	if prof.Profile.ClosedTrades != 1 || prof.Profile.NetProfit != "28.00" || prof.Profile.ProfitFactor != nil {
		t.Fatalf("profile after one winning close = %+v", prof.Profile)
	}
	next := d.order(tok, acct, "0.10", "profile-2")
	if next.Order.Execution != "EXTERNAL" || next.Order.RouteRuleID == nil {
		t.Fatalf("the profitable account's next order = %+v, want EXTERNAL by the profile rule", next)
	}
	if trades := d.venue.state().tradesOf(strconv.FormatInt(next.Order.ID, 10)); len(trades) != 1 {
		t.Fatalf("venue trades of the routed order = %+v", trades)
	}
}
