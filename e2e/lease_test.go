package e2e

import (
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/testkit/tcpproxy"
)

// 1. Two web processes started together: one holds the row, the other is a follower for life.
func TestTwoWebProcessesOneHolder(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	var a, b *proc
	var wg sync.WaitGroup
	wg.Go(func() { a = e.start("web-a", "fxdesk-web", "CRON_MODE=off") })
	wg.Go(func() { b = e.start("web-b", "fxdesk-web", "CRON_MODE=off") })
	wg.Wait()

	h, ok := e.row()
	if !ok {
		t.Fatal("no lease row after two web processes started")
	}
	holder, follower := a, b
	if h.PID == b.pid() {
		holder, follower = b, a
	} else if h.PID != a.pid() {
		t.Fatalf("row names pid %d, neither web process (%d, %d)", h.PID, a.pid(), b.pid())
	}
	if got, want := e.redisValue(), "box:"+strconv.Itoa(holder.pid()); got != want {
		t.Errorf("redis key = %q, want %q", got, want)
	}
	follower.waitLog(5*time.Second, msgHas("role: follower"))
	if _, ok := holder.findLog(msgHas("role: follower")); ok {
		t.Error("the holder logged that it is a follower")
	}
	if s := follower.desk(); s.Role != "follower" || s.Lease.Trusted {
		t.Fatalf("follower desk status = %+v", s)
	}
	if s := holder.desk(); s.Role != "holder" || !s.Lease.Trusted || s.Holder.Row.PID != holder.pid() || !s.Holder.Agree {
		t.Fatalf("holder desk status = %+v", s)
	}

	// The holder goes away; the follower does not promote, even long after the row expired.
	holder.stop(syscall.SIGTERM)
	e.waitRowExpired(10 * time.Second)
	deadline := time.Now().Add(2 * 3 * time.Second) // two TTLs past the release
	for time.Now().Before(deadline) {
		if h, _ := e.row(); h.PID == follower.pid() {
			t.Fatal("the follower took the lease after the holder left")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := follower.desk(); s.Role != "follower" || s.Lease.Trusted {
		t.Fatalf("follower after holder left = %+v", s)
	}
}

// 2. fxdesk-cron never appears in the row, even with no web process at all.
func TestCronNeverHoldsTheLease(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	c := e.start("cron", "fxdesk-cron")
	c.waitLog(time.Second, msgHas("never contends for the engine lease"))
	if h, ok := e.row(); ok {
		t.Fatalf("lease row exists with only the cron process running: %+v", h)
	}
	if v := e.redisValue(); v != "" {
		t.Fatalf("redis lease key = %q with only the cron process running", v)
	}
	if s := c.desk(); s.Role != "cron" || s.Lease != nil {
		t.Fatalf("cron desk status = %+v", s)
	}

	w := e.start("web", "fxdesk-web", "CRON_MODE=off")
	if h, _ := e.row(); h.PID != w.pid() {
		t.Fatalf("row names pid %d, want the web process %d", h.PID, w.pid())
	}
	if s := c.desk(); s.Holder.Row == nil || s.Holder.Row.PID != w.pid() || s.Holder.Redis != "box:"+strconv.Itoa(w.pid()) {
		t.Fatalf("cron's view of the holder = %+v, want the web process", s.Holder)
	}
}

// 3. A SIGKILLed holder is replaced at once on the same host (its pid is dead); a contender on
// another host has to wait for the row to expire.
func TestKilledHolderReclaim(t *testing.T) {
	t.Parallel()
	t.Run("same-host", func(t *testing.T) {
		t.Parallel()
		// A long TTL shows the replacement did not wait for expiry.
		e := newDeskEnv(t)
		a := e.start("web-a", "fxdesk-web", "FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s")
		old, _ := e.row()
		a.stop(syscall.SIGKILL)
		killed := time.Now()
		b := e.start("web-b", "fxdesk-web", "FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s")
		took := time.Since(killed)
		b.waitLog(time.Second, msgHas("role: holder"))
		h, _ := e.row()
		if h.PID != b.pid() || h.Term != old.Term+1 {
			t.Fatalf("row = %+v, want pid %d term %d", h, b.pid(), old.Term+1)
		}
		if _, ok := b.findLog(msgHas("holder on this host is dead")); !ok {
			t.Error("replacement did not reclaim from the dead pid")
		}
		t.Logf("same-host replacement took the lease %v after SIGKILL (boot included)", took.Round(time.Millisecond))
	})
	t.Run("other-host", func(t *testing.T) {
		t.Parallel()
		// The TTL outlasts web-c's boot on a loaded machine (3 s of it has been seen): with the
		// default 3 s the row could expire before web-c first looked, and it would rightly hold.
		e := newDeskEnv(t)
		a := e.start("web-a", "fxdesk-web", "FXDESK_LEASE_TTL=15s", "FXDESK_LEASE_FENCE=5s")
		a.stop(syscall.SIGKILL)
		c := e.start("web-c", "fxdesk-web", "FXDESK_HOSTNAME=elsewhere")
		c.waitLog(time.Second, msgHas("role: follower"))
		if h, _ := e.row(); h.PID != a.pid() {
			t.Fatalf("row = %+v, want still the killed holder until expiry", h)
		}
		e.waitRowExpired(25 * time.Second)
		d := e.start("web-d", "fxdesk-web", "FXDESK_HOSTNAME=elsewhere")
		d.waitLog(time.Second, msgHas("role: holder"))
		if h, _ := e.row(); h.PID != d.pid() || h.Hostname != "elsewhere" {
			t.Fatalf("row = %+v, want web-d on elsewhere", h)
		}
	})
}

// 4. A graceful stop releases: the row is expired, the Redis key gone, the next process takes over.
func TestGracefulStopReleases(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	a := e.start("web-a", "fxdesk-web", "FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s")
	a.stop(syscall.SIGTERM)
	a.waitLog(time.Second, msgIs("engine lease released"))
	if h, ok := e.row(); !ok || h.Live {
		t.Fatalf("row after graceful stop = %+v (ok=%v), want expired", h, ok)
	}
	if v := e.redisValue(); v != "" {
		t.Fatalf("redis key after graceful stop = %q, want gone", v)
	}
	b := e.start("web-b", "fxdesk-web", "FXDESK_HOSTNAME=elsewhere", "FXDESK_LEASE_TTL=20s", "FXDESK_LEASE_FENCE=5s")
	b.waitLog(time.Second, msgHas("role: holder"))
	if h, _ := e.row(); h.PID != b.pid() || h.Term != 2 {
		t.Fatalf("row = %+v, want web-b with term 2", h)
	}
}

// 5. A holder frozen past the TTL: its trust ended before the row expired, another process takes
// the lease, and on resume its term-scoped write is refused and it logs "lease lost" at error.
func TestFrozenHolderLosesTheLease(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	a := e.start("web-a", "fxdesk-web", guardedProbe...)
	// Right before the freeze, the holder's own trust runs out before the row does.
	s := a.desk()
	if !s.Lease.Trusted || s.Holder.Row == nil {
		t.Fatalf("holder status before freeze = %+v", s)
	}
	if s.Lease.TrustLeftMs >= s.Holder.Row.ExpiresInMs {
		t.Fatalf("trust left %d ms is not shorter than the row's %d ms", s.Lease.TrustLeftMs, s.Holder.Row.ExpiresInMs)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.waitRowExpired(10 * time.Second)
	b := e.start("web-b", "fxdesk-web", "FXDESK_HOSTNAME=elsewhere")
	b.waitLog(time.Second, msgHas("role: holder"))
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lost := a.waitLog(10*time.Second, msgHas("lease lost"))
	if lost.level() != "ERROR" {
		t.Errorf(`"lease lost" logged at %s, want ERROR`, lost.level())
	}
	// Guarded work after the resume is dropped at the gate: counted from a read after "lease
	// lost", which only the resumed process can have written.
	droppedAtResume := a.gateDropped()
	eventually(t, 10*time.Second, 50*time.Millisecond, "guarded work dropped at the resumed holder's gate", func() bool {
		return a.gateDropped() > droppedAtResume
	})
	h, _ := e.row()
	if h.PID != b.pid() || h.Term != 2 {
		t.Fatalf("row = %+v, want web-b term 2 untouched by the resumed process", h)
	}
	if s := a.desk(); !s.Lease.Lost || s.Lease.Trusted {
		t.Fatalf("resumed holder status = %+v, want lost and not holding", s.Lease)
	}
	if v := e.redisValue(); v != "elsewhere:"+strconv.Itoa(b.pid()) {
		t.Fatalf("redis key = %q, want web-b's tag", v)
	}
	// Once the process has exited, every line it wrote has been read: "lease lost" came once in
	// its whole life, renews and the graceful stop included.
	a.stop(syscall.SIGTERM)
	if n := a.countLog(msgHas("lease lost")); n != 1 {
		t.Errorf(`"lease lost" logged %d times, want once`, n)
	}
}

// 6. The holder's database connection is cut: guarded work stops at the trust deadline; with Redis
// also cut the desk fails open, printing the banner only where a sibling is provable.
func TestHolderCutFromItsStores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		instances  string
		wantBanner bool
	}{
		{"single-process", "1", false},
		{"sibling-configured", "2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newDeskEnv(t)
			mp, err := tcpproxy.Start("127.0.0.1:3306")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mp.Close() })
			rp, err := tcpproxy.Start(e.redis.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rp.Close() })
			a := e.start("web", "fxdesk-web", append([]string{
				"FXDESK_MYSQL_DSN=" + e.db.DSNVia(mp.Addr()),
				"FXDESK_REDIS_URL=redis://" + rp.Addr() + "/0",
				"FXDESK_WEB_INSTANCES=" + tc.instances, "FXDESK_CLUSTER_SECRET=" + clusterSecret}, guardedProbe...)...)
			a.waitLog(5*time.Second, msgHas("role: holder"))
			if n := a.countLog(msgIs("lease not confirmed; work not executed")); n != 0 {
				t.Fatalf("%d guarded units dropped while the lease was confirmed", n)
			}

			// One authenticated call while MySQL answers: the token stays honoured through the outage.
			a.desk()
			mp.Cut()
			lapsed := a.waitLog(10*time.Second, msgHas("not confirmed past its trust window"))
			a.waitLog(5*time.Second, msgIs("lease not confirmed; work not executed"))
			if s := a.desk(); s.Lease.Trusted {
				t.Fatalf("holder still trusts its lease with MySQL cut: %+v", s.Lease)
			}
			if _, ok := a.findLog(msgHas("NO WORKING ARBITER")); ok {
				t.Fatal("banner printed while Redis still answers")
			}
			_ = lapsed

			rp.Cut()
			a.waitLog(10*time.Second, msgHas("fail-open"))
			a.waitLog(10*time.Second, msgHas("confirmed again after a gap"))
			if s := a.desk(); !s.Lease.Trusted || !s.Lease.FailOpen {
				t.Fatalf("status after both arbiters were cut = %+v, want fail-open holding", s.Lease)
			}
			// The banner, if any, is logged right after "fail-open" in the renew that then logs
			// "confirmed again after a gap": that line read, the banner was read too.
			_, banner := a.findLog(msgHas("MULTI-PROCESS BACKEND WITH NO WORKING ARBITER"))
			if banner != tc.wantBanner {
				t.Fatalf("banner printed = %v, want %v", banner, tc.wantBanner)
			}
		})
	}
}

// CRON_MODE values other than inline and off stop the web process with a message naming them.
func TestBadCronModeFailsFast(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	for _, mode := range []string{"only", "yes", "INLINE"} {
		out, err := runOnce(e.env("CRON_MODE="+mode), "fxdesk-web")
		if err == nil {
			t.Fatalf("CRON_MODE=%s: web process started", mode)
		}
		for _, want := range []string{"CRON_MODE", "inline", "off"} {
			if !contains(out, want) {
				t.Errorf("CRON_MODE=%s: message %q does not name %q", mode, out, want)
			}
		}
	}
	// Rejected before any store was touched: not even the schema exists.
	var tables int
	if err := e.sql.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?", e.db.Name).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("a rejected process created %d tables", tables)
	}
}
