package e2e

import (
	"context"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/alert"
)

// chromium finds a headless browser. `make test` installs Debian's chromium when it is missing;
// where that was impossible the test says so and skips.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no headless Chromium: scripts/browser.sh installs Debian's chromium package; it could not be installed here")
	return ""
}

// dumpDOM loads url in headless Chromium and returns the rendered document.
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	return string(out)
}

// A browser loads the status page of a running desk (the web holder and the scheduler) and finds
// the holder's hostname:pid, its advertised URL and the open alerts.
func TestStatusPageInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", "CRON_MODE=off")
	cron := e.start("cron", "fxdesk-cron")
	inbox := alert.NewInbox(e.sql, slog.New(slog.DiscardHandler))
	if err := inbox.Raise(context.Background(), "ledger-drift", alert.Critical, "Account 7: Σ deals differs from balance by 1.00", nil); err != nil {
		t.Fatal(err)
	}
	holder := "box:" + strconv.Itoa(web.pid())
	token := e.adminToken()
	for _, p := range []*proc{web, cron} {
		dom := dumpDOM(t, browser, "http://"+p.addr+"/admin/status?token="+token)
		// The row's advertised URL is where followers forward: the holder's own address here.
		wants := []string{holder, "http://" + web.addr, "ledger-drift", "Σ deals differs from balance"}
		if p == web {
			wants = append(wants, "took")         // this process's last renew, on the process holding a lease view
			wants = append(wants, "Group commit") // the holder's batches of fills and closes
		}
		for _, want := range wants {
			if !strings.Contains(dom, want) {
				t.Errorf("%s status page lacks %q:\n%s", p.name, want, dom)
			}
		}
	}
	// Without a token the page is refused, not rendered.
	if dom := dumpDOM(t, browser, "http://"+web.addr+"/admin/status"); strings.Contains(dom, holder) {
		t.Error("status page rendered without a token")
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
