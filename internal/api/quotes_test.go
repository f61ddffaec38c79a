package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
	"fxdesk/internal/trading"
)

// fixedFeed is a price source whose last quotes never change.
type fixedFeed map[string]tick.Quote

func (f fixedFeed) LastTick(s string) (tick.Quote, bool) { q, ok := f[s]; return q, ok }
func (f fixedFeed) SymbolState(string) tick.State        { return tick.Quoting }
func (f fixedFeed) Updates([]string) (<-chan tick.Update, func()) {
	return make(chan tick.Update), func() {}
}

// The quotes and symbols routes answer the feed's prices without accountId, and with it the
// prices that account trades at: its group's effective markup taken off the bid and added to the
// ask, per symbol, as book.FillPrice prices its fills. Another user's account is not found; an
// admin may name any. The database is made here so this file stands alone in the package.
func TestQuotesForAnAccountCarryItsGroupsMarkup(t *testing.T) {
	db, closeDB, err := dbtest.NewMigrated("api_quotes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	log := slog.New(slog.DiscardHandler)
	cache := catalog.NewCache(db, time.Minute)
	admin, err := catalog.NewAdmin(catalog.AdminConfig{DB: db, Cache: cache, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(gate.Config{Lease: gate.NoLease, Log: log, Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	quotes := &desk.Quotes{}
	at := time.UnixMilli(1700000000123)
	quotes.SetFollowed(fixedFeed{
		"EURUSD": {Bid: 1.1, Ask: 1.1002, ReceivedAt: time.Now(), ProviderTime: at},
		"GBPUSD": {Bid: 1.25, Ask: 1.2502, ReceivedAt: time.Now(), ProviderTime: at},
		"USDJPY": {Bid: 150, Ask: 150.02, ReceivedAt: time.Now(), ProviderTime: at},
	})
	svc, err := trading.New(trading.Config{DB: db, Prices: quotes, Gate: g, Log: log, Catalog: cache})
	if err != nil {
		t.Fatal(err)
	}

	// Group vip: 10 points on EURUSD, half a point on GBPUSD (a price finer than the symbol's
	// digits), nothing on USDJPY (the majors' markup, 0).
	ctx := audit.WithActor(context.Background(), audit.Actor{TokenID: 1, UserID: 7, Via: "api"})
	if _, err := admin.CreateAccountGroup(ctx, "vip", catalog.AccountGroupPatch{}); err != nil {
		t.Fatal(err)
	}
	for symbol, points := range map[string]string{"EURUSD": "10", "GBPUSD": "0.5"} {
		m := decimal.RequireFromString(points)
		if _, _, err := admin.PutOverride(ctx, catalog.Override{AccountGroup: "vip", Symbol: symbol, MarkupPoints: &m}); err != nil {
			t.Fatal(err)
		}
	}
	account := func(user int64, group string) string {
		res, err := db.Exec("INSERT INTO `fx_account` (`userId`, `accountGroup`, `currency`, `leverage`) VALUES (?, ?, 'USD', 100)", user, group)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return strconv.FormatInt(id, 10)
	}
	vipAcct, otherAcct := account(42, "vip"), account(43, "default")

	r := chi.NewRouter()
	// What requireToken does: the caller (X-User, an admin with X-Admin) travels in the context.
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, _ := strconv.ParseInt(r.Header.Get("X-User"), 10, 64)
			p := auth.Principal{UserID: user, Role: auth.RoleTrader, Scopes: auth.AllScopes}
			if r.Header.Get("X-Admin") != "" {
				p.Role = auth.RoleViewer
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		})
	})
	r.Get("/quotes", handleQuotes(log, admin, svc, quotes))
	r.Get("/symbols", handleSymbols(log, admin, svc, quotes))
	r.Get("/markets/stream", handleMarketsStream(log, admin, nil))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	call := func(user int64, isAdmin bool, path string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("X-User", strconv.FormatInt(user, 10))
		if isAdmin {
			req.Header.Set("X-Admin", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	type shown struct{ Symbol, Bid, Ask string }
	prices := func(user int64, isAdmin bool, path, key string) map[string]shown {
		t.Helper()
		st, b := call(user, isAdmin, path)
		if st != 200 {
			t.Fatalf("GET %s: %d %s", path, st, b)
		}
		var out map[string][]shown
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("GET %s: %q: %v", path, b, err)
		}
		m := map[string]shown{}
		for _, s := range out[key] {
			m[s.Symbol] = s
		}
		return m
	}

	raw := map[string]shown{
		"EURUSD": {"EURUSD", "1.10000", "1.10020"},
		"GBPUSD": {"GBPUSD", "1.25000", "1.25020"},
		"USDJPY": {"USDJPY", "150.000", "150.020"},
	}
	vip := map[string]shown{
		"EURUSD": {"EURUSD", "1.09990", "1.10030"}, // ∓ 10 points: a buy fills at 1.10030
		"GBPUSD": {"GBPUSD", "1.249995", "1.250205"},
		"USDJPY": {"USDJPY", "150.000", "150.020"},
	}
	// Intent: without accountId every caller sees the feed; with it, the account's prices, on both
	// routes, for its owner and for an admin; an account in a group without markup sees the feed.
	for _, tc := range []struct {
		user    int64
		isAdmin bool
		query   string
		want    map[string]shown
	}{
		{42, false, "", raw},
		{42, false, "accountId=" + vipAcct, vip},
		{7, true, "accountId=" + vipAcct, vip},
		{43, false, "accountId=" + otherAcct, raw},
	} {
		for _, route := range []struct{ path, key string }{{"/quotes?symbols=EURUSD,GBPUSD,USDJPY&", "quotes"}, {"/symbols?", "symbols"}} {
			got := prices(tc.user, tc.isAdmin, route.path+tc.query, route.key)
			for s, want := range tc.want {
				if got[s] != want {
					t.Errorf("user %d GET %s%s: %s = %+v, want %+v", tc.user, route.path, tc.query, s, got[s], want)
				}
			}
		}
	}

	// Intent: a bad accountId is refused by name, another user's account or none is not found,
	// and the markets stream refuses accountId rather than show the feed as the account's prices.
	for _, tc := range []struct {
		user   int64
		path   string
		status int
		code   string
		want   string
	}{
		{43, "/quotes?accountId=" + vipAcct, 404, "not_found", "Account " + vipAcct + " not found"},
		{43, "/symbols?accountId=" + vipAcct, 404, "not_found", "Account " + vipAcct + " not found"},
		{42, "/quotes?accountId=999999", 404, "not_found", "Account 999999 not found"},
		{42, "/quotes?accountId=0", 400, "invalid", "accountId must be a positive whole number"},
		{42, "/quotes?accountId=abc", 400, "invalid", "accountId must be a positive whole number"},
		{42, "/quotes?accountId=", 400, "invalid", "accountId must be a positive whole number"},
		{42, "/symbols?accountId=-1", 400, "invalid", "accountId must be a positive whole number"},
		{42, "/quotes?accountId=" + vipAcct + "&accountId=" + vipAcct, 400, "invalid", "accountId is given 2 times"},
		{42, "/markets/stream?accountId=" + vipAcct, 400, "invalid", "accountId is not taken by the markets stream"},
	} {
		st, b := call(tc.user, false, tc.path)
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(b, &e)
		if st != tc.status || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("user %d GET %s: %d %s; want %d %s with %q", tc.user, tc.path, st, b, tc.status, tc.code, tc.want)
		}
	}
}
