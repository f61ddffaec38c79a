package venuesim

import (
	"fmt"
	"net/http"
	"testing"
)

// Where the official OANDA v20 client would notice the simulator differs from OANDA, it must
// not: these pin the shapes the desk's client and any other v20 client read.

// OANDA's PUT …/trades/{id}/close takes an optional body whose units default to ALL: no body
// (or an empty object) closes the whole trade.
func TestCloseWithoutUnitsClosesAllOfTheTrade(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	for i, body := range []any{nil, map[string]any{}} {
		id := answer(e.fill(fmt.Sprint("N", i), "EUR_USD", "3000")).str("id")
		code, out := e.call(http.MethodPut, "/trades/"+id+"/close", body)
		fill, _ := out["orderFillTransaction"].(map[string]any)
		closed, _ := fill["tradesClosed"].([]any)
		if code != http.StatusOK || len(closed) != 1 || answer(closed[0].(map[string]any)).str("units") != "-3000" {
			t.Fatalf("close with body %v: %d %v, want 200 closing all 3000 units", body, code, out)
		}
	}
}

// The account's opening deposit is a TRANSFER_FUNDS transaction, whose reason OANDA names
// fundingReason (a transaction's "reason" is an order's or a fill's).
func TestOpeningDepositNamesItsFundingReason(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	_, out := e.call(http.MethodGet, "/transactions/1", nil)
	tx := answer(out["transaction"].(map[string]any))
	if tx.str("type") != "TRANSFER_FUNDS" || tx.str("fundingReason") != "CLIENT_FUNDING" || tx.has("reason") {
		t.Fatalf("opening transaction %v, want TRANSFER_FUNDS with fundingReason CLIENT_FUNDING and no reason", tx)
	}
}

// An order for an instrument the account does not offer is refused with 400 and creates
// nothing, as at OANDA: no transaction id is used, no order is kept, and its client id stays
// free. (A known instrument that cannot be priced now is a different case: created, then
// cancelled MARKET_HALTED.)
func TestOrderForAnUnknownInstrumentIsRefusedAndCreatesNothing(t *testing.T) {
	t.Parallel()
	e := start(t, Config{Instruments: []string{"EURUSD", "USDJPY", "GBPUSD"}})
	before := e.sim.State().LastTransactionID
	for _, instrument := range []string{"ABC_DEF", "XAU_USD"} { // XAU_USD: not offered by this account
		code, out := e.order("K1", instrument, "1000")
		if code != http.StatusBadRequest || out.str("errorCode") != "INSTRUMENT_UNKNOWN" || out.str("errorMessage") == "" ||
			out.has("orderCreateTransaction") || out.has("orderRejectTransaction") || out.has("orderCancelTransaction") {
			t.Fatalf("order for %s: %d %v, want 400 INSTRUMENT_UNKNOWN and nothing created", instrument, code, out)
		}
	}
	if st := e.sim.State(); st.LastTransactionID != before || st.OrdersCancelled != 0 || len(st.Trades) != 0 {
		t.Fatalf("state after refused orders: last transaction %d (was %d), %d cancelled, %d trades", st.LastTransactionID, before, st.OrdersCancelled, len(st.Trades))
	}
	if code, _ := e.call(http.MethodGet, "/orders/@K1", nil); code != http.StatusNotFound {
		t.Fatalf("GET the refused order by its client id answered %d, want 404", code)
	}
	e.fill("K1", "EUR_USD", "1000") // the client id was never used

	// Known but not quoted now: created, then cancelled MARKET_HALTED.
	if err := e.feed.SetSession("GBPUSD", false); err != nil {
		t.Fatal(err)
	}
	code, out := e.order("K2", "GBP_USD", "1000")
	if cancel, _ := out["orderCancelTransaction"].(map[string]any); code != http.StatusCreated || answer(cancel).str("reason") != "MARKET_HALTED" {
		t.Fatalf("order for an unquoted instrument: %d %v, want 201 cancelled MARKET_HALTED", code, out)
	}
}
