package api

import (
	"database/sql"
	_ "embed"
	"encoding/csv"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/eod"
	"fxdesk/internal/fx"
)

// Account statements (docs/eod.md, «Statements»): GET /api/fx/accounts/{id}/statement for the
// trader's own account and GET /api/admin/fx/accounts/{id}/statement for desk staff, as JSON,
// CSV or a printable HTML page. The three are one view written three ways, so a CSV read back
// gives the JSON's figures.

var statementParams = []string{"from", "to", "format"}

var statementFormats = []string{"json", "csv", "html"}

// statementQuery reads the statement's range and format (default json); every refusal is a 400
// naming the parameter.
func statementQuery(q url.Values) (eod.StatementRange, string, error) {
	if err := checkQuery(q, statementParams, "a statement"); err != nil {
		return eod.StatementRange{}, "", err
	}
	format := "json"
	if v := q.Get("format"); v != "" {
		format = ""
		for _, f := range statementFormats {
			if strings.EqualFold(f, strings.TrimSpace(v)) {
				format = f
			}
		}
		if format == "" {
			return eod.StatementRange{}, "", fx.Errorf(fx.EINVALID, "format must be one of %s (got %q).", strings.Join(statementFormats, ", "), v)
		}
	}
	r, err := eod.ParseStatementRange(q.Get("from"), q.Get("to"))
	return r, format, err
}

// handleStatement serves an account's statement: the caller's own account (404 for anyone
// else's, as every trader route answers), or with staff any account.
func handleStatement(log *slog.Logger, db *sql.DB, staff bool) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		rng, format, err := statementQuery(r.URL.Query())
		if err != nil {
			return err
		}
		owner := principal(r.Context()).UserID
		if staff {
			owner = 0
		}
		a, err := book.LoadAccount(r.Context(), db, owner, id)
		if err != nil {
			return err
		}
		s, err := eod.ReadStatement(r.Context(), db, a, rng)
		if err != nil {
			return err
		}
		v := viewStatement(s)
		// A statement is a client's private record: no cache keeps a copy.
		w.Header().Set("Cache-Control", "no-store")
		switch format {
		case "csv":
			return writeStatementCSV(w, v)
		case "html":
			return writeStatementHTML(w, v)
		}
		writeJSON(w, http.StatusOK, map[string]any{"statement": v})
		return nil
	})
}

// statementSnapshot is an account at the close of a frozen day; at the account's start (the
// opening of a first statement) tradingDay and rolloverAt are null and everything is zero.
type statementSnapshot struct {
	TradingDay *string    `json:"tradingDay"`
	RolloverAt *time.Time `json:"rolloverAt"`
	Balance    string     `json:"balance"`
	// The marks at the day's closing prices; null when a price was missing then.
	Equity        *string `json:"equity"`
	Margin        *string `json:"margin"`
	FreeMargin    *string `json:"freeMargin"`
	FloatingPnL   *string `json:"floatingPnl"`
	OpenPositions int     `json:"openPositions"`
	PendingOrders int     `json:"pendingOrders"`
	ThroughDealID int64   `json:"throughDealId"`
}

type statementTotals struct {
	Deposits    string `json:"deposits"`
	Withdrawals string `json:"withdrawals"`
	Profit      string `json:"profit"`
	Swaps       string `json:"swaps"`
	Commissions string `json:"commissions"`
	Adjustments string `json:"adjustments"`
	Net         string `json:"net"`
}

// statementDeal is a deal as the deals route shows it, with the balance the statement runs to.
type statementDeal struct {
	dealView
	RunningBalance string `json:"runningBalance"`
	// BalanceAfterDisagrees: the stored balanceAfter is not runningBalance. Never true on a
	// ledger only the desk wrote.
	BalanceAfterDisagrees bool `json:"balanceAfterDisagrees"`
}

type closedPositionView struct {
	PositionID int64     `json:"positionId"`
	Symbol     string    `json:"symbol"`
	Side       fx.Side   `json:"side"`
	Volume     string    `json:"volume"`
	OpenPrice  string    `json:"openPrice"`
	ClosePrice string    `json:"closePrice"`
	OpenedAt   time.Time `json:"openedAt"`
	ClosedAt   time.Time `json:"closedAt"`
	Profit     string    `json:"profit"`
	Swap       string    `json:"swap"`
	Commission string    `json:"commission"`
}

type openPositionView struct {
	PositionID int64     `json:"positionId"`
	Symbol     string    `json:"symbol"`
	Side       fx.Side   `json:"side"`
	Volume     string    `json:"volume"`
	OpenPrice  string    `json:"openPrice"`
	OpenedAt   time.Time `json:"openedAt"`
}

// openPositionsView: count is the closing snapshot's; positions the ledger's list at the
// closing rollover.
type openPositionsView struct {
	Count     int                `json:"count"`
	Positions []openPositionView `json:"positions"`
}

type equityPoint struct {
	TradingDay string  `json:"tradingDay"`
	Balance    string  `json:"balance"`
	Equity     *string `json:"equity"`
}

// statementView is the statement as the route answers it.
type statementView struct {
	AccountID int64  `json:"accountId"`
	Currency  string `json:"currency"`
	From      string `json:"from"`
	To        string `json:"to"`
	// FrozenThrough is the closing snapshot's day: the range's days after it are not frozen yet.
	FrozenThrough string `json:"frozenThrough"`
	// Reconciled: opening.balance + totals.net = closing.balance, as it must be.
	Reconciled bool `json:"reconciled"`
	// BalanceAfterDisagrees lists the deals whose stored balanceAfter is not their running
	// balance; it must be empty.
	BalanceAfterDisagrees []int64              `json:"balanceAfterDisagrees"`
	Opening               statementSnapshot    `json:"opening"`
	Closing               statementSnapshot    `json:"closing"`
	Totals                statementTotals      `json:"totals"`
	Deals                 []statementDeal      `json:"deals"`
	ClosedPositions       []closedPositionView `json:"closedPositions"`
	OpenPositions         openPositionsView    `json:"openPositions"`
	EquityCurve           []equityPoint        `json:"equityCurve"`
}

func viewStatement(s *eod.Statement) statementView {
	ccy := s.Currency
	m := func(d decimal.Decimal) string { return money(ccy, d) }
	opt := func(d *decimal.Decimal) *string {
		if d == nil {
			return nil
		}
		v := m(*d)
		return &v
	}
	snap := func(sn eod.Snapshot) statementSnapshot {
		v := statementSnapshot{Balance: m(sn.Balance), Equity: opt(sn.Equity), Margin: opt(sn.Margin), FreeMargin: opt(sn.FreeMargin),
			FloatingPnL: opt(sn.FloatingPnL), OpenPositions: sn.OpenPositions, PendingOrders: sn.PendingOrders, ThroughDealID: sn.ThroughDealID}
		if sn.TradingDay != "" {
			day, at := sn.TradingDay, sn.RolloverAt.UTC()
			v.TradingDay, v.RolloverAt = &day, &at
		}
		return v
	}
	t := s.Totals
	v := statementView{AccountID: s.AccountID, Currency: ccy, From: s.Range.From, To: s.Range.To, FrozenThrough: s.FrozenThrough(),
		Reconciled: s.Reconciled(), BalanceAfterDisagrees: s.Disagreements(), Opening: snap(s.Opening), Closing: snap(s.Closing),
		Totals: statementTotals{Deposits: m(t.Deposits), Withdrawals: m(t.Withdrawals), Profit: m(t.Profit), Swaps: m(t.Swaps),
			Commissions: m(t.Commissions), Adjustments: m(t.Adjustments), Net: m(t.Net)},
		Deals: make([]statementDeal, 0, len(s.Deals)), ClosedPositions: make([]closedPositionView, 0, len(s.Closed)),
		OpenPositions: openPositionsView{Count: s.Closing.OpenPositions, Positions: make([]openPositionView, 0, len(s.Open))},
		EquityCurve:   make([]equityPoint, 0, len(s.Days))}
	for _, d := range s.Deals {
		v.Deals = append(v.Deals, statementDeal{dealView: viewDeal(d.Deal), RunningBalance: m(d.Running), BalanceAfterDisagrees: d.Disagrees()})
	}
	for _, c := range s.Closed {
		v.ClosedPositions = append(v.ClosedPositions, closedPositionView{PositionID: c.PositionID, Symbol: c.Symbol, Side: c.Side,
			Volume: c.Volume.String(), OpenPrice: c.OpenPrice.String(), ClosePrice: c.ClosePrice.String(), OpenedAt: c.OpenedAt.UTC(),
			ClosedAt: c.ClosedAt.UTC(), Profit: m(c.Profit), Swap: m(c.Swap), Commission: m(c.Commission)})
	}
	for _, p := range s.Open {
		v.OpenPositions.Positions = append(v.OpenPositions.Positions, openPositionView{PositionID: p.PositionID, Symbol: p.Symbol, Side: p.Side,
			Volume: p.Volume.String(), OpenPrice: p.OpenPrice.String(), OpenedAt: p.OpenedAt.UTC()})
	}
	for _, d := range s.Days {
		v.EquityCurve = append(v.EquityCurve, equityPoint{TradingDay: d.TradingDay, Balance: m(d.Balance), Equity: opt(d.Equity)})
	}
	return v
}

// statementCSVDeals are the CSV's deal columns, named as the JSON names them.
var statementCSVDeals = []string{"id", "createdAt", "type", "symbol", "side", "volume", "price", "orderId", "positionId", "amount",
	"runningBalance", "balanceAfter", "balanceAfterDisagrees", "comment"}

// summary is the statement's figures as (name, value) pairs, each named by its path in the
// JSON (closing.balance, totals.net); a null is an empty value.
func (v statementView) summary() [][2]string {
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Format(time.RFC3339Nano)
	}
	rows := [][2]string{{"accountId", strconv.FormatInt(v.AccountID, 10)}, {"currency", v.Currency}, {"from", v.From}, {"to", v.To},
		{"frozenThrough", v.FrozenThrough}, {"reconciled", strconv.FormatBool(v.Reconciled)}}
	for _, s := range []struct {
		name string
		v    statementSnapshot
	}{{"opening", v.Opening}, {"closing", v.Closing}} {
		rows = append(rows, [][2]string{{s.name + ".tradingDay", str(s.v.TradingDay)}, {s.name + ".rolloverAt", at(s.v.RolloverAt)},
			{s.name + ".balance", s.v.Balance}, {s.name + ".equity", str(s.v.Equity)}, {s.name + ".margin", str(s.v.Margin)},
			{s.name + ".freeMargin", str(s.v.FreeMargin)}, {s.name + ".floatingPnl", str(s.v.FloatingPnL)},
			{s.name + ".openPositions", strconv.Itoa(s.v.OpenPositions)}, {s.name + ".pendingOrders", strconv.Itoa(s.v.PendingOrders)},
			{s.name + ".throughDealId", strconv.FormatInt(s.v.ThroughDealID, 10)}}...)
	}
	t := v.Totals
	return append(rows, [][2]string{{"totals.deposits", t.Deposits}, {"totals.withdrawals", t.Withdrawals}, {"totals.profit", t.Profit},
		{"totals.swaps", t.Swaps}, {"totals.commissions", t.Commissions}, {"totals.adjustments", t.Adjustments}, {"totals.net", t.Net},
		{"openPositions.count", strconv.Itoa(v.OpenPositions.Count)}}...)
}

// writeStatementCSV writes the summary (field,value) and then the deals, each under its own
// header row, with an empty line between them.
func writeStatementCSV(w http.ResponseWriter, v statementView) error {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="statement-%d-%s-%s.csv"`, v.AccountID, v.From, v.To))
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	cw.Write([]string{"field", "value"})
	for _, r := range v.summary() {
		cw.Write(r[:])
	}
	cw.Flush()
	fmt.Fprint(w, "\r\n")
	cw.Write(statementCSVDeals)
	opt := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	optID := func(id *int64) string {
		if id == nil {
			return ""
		}
		return strconv.FormatInt(*id, 10)
	}
	for _, d := range v.Deals {
		side := ""
		if d.Side != nil {
			side = string(*d.Side)
		}
		cw.Write([]string{strconv.FormatInt(d.ID, 10), d.CreatedAt.Format(time.RFC3339Nano), d.Type, opt(d.Symbol), side, opt(d.Volume),
			opt(d.Price), optID(d.OrderID), optID(d.PositionID), d.Amount, d.RunningBalance, d.BalanceAfter,
			strconv.FormatBool(d.BalanceAfterDisagrees), d.Comment})
	}
	cw.Flush()
	return cw.Error()
}

//go:embed statement.html
var statementHTML string

// statementPage is the printable statement: html/template escapes every value it writes.
var statementPage = template.Must(template.New("statement.html").Funcs(template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"str": func(s *string) string {
		if s == nil {
			return "—"
		}
		return *s
	},
}).Parse(statementHTML))

// statementPageData is what the page shows: the view and its equity curve.
type statementPageData struct {
	S     statementView
	Curve *equityChart
}

func writeStatementHTML(w http.ResponseWriter, v statementView) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page runs no script and loads nothing: its styles and its chart are inline.
	w.Header().Set("Content-Security-Policy", pageCSP)
	var sb strings.Builder
	if err := statementPage.Execute(&sb, statementPageData{S: v, Curve: equityChartOf(v.Currency, v.EquityCurve)}); err != nil {
		return fmt.Errorf("statement page: %w", err)
	}
	w.WriteHeader(http.StatusOK)
	_, err := w.Write([]byte(sb.String()))
	return err
}

// equityChart is the statement's daily balance and equity on one scale.
type equityChart struct {
	Width, Height int
	Balance       string // polyline points
	Equity        string // polyline points of the days with an equity
	Dots          []chartDot
	Min, Max      string
	First, Last   string // the first and last day
}

type chartDot struct {
	X, Y   string
	Equity bool
}

const equityWidth, equityHeight = 640, 160

func equityChartOf(ccy string, days []equityPoint) *equityChart {
	if len(days) == 0 {
		return nil
	}
	balances := make([]decimal.Decimal, len(days))
	var equities []decimal.Decimal
	for i, d := range days {
		balances[i] = decimal.RequireFromString(d.Balance)
		if d.Equity != nil {
			equities = append(equities, decimal.RequireFromString(*d.Equity))
		}
	}
	p := newPlot(equityWidth, equityHeight, balances, equities...)
	c := &equityChart{Width: equityWidth, Height: equityHeight, Min: money(ccy, p.lo), Max: money(ccy, p.hi), First: days[0].TradingDay,
		Last: days[len(days)-1].TradingDay}
	var bal, eq []string
	for i, d := range days {
		bal = append(bal, p.point(i, balances[i]))
		c.Dots = append(c.Dots, chartDot{X: fmt.Sprintf("%.1f", p.x(i)), Y: fmt.Sprintf("%.1f", p.y(balances[i]))})
		if d.Equity != nil {
			e := decimal.RequireFromString(*d.Equity)
			eq = append(eq, p.point(i, e))
			c.Dots = append(c.Dots, chartDot{X: fmt.Sprintf("%.1f", p.x(i)), Y: fmt.Sprintf("%.1f", p.y(e)), Equity: true})
		}
	}
	c.Balance, c.Equity = strings.Join(bal, " "), strings.Join(eq, " ")
	return c
}
