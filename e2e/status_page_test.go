package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/alert"
)

// An operator's browser signs in to the status page of a running desk (the web holder and the
// scheduler) through the form, and finds the holder's hostname:pid, its advertised URL and the
// open alerts; it signs out again. A token in the URL is refused, as is a sign-in posted from
// another origin.
func TestStatusPageInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", "CRON_MODE=off")
	cron := e.start("cron", "fxdesk-cron")
	inbox := alert.NewInbox(e.sql, slog.New(slog.DiscardHandler))
	// A code no job of the desk resolves: the cron process's ledger check, at the turn of each
	// minute, resolves a ledger-drift it does not find, and once took this one off the page.
	if err := inbox.Raise(context.Background(), "status-page-probe", alert.Critical, "Account 7: Σ deals differs from balance by 1.00", nil); err != nil {
		t.Fatal(err)
	}
	holder := "box:" + strconv.Itoa(web.pid())
	token := e.adminToken()
	tab := openTab(t, browser)
	fill := "document.getElementById('token').value=" + jsString(token)
	for _, p := range []*proc{web, cron} {
		// A browser not signed in is sent to the form, and the form signs it in.
		tab.load("http://" + p.addr + "/admin/status")
		if path := tab.path(); path != "/admin/login" {
			t.Fatalf("%s: a browser not signed in lands on %s, want the sign-in form", p.name, path)
		}
		tab.submit("button[type=submit]", fill)
		if path := tab.path(); path != "/admin/status" {
			t.Fatalf("%s: signing in lands on %s:\n%s", p.name, path, tab.dom())
		}
		dom := tab.dom()
		// The row's advertised URL is where followers forward: the holder's own address here.
		// The dealer's P&L today: nothing booked yet, its total and the day's chart, on either
		// process (both read the ledger).
		wants := []string{holder, "http://" + web.addr, "status-page-probe", "Σ deals differs from balance", `id="pnl-total">0.00 USD`, `<svg id="pnl-chart"`}
		if p == web {
			wants = append(wants, "took")         // this process's last renew, on the process holding a lease view
			wants = append(wants, "Group commit") // the holder's batches of fills and closes
		}
		for _, want := range wants {
			if !strings.Contains(dom, want) {
				t.Errorf("%s status page lacks %q:\n%s", p.name, want, dom)
			}
		}
		// The cookie is HttpOnly: nothing in the page can read the token.
		if c := tab.eval("document.cookie"); strings.Contains(c, token) {
			t.Errorf("%s: the page's script reads the token from document.cookie", p.name)
		}
		// Signing out forgets the cookie: the page sends the browser to the form again.
		tab.submit(".signout button", "")
		tab.load("http://" + p.addr + "/admin/status")
		if path := tab.path(); path != "/admin/login" {
			t.Errorf("%s: after signing out the status page is %s", p.name, path)
		}
	}

	// A token in the URL is refused rather than used, and the page says what to do instead.
	tab.load("http://" + web.addr + "/admin/status?token=" + token)
	if dom := tab.dom(); strings.Contains(dom, holder) || !strings.Contains(dom, "not accepted") || strings.Contains(tab.eval("document.body.innerText"), token) {
		t.Errorf("status page with ?token=:\n%s", dom)
	}
	// A sign-in posted to the holder by another site's page (here on another port) is refused,
	// and the browser is not signed in. (The desk's own pages could not be made to do it: their
	// Content-Security-Policy lets their forms post to their own origin only.)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<form method="post" action="http://`+web.addr+`/admin/login"><input id="token" name="token"><button type="submit">go</button></form>`)
	}))
	t.Cleanup(other.Close)
	tab.load(other.URL)
	tab.submit("button[type=submit]", fill)
	if dom := tab.dom(); !strings.Contains(dom, "own page") {
		t.Errorf("a sign-in posted from another origin was not refused:\n%s", dom)
	}
	tab.load("http://" + web.addr + "/admin/status")
	if path := tab.path(); path != "/admin/login" {
		t.Errorf("a refused cross-origin sign-in left the browser signed in (on %s)", path)
	}
}

// The desk report names the role on every process, and flags a Redis key that disagrees with the
// row (overwritten by hand here).
func TestDeskReportRolesAndDisagreement(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	h := e.start("holder", "fxdesk-web", "CRON_MODE=off")
	f := e.start("follower", "fxdesk-web", "CRON_MODE=off")
	c := e.start("cron", "fxdesk-cron")
	h.waitLog(10*time.Second, msgIs("provider connected"))
	hr, fr, cr := h.desk(), f.desk(), c.desk()
	if hr.Role != "holder" || hr.Lease == nil || !hr.Lease.Trusted || hr.Lease.Term != 1 || hr.Feed == nil || !hr.Feed.Connected ||
		hr.Mirror == nil || hr.Mirror.Mode != "publishing" || !hr.Holder.Agree || hr.Alerts == nil {
		t.Errorf("holder report = %+v", hr)
	}
	// thisProcess names the process answering; holder names the lease holder, whoever answers.
	holderTag := "box:" + strconv.Itoa(h.pid())
	if hr.ThisProcess != holderTag || fr.ThisProcess != "box:"+strconv.Itoa(f.pid()) || fr.Holder.Redis != holderTag ||
		fr.Holder.Row == nil || fr.Holder.Row.Hostname+":"+strconv.Itoa(fr.Holder.Row.PID) != holderTag {
		t.Errorf("thisProcess/holder: holder answers %q, follower answers %q naming holder %+v", hr.ThisProcess, fr.ThisProcess, fr.Holder)
	}
	if hr.Lease == nil || hr.Lease.LastRenewTookMs == nil {
		t.Error("the holder's lease view has no lastRenewTookMs")
	}
	if hr.Risk == nil || !hr.Risk.Loaded {
		t.Errorf("holder report has no loaded risk engine: %+v", hr.Risk)
	}
	if fr.Risk != nil || cr.Risk != nil {
		t.Errorf("risk engine reported off the holder: follower %+v cron %+v", fr.Risk, cr.Risk)
	}
	if hr.Commits == nil || hr.Commits.Batches == nil || fr.Commits != nil || cr.Commits != nil {
		t.Errorf("group commit reported as holder %+v, follower %+v, cron %+v; want the holder's alone", hr.Commits, fr.Commits, cr.Commits)
	}
	if fr.Role != "follower" || fr.Lease == nil || fr.Lease.Trusted || fr.Feed != nil || fr.Mirror != nil || !strings.Contains(fr.Reason, "never promotes") {
		t.Errorf("follower report = %+v", fr)
	}
	if cr.Role != "cron" || cr.Lease != nil || cr.Mirror == nil || cr.Mirror.Mode != "following" || len(cr.Jobs) == 0 {
		t.Errorf("cron report = %+v", cr)
	}

	if err := e.rdb.Set(context.Background(), "engine:lease:forex-trading", "intruder:1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if r := c.desk(); r.Holder.Agree || r.Holder.Redis != "intruder:1" {
		t.Errorf("after overwriting the key: %+v, want agree=false", r.Holder)
	}
	// The holder's next renew makes the key agree again and says so in its log.
	h.waitLog(10*time.Second, msgHas("Redis key disagreed with the row"))
	if r := c.desk(); !r.Holder.Agree {
		t.Errorf("key not rewritten to agree: %+v", r.Holder)
	}
}
