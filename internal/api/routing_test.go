package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// The routing and profile routes over a real database: a bad rule answers 400 naming its field
// and writes nothing; rules come back in the order they are asked; the profile's figures are
// worked out from the row to the cent and shown in the dealer's account list too.
func TestRoutingAndProfileRoutes(t *testing.T) {
	db := migratedDB(t, "api_routing")
	parts := newTestParts(t, db, false)
	log, svc, admin := parts.log, parts.svc, parts.admin
	r := adminRouter()
	r.Get("/account-groups/{name}/routing", handleRoutingRules(log, admin))
	r.Post("/account-groups/{name}/routing", handleCreateRoutingRule(log, admin))
	r.Put("/account-groups/{name}/routing/order", handleReorderRoutingRules(log, admin))
	r.Put("/account-groups/{name}/routing/{id}", handleUpdateRoutingRule(log, admin))
	r.Delete("/account-groups/{name}/routing/{id}", handleDeleteRoutingRule(log, admin))
	r.Get("/accounts/{id}/profile", handleAccountProfile(log, svc))
	r.Get("/accounts", handleAdminAccounts(log, svc))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	res, err := db.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (42, 'USD', 100)")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	acct := strconv.FormatInt(id, 10)
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	written := func() (n int) {
		if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM `fx_audit`) + (SELECT COUNT(*) FROM `fx_routing_rule`)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Intent: every refusal names what is wrong, and nothing is written.
	for _, tc := range []struct{ body, want string }{
		{`{}`, "action (B_BOOK, A_BOOK or HEDGE) is required"},
		{`{"action":"HEDGE"}`, "action HEDGE needs hedgePercent"},
		{`{"action":"HEDGE","hedgePercent":0}`, "hedgePercent must be a whole number from 1 to 100 (got 0)"},
		{`{"action":"HEDGE","hedgePercent":101}`, "hedgePercent must be a whole number from 1 to 100 (got 101)"},
		{`{"action":"HEDGE","hedgePercent":"half"}`, "hedgePercent"},
		{`{"action":"HEDGE 50%","hedgePercent":40}`, "disagree"},
		{`{"action":"HEDGE fifty"}`, "is not HEDGE n%"},
		{`{"action":"B_BOOK","hedgePercent":50}`, "hedgePercent is for action HEDGE only"},
		{`{"action":"HEDGE 50%"}`, "cannot route to HEDGE"},               // no venue on this desk
		{`{"action":"HEDGE","hedgePercent":50}`, "cannot route to HEDGE"}, // the same rule, spelt out
		{`{"action":"SIDEWAYS"}`, "action must be B_BOOK"},
		{`{"action":"A_BOOK"}`, "cannot route to A_BOOK"}, // no venue on this desk
		{`{"action":"B_BOOK","accounts":[999999]}`, "accounts names 1 accounts that do not exist"},
		{`{"action":"B_BOOK","accounts":[0]}`, "accounts must be account ids above 0"},
		{`{"action":"B_BOOK","symbols":["NOPE"]}`, "symbols:"},
		{`{"action":"B_BOOK","symbols":["ABCDEF"]}`, `symbols: unknown symbol \"ABCDEF\"`},
		{`{"action":"B_BOOK","volumeMin":"five"}`, "volumeMin"},
		{`{"action":"B_BOOK","volumeMin":"5","volumeMax":"1"}`, "volumeMax 1 must be at least volumeMin 5"},
		{`{"action":"B_BOOK","minTrades":0}`, "minTrades must be"},
		{`{"action":"B_BOOK","winRateMin":"100.5"}`, "winRateMin must be a percentage"},
		{`{"action":"B_BOOK","underMinuteShareMin":"-1"}`, "underMinuteShareMin"},
		{`{"action":"B_BOOK","avgHoldSecondsMax":"0"}`, "avgHoldSecondsMax must be seconds above 0"},
		{`{"action":"B_BOOK","profitFactorMin":"1.23456"}`, "profitFactorMin"},
		{`{"action":"B_BOOK","colour":"red"}`, "colour"},
	} {
		before := written()
		st, body := call("POST", "/account-groups/default/routing", tc.body)
		if (st != 400 && st != 503) || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s: %d %s; want 400 with %q", tc.body, st, body, tc.want)
		}
		if written() != before {
			t.Errorf("POST %s: a refused rule wrote something", tc.body)
		}
	}
	if st, body := call("POST", "/account-groups/nosuch/routing", `{"action":"B_BOOK"}`); st != 404 {
		t.Errorf("a rule of an unknown group: %d %s", st, body)
	}

	// Two rules, asked in the order made, then the other way round.
	var first, second struct {
		Rule struct {
			ID       int64 `json:"id"`
			Priority int   `json:"priority"`
		} `json:"rule"`
	}
	st, body := call("POST", "/account-groups/default/routing", `{"action":"B_BOOK","accounts":[`+acct+`],"symbols":["EURUSD"],"volumeMin":"5","note":"vip"}`)
	if st != 201 || json.Unmarshal([]byte(body), &first) != nil || first.Rule.Priority != 1 ||
		!strings.Contains(body, `"accounts":[`+acct+`],"symbols":["EURUSD"],"volumeMin":"5","volumeMax":null`) {
		t.Fatalf("create: %d %s", st, body)
	}
	st, body = call("POST", "/account-groups/default/routing", `{"action":"B_BOOK","minTrades":20,"profitFactorMin":"1.5"}`)
	if st != 201 || json.Unmarshal([]byte(body), &second) != nil || second.Rule.Priority != 2 {
		t.Fatalf("create the second: %d %s", st, body)
	}
	ids := func(a, b int64) string { return strconv.FormatInt(a, 10) + "," + strconv.FormatInt(b, 10) }
	if st, body := call("PUT", "/account-groups/default/routing/order", `{"ids":[`+strconv.FormatInt(second.Rule.ID, 10)+`]}`); st != 400 || !strings.Contains(body, "exactly once") {
		t.Fatalf("a reorder missing a rule: %d %s", st, body)
	}
	st, body = call("PUT", "/account-groups/default/routing/order", `{"ids":[`+ids(second.Rule.ID, first.Rule.ID)+`]}`)
	if st != 200 || !strings.Contains(body, `"default":"B_BOOK"`) || strings.Index(body, `"note":"vip"`) < strings.Index(body, `"minTrades":20`) {
		t.Fatalf("reorder: %d %s", st, body)
	}
	if st, body := call("PUT", "/account-groups/default/routing/"+strconv.FormatInt(first.Rule.ID, 10), `{"action":"B_BOOK","symbols":["GBPUSD"]}`); st != 200 ||
		!strings.Contains(body, `"priority":2,"accounts":[],"symbols":["GBPUSD"],"volumeMin":null`) {
		t.Fatalf("update: %d %s", st, body)
	}
	if st, body := call("DELETE", "/account-groups/default/routing/999999", ""); st != 404 {
		t.Fatalf("delete of no rule: %d %s", st, body)
	}

	// The profile: 4 trades, 2 won (50.00), 15.00 lost, 321.5 s held, 2 under a minute.
	if st, body := call("GET", "/accounts/"+acct+"/profile", ""); st != 200 || !strings.Contains(body, `"closedTrades":0,"wins":0,"winRate":null,"profitFactor":null,"grossProfit":"0.00"`) {
		t.Fatalf("profile of an account with no trade: %d %s", st, body)
	}
	if _, err := db.Exec("INSERT INTO `fx_account_profile` (`accountId`, `trades`, `wins`, `grossProfit`, `grossLoss`, `holdMillis`, `underMinute`) VALUES (?, 4, 2, 50, 15, 321500, 2)", id); err != nil {
		t.Fatal(err)
	}
	want := `"closedTrades":4,"wins":2,"winRate":"50.00","profitFactor":"3.3333","grossProfit":"50.00","grossLoss":"15.00","netProfit":"35.00","avgHoldSeconds":"80.375","underMinuteShare":"50.00"`
	if st, body := call("GET", "/accounts/"+acct+"/profile", ""); st != 200 || !strings.Contains(body, want) {
		t.Fatalf("profile: %d %s; want %s", st, body, want)
	}
	if st, body := call("GET", "/accounts", ""); st != 200 || !strings.Contains(body, `"profile":{"accountId":`+acct+`,"currency":"USD",`+want) {
		t.Fatalf("the dealer's list: %d %s", st, body)
	}
	if st, _ := call("GET", "/accounts/999999/profile", ""); st != 404 {
		t.Fatalf("profile of no account: %d", st)
	}
}
