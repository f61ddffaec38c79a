package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/events"
	"fxdesk/internal/metrics"
	"fxdesk/internal/relay"
	"fxdesk/internal/routing"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/trading"
)

// auditDesk is the desk's real router over a fresh database, with an admin token.
type auditDesk struct {
	t     *testing.T
	db    *sql.DB
	srv   *httptest.Server
	admin string
	// account is a USD account to deposit into; alertID an OPEN alert to acknowledge; order a
	// PENDING order of account for a dealer to cancel.
	account, alertID, order int64
	cat                     *catalog.Admin
	svc                     *trading.Service
	// ruleUpd and ruleDel are routing rules to change and delete; ruleOrder two rules of group
	// walk-rt-ord to reorder.
	ruleUpd, ruleDel int64
	ruleOrder        [2]int64
	// webhook is an endpoint (a real receiver that accepts) with a dead letter of event
	// deadEvent for the replay to post.
	webhook, deadEvent int64
	// revokable is a live trader token for the revoke route to revoke.
	revokable int64
	// deps built the server, for tests that build its routes again.
	deps Deps
	// priceEngine is the holder's tick engine behind the price-source routes.
	priceEngine *priceEngine
	// moneyAccount is a funded USD account for staff withdrawals, with two PENDING money
	// requests of another user's to approve and to reject (moneyFixtures).
	moneyAccount  int64
	moneyRequests [2]int64
}

// fixtures adds what the walk's delete routes delete and its move moves into.
func (d *auditDesk) fixtures() {
	// What the delete routes delete and the move moves into: a symbol group, an empty account
	// group, a group to move into, one to switch to EXTERNAL, overrides on one symbol and on one
	// symbol group.
	ctxAdmin := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	admin, db, t := d.cat, d.db, d.t
	if _, _, err := admin.PutSymbolGroup(ctxAdmin, catalog.SymbolGroupPatch{Name: "walk-del"}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"walk-empty", "walk-move", "walk-ext"} {
		if _, err := admin.CreateAccountGroup(ctxAdmin, g, catalog.AccountGroupPatch{}); err != nil {
			t.Fatal(err)
		}
	}
	three := decimal.NewFromInt(3)
	if _, _, err := admin.PutOverride(ctxAdmin, catalog.Override{AccountGroup: "default", Symbol: "GBPUSD", MarkupPoints: &three}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.PutOverride(ctxAdmin, catalog.Override{AccountGroup: "default", SymbolGroup: "metals", MarkupPoints: &three}); err != nil {
		t.Fatal(err)
	}
	// Routing rules, each group of its own so the walk's order does not matter.
	rule := func(group string) int64 {
		if _, err := admin.CreateAccountGroup(ctxAdmin, group, catalog.AccountGroupPatch{}); err != nil && !strings.Contains(err.Error(), "exists") {
			t.Fatal(err)
		}
		r, err := admin.CreateRoutingRule(ctxAdmin, group, routing.Rule{Symbols: []string{"EURUSD"}, Action: routing.BBook})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	if _, err := admin.CreateAccountGroup(ctxAdmin, "walk-rt-new", catalog.AccountGroupPatch{}); err != nil {
		t.Fatal(err)
	}
	d.ruleUpd, d.ruleDel = rule("walk-rt-upd"), rule("walk-rt-del")
	d.ruleOrder = [2]int64{rule("walk-rt-ord"), rule("walk-rt-ord")}
	res, err := db.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `timeInForce`, `status`) "+
		"VALUES (?, 'EURUSD', 'BUY', 'LIMIT', 0.10, 1.00000, 'GTC', 'PENDING')", d.account)
	if err != nil {
		t.Fatal(err)
	}
	if d.order, err = res.LastInsertId(); err != nil {
		t.Fatal(err)
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	wh, _, err := relay.NewAdmin(db, relay.Sender{}).Create(ctxAdmin, relay.NewWebhook{URL: receiver.URL, Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	d.webhook = wh.ID
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Record(context.Background(), tx, events.Event{AccountID: d.account, UserID: 501, Type: events.Deposit, Payload: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT MAX(`id`) FROM `fx_event`").Scan(&d.deadEvent); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO `fx_webhook_dead` (`webhookId`, `eventId`, `attempts`, `lastStatus`, `lastError`) VALUES (?, ?, 8, 500, 'HTTP 500')", d.webhook, d.deadEvent); err != nil {
		t.Fatal(err)
	}
	if _, d.revokable, err = auth.Issue(ctxAdmin, db, auth.Grant{UserID: 501, Role: auth.RoleTrader, Scopes: auth.AllScopes, Label: "walk-revoke"}); err != nil {
		t.Fatal(err)
	}
	d.moneyFixtures()
}

func newAuditDesk(t *testing.T) (*auditDesk, http.Handler) {
	t.Helper()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	db, closeDB, err := dbtest.NewMigrated("api_audit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	parts := newTestParts(t, db, true)
	log, svc, admin := parts.log, parts.svc, parts.admin
	// Venue: true so a group may be EXTERNAL (the execution-mode write has something to change).
	inbox := alert.NewInbox(db, log)
	deps := Deps{Log: log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, log), Quotes: &desk.Quotes{}, Metrics: metrics.New("test"),
		Trading: svc, Catalog: admin, Settings: catalog.NewSettings(db, log), Alerts: inbox, Auth: auth.NewResolver(db), Webhooks: relay.NewAdmin(db, relay.Sender{})}
	d := &auditDesk{t: t, db: db, deps: deps, priceEngine: newPriceEngine()}
	d.deps.PriceSources = holderPins(t, d, d.priceEngine)
	deps = d.deps
	h, err := NewServer(deps)
	if err != nil {
		t.Fatal(err)
	}
	d.srv = httptest.NewServer(h)
	t.Cleanup(d.srv.Close)
	if d.admin, err = auth.Create(ctx, db, 1, true, "test"); err != nil {
		t.Fatal(err)
	}
	a, err := svc.Accounts().Open(ctx, 501, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	d.account = a.ID
	if err := inbox.Raise(ctx, "audit-walk", alert.Warning, "an alert to acknowledge", nil); err != nil {
		t.Fatal(err)
	}
	open, err := inbox.List(ctx, alert.Filter{Code: "audit-walk"})
	if err != nil || len(open) != 1 {
		t.Fatalf("the alert to acknowledge: %v %v", open, err)
	}
	d.alertID = open[0].ID
	d.cat, d.svc = admin, svc
	return d, h
}

// do sends one admin request and returns its status, body and request id.
func (d *auditDesk) do(method, path, body string) (int, string, string) {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.admin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	reqID := fmt.Sprintf("walk-%d", time.Now().UnixNano())
	req.Header.Set("X-Request-Id", reqID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), reqID
}

// newRows is the audit log's rows after id, oldest first.
func (d *auditDesk) newRows(after int64) []audit.Entry {
	d.t.Helper()
	es, err := audit.List(context.Background(), d.db, audit.Filter{Limit: 500})
	if err != nil {
		d.t.Fatal(err)
	}
	var out []audit.Entry
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].ID > after {
			out = append(out, es[i])
		}
	}
	return out
}

func (d *auditDesk) lastID() int64 {
	d.t.Helper()
	var id int64
	if err := d.db.QueryRow("SELECT COALESCE(MAX(`id`), 0) FROM `fx_audit`").Scan(&id); err != nil {
		d.t.Fatal(err)
	}
	return id
}

// auditedWrite is one admin write route's entry in the walk: a valid request and the one audit
// row it must leave, and a request the route refuses, which must leave none.
type auditedWrite struct {
	path, body         func(d *auditDesk) string // path and body of the valid request (the method is the key's)
	bad                func(d *auditDesk) (path, body string)
	action, entityType string
	entityID           func(d *auditDesk) string
	before             bool   // the row has a before (false: a creation)
	after              string // a fragment the row's after must hold
}

func fixed(s string) func(*auditDesk) string { return func(*auditDesk) string { return s } }

// auditedWrites lists every admin write route, keyed as chi.Walk names it. A route the router
// serves that is missing here fails the walk: a new admin write route adds its entry (a valid
// request, a refused one, the row it records).
var auditedWrites = map[string]auditedWrite{
	"POST /api/admin/fx/accounts/{id}/deposit": {
		path: func(d *auditDesk) string {
			return "/api/admin/fx/accounts/" + strconv.FormatInt(d.account, 10) + "/deposit"
		},
		body: fixed(`{"amount":"250.00","requestNonce":"walk-deposit"}`),
		bad: func(d *auditDesk) (string, string) {
			return "/api/admin/fx/accounts/" + strconv.FormatInt(d.account, 10) + "/deposit", `{"amount":"-5.00"}`
		},
		action: "account.deposit", entityType: "account", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.account, 10) },
		before: true, after: `"balance":"250.00"`,
	},
	"PUT /api/admin/fx/settings": {
		path: fixed("/api/admin/fx/settings"), body: fixed(`{"fxMaxAccountsPerUser":"7"}`),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/settings", `{"fxMaxAccountsPerUser":"0"}` },
		action: "setting.update", entityType: "setting", entityID: fixed("fxMaxAccountsPerUser"),
		before: false, after: `"value":"7"`,
	},
	"PUT /api/admin/fx/instruments": {
		path: fixed("/api/admin/fx/instruments"), body: fixed(`{"instruments":[{"symbol":"EURUSD","leverageMax":55}]}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/instruments", `{"instruments":[{"symbol":"EURUSD","leverageMax":0}]}`
		},
		action: "instrument.update", entityType: "instrument", entityID: fixed("EURUSD"),
		before: true, after: `"leverageMax":55`,
	},
	"PUT /api/admin/fx/account-groups/{name}": {
		path: fixed("/api/admin/fx/account-groups/walk-ext"), body: fixed(`{"executionMode":"EXTERNAL"}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/walk-ext", `{"executionMode":"SIDEWAYS"}`
		},
		action: "account_group.update", entityType: "account_group", entityID: fixed("walk-ext"),
		before: true, after: `"executionMode":"EXTERNAL"`,
	},
	"POST /api/admin/fx/account-groups": {
		path: fixed("/api/admin/fx/account-groups"), body: fixed(`{"name":"walk-new","leverageMax":30,"marginCallLevel":"100","stopOutLevel":"50"}`),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/account-groups", `{"name":"a b"}` },
		action: "account_group.create", entityType: "account_group", entityID: fixed("walk-new"),
		before: false, after: `"leverageMax":30`,
	},
	"PATCH /api/admin/fx/account-groups/{name}": {
		path: fixed("/api/admin/fx/account-groups/walk-move"), body: fixed(`{"maxPendingOrders":5}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/walk-move", `{"leverageMax":0}`
		},
		action: "account_group.update", entityType: "account_group", entityID: fixed("walk-move"),
		before: true, after: `"maxPendingOrders":5`,
	},
	"DELETE /api/admin/fx/account-groups/{name}": {
		path: fixed("/api/admin/fx/account-groups/walk-empty"), body: fixed(""),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/account-groups/default", "" },
		action: "account_group.delete", entityType: "account_group", entityID: fixed("walk-empty"),
		before: true, after: "",
	},
	"POST /api/admin/fx/accounts/{id}/group": {
		path: func(d *auditDesk) string {
			return "/api/admin/fx/accounts/" + strconv.FormatInt(d.account, 10) + "/group"
		},
		body: fixed(`{"group":"walk-move"}`),
		bad: func(d *auditDesk) (string, string) {
			return "/api/admin/fx/accounts/" + strconv.FormatInt(d.account, 10) + "/group", `{"group":"walk-nosuch"}`
		},
		action: "account.move", entityType: "account", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.account, 10) },
		before: true, after: `"group":"walk-move"`,
	},
	"PUT /api/admin/fx/accounts/{id}/state": {
		path: func(d *auditDesk) string {
			return "/api/admin/fx/accounts/" + strconv.FormatInt(d.account, 10) + "/state"
		},
		body: fixed(`{"state":"CLOSE_ONLY","reason":"walk"}`),
		bad: func(d *auditDesk) (string, string) {
			return "/api/admin/fx/accounts/" + strconv.FormatInt(d.account, 10) + "/state", `{"state":"SLEEPY","reason":"walk"}`
		},
		action: "account.state", entityType: "account", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.account, 10) },
		before: true, after: `"state":"CLOSE_ONLY"`,
	},
	"PUT /api/admin/fx/symbol-groups/{name}": {
		path: fixed("/api/admin/fx/symbol-groups/walk-new"), body: fixed(`{"markupPoints":"2"}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/symbol-groups/walk-new", `{"markupPoints":"two"}`
		},
		action: "symbol_group.create", entityType: "symbol_group", entityID: fixed("walk-new"),
		before: false, after: `"markupPoints":"2"`,
	},
	"DELETE /api/admin/fx/symbol-groups/{name}": {
		path: fixed("/api/admin/fx/symbol-groups/walk-del"), body: fixed(""),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/symbol-groups/majors", "" },
		action: "symbol_group.delete", entityType: "symbol_group", entityID: fixed("walk-del"),
		before: true, after: "",
	},
	"PUT /api/admin/fx/account-groups/{name}/overrides/symbols/{symbol}": {
		path: fixed("/api/admin/fx/account-groups/default/overrides/symbols/EURUSD"), body: fixed(`{"markupPoints":"4"}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/default/overrides/symbols/NOSUCH", `{"markupPoints":"4"}`
		},
		action: "symbol_override.create", entityType: "symbol_override", entityID: fixed("default/EURUSD"),
		before: false, after: `"markupPoints":"4"`,
	},
	"DELETE /api/admin/fx/account-groups/{name}/overrides/symbols/{symbol}": {
		path: fixed("/api/admin/fx/account-groups/default/overrides/symbols/GBPUSD"), body: fixed(""),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/default/overrides/symbols/USDJPY", ""
		},
		action: "symbol_override.delete", entityType: "symbol_override", entityID: fixed("default/GBPUSD"),
		before: true, after: "",
	},
	"PUT /api/admin/fx/account-groups/{name}/overrides/symbol-groups/{group}": {
		path: fixed("/api/admin/fx/account-groups/default/overrides/symbol-groups/majors"), body: fixed(`{"commissionPerLot":"2"}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/default/overrides/symbol-groups/nosuch", `{"commissionPerLot":"2"}`
		},
		action: "symbol_override.create", entityType: "symbol_override", entityID: fixed("default/majors"),
		before: false, after: `"commissionPerLot":"2"`,
	},
	"DELETE /api/admin/fx/account-groups/{name}/overrides/symbol-groups/{group}": {
		path: fixed("/api/admin/fx/account-groups/default/overrides/symbol-groups/metals"), body: fixed(""),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/default/overrides/symbol-groups/crosses", ""
		},
		action: "symbol_override.delete", entityType: "symbol_override", entityID: fixed("default/metals"),
		before: true, after: "",
	},
	"POST /api/admin/fx/account-groups/{name}/routing": {
		path: fixed("/api/admin/fx/account-groups/walk-rt-new/routing"), body: fixed(`{"volumeMin":"5","action":"B_BOOK","note":"walk"}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/walk-rt-new/routing", `{"volumeMin":"5","action":"HEDGE 150%"}`
		},
		action: "routing_rule.create", entityType: "routing_rule", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.ruleOrder[1]+1, 10) },
		before: false, after: `"volumeMin":"5"`,
	},
	"PUT /api/admin/fx/account-groups/{name}/routing/{id}": {
		path: func(d *auditDesk) string {
			return "/api/admin/fx/account-groups/walk-rt-upd/routing/" + strconv.FormatInt(d.ruleUpd, 10)
		},
		body: fixed(`{"volumeMax":"2","action":"B_BOOK"}`),
		bad: func(d *auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/walk-rt-upd/routing/" + strconv.FormatInt(d.ruleUpd, 10), `{"volumeMax":"-2","action":"B_BOOK"}`
		},
		action: "routing_rule.update", entityType: "routing_rule", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.ruleUpd, 10) },
		before: true, after: `"volumeMax":"2"`,
	},
	"DELETE /api/admin/fx/account-groups/{name}/routing/{id}": {
		path: func(d *auditDesk) string {
			return "/api/admin/fx/account-groups/walk-rt-del/routing/" + strconv.FormatInt(d.ruleDel, 10)
		},
		body: fixed(""),
		bad: func(d *auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/walk-rt-upd/routing/" + strconv.FormatInt(d.ruleDel, 10), ""
		},
		action: "routing_rule.delete", entityType: "routing_rule", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.ruleDel, 10) },
		before: true, after: "",
	},
	"PUT /api/admin/fx/account-groups/{name}/routing/order": {
		path: fixed("/api/admin/fx/account-groups/walk-rt-ord/routing/order"),
		body: func(d *auditDesk) string { return fmt.Sprintf(`{"ids":[%d,%d]}`, d.ruleOrder[1], d.ruleOrder[0]) },
		bad: func(d *auditDesk) (string, string) {
			return "/api/admin/fx/account-groups/walk-rt-ord/routing/order", fmt.Sprintf(`{"ids":[%d]}`, d.ruleOrder[1])
		},
		action: "routing_rule.reorder", entityType: "account_group", entityID: fixed("walk-rt-ord"),
		before: true, after: `"order":[`,
	},
	"POST /api/admin/fx/orders/{id}/cancel": {
		path:   func(d *auditDesk) string { return "/api/admin/fx/orders/" + strconv.FormatInt(d.order, 10) + "/cancel" },
		body:   fixed(""),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/orders/999999/cancel", "" },
		action: "order.cancel", entityType: "order", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.order, 10) },
		before: true, after: `"status":"CANCELLED"`,
	},
	"PUT /api/admin/fx/price-sources/symbols/{symbol}": {
		path: fixed("/api/admin/fx/price-sources/symbols/EURUSD"),
		body: fixed(`{"pin":"backup"}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/price-sources/symbols/EURUSD", `{"pin":"nowhere"}`
		},
		action: "price_source_pin.update", entityType: "price_source_pin", entityID: fixed("EURUSD"),
		before: false, after: `"pin":"backup"`,
	},
	"POST /api/admin/fx/alerts/{id}/ack": {
		path:   func(d *auditDesk) string { return "/api/admin/fx/alerts/" + strconv.FormatInt(d.alertID, 10) + "/ack" },
		body:   fixed(""),
		bad:    func(*auditDesk) (string, string) { return "/api/admin/fx/alerts/999999/ack", "" },
		action: "alert.acknowledge", entityType: "alert", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.alertID, 10) },
		before: true, after: `"status":"ACKNOWLEDGED"`,
	},
}

func (d *auditDesk) webhookPath(suffix string) string {
	return "/api/admin/fx/webhooks/" + strconv.FormatInt(d.webhook, 10) + suffix
}

func init() {
	auditedWrites["POST /api/admin/fx/webhooks"] = auditedWrite{
		path: fixed("/api/admin/fx/webhooks"), body: fixed(`{"url":"https://host.example/walk","enabled":false}`),
		bad: func(*auditDesk) (string, string) {
			return "/api/admin/fx/webhooks", `{"url":"ftp://host.example/walk"}`
		},
		action: "webhook.create", entityType: "webhook",
		// The fixture's endpoint is the first; a refused create takes no id.
		entityID: func(d *auditDesk) string { return strconv.FormatInt(d.webhook+1, 10) },
		before:   false, after: `"url":"https://host.example/walk"`,
	}
	auditedWrites["PATCH /api/admin/fx/webhooks/{id}"] = auditedWrite{
		path: func(d *auditDesk) string { return d.webhookPath("") }, body: fixed(`{"enabled":true}`),
		bad: func(d *auditDesk) (string, string) {
			return d.webhookPath(""), `{"secret":"another-secret-0123456789"}`
		},
		action: "webhook.update", entityType: "webhook", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.webhook, 10) },
		before: true, after: `"enabled":true`,
	}
	auditedWrites["POST /api/admin/fx/webhooks/{id}/dead-letters/{eventId}/replay"] = auditedWrite{
		path: func(d *auditDesk) string {
			return d.webhookPath("/dead-letters/" + strconv.FormatInt(d.deadEvent, 10) + "/replay")
		},
		body:   fixed(""),
		bad:    func(d *auditDesk) (string, string) { return d.webhookPath("/dead-letters/999999/replay"), "" },
		action: "webhook.replay", entityType: "webhook", entityID: func(d *auditDesk) string { return strconv.FormatInt(d.webhook, 10) },
		before: true, after: `"replayedAt":"`,
	}
}

// auditedInE2E are the admin writes the walk cannot make here — a dealer's close needs the lease
// and a live price — each with the end-to-end test that asserts its audit row.
var auditedInE2E = map[string]string{
	"POST /api/admin/fx/positions/{id}/close": "TestDealerActionsThroughAFollower",
}

// notAudited are the operator-page writes that change nothing in the database, and why.
var notAudited = map[string]string{
	"POST /admin/login":  "sets the browser's cookie from a token; writes nothing",
	"POST /admin/logout": "deletes the browser's cookie; writes nothing",
}

// Every admin write route the router serves records exactly one audit row — the right action,
// entity, actor and request, with before and after — for a valid request, and none for one it
// refuses. The walk fails on an admin write route with no entry in auditedWrites.
func TestEveryAdminWriteIsAudited(t *testing.T) {
	d, h := newAuditDesk(t)
	d.fixtures()
	var walked []string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		admin := strings.HasPrefix(route, "/api/admin/") || strings.HasPrefix(route, "/admin/")
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if admin {
				walked = append(walked, method+" "+route)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(walked) < len(auditedWrites) {
		t.Fatalf("the walk saw %d admin write routes (%v): it is not seeing the router", len(walked), walked)
	}
	seen := map[string]bool{}
	for _, key := range walked {
		seen[key] = true
		if _, ok := notAudited[key]; ok {
			continue
		}
		if name, ok := auditedInE2E[key]; ok {
			src, err := os.ReadFile("../../e2e/dealer_test.go")
			if err != nil || !strings.Contains(string(src), "func "+name+"(") || !strings.Contains(string(src), "fx_audit") {
				t.Errorf("%s is left to e2e's %s, which e2e/dealer_test.go does not hold with an fx_audit check (%v)", key, name, err)
			}
			continue
		}
		w, ok := auditedWrites[key]
		if !ok {
			t.Errorf("admin write route %s has no entry in auditedWrites: add a valid request, a refused one and the audit row it records", key)
			continue
		}
		method, _, _ := strings.Cut(key, " ")
		t.Run(key, func(t *testing.T) {
			d.t = t
			// Refused: a 4xx and no row.
			last := d.lastID()
			badPath, badBody := w.bad(d)
			if code, body, _ := d.do(method, badPath, badBody); code < 400 || code >= 500 {
				t.Fatalf("the refused request answered %d %s", code, body)
			}
			if rows := d.newRows(last); len(rows) != 0 {
				t.Fatalf("a refused request wrote audit rows: %+v", rows)
			}
			// Valid: one row, naming the change, the admin and the request.
			code, body, reqID := d.do(method, w.path(d), w.body(d))
			if code < 200 || code >= 300 {
				t.Fatalf("the valid request answered %d %s", code, body)
			}
			rows := d.newRows(last)
			if len(rows) != 1 {
				t.Fatalf("%d audit rows, want exactly 1: %+v", len(rows), rows)
			}
			e := rows[0]
			if e.Action != w.action || e.EntityType != w.entityType || e.EntityID != w.entityID(d) {
				t.Errorf("row %s %s %s, want %s %s %s", e.Action, e.EntityType, e.EntityID, w.action, w.entityType, w.entityID(d))
			}
			if e.ActorVia != "api" || e.ActorUserID == nil || *e.ActorUserID != 1 || e.ActorTokenID == nil || e.RequestID == nil || *e.RequestID != reqID {
				t.Errorf("row's actor: via %s user %v token %v request %v, want api, user 1, the token, %s", e.ActorVia, e.ActorUserID, e.ActorTokenID, e.RequestID, reqID)
			}
			if (e.Before != nil) != w.before || !strings.Contains(string(e.After), w.after) {
				t.Errorf("row's before %s after %s; want a before: %v, an after holding %s", e.Before, e.After, w.before, w.after)
			}
		})
	}
	d.t = t
	for key := range auditedWrites {
		if !seen[key] {
			t.Errorf("auditedWrites lists %s, which the router does not serve", key)
		}
	}
	for key := range notAudited {
		if !seen[key] {
			t.Errorf("notAudited lists %s, which the router does not serve", key)
		}
	}
}

// The audit route reads the log back newest first with filters and pages, and refuses a bad
// query parameter by name.
func TestAuditRouteFiltersPagesAndRefuses(t *testing.T) {
	d, _ := newAuditDesk(t)
	for i := range 3 {
		if code, body, _ := d.do("POST", "/api/admin/fx/accounts/"+strconv.FormatInt(d.account, 10)+"/deposit", fmt.Sprintf(`{"amount":"1.00","requestNonce":"page-%d"}`, i)); code != http.StatusCreated {
			t.Fatalf("deposit: %d %s", code, body)
		}
	}
	type page struct {
		Entries    []audit.Entry `json:"entries"`
		NextBefore *int64        `json:"nextBefore"`
	}
	get := func(q url.Values) page {
		t.Helper()
		code, body, _ := d.do("GET", "/api/admin/fx/audit?"+q.Encode(), "")
		if code != http.StatusOK {
			t.Fatalf("audit?%s: %d %s", q.Encode(), code, body)
		}
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	acct := strconv.FormatInt(d.account, 10)
	first := get(url.Values{"entityType": {"account"}, "entityId": {acct}, "limit": {"2"}})
	if len(first.Entries) != 2 || first.NextBefore == nil || first.Entries[0].ID < first.Entries[1].ID || *first.NextBefore != first.Entries[1].ID {
		t.Fatalf("first page = %+v", first)
	}
	second := get(url.Values{"entityType": {"account"}, "entityId": {acct}, "limit": {"2"}, "before": {strconv.FormatInt(*first.NextBefore, 10)}})
	if len(second.Entries) != 1 || second.NextBefore != nil || second.Entries[0].ID >= *first.NextBefore {
		t.Fatalf("second page = %+v", second)
	}
	var amounts []string
	for _, e := range append(first.Entries, second.Entries...) {
		var after struct{ Balance string }
		json.Unmarshal(e.After, &after)
		amounts = append(amounts, after.Balance)
	}
	if strings.Join(amounts, " ") != "3.00 2.00 1.00" {
		t.Fatalf("balances after each deposit, newest first: %v", amounts)
	}
	if p := get(url.Values{"actorUserId": {"1"}, "entityType": {"token"}}); len(p.Entries) != 0 {
		t.Fatalf("user 1 issued no token through the API, yet: %+v", p.Entries)
	}
	if p := get(url.Values{"entityType": {"token"}}); len(p.Entries) != 1 || p.Entries[0].ActorVia != "test" {
		t.Fatalf("the test's token issue: %+v", p.Entries)
	}
	now := time.Now().UTC()
	if p := get(url.Values{"from": {now.Add(-time.Hour).Format(time.RFC3339)}, "to": {now.Add(time.Hour).Format(time.RFC3339)}}); len(p.Entries) != 4 {
		t.Fatalf("the last hour holds %d entries, want 4", len(p.Entries))
	}
	if p := get(url.Values{"to": {now.Add(-time.Hour).Format(time.RFC3339)}}); len(p.Entries) != 0 {
		t.Fatalf("before an hour ago: %+v", p.Entries)
	}
	for _, tc := range []struct{ query, names string }{
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=ten", "limit"},
		{"before=-1", "before"},
		{"actorUserId=x", "actorUserId"},
		{"from=yesterday", "from"},
		{"to=2026-01-02", "to"},
		{"from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "from"},
		{"entityType=", "entityType"},
		{"entityId=" + strings.Repeat("x", 65), "entityId"},
		{"entity=account", "entity"},
		{"limit=1&limit=2", "limit"},
	} {
		code, body, _ := d.do("GET", "/api/admin/fx/audit?"+tc.query, "")
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid"`) || !strings.Contains(body, tc.names) {
			t.Errorf("audit?%s = %d %s; want 400 invalid naming %s", tc.query, code, body, tc.names)
		}
	}
}
