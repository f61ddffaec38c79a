package api

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// A type error names the field and the type it should have held, not a blanket rule about
// decimal strings.
func TestTypeErrorsNameTheExpectedType(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"accountId":"7","symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.1"}`, "accountId must be a whole number such as 42, not a string."},
		{`{"accountId":7,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":0.1}`, `volume must be a decimal string such as "1.25", not a number.`},
		{`{"accountId":7,"symbol":1,"side":"BUY","type":"MARKET","volume":"0.1"}`, "symbol must be a string, not a number."},
		{`{"accountId":7,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.1","price":true}`, `price must be a decimal string such as "1.25", not true or false.`},
	} {
		_, err := decodeOrder(strings.NewReader(tc.body))
		if fx.ErrorCode(err) != fx.EINVALID || fx.ErrorMessage(err) != tc.want {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
	_, err := decodeInstruments(strings.NewReader(`{"instruments":[{"symbol":"EURUSD","volumeMin":0.01}]}`))
	if want := `instruments.volumeMin must be a decimal string such as "1.25", not a number.`; fx.ErrorMessage(err) != want {
		t.Errorf("nested field: %v, want %q", err, want)
	}
}

// List filters take any case and hand back the canonical spelling.
func TestListStatusFilterIgnoresCase(t *testing.T) {
	for _, raw := range []string{"closed", "CLOSED", "Closed", " closed "} {
		f, err := listQuery(httptest.NewRequest("GET", "/api/fx/positions?status="+strings.ReplaceAll(raw, " ", "%20"), nil), fx.PositionOpen, fx.PositionClosed)
		if err != nil || f.Status != fx.PositionClosed {
			t.Errorf("status=%q: %q, %v", raw, f.Status, err)
		}
	}
	if _, err := listQuery(httptest.NewRequest("GET", "/api/fx/positions?status=shut", nil), fx.PositionOpen, fx.PositionClosed); err == nil ||
		!strings.Contains(fx.ErrorMessage(err), "OPEN, CLOSED") {
		t.Errorf("status=shut: %v", err)
	}
}

// A list asked for without a limit answers the newest 100; a limit asks for fewer or more, up to
// 500; anything else is refused.
func TestListPageSize(t *testing.T) {
	for query, want := range map[string]int{"": 100, "?limit=7": 7, "?limit=500": 500, "?limit=2000": 500} {
		f, err := listQuery(httptest.NewRequest("GET", "/api/fx/deals"+query, nil))
		if err != nil || f.Limit != want {
			t.Errorf("%q: limit %d, %v; want %d", query, f.Limit, err, want)
		}
	}
	for _, query := range []string{"?limit=0", "?limit=-1", "?limit=ten"} {
		if _, err := listQuery(httptest.NewRequest("GET", "/api/fx/deals"+query, nil)); err == nil {
			t.Errorf("%q: no error", query)
		}
	}
}

// An account shown from its stored marks has a marginLevel wherever margin is used; one never
// marked shows its equity and margins as null (unknown), never as zero.
func TestAccountViewFromStoredMarks(t *testing.T) {
	now := time.Now()
	a := book.Account{ID: 1, Currency: "USD", Balance: decimal.RequireFromString("1000"), Equity: decimal.RequireFromString("1012.5"),
		UsedMargin: decimal.RequireFromString("108.5"), MarkedAt: &now}
	stored := func(a book.Account) accountView {
		m, marked := a.StoredMetrics()
		return viewAccount(trading.AccountView{Account: a, Metrics: m, Marked: marked})
	}
	if v := stored(a); v.MarginLevel == nil || *v.MarginLevel != "933.18" || *v.FreeMargin != "904.00" || v.Live {
		t.Fatalf("stored view %+v", v)
	}
	a.UsedMargin = decimal.Zero
	if v := stored(a); v.MarginLevel != nil {
		t.Fatalf("no margin used: marginLevel %v, want null", *v.MarginLevel)
	}
	a.MarkedAt, a.Equity = nil, decimal.Zero
	if v := stored(a); v.Equity != nil || v.UsedMargin != nil || v.FreeMargin != nil || v.MarginLevel != nil || v.Balance != "1000.00" {
		t.Fatalf("never marked: %+v, want equity, margins and level null beside the balance", v)
	}
}

// A position says how many lots it opened with beside how many are still open, and carries a
// close price only once CLOSED.
func TestPositionViewNames(t *testing.T) {
	price := decimal.RequireFromString("1.08512")
	now := time.Now()
	p := book.Position{ID: 9, Symbol: "EURUSD", Side: fx.Buy, Volume: decimal.RequireFromString("0.4"), OpenVolume: decimal.RequireFromString("1"),
		OpenPrice: price, Status: fx.PositionOpen, ClosePrice: &price, OpenedAt: now}
	v := viewPosition(p)
	if v.Volume != "0.4" || v.InitialVolume != "1" || v.ClosePrice != nil {
		t.Fatalf("open position view %+v", v)
	}
	p.Volume, p.Status, p.ClosedAt = decimal.Zero, fx.PositionClosed, &now
	if v := viewPosition(p); v.ClosePrice == nil || *v.ClosePrice != "1.08512" || v.InitialVolume != "1" {
		t.Fatalf("closed position view %+v", v)
	}
}

// Money leaves the desk with exactly its currency's minor units: whole yen, cents, fils. An
// account, its positions and its deals agree, whatever the value's own scale.
func TestMoneyIsShownInTheCurrencysMinorUnits(t *testing.T) {
	d := decimal.RequireFromString
	for _, tc := range []struct {
		currency, amount, want string
	}{
		{"JPY", "998950.000", "998950"},
		{"USD", "10", "10.00"},
		{"KWD", "2.153", "2.153"},
		{"KWD", "1000", "1000.000"},
	} {
		a := book.Account{ID: 1, Currency: tc.currency, Balance: d(tc.amount), Equity: d(tc.amount), UsedMargin: decimal.Zero}
		m, _ := a.StoredMetrics()
		if v := viewAccount(trading.AccountView{Account: a, Metrics: m, Marked: true}); v.Balance != tc.want || *v.Equity != tc.want || *v.FreeMargin != tc.want {
			t.Errorf("%s account view %+v, want %s", tc.currency, v, tc.want)
		}
		p := book.Position{ID: 2, Currency: tc.currency, Commission: d(tc.amount), RealizedProfit: d(tc.amount), OpenedAt: time.Now()}
		if v := viewPosition(p); v.Commission != tc.want || v.RealizedProfit != tc.want {
			t.Errorf("%s position view %+v, want %s", tc.currency, v, tc.want)
		}
		deal := book.Deal{ID: 3, Currency: tc.currency, Amount: d(tc.amount), BalanceAfter: d(tc.amount)}
		if v := viewDeal(deal); v.Amount != tc.want || v.BalanceAfter != tc.want {
			t.Errorf("%s deal view %+v, want %s", tc.currency, v, tc.want)
		}
	}
}
