package api

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/eod"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/schedule"
	"fxdesk/internal/tick"
)

// statementDesk is the audit desk with two frozen days of one trader's account: deposits and a
// withdrawal, a position opened and closed in two parts, a swap, a second position left open,
// and deal comments a CSV and a page must escape.
type statementDesk struct {
	*auditDesk
	owner, tradeOnly, other, viewer string
	otherAccount                    int64
	path, adminPath                 string
	// day1 and day2 are the frozen days: two weekday rollovers still ahead, so that everything
	// the fixture writes now (positions opened and closed, deals) happened before both.
	day1, day2 fx.Rollover
}

// q is the query of a statement from from to to.
func q(from, to string) string { return "?from=" + from + "&to=" + to }

// stmtCloses quotes the symbols the fixture's positions hold.
type stmtCloses struct{}

func (stmtCloses) LastTick(s string) (tick.Quote, bool) {
	if s != "EURUSD" {
		return tick.Quote{}, false
	}
	return tick.Quote{Bid: 1.0850, Ask: 1.0852, ReceivedAt: time.Now()}, true
}

func (stmtCloses) SymbolState(s string) tick.State {
	if s == "EURUSD" {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// weekdayAfter is the first weekday rollover after t.
func weekdayAfter(t *testing.T, at time.Time) fx.Rollover {
	t.Helper()
	r, err := fx.NextRollover(at)
	if err != nil {
		t.Fatal(err)
	}
	for r.Weekday() == time.Saturday || r.Weekday() == time.Sunday {
		r = r.Next()
	}
	return r
}

// dayAfter is the date n days after date.
func dayAfter(date string, n int) string {
	d, _ := time.Parse("2006-01-02", date)
	return d.AddDate(0, 0, n).Format("2006-01-02")
}

func newStatementDesk(t *testing.T) *statementDesk {
	t.Helper()
	base, _ := newAuditDesk(t)
	d := &statementDesk{auditDesk: base}
	ctx := audit.WithActor(context.Background(), audit.Actor{TokenID: 1, UserID: 7, Via: "test"})
	issue := func(user int64, role auth.Role, scopes auth.Scopes) string {
		tok, _, err := auth.Issue(ctx, d.db, auth.Grant{UserID: user, Role: role, Scopes: scopes, Label: "statement"})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// The audit desk's account belongs to user 501.
	d.owner = issue(501, auth.RoleTrader, auth.Scopes{auth.ScopeRead})
	d.tradeOnly = issue(501, auth.RoleTrader, auth.Scopes{auth.ScopeTrade})
	d.other = issue(502, auth.RoleTrader, auth.AllScopes)
	d.viewer = issue(8, auth.RoleViewer, nil)
	a, err := d.svc.Accounts().Open(ctx, 502, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	d.otherAccount = a.ID
	d.day1 = weekdayAfter(t, time.Now().Add(24*time.Hour))
	d.day2 = weekdayAfter(t, d.day1.At)
	d.path = fmt.Sprintf("/api/fx/accounts/%d/statement", d.account)
	d.adminPath = fmt.Sprintf("/api/admin/fx/accounts/%d/statement", d.account)

	deposit := func(amount string) {
		if _, _, err := d.svc.Accounts().Deposit(ctx, d.account, decimal.RequireFromString(amount), ""); err != nil {
			t.Fatal(err)
		}
	}
	var now time.Time
	job := eod.New(eod.Config{DB: d.db, By: "test", Now: func() time.Time { return now }}, slog.New(slog.DiscardHandler))
	freeze := func(day fx.Rollover) {
		now = day.At.Add(time.Minute)
		if _, err := eod.Capture(ctx, d.db, day, stmtCloses{}, "test"); err != nil {
			t.Fatal(err)
		}
		res := schedule.Result{}
		if err := job.Run(ctx, now, []fx.Rollover{day}, res); err != nil || res["daysFrozen"] != 1 || res["unreconciled"] != 0 {
			t.Fatalf("freeze %s: %v %v", day.Date, res, err)
		}
	}
	deposit("10000.00")
	first := d.position("EURUSD", fx.Buy, "1.00", "1.08000")
	d.post(ledger.Deal{AccountID: d.account, Type: fx.DealCommission, Amount: decimal.RequireFromString("-7.00"), PositionID: &first, Comment: "commission at open"})
	d.post(ledger.Deal{AccountID: d.account, Type: fx.DealSwap, Amount: decimal.RequireFromString("-7.50"), PositionID: &first, Comment: "swap"})
	freeze(d.day1)
	d.closePart(first, "0.40", "1.08500", "200.00", `close "client", part one`)
	d.closePart(first, "0.60", "1.08250", "150.00", "<script>alert(1)</script>")
	// The trader's own withdrawal, while nothing is open (with a position open it needs prices).
	if _, _, err := d.svc.Accounts().Withdraw(ctx, 501, d.account, decimal.RequireFromString("250.25"), ""); err != nil {
		t.Fatal(err)
	}
	second := d.position("EURUSD", fx.Sell, "0.50", "1.08600")
	d.post(ledger.Deal{AccountID: d.account, Type: fx.DealCommission, Amount: decimal.RequireFromString("-3.50"), PositionID: &second, Comment: "commission at open"})
	deposit("0.10")
	freeze(d.day2)
	return d
}

// post writes one deal on the fixture's account through the ledger, on the locked account.
func (d *statementDesk) post(deal ledger.Deal) {
	t := d.t
	t.Helper()
	ctx := context.Background()
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	a := &ledger.Account{ID: deal.AccountID}
	if err := tx.QueryRowContext(ctx, "SELECT `currency`, `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", a.ID).Scan(&a.Currency, &a.Balance); err != nil {
		t.Fatal(err)
	}
	deal.IdempotencyKey = fmt.Sprintf("statement:%d", time.Now().UnixNano())
	p, err := ledger.Post([]*ledger.Account{a}, []ledger.Deal{deal})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exec(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// position opens a position on the fixture's account, opened an hour ago.
func (d *statementDesk) position(symbol string, side fx.Side, volume, price string) int64 {
	d.t.Helper()
	res, err := d.db.Exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `openedAt`) "+
		"VALUES (?, 1, ?, ?, ?, ?, ?, NOW(3) - INTERVAL 1 HOUR)", d.account, symbol, side, volume, volume, price)
	if err != nil {
		d.t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

// closePart closes volume of position at price with profit, closing it when nothing is left.
func (d *statementDesk) closePart(position int64, volume, price, profit, comment string) {
	d.t.Helper()
	vol, px := decimal.RequireFromString(volume), decimal.RequireFromString(price)
	sym, side := "EURUSD", fx.Buy
	d.post(ledger.Deal{AccountID: d.account, Type: fx.DealProfit, Amount: decimal.RequireFromString(profit), PositionID: &position, Symbol: &sym,
		Side: &side, Volume: &vol, Price: &px, Comment: comment})
	if _, err := d.db.Exec("UPDATE `fx_position` SET `volume` = `volume` - ?, `status` = IF(`volume` = 0, 'CLOSED', 'OPEN'), "+
		"`closedAt` = IF(`volume` = 0, NOW(3), NULL), `closePrice` = IF(`volume` = 0, ?, NULL) WHERE `id` = ?", vol, px, position); err != nil {
		d.t.Fatal(err)
	}
}

// get sends one GET with token and returns the status, the content type and the whole body.
func (d *statementDesk) get(token, path string) (int, http.Header, string) {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// The JSON statement of the two days: the fixture's figures, the running balances, the closed
// and open positions and the curve; the staff route gives the same statement.
func TestStatementJSON(t *testing.T) {
	d := newStatementDesk(t)
	d1, d2 := d.day1.Date, d.day2.Date
	st, h, body := d.get(d.owner, d.path+q(d1, dayAfter(d2, 3)))
	if st != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("statement: %d %v %s", st, h, body)
	}
	var got struct{ Statement statementView }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	v := got.Statement
	if v.FrozenThrough != d2 || v.Opening.TradingDay != nil || v.Opening.Balance != "0.00" || v.Closing.Balance != "10081.85" ||
		!v.Reconciled || len(v.BalanceAfterDisagrees) != 0 || len(v.Deals) != 8 {
		t.Fatalf("statement: %s", body)
	}
	want := statementTotals{Deposits: "10000.10", Withdrawals: "-250.25", Profit: "350.00", Swaps: "-7.50", Commissions: "-10.50", Adjustments: "0.00", Net: "10081.85"}
	if v.Totals != want {
		t.Errorf("totals %+v, want %+v", v.Totals, want)
	}
	running := decimal.Zero
	for _, deal := range v.Deals {
		running = running.Add(decimal.RequireFromString(deal.Amount))
		if deal.RunningBalance != money("USD", running) || deal.RunningBalance != deal.BalanceAfter || deal.BalanceAfterDisagrees {
			t.Errorf("deal %d runs to %s (balanceAfter %s), want %s", deal.ID, deal.RunningBalance, deal.BalanceAfter, running)
		}
	}
	if len(v.ClosedPositions) != 1 {
		t.Fatalf("closed positions: %+v", v.ClosedPositions)
	}
	// Two closes: 0.40 at 1.08500 and 0.60 at 1.08250, weighted 1.0835.
	if c := v.ClosedPositions[0]; c.Volume != "1" || c.OpenPrice != "1.08" || c.ClosePrice != "1.0835" || c.Profit != "350.00" || c.Swap != "-7.50" ||
		c.Commission != "-7.00" || c.Symbol != "EURUSD" || c.Side != fx.Buy {
		t.Errorf("closed position %+v", c)
	}
	if v.OpenPositions.Count != 1 || len(v.OpenPositions.Positions) != 1 || v.OpenPositions.Positions[0].Volume != "0.5" || v.OpenPositions.Positions[0].Side != fx.Sell {
		t.Errorf("open positions %+v", v.OpenPositions)
	}
	if len(v.EquityCurve) != 2 || v.EquityCurve[0].TradingDay != d1 || v.EquityCurve[0].Balance != "9985.50" || v.EquityCurve[1].Balance != "10081.85" ||
		v.EquityCurve[1].Equity == nil || v.Closing.Equity == nil || *v.EquityCurve[1].Equity != *v.Closing.Equity {
		t.Errorf("equity curve %+v", v.EquityCurve)
	}
	// Tuesday alone opens on Monday's close, and the staff route serves the same bytes.
	if _, _, tue := d.get(d.owner, d.path+q(d2, d2)); !strings.Contains(tue, `"opening":{"tradingDay":"`+d1+`"`) ||
		!strings.Contains(tue, `"balance":"9985.50"`) {
		t.Errorf("Tuesday: %s", tue)
	}
	if st, _, staff := d.get(d.viewer, d.adminPath+q(d1, dayAfter(d2, 3))); st != http.StatusOK || staff != body {
		t.Errorf("the staff route: %d %s", st, staff)
	}
}

// The CSV, read back, carries exactly the JSON's figures: every summary field under its JSON
// path, and every deal's columns.
func TestStatementCSVReadsBackAsTheJSON(t *testing.T) {
	d := newStatementDesk(t)
	d1, d2 := d.day1.Date, d.day2.Date
	_, _, js := d.get(d.owner, d.path+q(d1, d2))
	st, h, body := d.get(d.owner, d.path+q(d1, d2)+"&format=CSV")
	if st != http.StatusOK || h.Get("Content-Type") != "text/csv; charset=utf-8" ||
		h.Get("Content-Disposition") != fmt.Sprintf(`attachment; filename="statement-%d-%s-%s.csv"`, d.account, d1, d2) {
		t.Fatalf("csv: %d %v %s", st, h, body)
	}
	var doc struct {
		Statement map[string]any `json:"statement"`
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	text := func(v any) string {
		switch x := v.(type) {
		case nil:
			return ""
		case string:
			return x
		case json.Number:
			return x.String()
		case bool:
			return strconv.FormatBool(x)
		}
		t.Fatalf("not a figure: %#v", v)
		return ""
	}
	// The JSON's figures outside the lists, by path.
	leaves := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			switch x := v.(type) {
			case []any:
			case map[string]any:
				walk(prefix+k+".", x)
			default:
				leaves[prefix+k] = text(x)
			}
		}
	}
	walk("", doc.Statement)

	r := csv.NewReader(strings.NewReader(body))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(records[0], []string{"field", "value"}) {
		t.Fatalf("csv starts with %v", records[0])
	}
	summary := map[string]string{}
	i := 1
	for ; i < len(records) && !slices.Equal(records[i], statementCSVDeals); i++ {
		if len(records[i]) != 2 {
			t.Fatalf("summary row %v", records[i])
		}
		summary[records[i][0]] = records[i][1]
	}
	if !maps.Equal(summary, leaves) {
		keys := slices.Sorted(maps.Keys(leaves))
		t.Fatalf("the CSV's summary differs from the JSON's figures:\ncsv  %v\njson %v (%v)", summary, leaves, keys)
	}
	deals := doc.Statement["deals"].([]any)
	rows := records[i+1:]
	if len(rows) != len(deals) || len(deals) != 8 {
		t.Fatalf("%d deal rows, %d deals in the JSON", len(rows), len(deals))
	}
	for n, row := range rows {
		deal := deals[n].(map[string]any)
		for c, name := range statementCSVDeals {
			if _, ok := deal[name]; !ok {
				t.Fatalf("the CSV's column %s is not a field of the JSON's deal", name)
			}
			if row[c] != text(deal[name]) {
				t.Errorf("deal %d %s: csv %q, json %q", n, name, row[c], text(deal[name]))
			}
		}
	}
	if !strings.Contains(body, `"close ""client"", part one"`) {
		t.Errorf("a comment with a quote and a comma is not quoted: %s", body)
	}
}

// The printable page: no script (and a policy that forbids one), every value escaped, a
// header row repeated on every printed page, the totals, and the curve as inline SVG.
func TestStatementHTML(t *testing.T) {
	d := newStatementDesk(t)
	d1, d2 := d.day1.Date, d.day2.Date
	st, h, page := d.get(d.owner, d.path+q(d1, d2)+"&format=html")
	if st != http.StatusOK || h.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("html: %d %v %s", st, h, page)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("policy %q lets a script run", csp)
	}
	if strings.Contains(strings.ToLower(page), "<script") || regexp.MustCompile(`\son[a-z]+=`).MatchString(page) {
		t.Errorf("the page carries script:\n%s", page)
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "@page", "thead{display:table-header-group}", "break-inside:avoid",
		`<td class="n" id="opening-balance">0.00</td>`, `<td class="n" id="closing-balance">10081.85</td>`, `<td class="n" id="total-net">10081.85</td>`,
		`<td class="n" id="total-withdrawals">-250.25</td>`, `<svg id="equity-curve"`, "<polyline", `<thead><tr><th>Deal</th>`,
		`<span id="frozen-through">` + d2 + `</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// Every refusal: a bad parameter is a 400 naming it, another trader's account a 404 as on every
// trader route, the wrong token a 403, a range without a frozen day a 409 — and none of them
// changes anything.
func TestStatementRefusals(t *testing.T) {
	d := newStatementDesk(t)
	d1, d2 := d.day1.Date, d.day2.Date
	before := checksums(t, d.db)
	other := fmt.Sprintf("/api/fx/accounts/%d/statement", d.otherAccount)
	for _, c := range []struct {
		name, token, path string
		status            int
		says              string
	}{
		{"no range", d.owner, d.path, 400, "from is required"},
		{"no to", d.owner, d.path + "?from=" + d1, 400, "to is required"},
		{"a bad from", d.owner, d.path + "?from=2026-3-2&to=" + d2, 400, `from must be a date such as 2026-01-02 (got \"2026-3-2\")`},
		{"a bad to", d.owner, d.path + "?from=" + d1 + "&to=tomorrow", 400, "to must be a date"},
		{"reversed", d.owner, d.path + q(d2, d1), 400, "to (" + d1 + ") is before from (" + d2 + ")"},
		{"too long", d.owner, d.path + q(dayAfter(d2, -366), d2), 400, "at most 366 days"},
		{"an unknown format", d.owner, d.path + q(d1, d2) + "&format=pdf", 400, `format must be one of json, csv, html (got \"pdf\")`},
		{"an unknown parameter", d.owner, d.path + q(d1, d2) + "&since=1", 400, `Unknown query parameter \"since\"`},
		{"a parameter twice", d.owner, d.path + q(d1, d2) + "&from=" + d2, 400, "from is given 2 times"},
		{"not an id", d.owner, "/api/fx/accounts/abc/statement" + q(d1, d2), 404, "not an id"},
		{"another trader's account", d.owner, other + q(d1, d2), 404, fmt.Sprintf("Account %d not found.", d.otherAccount)},
		{"no such account", d.owner, "/api/fx/accounts/999999/statement" + q(d1, d2), 404, "Account 999999 not found."},
		{"the owner's other trader", d.other, d.path + q(d1, d2), 404, fmt.Sprintf("Account %d not found.", d.account)},
		{"a token without read", d.tradeOnly, d.path + q(d1, d2), 403, "needs a token with the read scope"},
		{"a trader on the staff route", d.owner, d.adminPath + q(d1, d2), 403, "This needs the read permission"},
		{"staff, no such account", d.viewer, "/api/admin/fx/accounts/999999/statement" + q(d1, d2), 404, "Account 999999 not found."},
		{"nothing frozen in range", d.owner, d.path + q(dayAfter(d2, 1), dayAfter(d2, 7)), 409, "No trading day from " + dayAfter(d2, 1) + " to " + dayAfter(d2, 7) + " is frozen (the end of day has frozen through " + d2 + ")"},
		{"staff, nothing frozen", d.viewer, d.adminPath + q(dayAfter(d1, -30), dayAfter(d1, -1)) + "&format=html", 409, "a statement covers frozen days only"},
	} {
		st, h, body := d.get(c.token, c.path)
		if st != c.status || !strings.Contains(body, c.says) || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, st, body, c.status, c.says)
		}
	}
	// Ownership and scope are the other trader routes': each token is answered on the statement
	// as on the account itself (staff read a trader's route as a trader with no account).
	for name, tok := range map[string]string{"owner": d.owner, "another trader": d.other, "trade scope only": d.tradeOnly, "staff": d.viewer} {
		st, _, _ := d.get(tok, d.path+q(d1, d2))
		acct, _, body := d.get(tok, fmt.Sprintf("/api/fx/accounts/%d", d.account))
		if st != acct {
			t.Errorf("%s: the statement answers %d, the account %d %s", name, st, acct, body)
		}
	}
	// The other trader's own account is its owner's to read.
	if st, _, body := d.get(d.other, other+q(d1, d2)); st != http.StatusOK || !strings.Contains(body, `"closing":{"tradingDay":"`+d2+`"`) {
		t.Errorf("the other trader's own account: %d %s", st, body)
	}
	if after := checksums(t, d.db); !maps.Equal(before, after) {
		t.Fatalf("refused statements changed the database:\nbefore %v\nafter  %v", before, after)
	}
}

// The equity curve's points: one per day on the canvas, balance and equity on one scale.
func TestEquityChart(t *testing.T) {
	t.Parallel()
	e1, e2 := "990.00", "1010.00"
	c := equityChartOf("USD", []equityPoint{{TradingDay: "2026-03-02", Balance: "1000.00", Equity: &e1}, {TradingDay: "2026-03-03", Balance: "1000.00"},
		{TradingDay: "2026-03-04", Balance: "1005.00", Equity: &e2}})
	// 640 px over 2 steps: x = 6, 320, 634; y spans 1010 (top, 6) to 990 (bottom, 154), 7.4 px a unit.
	if c == nil || c.Balance != "6.0,80.0 320.0,80.0 634.0,43.0" || c.Equity != "6.0,154.0 634.0,6.0" || c.Min != "990.00" || c.Max != "1010.00" ||
		len(c.Dots) != 5 || c.First != "2026-03-02" || c.Last != "2026-03-04" {
		t.Fatalf("chart %+v", c)
	}
	if one := equityChartOf("JPY", []equityPoint{{TradingDay: "2026-03-02", Balance: "1000"}}); one == nil || one.Balance != "320.0,6.0" || one.Min != "1000" {
		t.Fatalf("a one-day chart %+v", one)
	}
	if equityChartOf("USD", nil) != nil {
		t.Fatal("a chart of no days")
	}
}
