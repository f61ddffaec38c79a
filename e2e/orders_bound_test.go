package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// Price bounds and IOC/FOK on MARKET orders through real processes (docs/orders.md, «Price
// bound», «IOC and FOK»): on the B-book the desk judges the bound at its quote; at the REST and
// the FIX venue the venue does, and a venue that fills part of an order books the part for IOC
// and never for FOK.

// boundOrder is a MARKET order body on EURUSD with a timeInForce and a priceBound ("" : none).
func boundOrder(acct int64, side, volume, tif, bound, nonce string) string {
	b := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":%q,"type":"MARKET","volume":%q,"requestNonce":%q`, acct, side, volume, nonce)
	if tif != "" {
		b += fmt.Sprintf(`,"timeInForce":%q`, tif)
	}
	if bound != "" {
		b += fmt.Sprintf(`,"priceBound":%q`, bound)
	}
	return b + "}"
}

// boundAnswer is the part of an order's answer these tests read.
type boundAnswer struct {
	Order struct {
		ID           int64   `json:"id"`
		Status       string  `json:"status"`
		Volume       string  `json:"volume"`
		TimeInForce  string  `json:"timeInForce"`
		PriceBound   *string `json:"priceBound"`
		FilledVolume *string `json:"filledVolume"`
		FillPrice    *string `json:"fillPrice"`
	} `json:"order"`
	Position *positionJSON `json:"position"`
}

// placeBound submits body and answers the status, the decoded answer and the error text.
func placeBound(t *testing.T, d *tradingDesk, tok, body string) (int, boundAnswer, string) {
	t.Helper()
	code, b := call(t, d.web, tok, "POST", "/api/fx/orders", body)
	var a boundAnswer
	var e errorResp
	if code == http.StatusCreated {
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("order answer %s: %v", b, err)
		}
	} else {
		json.Unmarshal(b, &e)
	}
	return code, a, e.Error.Message
}

// ordersOfAccount counts acct's orders with status ("" : all).
func (e *deskEnv) ordersOfAccount(acct int64, status string) int {
	e.t.Helper()
	var n int
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ? AND (? = '' OR `status` = ?)", acct, status, status).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// On the B-book a bound past the desk's price is refused with 409 naming the price and the
// bound, and nothing is written; a bound at or beyond the price fills and is kept on the order;
// IOC and FOK fill whole at the desk's quote.
func TestPriceBoundOnTheDeskThroughTheAPI(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(3901, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	code, _, msg := placeBound(t, d, tok, boundOrder(acct, "BUY", "0.10", "", "1.10010", "b-1"))
	if code != http.StatusConflict || !strings.Contains(msg, "1.10020") || !strings.Contains(msg, "1.10010") {
		t.Fatalf("a buy bounded below the ask = %d %q; want 409 naming the price and the bound", code, msg)
	}
	if n := d.e.ordersOfAccount(acct, ""); n != 0 {
		t.Fatalf("a refused bounded order wrote %d orders", n)
	}
	code, _, msg = placeBound(t, d, tok, boundOrder(acct, "SELL", "0.10", "FOK", "1.10001", "b-2"))
	if code != http.StatusConflict || !strings.Contains(msg, "1.10000") {
		t.Fatalf("a sell bounded above the bid = %d %q; want 409", code, msg)
	}
	code, a, msg := placeBound(t, d, tok, boundOrder(acct, "BUY", "0.10", "IOC", "1.10020", "b-3"))
	if code != http.StatusCreated || a.Order.Status != "FILLED" || a.Order.PriceBound == nil || *a.Order.PriceBound != "1.1002" ||
		a.Order.TimeInForce != "IOC" || a.Order.FilledVolume != nil || a.Position == nil || a.Position.Volume != "0.1" {
		t.Fatalf("an IOC buy bounded at the ask = %d %+v %q; want the whole 0.10 filled, its bound kept", code, a, msg)
	}
	code, a, _ = placeBound(t, d, tok, boundOrder(acct, "SELL", "0.20", "FOK", "1.09000", "b-4"))
	if code != http.StatusCreated || a.Position == nil || a.Position.Volume != "0.2" || !dec(*a.Order.FillPrice).Equal(dec("1.1")) {
		t.Fatalf("a FOK sell bounded below the bid = %d %+v; want 0.20 filled at 1.10000", code, a)
	}
	if n := d.e.ordersOfAccount(acct, ""); n != 2 {
		t.Fatalf("%d orders written; want the two filled", n)
	}
	d.checkLedgerBalanced(acct)
}

// At the REST venue the bound and the fill policy go with the order: a bound the venue's price
// is beyond is cancelled there (BOUNDS_VIOLATION, the order REJECTED, 409); under the venue's
// partial fill an IOC books the part it filled (position 0.09 of 0.15, filledVolume 0.09) and a
// FOK is cancelled whole — desk and venue hold the same units.
func TestPriceBoundAndIOCAtTheRESTVenue(t *testing.T) {
	t.Parallel()
	d := newABookDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(3902, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	code, _, msg := placeBound(t, d.tradingDesk, tok, boundOrder(acct, "BUY", "0.10", "", "1.10015", "r-1"))
	if code != http.StatusConflict || !strings.Contains(msg, "priceBound") {
		t.Fatalf("a buy bounded below the venue's ask = %d %q; want 409 naming the priceBound", code, msg)
	}
	if n := d.e.ordersOfAccount(acct, "REJECTED"); n != 1 {
		t.Fatalf("%d REJECTED orders; want the bounded one", n)
	}
	for _, tr := range v.state().Trades {
		if tr.State == "OPEN" {
			t.Fatalf("the venue opened %+v for a bound it could not meet", tr)
		}
	}

	v.controlJSON("fault", `{"kind":"partial","count":1,"percent":60}`, nil)
	code, a, msg := placeBound(t, d.tradingDesk, tok, boundOrder(acct, "SELL", "0.15", "IOC", "1.09990", "r-2"))
	if code != http.StatusCreated || a.Position == nil || a.Position.Volume != "0.09" || a.Order.Volume != "0.15" ||
		a.Order.FilledVolume == nil || *a.Order.FilledVolume != "0.09" {
		t.Fatalf("an IOC the venue filled 60 %% of = %d %+v %q; want the 0.09 part booked", code, a, msg)
	}
	if trs := v.state().tradesOf(strconv.FormatInt(a.Order.ID, 10)); len(trs) != 1 || !trs[0].CurrentUnits.Equal(dec("-9000")) {
		t.Fatalf("venue trades of the IOC = %+v; want one of -9000 units", trs)
	}

	v.controlJSON("fault", `{"kind":"partial","count":1,"percent":60}`, nil)
	code, _, msg = placeBound(t, d.tradingDesk, tok, boundOrder(acct, "BUY", "0.15", "FOK", "", "r-3"))
	if code != http.StatusConflict || d.e.ordersOfAccount(acct, "REJECTED") != 2 {
		t.Fatalf("a FOK the venue could fill only part of = %d %q; want 409 and the order REJECTED", code, msg)
	}
	var positions int
	d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ?", acct).Scan(&positions)
	if positions != 1 {
		t.Fatalf("%d positions; want the IOC's alone", positions)
	}
	d.checkLedgerBalanced(acct)
}

// Over FIX the bound is an immediate LIMIT (OrdType=2) at the bound: beyond it the venue
// cancels the order whole and the desk REJECTS it; an IOC the venue fills 9,000 units of books
// 0.09 lots, and a FOK under the same fault books nothing. Desk and venue net the same units.
func TestPriceBoundAndIOCAtTheFIXVenue(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(3903, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	code, _, msg := placeBound(t, d.tradingDesk, tok, boundOrder(acct, "BUY", "0.10", "", "1.10015", "f-1"))
	if code != http.StatusConflict {
		t.Fatalf("a buy bounded below the venue's ask = %d %q; want 409", code, msg)
	}
	var rejected int64
	if err := d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ? AND `status` = 'REJECTED'", acct).Scan(&rejected); err != nil {
		t.Fatalf("the bounded order is not REJECTED: %v", err)
	}
	if os := v.state().ordersOf(strconv.FormatInt(rejected, 10)); len(os) != 1 || !os[0].CumQty.IsZero() {
		t.Fatalf("venue orders of the bounded one = %+v; want one, nothing executed", os)
	}

	v.post("fault", `{"kind":"partial","count":1,"units":"9000"}`)
	code, a, msg := placeBound(t, d.tradingDesk, tok, boundOrder(acct, "SELL", "0.15", "IOC", "1.09990", "f-2"))
	if code != http.StatusCreated || a.Position == nil || a.Position.Volume != "0.09" || a.Order.FilledVolume == nil || *a.Order.FilledVolume != "0.09" {
		t.Fatalf("an IOC the venue filled 9,000 units of = %d %+v %q; want the 0.09 part booked", code, a, msg)
	}
	v.post("fault", `{"kind":"partial","count":1,"units":"9000"}`)
	if code, _, msg = placeBound(t, d.tradingDesk, tok, boundOrder(acct, "BUY", "0.15", "FOK", "", "f-3")); code != http.StatusConflict {
		t.Fatalf("a FOK the venue could fill only part of = %d %q; want 409", code, msg)
	}
	if net := v.state().net("EURUSD"); !net.Equal(decimal.NewFromInt(-9000)) {
		t.Fatalf("the venue nets %s EURUSD; want the IOC's -9000 alone", net)
	}
	var lots decimal.Decimal
	d.e.sql.QueryRow("SELECT COALESCE(SUM(`volume`), 0) FROM `fx_position` WHERE `accountId` = ? AND `status` = 'OPEN'", acct).Scan(&lots)
	if !lots.Equal(dec("0.09")) {
		t.Fatalf("the desk holds %s lots open; want 0.09", lots)
	}
	d.checkLedgerBalanced(acct)
}
