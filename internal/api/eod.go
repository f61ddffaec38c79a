package api

import (
	"context"
	"database/sql"
	"encoding/csv"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/eod"
	"fxdesk/internal/fx"
)

// The dealer's daily desk report from the frozen end of day (docs/eod.md, «The daily desk
// report»): GET /api/admin/fx/eod, /eod/accounts and /eod/days, and the status page's line. They
// read the frozen rows back as they were written; nothing here recomputes a figure at today's
// prices.

var (
	eodParams         = []string{"day", "format"}
	eodAccountsParams = []string{"day", "after", "limit", "format"}
	eodDaysParams     = []string{"from", "to"}
)

const (
	// eodAccountsLimit is a page of accounts unless limit says otherwise.
	eodAccountsLimit = 100
	// eodDaysRange is the longest range of days listed, both ends included.
	eodDaysRange = 366
	// eodDaysDefault is how many days back the list reaches without a from.
	eodDaysDefault = 31
)

// dateParam reads query parameter name as a date, YYYY-MM-DD; "" when it is not given.
func dateParam(q url.Values, name string) (string, error) {
	if !q.Has(name) {
		return "", nil
	}
	v := q.Get(name)
	if t, err := time.Parse(time.DateOnly, v); err != nil || t.Format(time.DateOnly) != v {
		return "", fx.Errorf(fx.EINVALID, "%s must be a date such as 2026-12-01 (got %q).", name, v)
	}
	return v, nil
}

// csvFormat reads the format parameter: true for csv, false for json (the default).
func csvFormat(q url.Values) (bool, error) {
	switch v := q.Get("format"); {
	case !q.Has("format") || v == "json":
		return false, nil
	case v == "csv":
		return true, nil
	default:
		return false, fx.Errorf(fx.EINVALID, "format must be json or csv (got %q).", v)
	}
}

// frozenDay is the frozen day a request names: day, or the latest frozen day when day is "".
// A day not frozen is a 404 naming the latest ones.
func frozenDay(ctx context.Context, db *sql.DB, day string) (eod.Day, error) {
	if day != "" {
		return eod.FrozenDay(ctx, db, day)
	}
	d, ok, err := eod.LastDay(ctx, db)
	if err != nil {
		return eod.Day{}, err
	}
	if !ok {
		return eod.Day{}, eod.NoDayFrozen()
	}
	return d, nil
}

type eodPriceView struct {
	Symbol     string    `json:"symbol"`
	Bid        string    `json:"bid"`
	Ask        string    `json:"ask"`
	QuotedAt   time.Time `json:"quotedAt"`
	CapturedAt time.Time `json:"capturedAt"`
	CapturedBy string    `json:"capturedBy"`
}

// eodDeskFigures are the desk's money figures of a day in one currency, from its side.
type eodDeskFigures struct {
	BBookRealised string `json:"bBookRealised"`
	Markup        string `json:"markup"`
	Commission    string `json:"commission"`
	Swaps         string `json:"swaps"`
	NBPCost       string `json:"nbpCost"`
	HedgeBook     string `json:"hedgeBook"`
}

func deskFiguresView(ccy string, f eod.DeskFigures) eodDeskFigures {
	return eodDeskFigures{BBookRealised: money(ccy, f.Realised), Markup: money(ccy, f.Markup), Commission: money(ccy, f.Commission),
		Swaps: money(ccy, f.Swaps), NBPCost: money(ccy, f.NBP), HedgeBook: money(ccy, f.HedgeBook)}
}

// eodDeskSymbol is one symbol of a currency at the close: the clients' net open lots (long −
// short; the desk holds the other side of the B-book's), the desk's hedge units, the figures.
type eodDeskSymbol struct {
	Symbol             string `json:"symbol"`
	ClientNetBBookLots string `json:"clientNetBBookLots"`
	ClientNetABookLots string `json:"clientNetABookLots"`
	HedgeUnits         string `json:"hedgeUnits"`
	eodDeskFigures
}

type eodDeskCurrency struct {
	Currency string          `json:"currency"`
	Symbols  []eodDeskSymbol `json:"symbols"`
	Total    eodDeskFigures  `json:"total"`
}

// eodAccountTotals is a currency's frozen accounts summed; equity, margin and floatingPnl over
// the priced accounts, unpriced counting the others.
type eodAccountTotals struct {
	Currency      string `json:"currency"`
	Accounts      int    `json:"accounts"`
	Balance       string `json:"balance"`
	Equity        string `json:"equity"`
	Margin        string `json:"margin"`
	FloatingPnl   string `json:"floatingPnl"`
	Unpriced      int    `json:"unpriced"`
	OpenPositions int64  `json:"openPositions"`
	PendingOrders int64  `json:"pendingOrders"`
}

type eodReconciliation struct {
	Reconciles   bool `json:"reconciles"`
	Unreconciled int  `json:"unreconciled"`
	// Mismatches names the first eod.MismatchesListed unreconciled accounts.
	Mismatches []eod.Mismatch `json:"mismatches"`
}

// eodReportView is GET /api/admin/fx/eod's answer.
type eodReportView struct {
	Day            eod.Day            `json:"day"`
	Prices         []eodPriceView     `json:"prices"`
	Desk           []eodDeskCurrency  `json:"desk"`
	Accounts       []eodAccountTotals `json:"accounts"`
	Reconciliation eodReconciliation  `json:"reconciliation"`
}

func eodReportOf(rep eod.Report) eodReportView {
	v := eodReportView{Day: rep.Day, Prices: []eodPriceView{}, Desk: []eodDeskCurrency{}, Accounts: []eodAccountTotals{},
		Reconciliation: eodReconciliation{Reconciles: rep.Unreconciled == 0, Unreconciled: rep.Unreconciled, Mismatches: nonNil(rep.Mismatches)}}
	for _, p := range rep.Prices {
		v.Prices = append(v.Prices, eodPriceView{Symbol: p.Symbol, Bid: p.Bid.String(), Ask: p.Ask.String(), QuotedAt: p.QuotedAt,
			CapturedAt: p.CapturedAt, CapturedBy: p.CapturedBy})
	}
	for _, c := range rep.Desk {
		dc := eodDeskCurrency{Currency: c.Currency, Symbols: []eodDeskSymbol{}, Total: deskFiguresView(c.Currency, c.Total)}
		for _, s := range c.Symbols {
			dc.Symbols = append(dc.Symbols, eodDeskSymbol{Symbol: s.Symbol, ClientNetBBookLots: s.BBookNet.String(), ClientNetABookLots: s.ABookNet.String(),
				HedgeUnits: s.HedgeUnits.String(), eodDeskFigures: deskFiguresView(c.Currency, s.DeskFigures)})
		}
		v.Desk = append(v.Desk, dc)
	}
	for _, t := range rep.Accounts {
		v.Accounts = append(v.Accounts, eodAccountTotals{Currency: t.Currency, Accounts: t.Accounts, Balance: money(t.Currency, t.Balance),
			Equity: money(t.Currency, t.Equity), Margin: money(t.Currency, t.Margin), FloatingPnl: money(t.Currency, t.Floating),
			Unpriced: t.Unpriced, OpenPositions: t.OpenPositions, PendingOrders: t.PendingOrders})
	}
	return v
}

// handleEOD serves a frozen day's report (admin): GET /api/admin/fx/eod?day=YYYY-MM-DD&format=json|csv,
// the latest frozen day without day.
func handleEOD(log *slog.Logger, db *sql.DB) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		if err := checkQuery(q, eodParams, "the end of day report"); err != nil {
			return err
		}
		day, err := dateParam(q, "day")
		if err != nil {
			return err
		}
		asCSV, err := csvFormat(q)
		if err != nil {
			return err
		}
		if day == "" {
			d, err := frozenDay(r.Context(), db, "")
			if err != nil {
				return err
			}
			day = d.TradingDay
		}
		rep, err := eod.ReadReport(r.Context(), db, day)
		if err != nil {
			return err
		}
		v := eodReportOf(rep)
		if !asCSV {
			writeJSON(w, http.StatusOK, map[string]any{"eod": v})
			return nil
		}
		cw := startCSV(w, "eod-"+day+".csv")
		writeReportCSV(cw, v)
		endCSV(r.Context(), log, cw)
		return nil
	})
}

// The report as CSV: its parts one after another, each record's first field saying what it is
// (day, price, desk, deskTotal, accounts, reconciliation, mismatch) and each part led by a
// header record whose first field is "record" and whose others are the JSON names of the
// fields below it. Absent values (a total's lots) are empty.
func writeReportCSV(cw *csv.Writer, v eodReportView) {
	d := v.Day
	cw.Write([]string{"record", "tradingDay", "rolloverAt", "mode", "accounts", "frozenAt", "frozenBy"})
	cw.Write([]string{"day", d.TradingDay, csvTime(d.RolloverAt), d.Mode, strconv.Itoa(d.Accounts), csvTime(d.FrozenAt), d.FrozenBy})
	cw.Write([]string{"record", "symbol", "bid", "ask", "quotedAt", "capturedAt", "capturedBy"})
	for _, p := range v.Prices {
		cw.Write([]string{"price", p.Symbol, p.Bid, p.Ask, csvTime(p.QuotedAt), csvTime(p.CapturedAt), p.CapturedBy})
	}
	cw.Write([]string{"record", "currency", "symbol", "clientNetBBookLots", "clientNetABookLots", "hedgeUnits",
		"bBookRealised", "markup", "commission", "swaps", "nbpCost", "hedgeBook"})
	figures := func(f eodDeskFigures) []string {
		return []string{f.BBookRealised, f.Markup, f.Commission, f.Swaps, f.NBPCost, f.HedgeBook}
	}
	for _, c := range v.Desk {
		for _, s := range c.Symbols {
			cw.Write(append([]string{"desk", c.Currency, s.Symbol, s.ClientNetBBookLots, s.ClientNetABookLots, s.HedgeUnits}, figures(s.eodDeskFigures)...))
		}
		cw.Write(append([]string{"deskTotal", c.Currency, "", "", "", ""}, figures(c.Total)...))
	}
	cw.Write([]string{"record", "currency", "accounts", "balance", "equity", "margin", "floatingPnl", "unpriced", "openPositions", "pendingOrders"})
	for _, t := range v.Accounts {
		cw.Write([]string{"accounts", t.Currency, strconv.Itoa(t.Accounts), t.Balance, t.Equity, t.Margin, t.FloatingPnl, strconv.Itoa(t.Unpriced),
			strconv.FormatInt(t.OpenPositions, 10), strconv.FormatInt(t.PendingOrders, 10)})
	}
	rc := v.Reconciliation
	cw.Write([]string{"record", "reconciles", "unreconciled"})
	cw.Write([]string{"reconciliation", strconv.FormatBool(rc.Reconciles), strconv.Itoa(rc.Unreconciled)})
	cw.Write([]string{"record", "tradingDay", "accountId", "currency", "previousClose", "dealsSum", "balance", "difference"})
	for _, m := range rc.Mismatches {
		cw.Write([]string{"mismatch", m.TradingDay, strconv.FormatInt(m.AccountID, 10), m.Currency, m.Previous, m.Deals, m.Balance, m.Difference})
	}
}

// eodAccountView is one account at a day's close; the marks are null when a price was missing.
type eodAccountView struct {
	AccountID     int64     `json:"accountId"`
	Currency      string    `json:"currency"`
	Balance       string    `json:"balance"`
	Equity        *string   `json:"equity"`
	Margin        *string   `json:"margin"`
	FreeMargin    *string   `json:"freeMargin"`
	FloatingPnl   *string   `json:"floatingPnl"`
	OpenPositions int       `json:"openPositions"`
	PendingOrders int       `json:"pendingOrders"`
	ThroughDealID int64     `json:"throughDealId"`
	TakenAt       time.Time `json:"takenAt"`
}

func eodAccountOf(a eod.Account) eodAccountView {
	mark := func(d *decimal.Decimal) *string {
		if d == nil {
			return nil
		}
		s := money(a.Currency, *d)
		return &s
	}
	return eodAccountView{AccountID: a.AccountID, Currency: a.Currency, Balance: money(a.Currency, a.Balance), Equity: mark(a.Equity),
		Margin: mark(a.Margin), FreeMargin: mark(a.FreeMargin), FloatingPnl: mark(a.FloatingPnl), OpenPositions: a.OpenPositions,
		PendingOrders: a.PendingOrders, ThroughDealID: a.ThroughDealID, TakenAt: a.TakenAt}
}

// handleEODAccounts serves a page of a frozen day's accounts by id (admin):
// GET /api/admin/fx/eod/accounts?day=&after=&limit=&format=json|csv. The next page's after is
// nextAfter in JSON and the X-Next-After header in CSV; neither is there on the last page.
func handleEODAccounts(log *slog.Logger, db *sql.DB) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		if err := checkQuery(q, eodAccountsParams, "the end of day accounts"); err != nil {
			return err
		}
		day, err := dateParam(q, "day")
		if err != nil {
			return err
		}
		after, err := wholeParam("after", q.Get("after"), q.Has("after"), 0)
		if err != nil {
			return err
		}
		limit := eodAccountsLimit
		if q.Has("limit") {
			n, err := strconv.Atoi(q.Get("limit"))
			if err != nil || n < 1 || n > eod.MaxAccountsPage {
				return fx.Errorf(fx.EINVALID, "limit must be a whole number from 1 to %d (got %q).", eod.MaxAccountsPage, q.Get("limit"))
			}
			limit = n
		}
		asCSV, err := csvFormat(q)
		if err != nil {
			return err
		}
		d, err := frozenDay(r.Context(), db, day)
		if err != nil {
			return err
		}
		page, more, err := eod.Accounts(r.Context(), db, d.TradingDay, after, limit)
		if err != nil {
			return err
		}
		var next *int64
		if more {
			id := page[len(page)-1].AccountID
			next = &id
		}
		views := mapSlice(page, eodAccountOf)
		if !asCSV {
			writeJSON(w, http.StatusOK, map[string]any{"tradingDay": d.TradingDay, "accounts": views, "nextAfter": next})
			return nil
		}
		if next != nil {
			w.Header().Set("X-Next-After", strconv.FormatInt(*next, 10))
		}
		cw := startCSV(w, "eod-accounts-"+d.TradingDay+"-after-"+strconv.FormatInt(after, 10)+".csv")
		cw.Write([]string{"accountId", "currency", "balance", "equity", "margin", "freeMargin", "floatingPnl", "openPositions", "pendingOrders",
			"throughDealId", "takenAt"})
		opt := func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		}
		for _, a := range views {
			cw.Write([]string{strconv.FormatInt(a.AccountID, 10), a.Currency, a.Balance, opt(a.Equity), opt(a.Margin), opt(a.FreeMargin),
				opt(a.FloatingPnl), strconv.Itoa(a.OpenPositions), strconv.Itoa(a.PendingOrders), strconv.FormatInt(a.ThroughDealID, 10), csvTime(a.TakenAt)})
		}
		endCSV(r.Context(), log, cw)
		return nil
	})
}

// eodDaysRangeOf reads the days list's range at now: to defaults to the last rollover's date,
// from to eodDaysDefault days before to; both are included, at most eodDaysRange days.
func eodDaysRangeOf(q url.Values, now time.Time) (from, to string, err error) {
	if err := checkQuery(q, eodDaysParams, "the frozen days"); err != nil {
		return "", "", err
	}
	if from, err = dateParam(q, "from"); err != nil {
		return "", "", err
	}
	if to, err = dateParam(q, "to"); err != nil {
		return "", "", err
	}
	if to == "" {
		last, err := fx.LastRollover(now)
		if err != nil {
			return "", "", err
		}
		to = last.Date
	}
	toDate, _ := time.Parse(time.DateOnly, to)
	if from == "" {
		from = toDate.AddDate(0, 0, -(eodDaysDefault - 1)).Format(time.DateOnly)
	}
	fromDate, _ := time.Parse(time.DateOnly, from)
	days := int(toDate.Sub(fromDate)/(24*time.Hour)) + 1
	switch {
	case days < 1:
		return "", "", fx.Errorf(fx.EINVALID, "from must be on or before to (got from %s, to %s).", from, to)
	case days > eodDaysRange:
		return "", "", fx.Errorf(fx.EINVALID, "The range may span at most %d days, both ends included (from %s to %s is %d).", eodDaysRange, from, to, days)
	}
	return from, to, nil
}

// handleEODDays lists the frozen days (admin): GET /api/admin/fx/eod/days?from=&to=, oldest
// first, one row each.
func handleEODDays(log *slog.Logger, db *sql.DB) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		from, to, err := eodDaysRangeOf(r.URL.Query(), time.Now())
		if err != nil {
			return err
		}
		days, err := eod.Days(r.Context(), db, from, to)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"from": from, "to": to, "days": days})
		return nil
	})
}

// startCSV answers 200 with a CSV attachment named file and returns its writer.
func startCSV(w http.ResponseWriter, file string) *csv.Writer {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+file+`"`)
	w.WriteHeader(http.StatusOK)
	return csv.NewWriter(w)
}

// endCSV flushes cw. A failure now is the client's going away mid-answer: the status is sent, so
// it is only logged.
func endCSV(ctx context.Context, log *slog.Logger, cw *csv.Writer) {
	cw.Flush()
	if err := cw.Error(); err != nil {
		log.InfoContext(ctx, "CSV answer cut short", slog.Any("err", err))
	}
}

// csvTime writes t as JSON does, so a CSV field and its JSON value read the same.
func csvTime(t time.Time) string { return t.Format(time.RFC3339Nano) }

// eodLine is the status page's end of day: the last frozen day and whether the end of day
// reconciles, as its open alerts say (a full reconciliation is the report's, not every page
// load's).
type eodLine struct {
	Last          *eod.Day
	Error         string
	Unreconciled  bool // eod-reconciliation-failed is open or acknowledged
	PricesMissing bool // eod-prices-missing is open or acknowledged
	AlertsUnknown bool // the alerts could not be read
}

// buildEODLine reads the last frozen day (one row) and reads the alerts the report already holds.
func buildEODLine(ctx context.Context, db *sql.DB, alerts []alert.Alert, alertsError string) *eodLine {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	l := &eodLine{AlertsUnknown: alertsError != ""}
	d, ok, err := eod.LastDay(ctx, db)
	if err != nil {
		l.Error = err.Error()
	} else if ok {
		l.Last = &d
	}
	for _, a := range alerts {
		switch a.Code {
		case eod.AlertReconciliation:
			l.Unreconciled = true
		case eod.AlertPricesMissing:
			l.PricesMissing = true
		}
	}
	return l
}
