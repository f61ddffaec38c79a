package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/trading"
)

func init() {
	acct := func(d *auditDesk) string { return "/api/admin/fx/accounts/" + strconv.FormatInt(d.moneyAccount, 10) }
	request := func(i int, act string) func(d *auditDesk) string {
		return func(d *auditDesk) string {
			return "/api/admin/fx/money-requests/" + strconv.FormatInt(d.moneyRequests[i], 10) + act
		}
	}
	auditedWrites["POST /api/admin/fx/accounts/{id}/withdraw"] = auditedWrite{
		path: func(d *auditDesk) string { return acct(d) + "/withdraw" }, body: fixed(`{"amount":"5.00","requestNonce":"walk-withdraw"}`),
		bad:    func(d *auditDesk) (string, string) { return acct(d) + "/withdraw", `{"amount":"-5.00"}` },
		action: "account.withdraw", entityType: "account", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.moneyAccount, 10) },
		before: true, after: `"withdrawn":"5.00"`,
	}
	auditedWrites["POST /api/admin/fx/money-requests/{id}/approve"] = auditedWrite{
		path: request(0, "/approve"), body: fixed(""),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/money-requests/999999/approve", "" },
		action: "money_request.approve", entityType: "money_request", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.moneyRequests[0], 10) },
		before: true, after: `"state":"APPROVED"`,
	}
	auditedWrites["POST /api/admin/fx/money-requests/{id}/reject"] = auditedWrite{
		path: request(1, "/reject"), body: fixed(`{"reason":"walk"}`),
		bad:    func(d *auditDesk) (string, string) { return request(1, "/reject")(d), `{"reason":""}` },
		action: "money_request.reject", entityType: "money_request", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.moneyRequests[1], 10) },
		before: true, after: `"state":"REJECTED"`,
	}
}

// moneyFixtures funds an account of its own for the walk's staff withdrawal and leaves two
// deposits above the threshold PENDING, asked for by user 2, for the admin (user 1) to approve
// and to reject.
func (d *auditDesk) moneyFixtures() {
	t := d.t
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	a, err := d.svc.Accounts().Open(ctx, 502, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	d.moneyAccount = a.ID
	if _, _, err := d.svc.Accounts().Deposit(ctx, a.ID, decimal.NewFromInt(100), "walk-seed"); err != nil {
		t.Fatal(err)
	}
	asker := audit.WithActor(context.Background(), audit.Actor{UserID: 2, Via: "test"})
	for i, nonce := range []string{"walk-approve", "walk-reject"} {
		m, err := d.svc.Finance().Deposit(asker, a.ID, decimal.NewFromInt(20000), nonce, "")
		if err != nil || m.Request == nil {
			t.Fatalf("money request %s: %+v %v", nonce, m, err)
		}
		d.moneyRequests[i] = m.Request.ID
	}
}

// moneyDesk is the real router over a fresh database whose trading service and settings route
// share one catalog.Settings, as the binary wires them, so a change of the threshold applies to
// the next deposit.
type moneyDesk struct {
	t       *testing.T
	srv     *httptest.Server
	tokens  map[string]string
	account int64
}

func newMoneyDesk(t *testing.T) *moneyDesk {
	t.Helper()
	db, closeDB, err := dbtest.NewMigrated("api_money")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	parts := newTestParts(t, db, false)
	settings := catalog.NewSettings(db, parts.log)
	g, err := gate.New(gate.Config{Lease: gate.NoLease, Log: parts.log, Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := trading.New(trading.Config{DB: db, Prices: &desk.Quotes{}, Gate: g, Log: parts.log, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewServer(Deps{Log: parts.log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, parts.log), Quotes: &desk.Quotes{}, Metrics: metrics.New("test"),
		Trading: svc, Catalog: parts.admin, Settings: settings, Alerts: alert.NewInbox(db, parts.log), Auth: auth.NewResolver(db)})
	if err != nil {
		t.Fatal(err)
	}
	d := &moneyDesk{t: t, srv: httptest.NewServer(h), tokens: map[string]string{}}
	t.Cleanup(d.srv.Close)
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	for name, g := range map[string]auth.Grant{
		"alice": {UserID: 11, Role: auth.RoleFinance}, "alice2": {UserID: 11, Role: auth.RoleFinance}, "bob": {UserID: 12, Role: auth.RoleFinance},
		"risk": {UserID: 13, Role: auth.RoleRisk}, "super": {UserID: 14, Role: auth.RoleSuperadmin},
	} {
		g.Label = name
		if d.tokens[name], _, err = auth.Issue(ctx, db, g); err != nil {
			t.Fatal(err)
		}
	}
	a, err := svc.Accounts().Open(ctx, 501, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	d.account = a.ID
	return d
}

// call sends one request as the named token and decodes the answer into v (when non-nil).
func (d *moneyDesk) call(who, method, path, body string, v any) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.tokens[who])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			d.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

type moneyAnswer struct {
	MoneyRequest *moneyRequestView `json:"moneyRequest"`
	Deal         *struct {
		ID     int64  `json:"id"`
		Type   string `json:"type"`
		Amount string `json:"amount"`
	} `json:"deal"`
	Replayed bool `json:"replayed"`
}

// The four-eyes flow over HTTP: a deposit above the threshold answers 202 with the PENDING
// request (a retry the same one); its asker is refused (403) with either of their tokens; a
// second finance user's approval answers the request APPROVED with its deal, and again the
// same deal replayed; a rejected request cannot be approved (409). The list filters by state
// and account and pages. Only the superadmin moves the threshold, and "off" makes the same
// deposit at once.
func TestFourEyesOverTheAPI(t *testing.T) {
	t.Parallel()
	d := newMoneyDesk(t)
	deposit := fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", d.account)
	var pending moneyAnswer
	if code, body := d.call("alice", "POST", deposit, `{"amount":"20000.00","requestNonce":"big-1","comment":"wire 4711"}`, &pending); code != http.StatusAccepted || pending.Deal != nil {
		t.Fatalf("a deposit above the threshold: %d %s, want 202 with the request", code, body)
	}
	r := pending.MoneyRequest
	if r == nil || r.AccountID != d.account || r.Kind != "DEPOSIT" || r.Amount != "20000.00" || r.Currency != "USD" || r.State != "PENDING" || r.RequestedBy != 11 ||
		r.Comment != "wire 4711" || r.DealID != nil || r.ExpiresAt.IsZero() || pending.Replayed {
		t.Fatalf("the pending request: %+v", pending)
	}
	var retry moneyAnswer
	if code, body := d.call("alice", "POST", deposit, `{"amount":"20000.00","requestNonce":"big-1","comment":"wire 4711"}`, &retry); code != http.StatusAccepted ||
		retry.MoneyRequest.ID != r.ID || !retry.Replayed {
		t.Fatalf("the retry: %d %s", code, body)
	}
	approve := fmt.Sprintf("/api/admin/fx/money-requests/%d/approve", r.ID)
	for _, who := range []string{"alice", "alice2"} {
		if code, body := d.call(who, "POST", approve, "", nil); code != http.StatusForbidden || !strings.Contains(body, "another finance user must approve it") {
			t.Fatalf("%s approving their own request: %d %s", who, code, body)
		}
	}
	var list struct {
		MoneyRequests []moneyRequestView `json:"moneyRequests"`
		NextBefore    *int64             `json:"nextBefore"`
	}
	if code, body := d.call("bob", "GET", fmt.Sprintf("/api/admin/fx/money-requests?state=PENDING&accountId=%d", d.account), "", &list); code != http.StatusOK ||
		len(list.MoneyRequests) != 1 || list.MoneyRequests[0].ID != r.ID {
		t.Fatalf("the pending list: %d %s", code, body)
	}
	var done moneyAnswer
	if code, body := d.call("bob", "POST", approve, "{}", &done); code != http.StatusOK || done.Replayed || done.Deal == nil || done.MoneyRequest.State != "APPROVED" ||
		done.MoneyRequest.DealID == nil || *done.MoneyRequest.DealID != done.Deal.ID || done.Deal.Amount != "20000.00" || done.Deal.Type != "DEPOSIT" ||
		done.MoneyRequest.DecidedBy == nil || *done.MoneyRequest.DecidedBy != 12 {
		t.Fatalf("bob's approval: %d %s", code, body)
	}
	var again moneyAnswer
	if code, body := d.call("bob", "POST", approve, "", &again); code != http.StatusOK || !again.Replayed || again.Deal.ID != done.Deal.ID {
		t.Fatalf("approving again: %d %s", code, body)
	}

	// A staff withdrawal below the threshold is made at once.
	var w moneyAnswer
	if code, body := d.call("alice", "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/withdraw", d.account), `{"amount":"100.00"}`, &w); code != http.StatusCreated ||
		w.Deal == nil || w.Deal.Amount != "-100.00" || w.Deal.Type != "WITHDRAWAL" {
		t.Fatalf("a small staff withdrawal: %d %s", code, body)
	}

	// Rejected: cannot be approved.
	var rej moneyAnswer
	d.call("alice", "POST", deposit, `{"amount":"15000.00","requestNonce":"big-2"}`, &rej)
	reject := fmt.Sprintf("/api/admin/fx/money-requests/%d/reject", rej.MoneyRequest.ID)
	if code, body := d.call("bob", "POST", reject, `{"reason":"no wire arrived"}`, &rej); code != http.StatusOK || rej.MoneyRequest.State != "REJECTED" ||
		rej.MoneyRequest.Reason == nil || *rej.MoneyRequest.Reason != "no wire arrived" {
		t.Fatalf("the rejection: %d %s", code, body)
	}
	if code, body := d.call("bob", "POST", fmt.Sprintf("/api/admin/fx/money-requests/%d/approve", rej.MoneyRequest.ID), "", nil); code != http.StatusConflict {
		t.Fatalf("approving a rejected request: %d %s", code, body)
	}

	// The list: by state, paged newest first; bad parameters refused by name.
	if code, body := d.call("bob", "GET", "/api/admin/fx/money-requests?limit=1", "", &list); code != http.StatusOK || len(list.MoneyRequests) != 1 ||
		list.MoneyRequests[0].ID != rej.MoneyRequest.ID || list.NextBefore == nil {
		t.Fatalf("the first page: %d %s", code, body)
	}
	if code, body := d.call("bob", "GET", fmt.Sprintf("/api/admin/fx/money-requests?limit=1&before=%d", *list.NextBefore), "", &list); code != http.StatusOK ||
		len(list.MoneyRequests) != 1 || list.MoneyRequests[0].ID != r.ID || list.MoneyRequests[0].State != "APPROVED" {
		t.Fatalf("the second page: %d %s", code, body)
	}
	for _, q := range []string{"state=LOST", "limit=0", "accountId=x", "colour=red"} {
		if code, body := d.call("bob", "GET", "/api/admin/fx/money-requests?"+q, "", nil); code != http.StatusBadRequest {
			t.Errorf("money-requests?%s: %d %s, want 400", q, code, body)
		}
	}

	// The threshold: the superadmin's alone; off, the same deposit is made at once.
	if code, body := d.call("risk", "PUT", "/api/admin/fx/settings", `{"fxFourEyesAbove":"off"}`, nil); code != http.StatusForbidden || !strings.Contains(body, "tokens") {
		t.Fatalf("the risk desk lifting four eyes: %d %s", code, body)
	}
	if code, body := d.call("super", "PUT", "/api/admin/fx/settings", `{"fxFourEyesAbove":"ten"}`, nil); code != http.StatusBadRequest || !strings.Contains(body, "fxFourEyesAbove must be") {
		t.Fatalf("a threshold that is no amount: %d %s", code, body)
	}
	if code, body := d.call("super", "PUT", "/api/admin/fx/settings", `{"fxFourEyesAbove":"off"}`, nil); code != http.StatusOK {
		t.Fatalf("the superadmin switching four eyes off: %d %s", code, body)
	}
	var direct moneyAnswer
	if code, body := d.call("alice", "POST", deposit, `{"amount":"20000.00"}`, &direct); code != http.StatusCreated || direct.Deal == nil || direct.Deal.Amount != "20000.00" {
		t.Fatalf("a large deposit with four eyes off: %d %s", code, body)
	}
}
