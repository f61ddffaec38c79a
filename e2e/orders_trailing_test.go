package e2e

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// Trailing stops end to end (docs/orders.md, «Trailing stops»): set over the API on the real
// holder, moved by the feed simulator's quotes, stored by the holder's flush, fired by its risk
// engine, and carried over a SIGKILL of the holder by a standby follower.

// setTrail sets position id's trailing stop with body through p.
func (d *tradingDesk) setTrail(p *proc, tok string, id int64, body string) {
	d.e.t.Helper()
	must(d.e.t, p, tok, "PATCH", fmt.Sprintf("/api/fx/positions/%d", id), `{"trailingStop":`+body+`}`, http.StatusOK, nil)
}

// trailLevel reads position id's stored trailing level ("" when none).
func (d *tradingDesk) trailLevel(id int64) string {
	var l decimal.NullDecimal
	if err := d.e.sql.QueryRow("SELECT `trailLevel` FROM `fx_position` WHERE `id` = ?", id).Scan(&l); err != nil {
		d.e.t.Fatal(err)
	}
	if !l.Valid {
		return ""
	}
	return l.Decimal.String()
}

// waitTrailLevel polls until position id's stored level is want.
func (d *tradingDesk) waitTrailLevel(id int64, want string) {
	d.e.t.Helper()
	eventually(d.e.t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("position %d trailing level stored at %s", id, want), func() bool {
		return d.trailLevel(id) == want
	})
}

// A BUY's trail follows the bid up and stays when it turns; a SELL's follows the ask down; a gap
// through the BUY's closes it at the gapped bid with reason TRAILING_STOP, and its stored level
// is the one it fired at.
func TestTrailingStopFollowsTheFeedAndAGapClosesAtTheGappedPrice(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t, "FXDESK_TRAIL_FLUSH=100ms")
	waitRiskReady(d.web)
	tok, acct := d.newTrader(3901, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	buy := d.openMarket(tok, acct, "BUY", "0.10", "")
	sell := d.openMarket(tok, acct, "SELL", "0.10", "")
	d.setTrail(d.web, tok, buy, `{"distance":"0.00200"}`)
	d.setTrail(d.web, tok, sell, `{"pips":80}`)
	if b, s := d.trailLevel(buy), d.trailLevel(sell); b != "1.098" || s != "1.1082" {
		t.Fatalf("trails start at %s and %s, want 1.098 (bid − 0.002) and 1.1082 (ask + 0.008)", b, s)
	}

	d.setQuote(tok, "EURUSD", "1.10500", "1.10520") // up: the BUY's trail follows to 1.103; the SELL's stays
	d.waitTrailLevel(buy, "1.103")
	if l := d.trailLevel(sell); l != "1.1082" {
		t.Fatalf("the SELL's trail moved against the trader to %s", l)
	}
	d.setQuote(tok, "EURUSD", "1.09900", "1.09920") // down: the SELL's follows to 1.1072
	d.waitTrailLevel(sell, "1.1072")
	if l := d.trailLevel(buy); l != "1.103" {
		t.Fatalf("the BUY's trail moved against the trader to %s", l)
	}
	// Down through the BUY's trail (1.09900 ≤ 1.103 already): it fired at the last quote.
	got := d.waitClosed(buy)
	wantClose(t, "BUY trailed through", got, "TRAILING_STOP", "1.09900")
	if l := d.trailLevel(buy); l != "1.103" {
		t.Fatalf("closed BUY's stored level %s, want the level it fired at, 1.103", l)
	}

	// A gap up through the SELL's trail closes it at the gapped ask.
	d.setQuote(tok, "EURUSD", "1.12000", "1.12020")
	wantClose(t, "SELL gapped through", d.waitClosed(sell), "TRAILING_STOP", "1.12020")
	d.checkLedgerBalanced(acct)
}

// The holder is SIGKILLed after its trail moved and was stored; the standby follower takes the
// lease over, loads the stored level and closes the position at it: a quote above the level
// leaves it open, the first at or under it closes it. What the new holder may lose is the move
// since the last flush; here there was none, so it trails exactly from the old holder's level.
func TestTrailingStopSurvivesASIGKILLOfTheHolder(t *testing.T) {
	t.Parallel()
	w := newWebTier(t, "FXDESK_TAKEOVER=standby", "FXDESK_TRAIL_FLUSH=100ms")
	d := w.d
	tok, acct := d.newTrader(3902, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	id := d.openMarket(tok, acct, "BUY", "0.10", "")
	d.setTrail(d.web, tok, id, `{"pips":20}`)
	d.setQuote(tok, "EURUSD", "1.10600", "1.10620")
	d.waitTrailLevel(id, "1.104")

	d.web.stop(syscall.SIGKILL)
	w.follower.waitLog(40*time.Second, func(l logLine) bool { return l.msg() == "risk sweep" })
	d.web = w.follower                              // the new holder streams the prices setQuote waits for
	d.setQuote(tok, "EURUSD", "1.10450", "1.10470") // above the stored 1.104: stays open
	d.setQuote(tok, "EURUSD", "1.10390", "1.10410") // under it: closes here
	got := d.waitClosed(id)
	wantClose(t, "trail after the takeover", got, "TRAILING_STOP", "1.10390")
	if l := d.trailLevel(id); l != "1.104" {
		t.Fatalf("stored level %s after the new holder's close, want 1.104", l)
	}
	d.checkLedgerBalanced(acct)
}
