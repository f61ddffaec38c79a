package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/swaps"
)

// openPositions is an account's open positions over the trader's API, newest first.
func (d *tradingDesk) openPositions(token string, account int64) []positionJSON {
	d.e.t.Helper()
	var out struct{ Positions []positionJSON }
	must(d.e.t, d.web, token, "GET", fmt.Sprintf("/api/fx/positions?accountId=%d&status=OPEN", account), "", http.StatusOK, &out)
	return out.Positions
}

// traderIn is a new funded USD trader whose account the dealer moved into group.
func (d *tradingDesk) traderIn(user int64, group string) (string, int64) {
	d.e.t.Helper()
	tok, acct := d.newTrader(user, "USD", "100", "10000")
	must(d.e.t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/group", acct), fmt.Sprintf(`{"group":%q}`, group), http.StatusOK, nil)
	return tok, acct
}

// The three position modes through the real processes (fxdesk-web holding the lease, fxdesk-cron
// for the swaps, the feed simulator for prices), set by the dealer over HTTP: a NETTING account
// adds, reduces and reverses its one position; a FIFO account closes its oldest first and is
// refused a close of a newer one; close-by pairs a HEDGING account's two sides and is refused on
// FIFO; the dealer's B-book exposure and the cron's swaps follow the positions each mode left.
func TestOrdersPositionModes(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t)
	waitRiskReady(d.web)
	must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups", `{"name":"netting-e2e","positionMode":"NETTING"}`, http.StatusCreated, nil)
	must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups", `{"name":"fifo-e2e","positionMode":"FIFO"}`, http.StatusCreated, nil)
	tokN, netting := d.traderIn(3901, "netting-e2e")
	tokF, fifo := d.traderIn(3902, "fifo-e2e")
	tokH, hedging := d.newTrader(3903, "USD", "100", "10000")
	d.setQuote(tokN, "EURUSD", "1.10000", "1.10020")

	// NETTING: two buys are one position at the average, a sell reduces it, a larger one reverses.
	first := d.open(tokN, netting, "EURUSD", "BUY", "0.10")
	if again := d.open(tokN, netting, "EURUSD", "BUY", "0.10"); again != first {
		t.Fatalf("the second NETTING buy answered position %d, want %d", again, first)
	}
	if ps := d.openPositions(tokN, netting); len(ps) != 1 || ps[0].Volume != "0.2" {
		t.Fatalf("NETTING after two buys: %+v, want one position of 0.2", ps)
	}
	d.open(tokN, netting, "EURUSD", "SELL", "0.05")
	d.open(tokN, netting, "EURUSD", "SELL", "0.35")
	ps := d.openPositions(tokN, netting)
	if len(ps) != 1 || ps[0].Side != "SELL" || ps[0].Volume != "0.2" || ps[0].ID == first {
		t.Fatalf("NETTING after the reverse: %+v, want one new SELL of 0.2", ps)
	}
	var reason string
	d.e.sql.QueryRow("SELECT `closeReason` FROM `fx_position` WHERE `id` = ?", first).Scan(&reason)
	if reason != "NETTED" {
		t.Fatalf("the reversed position closed with %q, want NETTED", reason)
	}
	// 0.2 × 7 + 0.2 × 7 commission; the reduce and the close at the bid against 1.10020: −0.0002 × 20,000.
	d.checkLedger(netting, "9993.20")

	// FIFO: the oldest closes first; a newer one cannot be closed by the trader; no close-by.
	p1 := d.open(tokF, fifo, "EURUSD", "BUY", "0.10")
	p2 := d.open(tokF, fifo, "EURUSD", "BUY", "0.20")
	var refusal errorResp
	must(t, d.web, tokF, "POST", fmt.Sprintf("/api/fx/positions/%d/close", p2), "", http.StatusConflict, &refusal)
	if !strings.Contains(refusal.Error.Message, fmt.Sprintf("FIFO: close position %d first", p1)) {
		t.Fatalf("closing the newer FIFO position: %+v", refusal.Error)
	}
	must(t, d.web, tokF, "POST", fmt.Sprintf("/api/fx/positions/%d/close-by", p1), fmt.Sprintf(`{"oppositeId":%d}`, p2), http.StatusConflict, &refusal)
	if !strings.Contains(refusal.Error.Message, "is FIFO") {
		t.Fatalf("close-by on FIFO: %+v", refusal.Error)
	}
	d.open(tokF, fifo, "EURUSD", "SELL", "0.15")
	ps = d.openPositions(tokF, fifo)
	if len(ps) != 1 || ps[0].ID != p2 || ps[0].Volume != "0.15" {
		t.Fatalf("FIFO after selling 0.15: %+v, want %d with 0.15", ps, p2)
	}

	// HEDGING: close-by with no spread; a retry with its nonce replays.
	long := d.open(tokH, hedging, "EURUSD", "BUY", "0.20") // 1.10020
	d.setQuote(tokH, "EURUSD", "1.10100", "1.10120")
	short := d.open(tokH, hedging, "EURUSD", "SELL", "0.10") // 1.10100
	var cb struct {
		Position, Opposite positionJSON
		Deals              []dealJSON
		Replayed           bool
	}
	body := fmt.Sprintf(`{"oppositeId":%d,"requestNonce":"cb-e2e"}`, short)
	must(t, d.web, tokH, "POST", fmt.Sprintf("/api/fx/positions/%d/close-by", long), body, http.StatusOK, &cb)
	if cb.Replayed || len(cb.Deals) != 2 || cb.Deals[0].Amount != "8.00" || cb.Deals[1].Amount != "0.00" || cb.Position.Volume != "0.1" || cb.Opposite.Status != "CLOSED" {
		t.Fatalf("close-by: %+v", cb)
	}
	must(t, d.web, tokH, "POST", fmt.Sprintf("/api/fx/positions/%d/close-by", long), body, http.StatusOK, &cb)
	if !cb.Replayed {
		t.Fatalf("close-by retry: %+v, want replayed", cb)
	}
	d.checkLedger(hedging, "10005.90") // −1.40 − 0.70 commission + 8.00

	// The dealer's B-book net, the desk's own side of its clients': −(−0.2 NETTING + 0.15 FIFO + 0.1 HEDGING).
	var desk struct {
		Book struct {
			Symbols []struct{ Symbol, BBookNetLots string }
		}
	}
	must(t, d.web, d.admin, "GET", "/api/admin/fx/desk", "", http.StatusOK, &desk)
	net := ""
	for _, s := range desk.Book.Symbols {
		if s.Symbol == "EURUSD" {
			net = s.BBookNetLots
		}
	}
	if !dec(net).Equal(dec("-0.05")) {
		t.Fatalf("the desk's EURUSD B-book net = %q, want -0.05 (%+v)", net, desk.Book.Symbols)
	}

	// One rollover: a charge per open position, the NETTING one on the volume it holds now:
	// 0.2 × 100,000 × 2.2 × 0.00001 = 0.44 a night, short.
	d.waitPublished()
	ro := firstWeekdayRolloverAfter(time.Now())
	days := decimal.NewFromInt(int64(swaps.DayMultiplier(ro.Weekday(), time.Wednesday)))
	if got := d.e.cronRun(swaps.JobName, ro.At.Add(time.Hour)); got["charged"] != 3 {
		t.Fatalf("swap run: %v, want 3 charged (one per open position)", got)
	}
	if got := d.e.swapDeals(ps0(d, tokN, netting)); !got[ro.Date].Equal(dec("0.44").Mul(days)) {
		t.Fatalf("the NETTING position's swap: %v, want %s on %s", got, dec("0.44").Mul(days), ro.Date)
	}
}

// ps0 is the id of account's one open position.
func ps0(d *tradingDesk, token string, account int64) int64 {
	ps := d.openPositions(token, account)
	if len(ps) != 1 {
		d.e.t.Fatalf("account %d holds %d open positions, want 1", account, len(ps))
	}
	return ps[0].ID
}
