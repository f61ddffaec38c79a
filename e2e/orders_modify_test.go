package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// Modify a resting order in place (docs/orders.md, «Modify a resting order») through the real
// fxdesk-web holder and the feed simulator.

// placeLimit places a resting order and returns its id.
func (d *tradingDesk) placeLimit(tok string, acct int64, side, typ, volume, price string) int64 {
	t := d.e.t
	t.Helper()
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":%q,"type":%q,"volume":%q,"price":%q}`,
		acct, side, typ, volume, price), http.StatusCreated, &o)
	return o.Order.ID
}

// storedOrderPrice reads an order's price, volume and whether it was ever modified.
func (d *tradingDesk) storedOrderPrice(id int64) (price, volume decimal.Decimal, modified bool) {
	var at *time.Time
	if err := d.e.sql.QueryRow("SELECT `price`, `volume`, `modifiedAt` FROM `fx_order` WHERE `id` = ?", id).Scan(&price, &volume, &at); err != nil {
		d.e.t.Fatal(err)
	}
	return price, volume, at != nil
}

// A modified order fills at its new price, never at its old one: a quote that reaches only the
// old price leaves it PENDING (a sentinel order at the old price, on another account, fills on
// that same quote, so the engine has evaluated it), and the quote that reaches the new price
// fills it there. Bad modifies answer 400 and change nothing; the dealer's modify is audited; a
// filled order's modify answers 409.
func TestModifyThenTriggerAtTheNewPrice(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(3901, "USD", "100", "10000.00")
	sentTok, sentAcct := d.newTrader(3902, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	id := d.placeLimit(tok, acct, "BUY", "LIMIT", "0.10", "1.09000")
	sentinel := d.placeLimit(sentTok, sentAcct, "BUY", "LIMIT", "0.10", "1.09000")
	path := fmt.Sprintf("/api/fx/orders/%d", id)

	for _, bad := range []string{`{}`, `{"price":"1.20000"}`, `{"price":"1.09000"}`, `{"limitPrice":"1.08"}`, `{"volume":"0.105"}`, `{"side":"SELL"}`} {
		must(t, d.web, tok, "PATCH", path, bad, http.StatusBadRequest, nil)
	}
	must(t, d.web, sentTok, "PATCH", path, `{"price":"1.08000"}`, http.StatusNotFound, nil) // another trader's order
	if _, _, modified := d.storedOrderPrice(id); modified {
		t.Fatal("a refused modify wrote modifiedAt")
	}

	var o struct {
		Order struct {
			ID         int64   `json:"id"`
			Price      string  `json:"price"`
			Status     string  `json:"status"`
			ModifiedAt *string `json:"modifiedAt"`
		} `json:"order"`
	}
	must(t, d.web, tok, "PATCH", path, `{"price":"1.08000","sl":"1.07000"}`, http.StatusOK, &o)
	if o.Order.ID != id || o.Order.Price != "1.08" || o.Order.Status != "PENDING" || o.Order.ModifiedAt == nil {
		t.Fatalf("modify answered %+v", o.Order)
	}
	must(t, d.web, tok, "PATCH", path, `{"volume":"0.20"}`, http.StatusOK, nil)
	var modifiedEvents int
	d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `accountId` = ? AND `type` = 'order.modified'", acct).Scan(&modifiedEvents)
	if modifiedEvents != 2 {
		t.Fatalf("%d order.modified events, want 2 (one per modify)", modifiedEvents)
	}

	// The old price is reached: the sentinel fills, the modified order stays.
	d.setQuote(tok, "EURUSD", "1.08900", "1.08920")
	d.waitFilled(sentinel)
	if st := d.orderStatus(id); st != "PENDING" {
		t.Fatalf("the modified order is %s at its old price", st)
	}
	// The new price is reached: it fills there (ask 1.07990 ≤ 1.08000), 0.20 lots.
	d.setQuote(tok, "EURUSD", "1.07970", "1.07990")
	fill, open := d.waitFilled(id)
	if want := decimal.RequireFromString("1.07990"); !fill.Equal(want) || !open.Equal(want) {
		t.Fatalf("filled at %s, opened at %s; want 1.07990", fill, open)
	}
	if _, vol, _ := d.storedOrderPrice(id); !vol.Equal(decimal.RequireFromString("0.2")) {
		t.Fatalf("filled %s lots, want the modified 0.20", vol)
	}
	must(t, d.web, tok, "PATCH", path, `{"price":"1.07000"}`, http.StatusConflict, nil)
	d.checkLedgerBalanced(acct)
	d.checkLedgerBalanced(sentAcct)
}

// dealerModifiesAnOrder is TestDealerModifiesAnOrder (e2e/dealer_test.go, beside the dealer's
// other actions): the dealer moves a trader's resting order through the admin route; a refused
// modify writes no fx_audit row, the valid one exactly one (order.modify, by the admin, with the
// order before and after), and the order rests at its new values.
func dealerModifiesAnOrder(t *testing.T) {
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(3904, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	id := d.placeLimit(tok, acct, "SELL", "STOP", "0.10", "1.09000")
	path := fmt.Sprintf("/api/admin/fx/orders/%d", id)
	rows := func() int {
		var n int
		d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `entityType` = 'order' AND `entityId` = ? AND `action` = 'order.modify'", strconv.FormatInt(id, 10)).Scan(&n)
		return n
	}
	must(t, d.web, d.admin, "PATCH", path, `{"price":"1.10500"}`, http.StatusBadRequest, nil) // a sell stop above the bid
	must(t, d.web, tok, "PATCH", path, `{"price":"1.08500"}`, http.StatusForbidden, nil)      // a trader on the admin route
	if n := rows(); n != 0 {
		t.Fatalf("refused dealer modifies wrote %d fx_audit rows", n)
	}
	must(t, d.web, d.admin, "PATCH", path, `{"price":"1.08500","volume":"0.20"}`, http.StatusOK, nil)
	if n := rows(); n != 1 {
		t.Fatalf("%d fx_audit rows for the dealer's modify, want 1", n)
	}
	d.wantAudit("order", strconv.FormatInt(id, 10), "order.modify", `"price":"1.085"`, `"volume":"0.2"`)
	if price, vol, modified := d.storedOrderPrice(id); !price.Equal(decimal.RequireFromString("1.085")) || !vol.Equal(decimal.RequireFromString("0.2")) || !modified {
		t.Fatalf("after the dealer's modify: %s × %s (modified %v)", price, vol, modified)
	}
}

// THE RACE: 50 times, a modify that moves a buy limit away from the market is sent at the same
// moment as the quote that triggers it. Each time exactly one wins, decided under the order's row
// lock: "modified" (200; the order rests at its new price and, the market never reaching it, is
// still PENDING at the end) or "filled" (409; FILLED at or below its old price, never modified).
// Never both: no modified order fills at the quote that fired on its old price, no modify answers
// 200 for an order that filled; and Σ deals = balance.
func TestModifyRacesItsTrigger(t *testing.T) {
	t.Parallel()
	// Fifty rounds of a placement, a modify and the feed's moves outrun the front door's 50 a
	// second per token on a quiet machine (429 in CI): the race, not the limit, is under test.
	d := newTradingDesk(t, unlimitedRates...)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(3903, "USD", "100", "10000.00")
	rail := d.openRail(tok, "EURUSD")
	const rounds = 50
	outcome := map[int64]int{} // order → the PATCH's status
	for i := range rounds {
		d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
		id := d.placeLimit(tok, acct, "BUY", "LIMIT", "0.01", "1.09000")
		patch := fmt.Sprintf("/api/fx/orders/%d", id)
		trigger := quoteBody("EURUSD", "1.08970", "1.08990") // ask 1.08990 ≤ 1.09000
		var code int
		var body []byte
		if i%2 == 0 {
			// The modify sent the moment the desk shows the trigger quote: the engine evaluates
			// that same tick beside the rail, so its fill is in flight or just committed.
			d.simControl("quote", trigger)
			rail.await(t, "EURUSD", "1.08970", "1.08990")
			code, body = call(t, d.web, tok, "PATCH", patch, `{"price":"1.08000"}`)
		} else {
			// The modify and the quote sent together: either may reach the order first.
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				if err := d.sim.control("quote", trigger); err != nil {
					t.Error(err)
				}
			}()
			go func() {
				defer wg.Done()
				code, body = callNoFatal(d.web, tok, "PATCH", patch, `{"price":"1.08000"}`)
			}()
			wg.Wait()
		}
		if code != http.StatusOK && code != http.StatusConflict {
			t.Fatalf("round %d: PATCH = %d %s, want 200 or 409", i, code, body)
		}
		outcome[id] = code
		if code == http.StatusConflict {
			d.waitFilled(id) // a 409 is only ever a fill that won
		}
	}
	// Every fill the engine handed off has settled: the quote is back above every order (each
	// round's setQuote), and a last one is seen by the desk after every round's trigger.
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var modified, filled int
	for id, code := range outcome {
		price, _, wasModified := d.storedOrderPrice(id)
		st := d.orderStatus(id)
		switch code {
		case http.StatusOK:
			modified++
			if st != "PENDING" || !wasModified || !price.Equal(decimal.RequireFromString("1.08")) {
				t.Errorf("order %d: modify answered 200 but the order is %s at %s (modified %v)", id, st, price, wasModified)
			}
		case http.StatusConflict:
			filled++
			fill, _ := d.waitFilled(id)
			if wasModified || fill.GreaterThan(decimal.RequireFromString("1.09")) {
				t.Errorf("order %d: modify answered 409 but the order was modified (%v) or filled above its limit (%s)", id, wasModified, fill)
			}
		}
		var both int
		d.e.sql.QueryRow("SELECT COUNT(DISTINCT `type`) FROM `fx_event` WHERE `accountId` = ? AND `type` IN ('order.modified', 'order.triggered') "+
			"AND JSON_EXTRACT(`payload`, '$.id') = ?", acct, id).Scan(&both)
		if both != 1 {
			t.Errorf("order %d has %d of order.modified/order.triggered, want exactly one", id, both)
		}
	}
	dropped := d.web.countLog(msgIs("fill dropped: the order was modified after its trigger; it stays under watch"))
	t.Logf("%d rounds: %d modified, %d filled; %d fills dropped because the modify won the row", rounds, modified, filled, dropped)
	d.checkLedgerBalanced(acct)
}

// callNoFatal is call for a goroutine other than the test's: it reports a transport error as
// status 0.
func callNoFatal(p *proc, token, method, path, body string) (int, []byte) {
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
