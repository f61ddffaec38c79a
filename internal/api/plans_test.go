package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/hedge"
	"fxdesk/internal/metrics"
	"fxdesk/internal/relay"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/sqlrec"
	"fxdesk/internal/yeargen"
)

// largeTable is the row count above which a table is large for the plan check: on Small() the
// accounts (300) are large, the catalog's tables (instruments, groups, settings) are not.
const largeTable = 200

// unplannedGets are the GET routes the plan walk does not call, each with the reason. Every
// other GET route must have calls in planCalls: a new route fails the walk until it does.
var unplannedGets = map[string]string{
	// Streams: they hold the connection open. The events stream reads the outbox from a cursor
	// as the events page does (called below); the markets rail reads no table.
	"/api/fx/events/stream":  "a stream; its reads are the events page's",
	"/api/fx/markets/stream": "a stream of the tick engine's quotes; no SQL",
	// The holder's tick engine answers these from memory; they read no table.
	"/api/admin/fx/price-sources":          "the tick engine's state in memory; no SQL",
	"/api/admin/fx/price-sources/rejected": "the tick engine's state in memory; no SQL",
	"/admin/login":                         "the sign-in form; no SQL",
}

// boundedReads are the reads allowed a scan or a sort over a table the walk calls large, by
// route and table, each with what bounds it — never the history's length. Any other problem of
// the route fails the walk.
var boundedReads = map[string]map[string]string{
	"/admin/status":     dealerPnLBounds,
	"/api/admin/fx/pnl": dealerPnLBounds,
	// The desk report's totals per currency add up the frozen day's rows: one per account.
	"/api/admin/fx/eod": {"fx_eod_account": "one frozen day: a row per account, grouped by currency"},
}

// dealerPnLBounds: the PnL (and the status page, which shows today's) groups the summary rows of
// its range's whole hours — hours × symbols × kinds, a day's few thousand, never the deals — and
// reads every account's group and currency once to mark the open book (a row per account).
var dealerPnLBounds = map[string]string{
	"fx_pnl_hour": "the range's whole hours: hours × symbols × kinds",
	"fx_pnl_day":  "the range's whole trading days: days × symbols",
	"fx_account":  "a row per account, for the open book's groups and currencies",
	// The ledger is read only for the range's partial edge hours and what is not summarised yet
	// (the last closed hours), on idx_fx_deal_created: grouped by hour, currency and symbol.
	"fx_deal": "the range's unsummarised edge hours, on idx_fx_deal_created",
	// And the openings of those hours (their markup), on idx_fx_position_opened.
	"fx_position": "the range's unsummarised edge hours' openings, on idx_fx_position_opened",
}

// windowSorts are the routes allowed to sort one table's rows within a time window the caller
// gives, each with why that is bounded. The audit log pages by id, newest first; a from/to
// window is read on idx_fx_audit_at and its entries sorted by id: an id-ordered read cannot seek
// to an instant, since ids are taken at INSERT and rows commit out of that order (audit.After).
// The sort is a top-limit sort of the window's entries (a 30-day window of a year's log answered
// in 71 / 172 ms on a generated year); without a window the log is read on the primary key.
var windowSorts = map[string]string{
	"/api/admin/fx/audit": "fx_audit",
}

// planCall is one request of the walk: as whom, and the path with its query.
type planCall struct {
	as   string // "big", "small", "dealer", "admin", "" (no token)
	path string
	want int // expected status; 0 means 200
}

// planCalls are the requests that exercise each GET route, on the generated desk r.
func planCalls(r yeargen.Result, ids planIDs) map[string][]planCall {
	trader := func(path string) []planCall {
		return []planCall{{as: "big", path: path}, {as: "small", path: path}}
	}
	acct := func(format string) string { return fmt.Sprintf(format, r.BigAccount) }
	day := r.End.Format(time.DateOnly)
	monthAgo := r.End.AddDate(0, 0, -30)
	return map[string][]planCall{
		"/healthz":      {{path: "/healthz"}},
		"/readyz":       {{path: "/readyz", want: -1}}, // a desk with no lease answers 503: its reads still run
		"/metrics":      {{as: "dealer", path: "/metrics"}},
		"/admin/status": {{as: "dealer", path: "/admin/status"}},

		"/api/fx/accounts":                trader("/api/fx/accounts"),
		"/api/fx/accounts/{id}":           {{as: "big", path: acct("/api/fx/accounts/%d")}},
		"/api/fx/accounts/{id}/statement": {{as: "big", path: acct("/api/fx/accounts/%d/statement") + "?from=" + monthAgo.Format(time.DateOnly) + "&to=" + day, want: -1}},
		"/api/fx/deals": append(trader("/api/fx/deals"),
			planCall{as: "big", path: "/api/fx/deals?limit=50"},
			planCall{as: "big", path: acct("/api/fx/deals?accountId=%d")},
			planCall{as: "big", path: fmt.Sprintf("/api/fx/deals?limit=50&before=%d", ids.midDeal)}),
		"/api/fx/positions": append(trader("/api/fx/positions?status=closed"),
			planCall{as: "big", path: "/api/fx/positions"},
			planCall{as: "big", path: "/api/fx/positions?status=open"},
			planCall{as: "big", path: fmt.Sprintf("/api/fx/positions?status=closed&limit=50&before=%d", ids.midPosition)},
			planCall{as: "big", path: acct("/api/fx/positions?status=closed&accountId=%d")}),
		"/api/fx/orders": append(trader("/api/fx/orders"),
			planCall{as: "big", path: "/api/fx/orders?status=pending"},
			planCall{as: "big", path: fmt.Sprintf("/api/fx/orders?limit=50&before=%d", ids.midOrder)},
			planCall{as: "big", path: acct("/api/fx/orders?status=filled&accountId=%d")}),
		"/api/fx/events": append(trader("/api/fx/events"),
			planCall{as: "big", path: fmt.Sprintf("/api/fx/events?after=%d", ids.midEvent)},
			planCall{as: "big", path: acct("/api/fx/events?accountId=%d")}),
		"/api/fx/symbols": {{as: "big", path: "/api/fx/symbols"}},
		"/api/fx/quotes":  {{as: "big", path: "/api/fx/quotes", want: -1}},
		"/api/fx/candles": {{as: "big", path: "/api/fx/candles?symbol=EURUSD&granularity=M1&count=100", want: -1}},

		"/api/admin/fx/money-requests": {{as: "admin", path: "/api/admin/fx/money-requests"}},
		// A page that is to Small()'s 300 accounts what the default 500 is to a year's 20,000:
		// at 500 the page is every account, and the optimiser rightly reads the whole table.
		"/api/admin/fx/accounts":                        {{as: "dealer", path: "/api/admin/fx/accounts?limit=10"}, {as: "dealer", path: fmt.Sprintf("/api/admin/fx/accounts?limit=10&before=%d", ids.midAccount)}},
		"/api/admin/fx/settings":                        {{as: "dealer", path: "/api/admin/fx/settings"}},
		"/api/admin/fx/instruments":                     {{as: "dealer", path: "/api/admin/fx/instruments"}},
		"/api/admin/fx/account-groups":                  {{as: "dealer", path: "/api/admin/fx/account-groups"}},
		"/api/admin/fx/account-groups/{name}":           {{as: "dealer", path: "/api/admin/fx/account-groups/" + ids.group}},
		"/api/admin/fx/symbol-groups":                   {{as: "dealer", path: "/api/admin/fx/symbol-groups"}},
		"/api/admin/fx/account-groups/{name}/overrides": {{as: "dealer", path: "/api/admin/fx/account-groups/" + ids.group + "/overrides"}},
		"/api/admin/fx/accounts/{id}/effective":         {{as: "dealer", path: acct("/api/admin/fx/accounts/%d/effective")}},
		"/api/admin/fx/accounts/{id}/profile":           {{as: "dealer", path: acct("/api/admin/fx/accounts/%d/profile")}},
		"/api/admin/fx/accounts/{id}/statement":         {{as: "dealer", path: acct("/api/admin/fx/accounts/%d/statement") + "?from=" + monthAgo.Format(time.DateOnly) + "&to=" + day, want: -1}},
		"/api/admin/fx/account-groups/{name}/routing":   {{as: "dealer", path: "/api/admin/fx/account-groups/" + ids.group + "/routing"}},
		"/api/admin/fx/desk":                            {{as: "dealer", path: "/api/admin/fx/desk"}},
		"/api/admin/fx/pnl": {{as: "dealer", path: "/api/admin/fx/pnl"},
			{as: "dealer", path: "/api/admin/fx/pnl?from=" + r.End.AddDate(0, 0, -7).Format(time.RFC3339) + "&to=" + r.End.Format(time.RFC3339), want: -1}},
		"/api/admin/fx/eod":          {{as: "dealer", path: "/api/admin/fx/eod", want: -1}},
		"/api/admin/fx/eod/accounts": {{as: "dealer", path: "/api/admin/fx/eod/accounts", want: -1}},
		"/api/admin/fx/eod/days":     {{as: "dealer", path: "/api/admin/fx/eod/days"}},
		"/api/admin/fx/hedge-book":   {{as: "dealer", path: "/api/admin/fx/hedge-book"}},
		"/api/admin/fx/audit": {{as: "dealer", path: "/api/admin/fx/audit"},
			{as: "dealer", path: "/api/admin/fx/audit?from=" + monthAgo.Format(time.RFC3339) + "&to=" + r.End.Format(time.RFC3339)},
			{as: "dealer", path: "/api/admin/fx/audit?entityType=account&entityId=1"},
			{as: "dealer", path: fmt.Sprintf("/api/admin/fx/audit?before=%d", ids.midAudit)}},
		"/api/admin/fx/alerts":                     {{as: "dealer", path: "/api/admin/fx/alerts"}},
		"/api/admin/fx/webhooks":                   {{as: "dealer", path: "/api/admin/fx/webhooks"}},
		"/api/admin/fx/webhooks/{id}/dead-letters": {{as: "dealer", path: "/api/admin/fx/webhooks/1/dead-letters", want: -1}},
		"/api/admin/fx/tokens":                     {{as: "admin", path: "/api/admin/fx/tokens"}, {as: "admin", path: fmt.Sprintf("/api/admin/fx/tokens?userId=%d", r.BigUser)}},
	}
}

// planIDs are ids from the middle of the generated history, for the calls that page from one.
type planIDs struct {
	midDeal, midPosition, midOrder, midEvent, midAudit, midAccount int64
	group                                                          string
}

// Every GET route the API serves, called as a trader with a long history, a trader with a short
// one and a dealer, over a generated desk (yeargen.Small()): each read the handlers send is
// recorded through the real driver (internal/testkit/sqlrec) and EXPLAINed with its own
// arguments, and a full scan, a filesort or a temporary table over a large table fails the
// test (docs/architecture.md, «Reading a trader's history»). The routes come from the router,

// recordedServer is the desk's API over a pool of dsn that records every statement, its parts
// as the web process wires them for a follower (no lease: nothing fills), with a private Redis.
func recordedServer(t *testing.T, dsn string) (http.Handler, *sqlrec.Recorder) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, rec, err := sqlrec.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	parts := newTestParts(t, db, true)
	inbox := alert.NewInbox(db, log)
	m := metrics.New("test")
	m.WatchAlerts(inbox)
	m.WatchRelay(func(ctx context.Context) (relay.Status, error) { return relay.ReadStatus(ctx, db) })
	hedgeBook, err := hedge.NewBook(hedge.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	// The desk's status reads the lease's Redis tag too: a private Redis, as every test package.
	red, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(red.Stop)
	rdb, err := store.OpenRedis("redis://" + red.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	h, err := NewServer(Deps{Log: log, DB: db, Desk: desk.NewCron(db, rdb, desk.Config{}, log), Quotes: &desk.Quotes{}, Metrics: m,
		Trading: parts.svc, Catalog: parts.admin, Settings: catalog.NewSettings(db, log), Alerts: inbox, Auth: auth.NewResolver(db),
		Hedge: hedgeBook})
	if err != nil {
		t.Fatal(err)
	}
	return h, rec
}

// so a new GET route fails here until it is called or skipped with a reason.
func TestEveryGetRouteReadsOnABoundedPlan(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	d, err := dbtest.NewDatabase("api_plans")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	setup, err := store.OpenMigrated(ctx, d.DSN, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { setup.Close() })
	res, err := yeargen.Fill(ctx, setup, yeargen.Small(), 42, time.Now().UTC(), log)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := auth.Create(audit.WithActor(ctx, audit.Actor{Via: "test"}), setup, 7, true, "plans")
	if err != nil {
		t.Fatal(err)
	}
	var ids planIDs
	for q, into := range map[string]*int64{
		"SELECT `id` FROM `fx_deal` WHERE `accountId` = ? ORDER BY `id` LIMIT 1 OFFSET 200":     &ids.midDeal,
		"SELECT `id` FROM `fx_position` WHERE `accountId` = ? ORDER BY `id` LIMIT 1 OFFSET 100": &ids.midPosition,
		"SELECT `id` FROM `fx_order` WHERE `accountId` = ? ORDER BY `id` LIMIT 1 OFFSET 100":    &ids.midOrder,
	} {
		if err := setup.QueryRowContext(ctx, q, res.BigAccount).Scan(into); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := setup.QueryRowContext(ctx, "SELECT COALESCE(MAX(`id`), 0) DIV 2 FROM `fx_event`").Scan(&ids.midEvent); err != nil {
		t.Fatal(err)
	}
	if err := setup.QueryRowContext(ctx, "SELECT COALESCE(MAX(`id`), 0) DIV 2 + 1 FROM `fx_account`").Scan(&ids.midAccount); err != nil {
		t.Fatal(err)
	}
	if err := setup.QueryRowContext(ctx, "SELECT COALESCE(MAX(`id`), 0) DIV 2 + 1 FROM `fx_audit`").Scan(&ids.midAudit); err != nil {
		t.Fatal(err)
	}
	if err := setup.QueryRowContext(ctx, "SELECT `name` FROM `fx_account_group` ORDER BY `name` LIMIT 1").Scan(&ids.group); err != nil {
		t.Fatal(err)
	}
	tables, err := sqlrec.Tables(ctx, setup)
	if err != nil {
		t.Fatal(err)
	}

	// The desk's API over a pool that records every read; the parts as the web process wires
	// them for a follower (no lease: nothing here fills).
	h, rec := recordedServer(t, d.DSN)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tokens := map[string]string{"big": res.BigToken, "small": res.SmallToken, "dealer": res.DealerToken, "admin": admin}

	calls := planCalls(res, ids)
	var routes []string
	if err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method == http.MethodGet {
			routes = append(routes, strings.TrimSuffix(route, "/"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(routes)
	if len(routes) < 40 {
		t.Fatalf("only %d GET routes walked; the walk is not seeing the router", len(routes))
	}
	perRoute := map[string][]sqlrec.Statement{}
	for _, route := range routes {
		if _, skip := unplannedGets[route]; skip {
			continue
		}
		if len(calls[route]) == 0 {
			t.Errorf("GET %s is not exercised by the plan walk: add calls to planCalls, or a reason to unplannedGets", route)
			continue
		}
		for _, c := range calls[route] {
			rec.Take() // whatever ran between calls (the resolver's cache, a collector) is not this route's
			rec.Tag(c.as + " " + c.path)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+c.path, nil)
			if tok := tokens[c.as]; tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := c.want; (want == 0 && resp.StatusCode != http.StatusOK) || (want > 0 && resp.StatusCode != want) {
				t.Errorf("GET %s as %s: %d %.300s", c.path, c.as, resp.StatusCode, body)
			}
			perRoute[route] = append(perRoute[route], rec.Take()...)
		}
	}
	for name := range unplannedGets {
		if !slices.Contains(routes, name) {
			t.Errorf("unplannedGets names %s, which the router no longer serves", name)
		}
	}

	checked := 0
	for _, route := range slices.Sorted(maps.Keys(perRoute)) {
		seen := map[string]bool{}
		var problems []string
		for _, s := range perRoute[route] {
			key := s.Text + fmt.Sprint(s.Args)
			if seen[key] {
				continue
			}
			seen[key] = true
			ps, err := sqlrec.Check(ctx, setup, s, tables, largeTable)
			if err != nil {
				t.Errorf("GET %s: %v", route, err)
				continue
			}
			checked++
			for _, p := range ps {
				if windowSorts[route] == p.Table && p.Why == "sort or temporary table" && strings.Contains(p.Statement.Text, "`at` >= ?") {
					continue
				}
				if _, bounded := boundedReads[route][p.Table]; bounded {
					continue
				}
				problems = append(problems, p.String())
			}
		}
		if len(problems) > 0 {
			t.Errorf("GET %s reads over a large table:\n  %s", route, strings.Join(problems, "\n  "))
		}
	}
	t.Logf("%d distinct reads of %d routes explained; large tables: %v", checked, len(perRoute), largeTables(tables))
}

func largeTables(tables map[string]int64) []string {
	var out []string
	for name, n := range tables {
		if n > largeTable {
			out = append(out, fmt.Sprintf("%s=%d", name, n))
		}
	}
	slices.Sort(out)
	return out
}
