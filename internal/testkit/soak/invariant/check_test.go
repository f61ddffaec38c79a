package invariant

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// Every invariant is tested the same way: a fixture of crafted evidence that holds, then, case by
// case, one change that breaks it. A case with no want must pass the check untouched (an
// exemption the check allows); a case with a want must be flagged with a violation saying so —
// so each check is shown to fail, not only to pass.

// base is the instant the crafted evidence is laid out from.
var base = time.Date(2025, 3, 5, 12, 0, 0, 0, time.UTC)

// at is base plus sec seconds.
func at(sec float64) time.Time { return base.Add(time.Duration(sec * float64(time.Second))) }

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func ndec(s string) decimal.NullDecimal { return decimal.NullDecimal{Decimal: dec(s), Valid: true} }

func nid(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: true} }

func nstr(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }

func ntime(t time.Time) sql.NullTime { return sql.NullTime{Time: t, Valid: true} }

// answer is a journal entry answered with status and body resp.
func answer(seq int64, client, op, method, path string, status int, resp string, start, end time.Time) Entry {
	return Entry{Seq: seq, Client: client, Op: op, Proc: "web1", Method: method, Path: path, Start: start, End: end,
		Outcome: Answered, Status: status, Resp: json.RawMessage(resp)}
}

// errBody is an error answer as the desk writes it.
func errBody(code, msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return string(b)
}

// checkCase is one change to a check's fixture and what the check must say of it: want is a text
// one violation must contain, or "" when the changed evidence still holds.
type checkCase[F any] struct {
	name   string
	change func(F)
	want   string
}

// runCases runs each case on a fresh fixture, and the fixture untouched first: it must hold.
func runCases[F any](t *testing.T, fixture func() F, check func(F) Result, cases []checkCase[F]) {
	t.Helper()
	t.Run("the crafted evidence holds", func(t *testing.T) { expect(t, check(fixture()), "") })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fixture()
			c.change(f)
			expect(t, check(f), c.want)
		})
	}
}

// expect fails t unless r holds (want "") or one of its violations contains want.
func expect(t *testing.T, r Result, want string) {
	t.Helper()
	var texts []string
	for _, v := range r.Violations {
		texts = append(texts, v.Text)
	}
	if want == "" {
		if len(r.Violations) > 0 {
			t.Fatalf("%s flagged evidence that holds (%s):\n%s", r.Name, r.Figures, strings.Join(texts, "\n"))
		}
		return
	}
	for _, s := range texts {
		if strings.Contains(s, want) {
			return
		}
	}
	t.Fatalf("%s did not flag the broken evidence with %q (%s); violations:\n%s", r.Name, want, r.Figures, strings.Join(texts, "\n"))
}

// money is the fixture of the ledger, positions and nonces checks.
type money struct {
	s  *Snapshot
	ev *Evidence
}

func moneyFixture() *money {
	s := &Snapshot{
		Taken: at(100),
		Accounts: []dbAccount{
			{ID: 1, User: 1001, Balance: dec("10037.50")},
		},
		Deals: []dbDeal{
			{ID: 1, Account: 1, Type: "DEPOSIT", Amount: dec("10000.00"), BalanceAfter: dec("10000.00"), Key: "dep:1"},
			{ID: 2, Account: 1, Type: "PROFIT", Amount: dec("25.00"), BalanceAfter: dec("10025.00"), Position: nid(10), Volume: ndec("0.6"), Key: "close:10:1"},
			{ID: 3, Account: 1, Type: "PROFIT", Amount: dec("12.50"), BalanceAfter: dec("10037.50"), Position: nid(11), Volume: ndec("0.5"), Key: "close:11:0.5"},
		},
		Positions: []dbPosition{
			{ID: 10, Account: 1, Order: 100, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("1"), Volume: dec("0.4"), Status: "OPEN"},
			{ID: 11, Account: 1, Order: 101, Symbol: "EURUSD", Side: "SELL", OpenVolume: dec("0.5"), Volume: dec("0"), Status: "CLOSED"},
		},
		Orders: []dbOrder{
			{ID: 100, Account: 1, Nonce: nstr("t1-order-1"), Status: "FILLED", Execution: "INTERNAL"},
			{ID: 101, Account: 1, Nonce: nstr("t1-order-2"), Status: "FILLED", Execution: "INTERNAL"},
		},
	}
	order := func(id int64, nonce string) string {
		return `{"order":{"id":` + strconv.FormatInt(id, 10) + `,"requestNonce":"` + nonce + `"}}`
	}
	ev := &Evidence{Journal: []Entry{
		answer(1, "t1", "open", http.MethodPost, "/api/fx/orders", 201, order(100, "t1-order-1"), at(1), at(1.1)),
		answer(2, "t1", "open-retry", http.MethodPost, "/api/fx/orders", 200, order(100, "t1-order-1"), at(2), at(2.1)),
		answer(3, "t1", "raceClose", http.MethodPost, "/api/fx/positions/11/close", 200, `{}`, at(3), at(3.1)),
		answer(4, "t1", "raceClose", http.MethodPost, "/api/fx/positions/11/close", 409, errBody(fx.ECONFLICT, "closed"), at(3), at(3.1)),
	}}
	return &money{s, ev}
}

func TestLedgerCheckFlagsABalanceOrARunningBalanceThatDisagreesWithTheDeals(t *testing.T) {
	runCases(t, moneyFixture, func(m *money) Result { return checkLedger(m.s) }, []checkCase[*money]{
		{"a deal's balanceAfter is not the previous one's plus its amount", func(m *money) { m.s.Deals[1].BalanceAfter = dec("10030.00") },
			"deal 2 (PROFIT 25, key close:10:1): balanceAfter 10030"},
		{"the balance is not the sum of the deals", func(m *money) { m.s.Accounts[0].Balance = dec("10000.00") },
			"account 1: Σ 3 deals = 10037.5, balance = 10000"},
		{"an account with no deals and a balance", func(m *money) { m.s.Accounts = append(m.s.Accounts, dbAccount{ID: 2, Balance: dec("5")}) },
			"account 2: Σ 0 deals = 0, balance = 5"},
	})
}

func TestPositionsCheckFlagsADoubleCloseAnOvercloseAndTwoWinnersOfARace(t *testing.T) {
	runCases(t, moneyFixture, func(m *money) Result { return checkPositions(m.s, m.ev) }, []checkCase[*money]{
		{"a close deal after the full close", func(m *money) {
			m.s.Deals = append(m.s.Deals, dbDeal{ID: 4, Account: 1, Type: "PROFIT", Position: nid(11), Volume: ndec("0.5"), Key: "close:11:0.5"})
		}, "position 11 closed again after it was fully closed: deal 4"},
		{"a close from a volume that was not open", func(m *money) { m.s.Deals[1].Key = "close:10:0.8" },
			"position 10 deal 2 closed 0.6 from 0.8, but 1 was open"},
		{"more closed than opened", func(m *money) { m.s.Deals[1].Volume = ndec("1.2") },
			"position 10 (EURUSD): closed 1.2 of 1 opened"},
		{"the row's volume disagrees with its close deals", func(m *money) { m.s.Positions[0].Volume = dec("0.5") },
			"position 10: volume 0.5, but opened 1 minus its close deals is 0.4"},
		{"CLOSED with volume left", func(m *money) { m.s.Positions[0].Status = "CLOSED" },
			"position 10: status CLOSED with volume 0.4"},
		{"both halves of a race answered 2xx", func(m *money) { m.ev.Journal[3].Status, m.ev.Journal[3].Resp = 200, json.RawMessage(`{}`) },
			"t1 /api/fx/positions/11/close: 2 concurrent full closes answered 2xx (journal seq 3 and 4)"},
		{"a race whose both halves failed", func(m *money) { m.ev.Journal[2].Status = 404 }, ""},
	})
}

func TestNoncesCheckFlagsTwoOrdersForOneNonceOrTwoAnswersNamingDifferentOrders(t *testing.T) {
	runCases(t, moneyFixture, func(m *money) Result { return checkNonces(m.s, m.ev) }, []checkCase[*money]{
		{"two orders of one account under one nonce", func(m *money) {
			m.s.Orders = append(m.s.Orders, dbOrder{ID: 102, Account: 1, Nonce: nstr("t1-order-1"), Status: "FILLED"})
		}, "account 1 nonce t1-order-1: orders [100 102]"},
		{"one nonce on two accounts", func(m *money) {
			m.s.Orders = append(m.s.Orders, dbOrder{ID: 102, Account: 2, Nonce: nstr("t1-order-1"), Status: "FILLED"})
		}, ""},
		{"a retry answered with another order", func(m *money) {
			m.ev.Journal[1].Resp = json.RawMessage(`{"order":{"id":102,"requestNonce":"t1-order-1"}}`)
		}, "nonce t1-order-1 answered with orders [100 102]"},
		{"a refused retry", func(m *money) {
			m.ev.Journal[1].Status, m.ev.Journal[1].Resp = 409, json.RawMessage(`{"order":{"id":102,"requestNonce":"t1-order-1"}}`)
		}, ""},
	})
}
