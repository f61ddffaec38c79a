package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/mirror"
)

const mirrorEvery = 500 * time.Millisecond

type alertsResp struct {
	Alerts []struct {
		ID      int64  `json:"id"`
		Code    string `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"alerts"`
}

// openAlert returns the open alert with code on p, if any.
func (p *proc) openAlert(code string) (string, bool) {
	p.t.Helper()
	var a alertsResp
	must(p.t, p, p.env.adminToken(), "GET", "/api/admin/fx/alerts?status=OPEN&code="+code, "", http.StatusOK, &a)
	for _, al := range a.Alerts {
		if al.Code == code {
			return al.Message, true
		}
	}
	return "", false
}

// waitAlert polls the alert inbox until code's open state is want. The follower raises and
// resolves on its own schedule, so this waits on the inbox with a deadline.
func (p *proc) waitAlert(code string, want bool, timeout time.Duration) string {
	p.t.Helper()
	var msg string
	eventually(p.t, timeout, 50*time.Millisecond, fmt.Sprintf("%s: alert %s open=%v", p.name, code, want), func() bool {
		var open bool
		msg, open = p.openAlert(code)
		return open == want
	})
	return msg
}

type mirrorView struct {
	Mirror *struct {
		Mode            string   `json:"mode"`
		LastPublishedAt string   `json:"lastPublishedAt"`
		Symbols         int      `json:"symbols"`
		Advancing       bool     `json:"advancing"`
		Refused         []string `json:"refused"`
		Cycles          uint64   `json:"cycles"`
		Term            int64    `json:"term"`
		TermRefused     uint64   `json:"termRefused"`
	} `json:"mirror"`
}

func (p *proc) mirror() mirrorView {
	p.t.Helper()
	var v mirrorView
	must(p.t, p, p.env.adminToken(), "GET", "/api/admin/fx/desk", "", http.StatusOK, &v)
	return v
}

// openPosition gives the install a trader with one open EURUSD position.
func (e *deskEnv) openPosition(web *proc) {
	e.t.Helper()
	// The desk fills at its own quote: wait until EURUSD has one.
	web.stream("EURUSD").waitFor(e.t, 10*time.Second, func(map[string]any) bool { return true })
	tok := e.issueToken(42, false)
	var a accountResp
	must(e.t, web, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`, http.StatusCreated, &a)
	must(e.t, web, e.adminToken(), "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", a.Account.ID), `{"amount":"10000"}`, http.StatusCreated, nil)
	must(e.t, web, tok, "POST", "/api/fx/orders",
		fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.1","requestNonce":"mirror-1"}`, a.Account.ID),
		http.StatusCreated, nil)
}

func mirrorEnv(extra ...string) []string {
	return append([]string{"FXDESK_MIRROR_INTERVAL=" + mirrorEvery.String()}, extra...)
}

// The split install: the snapshot appears and advances; with an open position, stopping the web
// process raises quote-mirror-unavailable within two intervals and a restart resolves it; a
// symbol silenced while its session is open becomes quote-mirror-stale by name.
func TestMirrorSplitInstall(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", mirrorEnv("CRON_MODE=off", "FXDESK_MIRROR_MAX_AGE=3s")...)
	web.waitLog(5*time.Second, msgIs("fx quote mirror publishing every "+mirrorEvery.String()))
	cron := e.start("cron", "fxdesk-cron", mirrorEnv("FXDESK_MIRROR_MAX_AGE=3s")...)
	cron.waitLog(5*time.Second, msgHas("fx quote mirror following"))

	// Appears and advances.
	first := ""
	eventually(t, 10*time.Second, 100*time.Millisecond, "snapshot appears and advances", func() bool {
		v := cron.mirror().Mirror
		if v == nil || v.LastPublishedAt == "" || v.Symbols <= 30 {
			return false
		}
		if first == "" {
			first = v.LastPublishedAt
		}
		return v.LastPublishedAt != first
	})
	if v := web.mirror().Mirror; v == nil || v.Mode != "publishing" {
		t.Fatalf("web mirror = %+v, want publishing", v)
	}
	if _, open := cron.openAlert(mirror.AlertUnavailable); open {
		t.Fatal("unavailable alert while the mirror advances")
	}

	// A silenced symbol is refused by name once its mid is older than the bound.
	web.simControl("/control/silence", map[string]any{"symbol": "NZDCHF", "seconds": 60})
	msg := cron.waitAlert(mirror.AlertStale, true, 15*time.Second)
	if !strings.Contains(msg, "NZDCHF") {
		t.Fatalf("stale alert %q does not name NZDCHF", msg)
	}
	web.simControl("/control/silence", map[string]any{"symbol": "NZDCHF", "seconds": 0})
	cron.waitAlert(mirror.AlertStale, false, 15*time.Second)

	// The leader stops with the desk exposed: the alert within two intervals, resolved after restart.
	e.openPosition(web)
	web.stop(syscall.SIGTERM)
	stopped := time.Now()
	msg = cron.waitAlert(mirror.AlertUnavailable, true, 10*time.Second)
	t.Logf("quote-mirror-unavailable raised %v after the leader stopped (interval %v)", time.Since(stopped).Round(10*time.Millisecond), mirrorEvery)
	for _, cause := range []string{"CRON_MODE=off", "same Redis"} {
		if !strings.Contains(msg, cause) {
			t.Errorf("unavailable alert %q does not name %q", msg, cause)
		}
	}
	e.start("web-2", "fxdesk-web", mirrorEnv("CRON_MODE=off")...)
	cron.waitAlert(mirror.AlertUnavailable, false, 10*time.Second)
}

// An inline web process publishes nothing: the follower says so, but only once the desk is
// exposed. A follower reading another Redis database says so too.
func TestFollowerReportsAMisconfiguredMirror(t *testing.T) {
	t.Parallel()
	t.Run("inline-web", func(t *testing.T) {
		t.Parallel()
		e := newDeskEnv(t)
		web := e.start("web", "fxdesk-web", mirrorEnv("CRON_MODE=inline")...)
		cron := e.start("cron", "fxdesk-cron", mirrorEnv()...)
		if _, ok := web.findLog(msgHas("fx quote mirror publishing")); ok {
			t.Fatal("an inline web process armed the publisher")
		}
		// Idle desk: the follower polls four times, finding no snapshot each time, and raises
		// nothing (an alert, once raised, stays open: the mirror never appears here).
		polled := func() uint64 {
			if v := cron.mirror().Mirror; v != nil {
				return v.Cycles
			}
			return 0
		}
		first := polled()
		eventually(t, 10*time.Second, 50*time.Millisecond, "four follower polls", func() bool { return polled() >= first+4 })
		if _, open := cron.openAlert(mirror.AlertUnavailable); open {
			t.Fatal("quote-mirror-unavailable raised on an idle desk")
		}
		if n, err := e.rdb.Exists(context.Background(), e.names.QuoteMirrorSnapshot()).Result(); err != nil || n != 0 {
			t.Fatalf("snapshot key exists (%d, %v) with an inline web process", n, err)
		}
		e.openPosition(web)
		cron.waitAlert(mirror.AlertUnavailable, true, 10*time.Second)
	})
	t.Run("other-redis-db", func(t *testing.T) {
		t.Parallel()
		e := newDeskEnv(t)
		web := e.start("web", "fxdesk-web", mirrorEnv("CRON_MODE=off")...)
		web.waitLog(5*time.Second, msgHas("fx quote mirror publishing"))
		cron := e.start("cron", "fxdesk-cron", mirrorEnv("FXDESK_REDIS_URL=redis://"+e.redis.Addr+"/1")...)
		e.openPosition(web)
		cron.waitAlert(mirror.AlertUnavailable, true, 10*time.Second)
	})
}
