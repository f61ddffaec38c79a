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

// The account-group, move and state routes over a real database: each write answers the view,
// writes exactly one audit row, and each refusal answers its status and code and writes nothing.
// The database is made here so this file stands alone in the package.
func TestAccountGroupRoutes(t *testing.T) {
	db := migratedDB(t, "api_groups")
	parts := newTestParts(t, db, false)
	log, svc, admin := parts.log, parts.svc, parts.admin
	r := adminRouter()
	r.Get("/account-groups", handleAccountGroups(log, admin))
	r.Post("/account-groups", handleCreateAccountGroup(log, admin))
	r.Get("/account-groups/{name}", handleAccountGroup(log, admin))
	r.Put("/account-groups/{name}", handleUpdateAccountGroup(log, admin))
	r.Patch("/account-groups/{name}", handleUpdateAccountGroup(log, admin))
	r.Delete("/account-groups/{name}", handleDeleteAccountGroup(log, admin))
	r.Post("/accounts/{id}/group", handleMoveAccount(log, admin, svc))
	r.Put("/accounts/{id}/state", handleSetAccountState(log, admin, svc))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	res, err := db.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (42, 'USD', 100)")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	acct := "/accounts/" + strconv.FormatInt(id, 10)

	audited := func() (n int) {
		if err := db.QueryRow("SELECT COUNT(*) FROM `fx_audit`").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	call := func(method, path, body string) (int, map[string]json.RawMessage) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]json.RawMessage
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, b, err)
		}
		return resp.StatusCode, out
	}

	// Intent: each write answers its status and the entity as it is now, with one audit row.
	for _, tc := range []struct {
		method, path, body string
		status             int
		field, want        string // a fragment of the answer's field
	}{
		{"POST", "/account-groups", `{"name":"retail-eu","leverageMax":30,"stopOutLevel":"50","marginCallLevel":"100"}`, 201, "accountGroup",
			`{"name":"retail-eu","leverageMax":30,"marginCallLevel":"100","stopOutLevel":"50","executionMode":"INTERNAL","swapFreeDefault":false,"negativeBalanceProtection":true,"maxPendingOrders":null,"positionMode":"HEDGING"}`},
		{"PUT", "/account-groups/retail-eu", `{"executionMode":"internal"}`, 200, "accountGroup", `"executionMode":"INTERNAL"`},
		{"PATCH", "/account-groups/retail-eu", `{"maxPendingOrders":5,"stopOutLevel":"30.5"}`, 200, "accountGroup", `"stopOutLevel":"30.5","executionMode":"INTERNAL","swapFreeDefault":false,"negativeBalanceProtection":true,"maxPendingOrders":5,"positionMode":"HEDGING"}`},
		{"PUT", "/account-groups/retail-eu", `{"maxPendingOrders":null,"swapFreeDefault":true}`, 200, "accountGroup", `"swapFreeDefault":true,"negativeBalanceProtection":true,"maxPendingOrders":null`},
		{"PATCH", "/account-groups/retail-eu", `{"positionMode":"FIFO"}`, 200, "accountGroup", `"positionMode":"FIFO"`},
		{"PATCH", "/account-groups/retail-eu", `{"positionMode":"HEDGING"}`, 200, "accountGroup", `"positionMode":"HEDGING"`},
		{"POST", acct + "/group", `{"group":"retail-eu"}`, 200, "account", `"group":"retail-eu"`},
		{"PUT", acct + "/state", `{"state":"CLOSE_ONLY","reason":"KYC review"}`, 200, "account", `"state":"CLOSE_ONLY","stateReason":"KYC review"`},
		{"PUT", acct + "/state", `{"state":"ACTIVE"}`, 200, "account", `"state":"ACTIVE","stateReason":null`},
	} {
		before := audited()
		st, body := call(tc.method, tc.path, tc.body)
		if st != tc.status || !strings.Contains(string(body[tc.field]), tc.want) {
			t.Fatalf("%s %s %s: %d %s; want %d with %s", tc.method, tc.path, tc.body, st, body, tc.status, tc.want)
		}
		if n := audited() - before; n != 1 {
			t.Fatalf("%s %s: %d audit rows, want 1", tc.method, tc.path, n)
		}
	}
	if st, body := call("GET", "/account-groups/retail-eu", ""); st != 200 || !strings.Contains(string(body["accountGroup"]), `"leverageMax":30`) {
		t.Fatalf("GET one: %d %s", st, body)
	}
	if st, body := call("GET", "/account-groups", ""); st != 200 || !strings.Contains(string(body["accountGroups"]), `"name":"retail-eu"`) {
		t.Fatalf("GET list: %d %s", st, body)
	}

	// Intent: each refusal answers the vocabulary's status, code and reason, and writes nothing.
	before := audited()
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, want         string
	}{
		{"POST", "/account-groups", `{"name":"retail-eu"}`, 409, "conflict", "already exists"},
		{"POST", "/account-groups", `{"leverageMax":30}`, 400, "invalid", "name"},
		{"POST", "/account-groups", `{"name":"a b"}`, 400, "invalid", "name must be"},
		{"POST", "/account-groups", `{"name":"x","leverageMax":0}`, 400, "invalid", "leverageMax must be a whole number from 1 to 10000"},
		{"POST", "/account-groups", `{"name":"x","executionMode":"EXTERNAL"}`, 503, "unavailable", "No execution venue is configured"},
		{"PATCH", "/account-groups/retail-eu", `{}`, 400, "invalid", "Nothing to change"},
		{"PATCH", "/account-groups/retail-eu", `{"name":"other"}`, 400, "invalid", "cannot be renamed"},
		{"PATCH", "/account-groups/retail-eu", `{"stopOutLevel":30}`, 400, "invalid", "stopOutLevel must be a decimal string"},
		{"PATCH", "/account-groups/retail-eu", `{"stopOutLevel":"30.123"}`, 400, "invalid", "more than 2 decimals"},
		{"PATCH", "/account-groups/retail-eu", `{"marginCallLevel":"20"}`, 400, "invalid", "must be at least stopOutLevel 30.5%"},
		{"PATCH", "/account-groups/retail-eu", `{"maxPendingOrders":1.5}`, 400, "invalid", "maxPendingOrders must be a whole number"},
		{"PATCH", "/account-groups/retail-eu", `{"maxPendingOrders":0}`, 400, "invalid", "from 1 to 10000"},
		{"PATCH", "/account-groups/retail-eu", `{"positionMode":"netting"}`, 400, "invalid", "positionMode must be HEDGING"},
		{"PUT", "/account-groups/retail-eu", `{"executionMode":"HYBRID"}`, 400, "invalid", "executionMode must be INTERNAL (the desk fills) or EXTERNAL (the venue fills)"},
		{"PUT", "/account-groups/nobody", `{"leverageMax":10}`, 404, "not_found", `Account group "nobody" not found`},
		{"GET", "/account-groups/nobody", "", 404, "not_found", "not found"},
		{"DELETE", "/account-groups/retail-eu", "", 409, "conflict", "still holds 1 accounts"},
		{"DELETE", "/account-groups/default", "", 409, "conflict", "cannot be deleted"},
		{"POST", acct + "/group", `{}`, 400, "invalid", "group"},
		{"POST", acct + "/group", `{"group":"nobody"}`, 404, "not_found", `Account group "nobody" not found`},
		{"POST", "/accounts/999999/group", `{"group":"default"}`, 404, "not_found", "Account 999999 not found"},
		{"PUT", acct + "/state", `{"state":"DISABLED"}`, 400, "invalid", "reason is required for DISABLED"},
		{"PUT", acct + "/state", `{"state":"FROZEN","reason":"x"}`, 400, "invalid", "state must be ACTIVE, CLOSE_ONLY or DISABLED"},
		{"PUT", acct + "/state", `{"reason":"x"}`, 400, "invalid", "state"},
	} {
		st, body := call(tc.method, tc.path, tc.body)
		var e struct{ Code, Message string }
		json.Unmarshal(body["error"], &e)
		if st != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s %s %s: %d %+v; want %d %s naming %q", tc.method, tc.path, tc.body, st, e, tc.status, tc.code, tc.want)
		}
	}
	if n := audited() - before; n != 0 {
		t.Fatalf("refused requests wrote %d audit rows", n)
	}

	// Emptied, the group is deleted and answered as it was.
	call("POST", acct+"/group", `{"group":"default"}`)
	if st, body := call("DELETE", "/account-groups/retail-eu", ""); st != 200 || string(body["deleted"]) != "true" || !strings.Contains(string(body["accountGroup"]), `"name":"retail-eu"`) {
		t.Fatalf("DELETE: %d %s", st, body)
	}
}
