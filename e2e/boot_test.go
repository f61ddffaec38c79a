package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// A holder admits no fill before the risk view that will watch it exists (docs/architecture.md,
// «The gate»), at boot and after a standby's takeover; the takeover is tested here. (A boot holder
// goes through the same gate; a boot under the lock would also wait 15 s on CREATE DATABASE, which
// LOCK TABLES holds up.) The window is held open for real: the test
// holds LOCK TABLES `fx_position` WRITE, so the new holder's risk view load waits inside its
// positions read — as a load over a large book would — while the lease, the price stream, the
// tokens and /readyz need none of that table. Without the risk view's gate a fill would be admitted
// and its batch would wait on the lock: the order's call would hang, and the test fails on its
// timeout.

const riskViewText = "The desk is starting its risk engine and takes no new orders until it watches every position — nothing was written; please retry shortly"

// readyzBody is /readyz's answer.
type readyzBody struct {
	Ready    bool   `json:"ready"`
	Role     string `json:"role"`
	RiskView string `json:"riskView"`
}

func (p *proc) readyz() (int, readyzBody) {
	p.t.Helper()
	var b readyzBody
	code := p.getAs("", "/readyz", &b)
	return code, b
}

// lockPositions holds fx_position write-locked on a connection of its own until the returned
// unlock is called (or the test ends).
func lockPositions(t *testing.T, db *sql.DB) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "LOCK TABLES `fx_position` WRITE"); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			t.Error(err)
		}
		conn.Close()
	}
	t.Cleanup(unlock)
	return unlock
}

// refusedWhileLoading checks that p, a holder whose risk view cannot load yet, says so on
// /readyz and refuses a market order with the risk view's 503 — after the pricing 503 a holder
// answers until its own stream quotes the symbol. The order carries no requestNonce: a refused
// submit with one looks its nonce up in fx_order and fx_position (a retry that already filled is
// answered from there), which the lock would hold up. It returns the order it sent.
func refusedWhileLoading(t *testing.T, d *tradingDesk, p *proc, tok string, acct int64) string {
	t.Helper()
	eventually(t, 30*time.Second, 50*time.Millisecond, "the new holder reports its risk view loading", func() bool {
		code, b := p.readyz()
		return code == http.StatusServiceUnavailable && b.Role == "holder" && b.RiskView == "loading" && !b.Ready
	})
	body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","sl":"1.09500"}`, acct)
	client := &http.Client{Timeout: 5 * time.Second}
	for start := time.Now(); ; {
		if time.Since(start) > 20*time.Second {
			t.Fatal("the new holder never answered with the risk view's refusal")
		}
		d.simQuote("EURUSD", "1.10000", "1.10020")
		req, _ := http.NewRequest("POST", "http://"+p.addr+"/api/fx/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a market order was admitted while the risk view was loading: its fill waits on fx_position instead of being refused")
		}
		if err != nil {
			t.Fatal(err)
		}
		var er errorResp
		json.NewDecoder(resp.Body).Decode(&er)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("order while the risk view loads = %d %+v (Retry-After %q), want 503 with Retry-After", resp.StatusCode, er, resp.Header.Get("Retry-After"))
		}
		if er.Error.Message == riskViewText {
			if er.Error.Code != "unavailable" {
				t.Fatalf("risk view refusal code = %q, want unavailable", er.Error.Code)
			}
			break
		}
		if er.Error.Message != pricingText {
			t.Fatalf("order while the risk view loads = 503 %+v, want the pricing or the risk view text", er)
		}
		time.Sleep(100 * time.Millisecond) // the retry pace of a trader's client, not a wait for an event
	}
	// Still not ready: the refusal was not a moment's race with the load.
	if code, b := p.readyz(); code != http.StatusServiceUnavailable || b.RiskView != "loading" {
		t.Fatalf("/readyz after the refusal = %d %+v, want 503 loading", code, b)
	}
	return body
}

// servedOnceLoaded releases the lock, waits for p's risk engine to watch the desk, checks
// /readyz and the gate's count, and sends body again: it fills now.
func servedOnceLoaded(t *testing.T, d *tradingDesk, p *proc, unlock func(), tok, body, firstSweep string) int64 {
	t.Helper()
	unlock()
	l := p.waitLog(30*time.Second, msgIs(msgRiskWatching))
	if l["first_sweep"] != firstSweep {
		t.Errorf("risk engine watching after a %v first sweep, want %s", l["first_sweep"], firstSweep)
	}
	if code, b := p.readyz(); code != http.StatusOK || !b.Ready || b.RiskView != "loaded" || b.Role != "holder" {
		t.Fatalf("/readyz once loaded = %d %+v", code, b)
	}
	if !strings.Contains(p.metrics(), `fxdesk_gate_dropped_total{at="risk_view",work="fill"}`) {
		t.Error(`no fxdesk_gate_dropped_total{at="risk_view",work="fill"} series`)
	}
	d.web = p
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, p, tok, "POST", "/api/fx/orders", body, http.StatusCreated, &o)
	if o.Replayed || o.Position == nil || o.Order.Status != "FILLED" {
		t.Fatalf("order once the risk view loaded = %+v, want a new fill", o)
	}
	return o.Position.ID
}

// A standby takes over after the holder's SIGKILL: until its risk view is loaded its /readyz is
// 503 (riskView loading) and a market order is refused with the risk view's 503 and writes
// nothing; once loaded, the same order fills, and what the old holder left — a position's SL, a
// resting LIMIT — and the new position's SL are all watched by the new holder.
func TestTakeoverFillsOnlyOnceTheRiskViewWatches(t *testing.T) {
	t.Parallel()
	w := newWebTier(t, "FXDESK_TAKEOVER=standby")
	d := w.d
	tok, acct := d.newTrader(780, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	old := d.openMarket(tok, acct, "BUY", "0.10", `,"sl":"1.09600","tp":"1.12000"`)
	var limit orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.09700"}`, acct),
		http.StatusCreated, &limit)
	if code, b := w.follower.readyz(); code != http.StatusOK || b.Role != "follower" || b.RiskView != "" {
		t.Fatalf("standby's /readyz before the kill = %d %+v, want 200 follower without a risk view", code, b)
	}

	unlock := lockPositions(t, d.e.sql)
	d.web.stop(syscall.SIGKILL)
	w.follower.waitLog(30*time.Second, msgHas("role: holder — took over"))
	body := refusedWhileLoading(t, d, w.follower, tok, acct)
	d.checkLedger(acct, "9999.30") // the one commission of 0.70 before the kill; nothing since
	id := servedOnceLoaded(t, d, w.follower, unlock, tok, body, "lease_restored")

	// One gap under every stop and the limit: the new holder closes the old position and the new
	// one at their SLs (a gap closes at the market) and fills the resting LIMIT.
	d.simQuote("EURUSD", "1.09400", "1.09420")
	wantClose(t, "the old holder's position", d.waitClosed(old), "SL", "1.09400")
	wantClose(t, "the position filled after the load", d.waitClosed(id), "SL", "1.09400")
	if fill, _ := d.waitFilled(limit.Order.ID); !fill.Equal(decimal.RequireFromString("1.09420")) {
		t.Fatalf("resting LIMIT filled by the new holder at %s, want 1.09420", fill)
	}
	d.checkLedgerBalanced(acct)
}
