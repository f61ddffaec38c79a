package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// STOP_LIMIT and OCO pairs end to end (docs/orders.md «Stop-limit», «OCO pairs»): the real
// fxdesk-web holder fed by the feed simulator, which a test moves with a far quote (a gap);
// every outcome is read from the database the risk engine's fills write.

// waitTriggered polls a STOP_LIMIT until its stop has triggered.
func (d *tradingDesk) waitTriggered(id int64) {
	t := d.e.t
	t.Helper()
	eventually(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("order %d triggered", id), func() bool {
		var at sql.NullTime
		if err := d.e.sql.QueryRow("SELECT `triggeredAt` FROM `fx_order` WHERE `id` = ?", id).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at.Valid
	})
}

// A buy stop-limit gapped through its stop and past its limit rests as a LIMIT at its limit —
// not filled at the gapped price, nor on a later tick still above the limit — and fills once the
// ask comes back to the limit, at or below it.
func TestStopLimitGapRestsAtItsLimit(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(3901, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var sl orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"STOP_LIMIT","volume":"0.10","price":"1.10500","limitPrice":"1.10400"}`, acct),
		http.StatusCreated, &sl)
	// A limit above the stop is refused whole.
	if code, b := call(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"STOP_LIMIT","volume":"0.10","price":"1.10500","limitPrice":"1.10600"}`, acct)); code != http.StatusBadRequest {
		t.Fatalf("a buy stop-limit with its limit above its stop: %d %s, want 400", code, b)
	}

	d.setQuote(tok, "EURUSD", "1.10800", "1.10820") // the gap
	d.waitTriggered(sl.Order.ID)
	if s := d.orderStatus(sl.Order.ID); s != "PENDING" {
		t.Fatalf("after the gap the stop-limit is %s, want PENDING (resting at its limit)", s)
	}
	// A sentinel LIMIT the next tick fills: the stop-limit, still above its limit on that tick,
	// must not fill with it.
	var sentinel orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.01","price":"1.10650"}`, acct), http.StatusCreated, &sentinel)
	d.setQuote(tok, "EURUSD", "1.10600", "1.10620")
	d.waitFilled(sentinel.Order.ID)
	if s := d.orderStatus(sl.Order.ID); s != "PENDING" {
		t.Fatalf("on a tick above its limit the stop-limit is %s, want PENDING", s)
	}

	d.setQuote(tok, "EURUSD", "1.10370", "1.10390")
	fill, open := d.waitFilled(sl.Order.ID)
	if !fill.Equal(decimal.RequireFromString("1.10390")) || !open.Equal(fill) {
		t.Fatalf("stop-limit filled at %s (position open %s), want 1.10390: at its limit or better", fill, open)
	}
	var n int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `accountId` = ? AND `type` = 'order.stop_triggered'", acct).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d order.stop_triggered events (%v), want 1", n, err)
	}
	d.checkLedgerBalanced(acct)
}

// ocoResp is POST /api/fx/orders/oco's answer.
type ocoResp struct {
	Orders []struct {
		ID         int64  `json:"id"`
		Status     string `json:"status"`
		OCOOrderID *int64 `json:"ocoOrderId"`
	} `json:"orders"`
	Replayed bool `json:"replayed"`
}

// An OCO pair whose legs both trigger on one gap (a buy stop below it, a sell limit below it):
// exactly one fills and the other is CANCELLED, round after round; the pair's nonce replays it;
// a cancel of one leg cancels both; Σ deals = balance at the end.
func TestOCOBothLegsOnOneGap(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(3902, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	pair := func(nonce string) string {
		return fmt.Sprintf(`{"accountId":%d,"requestNonce":%q,"legs":[`+
			`{"symbol":"EURUSD","side":"BUY","type":"STOP","volume":"0.10","price":"1.10300"},`+
			`{"symbol":"EURUSD","side":"SELL","type":"LIMIT","volume":"0.10","price":"1.10200"}]}`, acct, nonce)
	}
	var p ocoResp
	must(t, d.web, tok, "POST", "/api/fx/orders/oco", pair("oco-cancel"), http.StatusCreated, &p)
	if len(p.Orders) != 2 || p.Orders[0].OCOOrderID == nil || *p.Orders[0].OCOOrderID != p.Orders[1].ID {
		t.Fatalf("pair %+v: want two legs naming each other", p)
	}
	var again ocoResp
	must(t, d.web, tok, "POST", "/api/fx/orders/oco", pair("oco-cancel"), http.StatusOK, &again)
	if !again.Replayed || again.Orders[0].ID != p.Orders[0].ID || again.Orders[1].ID != p.Orders[1].ID {
		t.Fatalf("retry %+v: want the same pair replayed", again)
	}
	must(t, d.web, tok, "DELETE", fmt.Sprintf("/api/fx/orders/%d", p.Orders[1].ID), "", http.StatusOK, nil)
	if s0, s1 := d.orderStatus(p.Orders[0].ID), d.orderStatus(p.Orders[1].ID); s0 != "CANCELLED" || s1 != "CANCELLED" {
		t.Fatalf("after cancelling one leg: %s/%s, want both CANCELLED", s0, s1)
	}

	for round := 0; round < 5; round++ {
		d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
		must(t, d.web, tok, "POST", "/api/fx/orders/oco", pair(fmt.Sprintf("oco-gap-%d", round)), http.StatusCreated, &p)
		d.setQuote(tok, "EURUSD", "1.10500", "1.10520") // through both legs at once
		statuses := map[string]int{}
		for _, o := range p.Orders {
			var s string
			eventually(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("OCO leg %d out of PENDING", o.ID), func() bool {
				s = d.orderStatus(o.ID)
				return s != "PENDING"
			})
			statuses[s]++
		}
		if statuses["FILLED"] != 1 || statuses["CANCELLED"] != 1 {
			t.Fatalf("round %d: legs ended %v, want exactly one FILLED and one CANCELLED", round, statuses)
		}
	}
	d.checkLedgerBalanced(acct)
}

// A STOP_LIMIT whose stop triggered before the holder was SIGKILLed is, for the standby that
// takes over, the LIMIT it has become: a tick above its limit (and above its old stop) does not
// fill it — a sentinel LIMIT filled on that same tick says the tick was evaluated — and a tick at
// its limit does.
func TestStopLimitTriggeredSurvivesATakeover(t *testing.T) {
	t.Parallel()
	w := newWebTier(t, "FXDESK_TAKEOVER=standby")
	tok, acct := w.d.newTrader(3903, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var sl orderResp
	must(t, w.d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"STOP_LIMIT","volume":"0.10","price":"1.10500","limitPrice":"1.10400"}`, acct),
		http.StatusCreated, &sl)
	w.d.setQuote(tok, "EURUSD", "1.10800", "1.10820")
	w.d.waitTriggered(sl.Order.ID)

	w.d.web.stop(syscall.SIGKILL)
	w.follower.waitLog(30*time.Second, msgHas("role: holder — took over"))
	w.follower.waitLog(10*time.Second, func(l logLine) bool { return l.msg() == "risk sweep" && l["reason"] == "lease_restored" })
	// The sentinel is placed on the new holder once it quotes (503 with the pricing text until).
	var sentinel orderResp
	eventually(t, 20*time.Second, 100*time.Millisecond, "a sentinel LIMIT placed on the new holder", func() bool {
		w.d.simQuote("EURUSD", "1.10800", "1.10820")
		code, b := call(t, w.follower, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.01","price":"1.10650"}`, acct))
		if code == http.StatusCreated {
			return json.Unmarshal(b, &sentinel) == nil
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("sentinel on the new holder = %d %s", code, b)
		}
		return false
	})
	w.d.simQuote("EURUSD", "1.10600", "1.10620") // above the limit, above the old stop
	w.d.waitFilled(sentinel.Order.ID)
	if s := w.d.orderStatus(sl.Order.ID); s != "PENDING" {
		t.Fatalf("after the takeover, on a tick above its limit, the stop-limit is %s; want PENDING (a LIMIT at 1.10400, not its old STOP)", s)
	}
	w.d.simQuote("EURUSD", "1.10370", "1.10390")
	if fill, _ := w.d.waitFilled(sl.Order.ID); !fill.Equal(decimal.RequireFromString("1.10390")) {
		t.Fatalf("stop-limit filled by the new holder at %s, want 1.10390", fill)
	}
	w.d.checkLedgerBalanced(acct)
}
