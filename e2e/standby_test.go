package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/forward"
	"fxdesk/internal/lease"
)

const pricingText = "Pricing is temporarily unavailable for this instrument — please retry shortly"

// standbyOrder is a 0.10-lot EURUSD market buy with its own requestNonce.
func standbyOrder(acct int64, nonce string) string {
	return fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":%q}`, acct, nonce)
}

// With FXDESK_TAKEOVER=standby, the holder (box-a) is SIGKILLed and the follower (box-b, so the
// dead-pid shortcut cannot apply) takes the lease over once the row has expired: it starts the
// price stream and the risk engine (first sweep lease_restored) and a trader's order sent to it
// fills. The time from the kill to that fill is the takeover time, logged for the report.
func TestStandbyTakesOverAfterTheHolderIsKilled(t *testing.T) {
	t.Parallel()
	w := newWebTier(t, "FXDESK_TAKEOVER=standby")
	tok, acct := w.d.newTrader(760, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	must(t, w.follower, tok, "POST", "/api/fx/orders", standbyOrder(acct, "s-1"), http.StatusCreated, nil)
	if s := w.follower.desk(); s.Role != "follower" || s.Takeover != "standby" || s.Lease.Trusted {
		t.Fatalf("standby follower before the kill = %+v", s)
	}

	killed := time.Now()
	w.d.web.stop(syscall.SIGKILL)
	// The row's expiry is on the database clock: the latest term-1 expiry read after the kill (a
	// renew in flight at the kill may still have landed) is what the takeover must wait out.
	var expired time.Time
	sawTerm1 := false
	noteExpiry := func() {
		if term, exp, _ := leaseTimes(t, w.d.e); term == 1 {
			sawTerm1 = true
			if exp.After(expired) {
				expired = exp
			}
		}
	}
	noteExpiry()
	// Until the follower holds the lease, quotes and watches the desk, every attempt is refused;
	// the same requestNonce on every attempt means a fill can happen only once.
	var o orderResp
	for {
		if time.Since(killed) > 30*time.Second {
			t.Fatal("the standby follower never served a fill after the holder was killed")
		}
		noteExpiry()
		w.d.simQuote("EURUSD", "1.10000", "1.10020")
		code, a := callHeaders(t, w.follower, tok, "POST", "/api/fx/orders", standbyOrder(acct, "s-2"))
		if code == http.StatusCreated {
			if err := json.Unmarshal(a.body, &o); err != nil {
				t.Fatal(err)
			}
			break
		}
		var er errorResp
		json.Unmarshal(a.body, &er)
		// The pricing text until the new holder quotes; the risk view's while its engine loads.
		if code != http.StatusServiceUnavailable || (er.Error.Message != pricingText && er.Error.Message != riskViewText) || a.header.Get("Retry-After") == "" {
			t.Fatalf("during the takeover = %d %s (Retry-After %q), want 503 with the pricing or the risk view text", code, a.body, a.header.Get("Retry-After"))
		}
		time.Sleep(100 * time.Millisecond) // the retry pace of a trader's client, not a wait for an event
	}
	took := time.Since(killed)
	t.Logf("standby takeover: %v from SIGKILL of the holder to a fill served by the follower (FXDESK_LEASE_TTL=6s, re-contend every 2s)", took.Round(time.Millisecond))
	// A takeover that did not wait for the killed holder's row to expire took a live row.
	term, _, acquired := leaseTimes(t, w.d.e)
	if !sawTerm1 || term != 2 {
		t.Fatalf("lease row: term 1 seen after the kill %v, term now %d; want term 1 until the takeover, then 2", sawTerm1, term)
	}
	if acquired.Before(expired) {
		t.Fatalf("term 2 acquired at %s, before term 1 expired at %s (database clock)", acquired.Format(time.StampMilli), expired.Format(time.StampMilli))
	}
	if o.Order.Status != "FILLED" || o.Position == nil || o.Replayed {
		t.Fatalf("order after takeover = %+v", o)
	}

	promo := w.follower.waitLog(time.Second, msgHas("role: holder — took over"))
	if promo.level() != "WARN" {
		t.Errorf("promotion logged at %s, want WARN (an operator should see it)", promo.level())
	}
	w.follower.waitLog(5*time.Second, func(l logLine) bool { return l.msg() == "risk sweep" && l["reason"] == "lease_restored" })
	if _, ok := w.follower.findLog(func(l logLine) bool { return l.msg() == "risk sweep" && l["reason"] == "boot" }); ok {
		t.Error("the promoted follower's first risk sweep was a boot sweep")
	}
	s := w.follower.desk()
	if s.Role != "holder" || !s.Lease.Trusted || s.Lease.Term != 2 || s.Holder.Row == nil || s.Holder.Row.Hostname != "box-b" ||
		s.Holder.Row.PID != w.follower.pid() || !strings.Contains(s.Reason, "took the engine lease over") || s.Feed == nil || s.Risk == nil {
		t.Fatalf("desk after takeover = %+v", s)
	}
	w.d.checkLedger(acct, "9998.60") // two 0.10-lot commissions of 0.70
}

// A holder frozen with SIGSTOP loses the lease to the standby follower; SIGCONTed afterwards it
// finds the term moved: its keeper reports lost, its gate stays shut, a request forwarded to it
// for its old term is refused with the pricing text and writes nothing, and a trader's order
// sent to it goes to the new holder — never back to itself.
func TestStandbyOldHolderResumedAfterTakeoverIsFenced(t *testing.T) {
	t.Parallel()
	w := newWebTier(t, append([]string{"FXDESK_TAKEOVER=standby"}, guardedProbe...)...)
	tok, acct := w.d.newTrader(770, "USD", "100", "10000.00")
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	must(t, w.d.web, tok, "POST", "/api/fx/orders", standbyOrder(acct, "f-1"), http.StatusCreated, nil)

	old := w.d.web
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	w.follower.waitLog(30*time.Second, msgHas("role: holder — took over"))
	w.d.web = w.follower
	// The takeover is announced before the new holder's own tick engine is attached; a markets
	// rail opened in between follows neither feed, so wait for the engine's provider session.
	eventually(t, 10*time.Second, 50*time.Millisecond, "the new holder's feed connected", func() bool {
		s := w.follower.desk()
		return s.Feed != nil && s.Feed.Connected
	})
	w.d.setQuote(tok, "EURUSD", "1.10000", "1.10020") // the new holder quotes from its own engine
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lost := old.waitLog(10*time.Second, msgHas("lease lost"))
	if lost.level() != "ERROR" {
		t.Errorf(`"lease lost" logged at %s, want ERROR`, lost.level())
	}
	if s := old.desk(); !s.Lease.Lost || s.Lease.Trusted || s.Lease.Term != 1 {
		t.Fatalf("resumed old holder = %+v, want lost, not holding, term 1", s.Lease)
	}
	// Read after "lease lost", which only the resumed process can have written: drops counted
	// from here on are guarded work after the resume.
	droppedAtResume := old.gateDropped()

	// A forward naming the old term, properly signed, reaches the old holder: refused, not served.
	signer, err := forward.NewSigner(clusterSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	forwardTo := func(p *proc, term int64, nonce string) (int, errorResp, http.Header) {
		t.Helper()
		body := standbyOrder(acct, nonce)
		req, _ := http.NewRequest("POST", "http://"+p.addr+"/api/fx/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(forward.Header, signer.Sign(forward.Request{Method: "POST", Path: "/api/fx/orders", Body: []byte(body)}, term))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var er errorResp
		json.NewDecoder(resp.Body).Decode(&er)
		return resp.StatusCode, er, resp.Header
	}
	if code, er, h := forwardTo(old, 1, "f-2"); code != http.StatusServiceUnavailable || er.Error.Message != pricingText || h.Get("Retry-After") == "" {
		t.Fatalf("old-term forward to the resumed holder = %d %+v", code, er)
	}
	w.d.checkLedger(acct, "9999.30") // only f-1's commission

	// A trader's order sent to the old process is forwarded to the new holder, which fills it: the
	// answer names the term it was forwarded under.
	code, a := callHeaders(t, old, tok, "POST", "/api/fx/orders", standbyOrder(acct, "f-3"))
	var o orderResp
	if err := json.Unmarshal(a.body, &o); code != http.StatusCreated || err != nil || o.Replayed || o.Position == nil {
		t.Fatalf("order through the old process = %d %s", code, a.body)
	}
	if got := a.header.Get(forward.ForwardedHeader); got != "2" {
		t.Errorf("order through the old process answered with %s %q, want the new holder's term 2", forward.ForwardedHeader, got)
	}
	// Had the old process forwarded to itself, it would have refused that forward before
	// answering. A forward naming a term nobody holds is refused and logged after it: once that
	// line is read, every refusal before it is too, and there must be just the two.
	const barrierTerm = 99
	if code, _, _ := forwardTo(old, barrierTerm, "f-4"); code != http.StatusServiceUnavailable {
		t.Fatalf("forward for term %d = %d, want 503", barrierTerm, code)
	}
	refused := msgHas("forwarded request refused")
	old.waitLog(5*time.Second, func(l logLine) bool { return refused(l) && l["term"] == float64(barrierTerm) })
	if n := old.countLog(refused); n != 2 {
		t.Errorf("the old holder refused %d forwarded requests, want 2 (the old term's and the barrier's): it forwarded to itself", n)
	}
	// Its guarded work stays dropped at the gate, and the row is the new holder's, untouched.
	eventually(t, 10*time.Second, 50*time.Millisecond, "guarded work dropped at the old holder's gate after the resume", func() bool {
		return old.gateDropped() > droppedAtResume
	})
	if h, _ := w.d.e.row(); h.Hostname != "box-b" || h.PID != w.follower.pid() || h.Term != 2 {
		t.Fatalf("row = %+v, want box-b term 2", h)
	}
	w.d.checkLedger(acct, "9998.60")
}

// leaseTimes reads the lease row's term and its expiry and acquisition times on the database clock.
func leaseTimes(t *testing.T, e *deskEnv) (term int64, expiresAt, acquiredAt time.Time) {
	t.Helper()
	var exp, acq string
	const f = "'%Y-%m-%d %H:%i:%s.%f'"
	if err := e.sql.QueryRow("SELECT `term`, DATE_FORMAT(`expiresAt`, "+f+"), DATE_FORMAT(`acquiredAt`, "+f+") FROM `engine_lease` WHERE `id` = ?", lease.Key).Scan(&term, &exp, &acq); err != nil {
		t.Fatal(err)
	}
	var err error
	if expiresAt, err = time.Parse("2006-01-02 15:04:05.000000", exp); err != nil {
		t.Fatal(err)
	}
	if acquiredAt, err = time.Parse("2006-01-02 15:04:05.000000", acq); err != nil {
		t.Fatal(err)
	}
	return term, expiresAt, acquiredAt
}
