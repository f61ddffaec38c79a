package api

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/desk"
	"fxdesk/internal/eod"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/schedule"
	"fxdesk/internal/tick"
)

// eodDesk is the desk's real router over a database with two frozen days: D1 (Tuesday
// 2026-11-03) frozen at its rollover, D2 (the Wednesday) caught up six hours late from the
// ledger as it stood at its rollover.
type eodDesk struct {
	*auditDesk
	d1, d2 fx.Rollover
	// usd1 holds a EURUSD position, usd2 a resting order, unpriced a USDJPY position whose price
	// nobody captured; eur is a EUR account.
	usd1, usd2, eur, unpriced int64
	// lateDeposit is usd2's deposit on D2.
	lateDeposit int64
}

var eodNoLog = slog.New(slog.DiscardHandler)

func newEODDesk(t *testing.T) *eodDesk {
	t.Helper()
	ad, _ := newAuditDesk(t)
	d := &eodDesk{auditDesk: ad}
	var err error
	if d.d1, err = fx.LastRollover(time.Date(2026, 11, 3, 23, 0, 0, 0, time.UTC)); err != nil || d.d1.Date != "2026-11-03" {
		t.Fatalf("D1: %+v %v", d.d1, err)
	}
	d.d2 = d.d1.Next()
	before := d.d1.At.Add(-3 * time.Hour)
	open := func(ccy string) int64 {
		res, err := d.db.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`, `createdAt`) VALUES (?, ?, 100, ?)", 700, ccy, before)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	d.usd1, d.usd2, d.eur, d.unpriced = open("USD"), open("USD"), open("EUR"), open("USD")
	// The walk's own account, opened now, is back-dated too: both days hold five accounts.
	if _, err := d.db.Exec("UPDATE `fx_account` SET `createdAt` = ? WHERE `id` = ?", before, d.account); err != nil {
		t.Fatal(err)
	}
	position := func(account int64, symbol, volume, price string) int64 {
		res, err := d.db.Exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `openedAt`) "+
			"VALUES (?, 0, ?, 'BUY', ?, ?, ?, ?)", account, symbol, volume, volume, price, d.d1.At.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	p1 := position(d.usd1, "EURUSD", "0.10", "1.10000")
	position(d.unpriced, "USDJPY", "0.05", "150.000")
	if _, err := d.db.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `timeInForce`, `status`, `createdAt`) "+
		"VALUES (?, 'EURUSD', 'BUY', 'LIMIT', 0.10, 1.00000, 'GTC', 'PENDING', ?)", d.usd2, d.d1.At.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	deposit := func(amount string) ledger.Deal {
		return ledger.Deal{Type: fx.DealDeposit, Amount: decimal.RequireFromString(amount), IdempotencyKey: "eod-deposit"}
	}
	eodPost(t, d.db, d.usd1, deposit("10000"), d.d1.At.Add(-2*time.Hour))
	eodPost(t, d.db, d.usd2, deposit("2500.50"), d.d1.At.Add(-2*time.Hour))
	eodPost(t, d.db, d.eur, deposit("700"), d.d1.At.Add(-2*time.Hour))
	eodPost(t, d.db, d.unpriced, deposit("1000"), d.d1.At.Add(-2*time.Hour))

	// D1 is frozen at its rollover, at EURUSD 1.1050 / 1.1052 (no USDJPY).
	d.freeze(t, d.d1, fixedFeed{"EURUSD": {Bid: 1.1050, Ask: 1.1052, ProviderTime: d.d1.At.Add(-time.Second)},
		"GBPUSD": {Bid: 1.3, Ask: 1.3002, ProviderTime: d.d1.At.Add(-2 * time.Second)}}, d.d1.At.Add(time.Minute), "ON_TIME")

	// D2's deals: a commission on the position, a deposit, a EUR withdrawal.
	sym := "EURUSD"
	eodPost(t, d.db, d.usd1, ledger.Deal{Type: fx.DealCommission, Amount: decimal.RequireFromString("-7"), Symbol: &sym, PositionID: &p1,
		IdempotencyKey: "eod-commission"}, d.d1.At.Add(time.Hour))
	d.lateDeposit = eodPost(t, d.db, d.usd2, deposit("250"), d.d1.At.Add(2*time.Hour))
	eodPost(t, d.db, d.eur, ledger.Deal{Type: fx.DealWithdrawal, Amount: decimal.RequireFromString("-100"), IdempotencyKey: "eod-withdrawal"},
		d.d1.At.Add(3*time.Hour))
	// D2 is frozen six hours late, at EURUSD 1.0950 / 1.0952: rebuilt as the ledger stood at its
	// rollover, so a deposit made after it (now) is not in it.
	eodPost(t, d.db, d.usd2, deposit("1"), time.Now())
	d.freeze(t, d.d2, fixedFeed{"EURUSD": {Bid: 1.0950, Ask: 1.0952, ProviderTime: d.d2.At.Add(-time.Second)},
		"GBPUSD": {Bid: 1.31, Ask: 1.3102, ProviderTime: d.d2.At.Add(-time.Second)}}, d.d2.At.Add(6*time.Hour), "CAUGHT_UP")
	return d
}

// freeze captures day's closing prices from prices and runs the end of day at at, the wall
// clock standing at at too, so whether the day is frozen live or rebuilt is decided by at alone.
func (d *eodDesk) freeze(t *testing.T, day fx.Rollover, prices tick.Prices, at time.Time, mode string) {
	t.Helper()
	ctx := context.Background()
	if n, err := eod.Capture(ctx, d.db, day, prices, "test:1"); err != nil || n != 2 {
		t.Fatalf("capture %s: %d prices, %v", day.Date, n, err)
	}
	job := eod.New(eod.Config{DB: d.db, By: "test:1", Now: func() time.Time { return at }}, eodNoLog)
	res := schedule.Result{}
	if err := job.Run(ctx, at, []fx.Rollover{day}, res); err != nil || res["daysFrozen"] != 1 || res["unreconciled"] != 0 {
		t.Fatalf("freeze %s: %v %v", day.Date, res, err)
	}
	var got string
	if err := d.db.QueryRow("SELECT `mode` FROM `fx_eod_day` WHERE `tradingDay` = ?", day.Date).Scan(&got); err != nil || got != mode {
		t.Fatalf("%s frozen %s, want %s (%v)", day.Date, got, mode, err)
	}
}

// eodPost writes one deal on account through the ledger, dated at, and returns its id.
func eodPost(t *testing.T, db *sql.DB, account int64, deal ledger.Deal, at time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	a := &ledger.Account{ID: account}
	if err := tx.QueryRowContext(ctx, "SELECT `currency`, `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", account).Scan(&a.Currency, &a.Balance); err != nil {
		t.Fatal(err)
	}
	deal.AccountID = account
	deal.IdempotencyKey += fmt.Sprintf(":%d:%d", account, at.UnixNano())
	p, err := ledger.Post([]*ledger.Account{a}, []ledger.Deal{deal})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exec(ctx, tx); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRowContext(ctx, "SELECT `id` FROM `fx_deal` WHERE `idempotencyKey` = ?", deal.IdempotencyKey).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_deal` SET `createdAt` = ? WHERE `id` = ?", at, id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

// get sends a GET with token and returns its status, headers and body.
func (d *eodDesk) get(token, path string) (int, http.Header, string) {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func (d *eodDesk) report(day string) (eodReportView, map[string]any) {
	d.t.Helper()
	q := ""
	if day != "" {
		q = "?day=" + day
	}
	st, _, body := d.get(d.admin, "/api/admin/fx/eod"+q)
	if st != http.StatusOK {
		d.t.Fatalf("report %q: %d %s", day, st, body)
	}
	var typed struct {
		EOD eodReportView `json:"eod"`
	}
	var loose struct {
		EOD map[string]any `json:"eod"`
	}
	if err := json.Unmarshal([]byte(body), &typed); err != nil {
		d.t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(body), &loose); err != nil {
		d.t.Fatal(err)
	}
	return typed.EOD, loose.EOD
}

// directTotals sums the day's frozen accounts per currency row by row, as the report's GROUP BY
// should.
func (d *eodDesk) directTotals(day string) []eodAccountTotals {
	d.t.Helper()
	rows, err := d.db.Query("SELECT `currency`, `balance`, `equity`, `margin`, `floatingPnl`, `openPositions`, `pendingOrders` "+
		"FROM `fx_eod_account` WHERE `tradingDay` = ?", day)
	if err != nil {
		d.t.Fatal(err)
	}
	defer rows.Close()
	type sums struct {
		n, unpriced                       int
		balance, equity, margin, floating decimal.Decimal
		positions, orders                 int64
	}
	by := map[string]*sums{}
	for rows.Next() {
		var ccy string
		var balance decimal.Decimal
		var equity, margin, floating decimal.NullDecimal
		var positions, orders int64
		if err := rows.Scan(&ccy, &balance, &equity, &margin, &floating, &positions, &orders); err != nil {
			d.t.Fatal(err)
		}
		s := by[ccy]
		if s == nil {
			s = &sums{}
			by[ccy] = s
		}
		s.n++
		s.balance = s.balance.Add(balance)
		s.positions += positions
		s.orders += orders
		if !equity.Valid {
			s.unpriced++
			continue
		}
		s.equity, s.margin, s.floating = s.equity.Add(equity.Decimal), s.margin.Add(margin.Decimal), s.floating.Add(floating.Decimal)
	}
	var out []eodAccountTotals
	for _, ccy := range slices.Sorted(maps.Keys(by)) {
		s := by[ccy]
		out = append(out, eodAccountTotals{Currency: ccy, Accounts: s.n, Balance: money(ccy, s.balance), Equity: money(ccy, s.equity),
			Margin: money(ccy, s.margin), FloatingPnl: money(ccy, s.floating), Unpriced: s.unpriced, OpenPositions: s.positions, PendingOrders: s.orders})
	}
	return out
}

// directDesk reads the day's desk rows one by one and totals each currency.
func (d *eodDesk) directDesk(day string) []eodDeskCurrency {
	d.t.Helper()
	rows, err := d.db.Query("SELECT `currency`, `symbol`, `bbookNet`, `abookNet`, `hedgeUnits`, `realised`, `markup`, `commission`, `swaps`, `nbp`, `hedgeBook` "+
		"FROM `fx_eod_symbol` WHERE `tradingDay` = ? ORDER BY `currency`, `symbol`", day)
	if err != nil {
		d.t.Fatal(err)
	}
	defer rows.Close()
	var out []eodDeskCurrency
	var totals [][6]decimal.Decimal
	for rows.Next() {
		var ccy, symbol string
		var b, a, h decimal.Decimal
		var f [6]decimal.Decimal
		if err := rows.Scan(&ccy, &symbol, &b, &a, &h, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5]); err != nil {
			d.t.Fatal(err)
		}
		if len(out) == 0 || out[len(out)-1].Currency != ccy {
			out = append(out, eodDeskCurrency{Currency: ccy})
			totals = append(totals, [6]decimal.Decimal{})
		}
		for i := range f {
			totals[len(totals)-1][i] = totals[len(totals)-1][i].Add(f[i])
		}
		m := func(x decimal.Decimal) string { return money(ccy, x) }
		out[len(out)-1].Symbols = append(out[len(out)-1].Symbols, eodDeskSymbol{Symbol: symbol, ClientNetBBookLots: b.String(), ClientNetABookLots: a.String(),
			HedgeUnits: h.String(), eodDeskFigures: eodDeskFigures{m(f[0]), m(f[1]), m(f[2]), m(f[3]), m(f[4]), m(f[5])}})
	}
	for i := range out {
		m := func(x decimal.Decimal) string { return money(out[i].Currency, x) }
		f := totals[i]
		out[i].Total = eodDeskFigures{m(f[0]), m(f[1]), m(f[2]), m(f[3]), m(f[4]), m(f[5])}
	}
	return out
}

// Each frozen day's report against its rows read one by one and the amounts the scenario put in:
// the day's row, its closing prices, the desk per symbol and currency with totals, the accounts'
// totals per currency (balances as deposited, the unpriced account left out of the marks and
// counted), and its reconciliation. Without day, the latest frozen day.
func TestEODReportReadsTheFrozenDays(t *testing.T) {
	d := newEODDesk(t)
	if v, _ := d.report(""); v.Day.TradingDay != "2026-11-04" {
		t.Errorf("without day: %+v, want the latest frozen day", v.Day)
	}
	for _, c := range []struct {
		day                fx.Rollover
		mode               string
		bid                string
		usd, eur, floating string
	}{
		// D1: deposits 10000 + 2500.50 + 1000 + the walk's empty account; 0.10 lot bought at
		// 1.1000, marked at the 1.1050 bid: +50.
		{d.d1, "ON_TIME", "1.105", "13500.50", "700.00", "50.00"},
		// D2: less the commission of 7, plus the deposit of 250 (the one made after the rollover
		// is not in it); the EUR withdrawal of 100; marked at 1.0950: −50.
		{d.d2, "CAUGHT_UP", "1.095", "13743.50", "600.00", "-50.00"},
	} {
		v, _ := d.report(c.day.Date)
		day := v.Day
		if day.TradingDay != c.day.Date || day.Mode != c.mode || day.Accounts != 5 || !day.RolloverAt.Equal(c.day.At) || day.FrozenBy != "test:1" || day.FrozenAt.IsZero() {
			t.Errorf("%s: day %+v", c.day.Date, day)
		}
		if len(v.Prices) != 2 || v.Prices[0].Symbol != "EURUSD" || v.Prices[0].Bid != c.bid || v.Prices[1].Symbol != "GBPUSD" ||
			!v.Prices[0].QuotedAt.Equal(c.day.At.Add(-time.Second)) || v.Prices[0].CapturedBy != "test:1" {
			t.Errorf("%s: prices %+v", c.day.Date, v.Prices)
		}
		if want := d.directTotals(c.day.Date); !slices.Equal(v.Accounts, want) {
			t.Errorf("%s: account totals\n got %+v\nwant %+v", c.day.Date, v.Accounts, want)
		}
		if len(v.Accounts) != 2 {
			t.Fatalf("%s: account totals %+v", c.day.Date, v.Accounts)
		}
		eur, usd := v.Accounts[0], v.Accounts[1]
		if eur.Currency != "EUR" || eur.Accounts != 1 || eur.Balance != c.eur || eur.Equity != c.eur || eur.Unpriced != 0 {
			t.Errorf("%s: EUR %+v", c.day.Date, eur)
		}
		if usd.Currency != "USD" || usd.Accounts != 4 || usd.Balance != c.usd || usd.FloatingPnl != c.floating || usd.Unpriced != 1 ||
			usd.OpenPositions != 2 || usd.PendingOrders != 1 {
			t.Errorf("%s: USD %+v", c.day.Date, usd)
		}
		desk := d.directDesk(c.day.Date)
		if !slices.EqualFunc(v.Desk, desk, func(a, b eodDeskCurrency) bool {
			return a.Currency == b.Currency && a.Total == b.Total && slices.Equal(a.Symbols, b.Symbols)
		}) {
			t.Errorf("%s: desk\n got %+v\nwant %+v", c.day.Date, v.Desk, desk)
		}
		if rc := v.Reconciliation; !rc.Reconciles || rc.Unreconciled != 0 || len(rc.Mismatches) != 0 {
			t.Errorf("%s: reconciliation %+v", c.day.Date, rc)
		}
	}
	// D2's desk in USD: the clients' 0.1 lot of EURUSD and 0.05 of USDJPY on the B-book, and the
	// day's commission of 7 earned by the desk.
	v, _ := d.report(d.d2.Date)
	if len(v.Desk) != 1 || v.Desk[0].Currency != "USD" || len(v.Desk[0].Symbols) != 2 {
		t.Fatalf("D2's desk: %+v", v.Desk)
	}
	eurusd, usdjpy := v.Desk[0].Symbols[0], v.Desk[0].Symbols[1]
	if eurusd.Symbol != "EURUSD" || eurusd.ClientNetBBookLots != "0.1" || eurusd.ClientNetABookLots != "0" || eurusd.Commission != "7.00" ||
		usdjpy.Symbol != "USDJPY" || usdjpy.ClientNetBBookLots != "0.05" || v.Desk[0].Total.Commission != "7.00" {
		t.Errorf("D2's desk: %+v", v.Desk[0])
	}

	// A deal of D2 changed behind the desk's back: D2 no longer reconciles and names the account;
	// D1 still does. The end of day's next run raises the alert the status page reads.
	if _, err := d.db.Exec("UPDATE `fx_deal` SET `amount` = `amount` + 1 WHERE `id` = ?", d.lateDeposit); err != nil {
		t.Fatal(err)
	}
	v, _ = d.report(d.d2.Date)
	want := eod.Mismatch{TradingDay: d.d2.Date, AccountID: d.usd2, Currency: "USD", Previous: "2500.50", Deals: "251.00", Balance: "2750.50", Difference: "-1.00"}
	if rc := v.Reconciliation; rc.Reconciles || rc.Unreconciled != 1 || len(rc.Mismatches) != 1 || rc.Mismatches[0] != want {
		t.Errorf("D2 changed: %+v", rc)
	}
	if v1, _ := d.report(d.d1.Date); !v1.Reconciliation.Reconciles {
		t.Errorf("D1: %+v", v1.Reconciliation)
	}

	// The CSV of each day is its JSON, record for record.
	for _, day := range []string{d.d1.Date, d.d2.Date} {
		_, j := d.report(day)
		st, h, body := d.get(d.admin, "/api/admin/fx/eod?format=csv&day="+day)
		if st != http.StatusOK || h.Get("Content-Type") != "text/csv; charset=utf-8" || h.Get("Content-Disposition") != `attachment; filename="eod-`+day+`.csv"` {
			t.Fatalf("%s as CSV: %d %v %s", day, st, h, body)
		}
		kinds := csvMatchesJSON(t, body, j)
		if day == d.d2.Date {
			for _, k := range []string{"day", "price", "desk", "deskTotal", "accounts", "reconciliation", "mismatch"} {
				if kinds[k] == 0 {
					t.Errorf("D2's CSV has no %s record", k)
				}
			}
		}
	}

	inbox := d.deps.Alerts
	job := eod.New(eod.Config{DB: d.db, Alerts: inbox, By: "test:1", Now: func() time.Time { return d.d2.At.Add(7 * time.Hour) }}, eodNoLog)
	res := schedule.Result{}
	if err := job.Run(context.Background(), d.d2.At.Add(7*time.Hour), []fx.Rollover{d.d2}, res); err != nil || res["unreconciled"] != 1 {
		t.Fatalf("the next run: %v %v", res, err)
	}
	alerts, err := inbox.List(context.Background(), alert.Filter{Statuses: []alert.Status{alert.Open, alert.Acknowledged}})
	if err != nil {
		t.Fatal(err)
	}
	line := buildEODLine(context.Background(), d.db, alerts, "")
	if line.Error != "" || line.Last == nil || line.Last.TradingDay != d.d2.Date || !line.Unreconciled {
		t.Errorf("the status line: %+v", line)
	}
}

// csvMatchesJSON checks that the report's CSV holds exactly its JSON j: the records of each kind
// in the JSON's order, each field equal to the JSON's value of the same name (null: empty), and
// no JSON field missing. It returns how many records of each kind there were.
func csvMatchesJSON(t *testing.T, body string, j map[string]any) map[string]int {
	t.Helper()
	r := csv.NewReader(strings.NewReader(body))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v\n%s", err, body)
	}
	got := map[string][]map[string]string{}
	var header []string
	for _, rec := range recs {
		if rec[0] == "record" {
			header = rec
			continue
		}
		if len(rec) != len(header) {
			t.Fatalf("CSV record %v under header %v", rec, header)
		}
		m := map[string]string{}
		for i := 1; i < len(rec); i++ {
			m[header[i]] = rec[i]
		}
		got[rec[0]] = append(got[rec[0]], m)
	}
	obj := func(v any) map[string]any { return maps.Clone(v.(map[string]any)) }
	want := map[string][]map[string]any{"day": {obj(j["day"])}}
	for _, p := range j["prices"].([]any) {
		want["price"] = append(want["price"], obj(p))
	}
	for _, c := range j["desk"].([]any) {
		cur := c.(map[string]any)
		for _, s := range cur["symbols"].([]any) {
			row := obj(s)
			row["currency"] = cur["currency"]
			want["desk"] = append(want["desk"], row)
		}
		total := obj(cur["total"])
		total["currency"] = cur["currency"]
		want["deskTotal"] = append(want["deskTotal"], total)
	}
	for _, a := range j["accounts"].([]any) {
		want["accounts"] = append(want["accounts"], obj(a))
	}
	rc := obj(j["reconciliation"])
	for _, m := range rc["mismatches"].([]any) {
		want["mismatch"] = append(want["mismatch"], obj(m))
	}
	delete(rc, "mismatches")
	want["reconciliation"] = []map[string]any{rc}
	kinds := map[string]int{}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("CSV has %d %s records the JSON does not", len(got[k]), k)
		}
	}
	for kind, rows := range want {
		kinds[kind] = len(got[kind])
		if len(got[kind]) != len(rows) {
			t.Errorf("%s: %d CSV records, %d in the JSON", kind, len(got[kind]), len(rows))
			continue
		}
		for i, jr := range rows {
			cr := got[kind][i]
			for name, v := range jr {
				if c, ok := cr[name]; !ok || c != jsonText(v) {
					t.Errorf("%s %d: %s is %q in the CSV, %v in the JSON", kind, i, name, c, v)
				}
			}
			for name, c := range cr {
				if _, ok := jr[name]; !ok && c != "" {
					t.Errorf("%s %d: %s = %q in the CSV only", kind, i, name, c)
				}
			}
		}
	}
	return kinds
}

// jsonText is a decoded JSON scalar as the CSV writes it.
func jsonText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprintf("unexpected %T", v)
}

type eodAccountsPage struct {
	TradingDay string           `json:"tradingDay"`
	Accounts   []eodAccountView `json:"accounts"`
	NextAfter  *int64           `json:"nextAfter"`
}

// Paging a day's accounts by id covers every account once, whatever the page size, and the last
// page says it is the last; a CSV page holds what its JSON page does and hands the next page's
// cursor in X-Next-After.
func TestEODAccountsPageEveryAccountOnce(t *testing.T) {
	d := newEODDesk(t)
	var ids []int64
	rows, err := d.db.Query("SELECT `accountId` FROM `fx_eod_account` WHERE `tradingDay` = ? ORDER BY `accountId`", d.d2.Date)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) != 5 {
		t.Fatalf("accounts frozen on D2: %v", ids)
	}
	page := func(query string) eodAccountsPage {
		t.Helper()
		st, _, body := d.get(d.admin, "/api/admin/fx/eod/accounts?"+query)
		var p eodAccountsPage
		if st != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil {
			t.Fatalf("%s: %d %s", query, st, body)
		}
		return p
	}
	for _, limit := range []int{1, 2, 4, 5, 1000} {
		var seen []int64
		pages := 0
		after := int64(0)
		for {
			p := page(fmt.Sprintf("day=%s&limit=%d&after=%d", d.d2.Date, limit, after))
			pages++
			if p.TradingDay != d.d2.Date || len(p.Accounts) > limit || pages > 10 {
				t.Fatalf("limit %d, page %d: %+v", limit, pages, p)
			}
			for _, a := range p.Accounts {
				seen = append(seen, a.AccountID)
			}
			if p.NextAfter == nil {
				break
			}
			if *p.NextAfter != p.Accounts[len(p.Accounts)-1].AccountID {
				t.Fatalf("limit %d: nextAfter %d after %+v", limit, *p.NextAfter, p.Accounts)
			}
			after = *p.NextAfter
		}
		if !slices.Equal(seen, ids) || pages != (len(ids)+limit-1)/limit {
			t.Errorf("limit %d: %d pages of %v, want %v", limit, pages, seen, ids)
		}
	}
	// The figures of a page: D2 is rebuilt at its rollover, so usd2 has the 250 deposited that
	// day but not the 1 deposited since; the unpriced account has no marks.
	all := page("day=" + d.d2.Date + "&limit=1000")
	byID := map[int64]eodAccountView{}
	for _, a := range all.Accounts {
		byID[a.AccountID] = a
	}
	if a := byID[d.usd2]; a.Balance != "2750.50" || a.Equity == nil || *a.Equity != "2750.50" || a.PendingOrders != 1 || a.ThroughDealID != d.lateDeposit {
		t.Errorf("usd2 on D2: %+v", a)
	}
	if a := byID[d.usd1]; a.Balance != "9993.00" || a.FloatingPnl == nil || *a.FloatingPnl != "-50.00" || a.OpenPositions != 1 {
		t.Errorf("usd1 on D2: %+v", a)
	}
	if a := byID[d.unpriced]; a.Balance != "1000.00" || a.Equity != nil || a.Margin != nil || a.FreeMargin != nil || a.FloatingPnl != nil || a.OpenPositions != 1 {
		t.Errorf("the unpriced account on D2: %+v", a)
	}
	if def := page("limit=1000"); def.TradingDay != d.d2.Date || len(def.Accounts) != 5 {
		t.Errorf("without day: %+v", def)
	}

	// CSV, two at a time, page for page the JSON.
	after, pages := "0", 0
	for {
		q := "day=" + d.d1.Date + "&limit=2&after=" + after
		st, h, body := d.get(d.admin, "/api/admin/fx/eod/accounts?format=csv&"+q)
		if st != http.StatusOK || h.Get("Content-Type") != "text/csv; charset=utf-8" {
			t.Fatalf("CSV %s: %d %s", q, st, body)
		}
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil || len(recs) < 1 {
			t.Fatalf("CSV %s: %v %s", q, err, body)
		}
		p := page(q)
		var loose struct {
			Accounts []map[string]any `json:"accounts"`
		}
		_, _, jbody := d.get(d.admin, "/api/admin/fx/eod/accounts?"+q)
		if err := json.Unmarshal([]byte(jbody), &loose); err != nil {
			t.Fatal(err)
		}
		if len(recs)-1 != len(loose.Accounts) || len(loose.Accounts) == 0 ||
			!slices.Equal(slices.Sorted(slices.Values(recs[0])), slices.Sorted(maps.Keys(loose.Accounts[0]))) {
			t.Fatalf("CSV %s: %v, JSON %v", q, recs, loose.Accounts)
		}
		for i, a := range loose.Accounts {
			for k, name := range recs[0] {
				v, ok := a[name]
				if !ok || jsonText(v) != recs[i+1][k] {
					t.Errorf("CSV %s row %d: %s = %q, JSON %v", q, i, name, recs[i+1][k], v)
				}
			}
		}
		pages++
		next := h.Get("X-Next-After")
		if (next == "") != (p.NextAfter == nil) || p.NextAfter != nil && next != strconv.FormatInt(*p.NextAfter, 10) || pages > 5 {
			t.Fatalf("CSV %s: X-Next-After %q, JSON nextAfter %v", q, next, p.NextAfter)
		}
		if next == "" {
			break
		}
		after = next
	}
	if pages != 3 {
		t.Errorf("5 accounts two at a time in %d CSV pages", pages)
	}
}

// The frozen days are listed oldest first over the range asked for.
func TestEODDaysListsTheFrozenDays(t *testing.T) {
	d := newEODDesk(t)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"from=2026-11-01&to=2026-11-30", []string{"2026-11-03 ON_TIME", "2026-11-04 CAUGHT_UP"}},
		{"from=2026-11-04&to=2026-11-04", []string{"2026-11-04 CAUGHT_UP"}},
		{"from=2026-11-05&to=2026-11-30", nil},
	} {
		st, _, body := d.get(d.admin, "/api/admin/fx/eod/days?"+c.query)
		var got struct {
			From, To string
			Days     []eod.Day
		}
		if st != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got.Days == nil {
			t.Fatalf("%s: %d %s", c.query, st, body)
		}
		var days []string
		for _, day := range got.Days {
			days = append(days, day.TradingDay+" "+day.Mode)
			if day.Accounts != 5 || day.FrozenBy != "test:1" {
				t.Errorf("%s: %+v", c.query, day)
			}
		}
		if !slices.Equal(days, c.want) {
			t.Errorf("%s: %v, want %v", c.query, days, c.want)
		}
	}
}

// The days' range at a fixed now: to defaults to the last rollover's date, from to 31 days
// before it, both ends included, at most 366 days.
func TestEODDaysRange(t *testing.T) {
	t.Parallel()
	// Thursday 03:24 UTC is Wednesday 22:24 in New York: the last rollover is Wednesday's.
	now := time.Date(2026, 12, 3, 3, 24, 0, 0, time.UTC)
	for _, c := range []struct {
		query, from, to, refused string
	}{
		{query: "", from: "2026-11-02", to: "2026-12-02"},
		{query: "from=2026-12-01", from: "2026-12-01", to: "2026-12-02"},
		{query: "to=2026-01-31", from: "2026-01-01", to: "2026-01-31"},
		{query: "from=2025-12-02&to=2026-12-02", from: "2025-12-02", to: "2026-12-02"},
		{query: "from=2025-12-01&to=2026-12-02", refused: "at most 366 days, both ends included (from 2025-12-01 to 2026-12-02 is 367)"},
		{query: "from=2026-12-02&to=2026-12-01", refused: "from must be on or before to"},
		{query: "from=2026-02-30", refused: `from must be a date such as 2026-12-01 (got "2026-02-30")`},
		{query: "to=2026-12-02T00:00:00Z", refused: "to must be a date"},
		{query: "day=2026-12-02", refused: `Unknown query parameter "day": the frozen days takes from, to.`},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		from, to, err := eodDaysRangeOf(q, now)
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) || statusOf[fx.ErrorCode(err)] != http.StatusBadRequest {
				t.Errorf("%s: %v, want 400 %q", c.query, err, c.refused)
			}
			continue
		}
		if err != nil || from != c.from || to != c.to {
			t.Errorf("%s: %s to %s, %v; want %s to %s", c.query, from, to, err, c.from, c.to)
		}
	}
}

// A bad parameter is a 400 naming it, a day not frozen a 404 naming the latest frozen days, a
// trader is refused; none of it changes a table.
func TestEODRoutesRefuse(t *testing.T) {
	d := newEODDesk(t)
	trader, err := auth.Create(audit.WithActor(context.Background(), audit.Actor{Via: "test"}), d.db, 2, false, "trader")
	if err != nil {
		t.Fatal(err)
	}
	before := checksums(t, d.db)
	for _, c := range []struct {
		path   string
		status int
		says   string
	}{
		{"/api/admin/fx/eod?day=2026-11-31", 400, `day must be a date such as 2026-12-01 (got \"2026-11-31\")`},
		{"/api/admin/fx/eod?day=2026-11-3", 400, "day must be a date"},
		{"/api/admin/fx/eod?day=yesterday", 400, "day must be a date"},
		{"/api/admin/fx/eod?format=xml", 400, `format must be json or csv (got \"xml\")`},
		{"/api/admin/fx/eod?limit=5", 400, `Unknown query parameter \"limit\": the end of day report takes day, format.`},
		{"/api/admin/fx/eod?day=2026-11-03&day=2026-11-04", 400, "Query parameter day is given 2 times"},
		{"/api/admin/fx/eod/accounts?after=-1", 400, `after must be a whole number, 0 or more (got \"-1\")`},
		{"/api/admin/fx/eod/accounts?after=x", 400, "after must be a whole number"},
		{"/api/admin/fx/eod/accounts?limit=0", 400, `limit must be a whole number from 1 to 1000 (got \"0\")`},
		{"/api/admin/fx/eod/accounts?limit=1001", 400, "limit must be a whole number from 1 to 1000"},
		{"/api/admin/fx/eod/accounts?limit=ten", 400, "limit must be a whole number from 1 to 1000"},
		{"/api/admin/fx/eod/accounts?format=CSV", 400, "format must be json or csv"},
		{"/api/admin/fx/eod/accounts?day=03.11.2026", 400, "day must be a date"},
		{"/api/admin/fx/eod/days?from=2026-11-05&to=2026-11-04", 400, "from must be on or before to"},
		{"/api/admin/fx/eod/days?from=2025-11-03&to=2026-11-04", 400, "at most 366 days"},
		{"/api/admin/fx/eod/days?to=tomorrow", 400, "to must be a date"},
		{"/api/admin/fx/eod?day=2026-11-05", 404, "2026-11-05 is not frozen. The latest frozen days are 2026-11-04, 2026-11-03."},
		{"/api/admin/fx/eod?day=2026-11-07&format=csv", 404, "2026-11-07 is a Saturday: weekend rollovers close no day. The latest frozen days are 2026-11-04, 2026-11-03."},
		{"/api/admin/fx/eod/accounts?day=2026-11-02", 404, "2026-11-02 is not frozen. The latest frozen days are 2026-11-04, 2026-11-03."},
	} {
		st, h, body := d.get(d.admin, c.path)
		code := map[int]string{400: `"code":"invalid"`, 404: `"code":"not_found"`}[c.status]
		if st != c.status || !strings.Contains(body, c.says) || !strings.Contains(body, code) || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s, want %d saying %s", c.path, st, body, c.status, c.says)
		}
	}
	for _, path := range []string{"/api/admin/fx/eod", "/api/admin/fx/eod/accounts", "/api/admin/fx/eod/days"} {
		if st, _, body := d.get(trader, path); st != http.StatusForbidden || !strings.Contains(body, "read permission") {
			t.Errorf("%s by a trader: %d %s", path, st, body)
		}
	}
	if after := checksums(t, d.db); !maps.Equal(before, after) {
		t.Errorf("refused requests changed the database:\nbefore %v\nafter  %v", before, after)
	}
}

// Before any day is frozen, the report and the accounts say so (404) and the days list is empty.
func TestEODBeforeAnyDayIsFrozen(t *testing.T) {
	d, _ := newAuditDesk(t)
	ed := &eodDesk{auditDesk: d}
	for _, path := range []string{"/api/admin/fx/eod", "/api/admin/fx/eod/accounts?format=csv"} {
		if st, _, body := ed.get(d.admin, path); st != http.StatusNotFound || !strings.Contains(body, "No day is frozen yet.") {
			t.Errorf("%s: %d %s", path, st, body)
		}
	}
	if st, _, body := ed.get(d.admin, "/api/admin/fx/eod?day=2026-11-04"); st != http.StatusNotFound || !strings.Contains(body, "2026-11-04 is not frozen. No day is frozen yet.") {
		t.Errorf("a day: %d %s", st, body)
	}
	if st, _, body := ed.get(d.admin, "/api/admin/fx/eod/days"); st != http.StatusOK || !strings.Contains(body, `"days":[]`) {
		t.Errorf("the days: %d %s", st, body)
	}
	line := buildEODLine(context.Background(), d.db, nil, "")
	var page bytes.Buffer
	if err := statusPage.Execute(&page, report{Status: desk.Status{Process: "web", Time: time.Now()}, EOD: line}); err != nil ||
		!strings.Contains(page.String(), "no day frozen yet") || strings.Contains(page.String(), "reconciles") {
		t.Errorf("the status page without a frozen day: %v\n%s", err, page.String())
	}
}

// The status page's end of day line: the last frozen day, its mode, and whether the end of day
// reconciles as its alerts say; unknown when the alerts could not be read.
func TestStatusPageShowsTheEndOfDay(t *testing.T) {
	t.Parallel()
	last := &eod.Day{TradingDay: "2026-11-04", Mode: "CAUGHT_UP", Accounts: 20000, FrozenAt: time.Date(2026, 11, 5, 4, 0, 0, 0, time.UTC), FrozenBy: "cron:42"}
	for _, c := range []struct {
		line *eodLine
		want []string
	}{
		{&eodLine{Last: last}, []string{`last frozen <strong id="eod-day">2026-11-04</strong> · <span id="eod-mode">CAUGHT_UP</span> · 20000 accounts · frozen 2026-11-05 04:00 UTC by cron:42`,
			`<span class="ok" id="eod-reconciles">reconciles</span>`}},
		{&eodLine{Last: last, Unreconciled: true, PricesMissing: true}, []string{`<span class="bad" id="eod-reconciles">does not reconcile: see the alert eod-reconciliation-failed</span>`,
			`id="eod-prices-missing"`}},
		{&eodLine{Last: last, AlertsUnknown: true}, []string{"reconciliation unknown (alerts unreadable)"}},
		{&eodLine{Error: "database down"}, []string{`<span class="bad">unreadable: database down</span>`}},
	} {
		var page bytes.Buffer
		if err := statusPage.Execute(&page, report{Status: desk.Status{Process: "web", Time: time.Now()}, EOD: c.line}); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(page.String(), w) {
				t.Errorf("%+v: the page lacks %s", c.line, w)
			}
		}
	}
}
