package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/events"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/dbtest"
)

type eventsPage struct {
	Events []events.Entry `json:"events"`
	Next   int64          `json:"next"`
}

// The events page serves the caller's own accounts' events in id order (an admin's: any
// account's), pages by after and limit, refuses a bad or unknown parameter and another's
// account, and stops before a gap in the ids until the gap has settled.
func TestEventsPage(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	db, closeDB, err := dbtest.NewMigrated("api_events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	parts := newTestParts(t, db, false)
	log, svc, admin := parts.log, parts.svc, parts.admin
	h, err := NewServer(Deps{Log: log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, log), Quotes: &desk.Quotes{}, Metrics: metrics.New("test"),
		Trading: svc, Catalog: admin, Settings: catalog.NewSettings(db, log), Alerts: alert.NewInbox(db, log), Auth: auth.NewResolver(db)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	token := func(user int64, isAdmin bool) string {
		tok, err := auth.Create(ctx, db, user, isAdmin, "test")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	adminTok, mine, theirs := token(1, true), token(601, false), token(602, false)
	account := func(user int64) int64 {
		a, err := svc.Accounts().Open(ctx, user, "USD", 100)
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	a, b := account(601), account(602)
	deposit := func(id int64, amount int64, nonce string) {
		if _, _, err := svc.Accounts().Deposit(ctx, id, decimal.NewFromInt(amount), nonce); err != nil {
			t.Fatal(err)
		}
	}
	deposit(a, 100, "a1")
	deposit(b, 200, "b1")
	deposit(a, 300, "a2")
	deposit(a, 400, "a3")
	get := func(tok, query string) (int, eventsPage) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/fx/events"+query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var p eventsPage
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("GET %s: %s: %v", query, body, err)
			}
		}
		return resp.StatusCode, p
	}
	amounts := func(p eventsPage) []string {
		var out []string
		for _, e := range p.Events {
			var b events.Balance
			if err := json.Unmarshal(e.Payload, &b); err != nil {
				t.Fatal(err)
			}
			out = append(out, strconv.FormatInt(e.AccountID, 10)+":"+b.Amount)
		}
		return out
	}
	want := func(what string, p eventsPage, amts ...string) {
		t.Helper()
		got := amounts(p)
		if len(got) != len(amts) {
			t.Fatalf("%s: %v, want %v", what, got, amts)
		}
		for i := range got {
			if got[i] != amts[i] || (i > 0 && p.Events[i].ID <= p.Events[i-1].ID) || p.Events[i].Type != string(events.Deposit) {
				t.Fatalf("%s: %v (%+v), want %v in id order", what, got, p.Events, amts)
			}
		}
	}
	as, bs := strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)

	code, p := get(mine, "")
	if code != http.StatusOK {
		t.Fatalf("own page: %d", code)
	}
	want("own page", p, as+":100.00", as+":300.00", as+":400.00")
	if p.Next != p.Events[2].ID {
		t.Fatalf("next = %d, want the last id %d", p.Next, p.Events[2].ID)
	}
	_, first := get(mine, "?limit=2")
	want("first two", first, as+":100.00", as+":300.00")
	_, rest := get(mine, "?after="+strconv.FormatInt(first.Next, 10))
	want("after the first two", rest, as+":400.00")
	_, none := get(mine, "?after="+strconv.FormatInt(rest.Next, 10))
	want("after the last", none)
	if none.Next != rest.Next {
		t.Fatalf("an empty page's next = %d, want after (%d)", none.Next, rest.Next)
	}
	_, p = get(theirs, "")
	want("the other trader's page", p, bs+":200.00")
	if code, _ := get(mine, "?accountId="+bs); code != http.StatusNotFound {
		t.Fatalf("another's account: %d, want 404", code)
	}
	_, p = get(adminTok, "?accountId="+bs)
	want("admin, one account", p, bs+":200.00")
	_, p = get(adminTok, "")
	want("admin, every account", p, as+":100.00", bs+":200.00", as+":300.00", as+":400.00")
	for _, q := range []string{"?since=1", "?after=-1", "?after=x", "?limit=0", "?limit=501", "?after=1&after=2", "?accountId=0"} {
		if code, _ := get(mine, q); code != http.StatusBadRequest {
			t.Errorf("GET /api/fx/events%s: %d, want 400", q, code)
		}
	}

	// A writer that took an id and rolled back gives it back: the next event has the next id,
	// and the page reads on with no gap to wait out.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Record(ctx, tx, events.Event{AccountID: a, UserID: 601, Type: events.Deposit, Payload: events.Balance{}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	deposit(a, 500, "a4")
	code, p = get(mine, "?after="+strconv.FormatInt(rest.Next, 10))
	want("after a rolled-back writer", p, as+":500.00")
	if code != http.StatusOK || p.Events[0].ID != rest.Next+1 {
		t.Fatalf("after a rolled-back writer: %d, first id %d, want %d", code, p.Events[0].ID, rest.Next+1)
	}
}
