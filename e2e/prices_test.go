package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// Prices from several sources end to end (docs/prices.md): failover to the backup when the
// primary dies and back after the hold-down, a one-off tick the spike filter drops, a real gap it
// lets through after confirmation.

// The primary simulator is SIGKILLed with a stop placed: the desk quotes from the backup at once
// and the backup's price closes the stop; price-source-failover is raised. The primary comes back
// on its address: the desk returns to it only once it has been healthy for the hold-down, and the
// alert is resolved.
func TestPriceFailoverToBackupAndBack(t *testing.T) {
	t.Parallel()
	d := newPriceDesk(t)
	rail := d.rail("EURUSD")
	tok, acct := d.newTrader(3800, "USD", "100", "10000.00")
	// The simulators' walk moves a couple of pips a step: the stop stands well clear of it.
	now := rail.latest()
	sl := now.Bid.Sub(pips(60))
	pos := d.openMarket(tok, acct, "BUY", "0.10", fmt.Sprintf(`,"sl":%q`, sl.StringFixed(5)))

	from := d.web.lineCount()
	killed := time.Now()
	d.primary.kill()
	first := d.firstFromBackup(rail, from, killed)
	t.Logf("failover: SIGKILL of the primary to the first quote from the backup %v", first.At.Sub(killed).Round(time.Millisecond))
	d.web.waitNth(10*time.Second, from, 1, isSwitch("EURUSD", "backup"))
	if s := d.selection("EURUSD"); s.Source != "backup" || s.healthy("primary") || s.Failovers < 1 {
		t.Fatalf("selection after the kill: %+v; want backup, the primary unhealthy, a failover counted", s)
	}
	d.web.waitAlert("price-source-failover", true, 10*time.Second)
	if off := d.failoverAlertSymbols(); off["EURUSD"] != "backup" {
		t.Errorf("price-source-failover names %v, not EURUSD from the backup", off)
	}
	if st := d.positionStatus(pos); st != "OPEN" {
		t.Fatalf("position %d is %s before the backup's price reached its stop", pos, st)
	}

	// The backup alone moves through the stop. The move is past the filter's floor: the tick is
	// held and, with no other healthy source to ask, published once the backup's walk on from
	// there has stood ConfirmAfter (docs/prices.md). The risk engine closes at the latest
	// published price: below the stop, within the walk of that second (20 steps) from the moved
	// price — some 90 pips from the market the primary quoted.
	cur := rail.latest()
	target := sl.Sub(pips(30))
	d.backup.must("quote", quoteBody("EURUSD", target.StringFixed(5), target.Add(cur.Ask.Sub(cur.Bid)).StringFixed(5)))
	got := d.waitClosed(pos)
	if got.Reason != "SL" || got.Price.GreaterThan(sl) || got.Price.Sub(target).Abs().GreaterThan(pips(25)) {
		t.Fatalf("buy closed with reason %q at %s; want SL at the backup's moved price %s (stop %s)", got.Reason, got.Price, target, sl)
	}
	d.checkLedgerBalanced(acct)
	// The backup moves back to the market, so the primary agrees with it when it returns.
	d.backup.must("shift", fmt.Sprintf(`{"symbol":"EURUSD","pips":%s}`, cur.Bid.Sub(target).Shift(4).String()))

	// The primary returns on its address. Until it has been healthy for the hold-down, the desk
	// stays on the backup.
	from = d.web.lineCount()
	restarted := time.Now()
	d.primary = startMarketSim(t, d.primary.addr())
	var firstHealthy, lastOnBackup time.Time // as the test read them
	var back symbolSelection
	// The desk reconnects with its back-off (doubling to 15s), so the primary may take seconds to be
	// seen again.
	eventually(t, 30*time.Second, 20*time.Millisecond, "EURUSD back on the primary", func() bool {
		s, at := d.selection("EURUSD"), time.Now()
		if s.Source == "backup" && s.healthy("primary") {
			if firstHealthy.IsZero() {
				firstHealthy = at
			}
			lastOnBackup = at
		}
		back = s
		return s.Source == "primary"
	})
	if firstHealthy.IsZero() {
		t.Fatalf("never saw the primary healthy while EURUSD stayed on the backup")
	}
	t.Logf("still on the backup %v after the primary was first seen healthy", lastOnBackup.Sub(firstHealthy).Round(time.Millisecond))
	// The primary cannot have been healthy before it was restarted, so the switch back must come
	// at least the hold-down after that.
	if back.Since.Sub(restarted) < priceHoldDown {
		t.Fatalf("back on the primary at %v, %v after its restart: before the hold-down of %v", back.Since, back.Since.Sub(restarted), priceHoldDown)
	}
	t.Logf("fail-back %v after the primary's restart (hold-down %v)", back.Since.Sub(restarted).Round(time.Millisecond), priceHoldDown)
	d.web.waitNth(10*time.Second, from, 1, isSwitch("EURUSD", "primary"))
	eventually(t, 10*time.Second, 50*time.Millisecond, "every symbol back on the primary", func() bool { return len(d.priceSources().OffPrimary) == 0 })
	// The watcher resolves the alert once every symbol has been back for its debounce
	// (FXDESK_PRICE_ALERT_RESOLVE, 2s here).
	resolving := time.Now()
	d.web.waitAlert("price-source-failover", false, 15*time.Second)
	t.Logf("price-source-failover resolved %v after every symbol was back", time.Since(resolving).Round(100*time.Millisecond))
}

// One EURUSD tick 300 pips away on the primary, for 50 ms, crosses a stop, an account's stop-out
// level and (by the closes it would cause) the hedger's limit: the desk publishes none of it, so
// nothing closes, nothing stops out, nothing is hedged; the tick is listed as dropped for spike.
func TestOneOffMarketTickMovesNothing(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	primary, backup := startMarketSim(t, "127.0.0.1:0"), startMarketSim(t, "127.0.0.1:0")
	venue := startVenueSim(t, primary, "5ms")
	env := append([]string{
		"FXDESK_PRICE_SOURCES=primary=" + primary.url + ",backup=" + backup.url,
		"FXDESK_FEED_KEY=test", "FXDESK_LEASE_TTL=6s", "FXDESK_LEASE_FENCE=2s",
		"FXDESK_PRICE_HOLD_DOWN=" + priceHoldDown.String(), "FXDESK_HEDGE_INTERVAL=500ms",
	}, venue.env()...)
	web := e.start("web", "fxdesk-web", env...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	d := &priceDesk{tradingDesk: &tradingDesk{e: e, sim: primary, web: web, admin: e.adminToken()}, primary: primary, backup: backup}
	waitRiskReady(web)
	d.waitActive("EURUSD", "primary", true)
	rail := d.rail("EURUSD")

	must(t, d.web, d.admin, "PUT", "/api/admin/fx/settings", `{"fxHedgeLimitLots.EURUSD":"10","fxHedgeBandLots":"2","fxHedgeMinLots":"0.5"}`, http.StatusOK, nil)
	tok, acct := d.newTrader(3810, "USD", "100", "500000.00")
	now := rail.latest()
	// A 12-lot sell with a stop 100 pips up: the desk is long 12 lots, the hedger sells 4 at the
	// venue; the stop closing would take the hedge back.
	stop := now.Ask.Add(pips(100))
	big := d.openMarket(tok, acct, "SELL", "12.00", fmt.Sprintf(`,"sl":%q`, stop.StringFixed(5)))
	eventually(t, 15*time.Second, 20*time.Millisecond, "the hedge", func() bool { return len(d.e.hedgeRows().open) == 1 })
	// 0.5 lots on 1,000: 300 pips against it is −1,500, far below its stop-out level.
	thinTok, thin := d.newTrader(3811, "USD", "100", "1000.00")
	thinPos := d.openMarket(thinTok, thin, "SELL", "0.50", "")
	sentTok, sentAcct := d.newTrader(3812, "USD", "100", "1000.00")
	d.web.passAfter(d.web.lineCount(), "scheduled")
	hedgesBefore := strings.Join(d.e.hedgeRows().orders, ",")
	droppedBefore := d.sourceCount("primary").Dropped

	d.primary.must("spike", `{"symbol":"EURUSD","pips":300,"ms":50}`)
	var spike rejectedTick
	eventually(t, 10*time.Second, 20*time.Millisecond, "the spike listed as dropped", func() bool {
		for _, r := range d.rejected() {
			if r.Symbol == "EURUSD" && r.Source == "primary" && r.Reason == "spike" && r.Outcome == "dropped" {
				spike = r
				return true
			}
		}
		return false
	})
	t.Logf("rejected: %+v", spike)
	if n := d.sourceCount("primary").Dropped; n <= droppedBefore {
		t.Fatalf("primary's dropped count %d, was %d before the spike", n, droppedBefore)
	}
	series := `fxdesk_price_filtered_total{outcome="dropped",source="primary",symbol="EURUSD"}`
	if n, ok := metricValue(d.web.metrics(), series); !ok || n == "0" {
		t.Fatalf("%s = %q (exposed %v) after the spike", series, n, ok)
	}

	// A sentinel that a real 22-pip move of the market (both sources, under the filter's floor)
	// closes: once it has, every tick published before that move has been evaluated.
	sentinel := d.openMarket(sentTok, sentAcct, "BUY", "0.01", fmt.Sprintf(`,"tp":%q`, rail.latest().Bid.Add(pips(12)).StringFixed(5)))
	d.both("shift", `{"symbol":"EURUSD","pips":22}`)
	d.waitClosed(sentinel)
	d.web.passAfter(d.web.lineCount(), "scheduled")
	for id, what := range map[int64]string{big: "the stopped sell", thinPos: "the thin account's sell"} {
		if st := d.positionStatus(id); st != "OPEN" {
			t.Errorf("%s (%d) is %s after a one-off tick", what, id, st)
		}
	}
	var stopOuts int
	d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `closeReason` IN ('SL','STOP_OUT')").Scan(&stopOuts)
	if stopOuts != 0 {
		t.Errorf("%d positions closed by SL or stop-out", stopOuts)
	}
	if h := strings.Join(d.e.hedgeRows().orders, ","); h != hedgesBefore {
		t.Errorf("hedge orders %s after the spike, %s before", h, hedgesBefore)
	}
	d.checkLedgerBalanced(acct)
	d.checkLedgerBalanced(thin)
	// Nothing the desk published came near the spike.
	for {
		select {
		case q := <-rail.quotes:
			if q.Ask.GreaterThanOrEqual(stop) {
				t.Fatalf("the desk published %s/%s, past the stop at %s", q.Bid, q.Ask, stop)
			}
			continue
		default:
		}
		break
	}
}

// failoverAlertSymbols is the symbols the open price-source-failover alert names in its details,
// each with the source it quotes from.
func (d *priceDesk) failoverAlertSymbols() map[string]string {
	d.e.t.Helper()
	var a struct {
		Alerts []struct {
			Code    string `json:"code"`
			Details struct {
				Symbols map[string]string `json:"symbols"` // symbol → the source it quotes from
			} `json:"details"`
		} `json:"alerts"`
	}
	must(d.e.t, d.web, d.admin, "GET", "/api/admin/fx/alerts?status=OPEN&code=price-source-failover", "", http.StatusOK, &a)
	for _, al := range a.Alerts {
		if al.Code == "price-source-failover" {
			return al.Details.Symbols
		}
	}
	return nil
}

// sourceCount is source's counters on GET /price-sources.
func (d *priceDesk) sourceCount(source string) (c struct{ Accepted, Held, Dropped, Published uint64 }) {
	d.e.t.Helper()
	for _, s := range d.priceSources().Sources {
		if s.Name == source {
			c.Accepted, c.Held, c.Dropped, c.Published = s.Accepted, s.Held, s.Dropped, s.Published
			return c
		}
	}
	d.e.t.Fatalf("price-sources shows no source %s", source)
	return c
}

// A real gap: the market moves 300 pips on both sources and stays. The stop triggers at the first
// published gapped price, after the filter's confirmation delay, which the test reports.
func TestARealGapTriggersStopsAfterConfirmation(t *testing.T) {
	t.Parallel()
	d := newPriceDesk(t)
	rail := d.rail("EURUSD")
	tok, acct := d.newTrader(3820, "USD", "100", "10000.00")
	before := rail.latest()
	stop := before.Ask.Add(pips(100))
	pos := d.openMarket(tok, acct, "SELL", "0.10", fmt.Sprintf(`,"sl":%q`, stop.StringFixed(5)))

	delay, gapped := d.gap(rail, 300, stop)
	t.Logf("gap of 300 pips: shift to the first published gapped quote %v (%s/%s from %s/%s)", delay.Round(time.Millisecond), gapped.Bid, gapped.Ask, before.Bid, before.Ask)
	if gapped.Ask.Sub(before.Ask).LessThan(pips(250)) {
		t.Fatalf("the first quote past the stop is %s, not the gapped market (from %s)", gapped.Ask, before.Ask)
	}
	wantClose(t, "sell stopped by the gap", d.waitClosed(pos), "SL", gapped.Ask.StringFixed(5))
	d.checkLedgerBalanced(acct)
}

// gap shifts the market by n pips on both sources and returns how long after the shift the desk
// published the first quote past beyond (above it for an upward gap, below for a downward one),
// and that quote.
func (d *priceDesk) gap(rail *priceRail, n int64, beyond decimal.Decimal) (time.Duration, railQuote) {
	d.e.t.Helper()
	rail.latest()
	shifted := time.Now()
	d.both("shift", fmt.Sprintf(`{"symbol":"EURUSD","pips":%d}`, n))
	q := rail.next(10*time.Second, "past the gap", func(q railQuote) bool {
		if n > 0 {
			return q.Ask.GreaterThanOrEqual(beyond)
		}
		return q.Bid.LessThanOrEqual(beyond)
	})
	return q.At.Sub(shifted), q
}
