package e2e

import (
	"bytes"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/lease"
)

// runToExit runs binary with e's environment plus env and waits for it to exit on its own.
func (e *deskEnv) runToExit(binary string, timeout time.Duration, env ...string) (exitCode int, stderr string) {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, binary))
	cmd.Env = e.env(env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var buf bytes.Buffer
	cmd.Stderr = &buf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			e.t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), buf.String()
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		e.t.Fatalf("%s still running after %s; it should have stopped on its own:\n%s", binary, timeout, buf.String())
		return 0, ""
	}
}

// A part of fxdesk-web that cannot run — here the bundled feed simulator of a split install
// (CRON_MODE=off, which also arms the mirror publisher) whose address another process holds —
// stops the process with a non-zero exit and an error naming the part, and the lease it had
// just won is released, so a replacement takes over at once instead of waiting out the TTL.
func TestFailingPartStopsTheProcess(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	code, stderr := e.runToExit("fxdesk-web", 60*time.Second, "CRON_MODE=off", "FXDESK_SIM_ADDR="+taken.Addr().String())
	if code == 0 {
		t.Fatalf("fxdesk-web exited 0 with its feed simulator unable to listen:\n%s", stderr)
	}
	if !strings.Contains(stderr, "feed simulator") || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("the exit does not name the failed part:\n%s", stderr)
	}
	if !strings.Contains(stderr, `"msg":"role: holder`) {
		t.Fatalf("fxdesk-web did not win the lease first; the test proves nothing about release:\n%s", stderr)
	}
	var expired bool
	if err := e.sql.QueryRow("SELECT `expiresAt` <= NOW(3) FROM `engine_lease` WHERE `id` = ?", lease.Key).Scan(&expired); err != nil || !expired {
		t.Fatalf("lease row after the failed start: expired=%v err=%v (not released)", expired, err)
	}
}

// A part that fails while the desk runs stops the process too: the holder's tick engine, whose
// provider refuses its key session after session, ends with an error that names the part and
// the cause; fxdesk-web exits non-zero and releases the lease it held.
func TestPartFailingAtRuntimeStopsTheProcess(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	sim := startFeedSim(t, "-key", "the-account-key")
	code, stderr := e.runToExit("fxdesk-web", 60*time.Second, "FXDESK_FEED="+sim.url, "FXDESK_FEED_KEY=a-wrong-key")
	if code == 0 {
		t.Fatalf("fxdesk-web exited 0 although its provider refused the key:\n%s", stderr)
	}
	if !strings.Contains(stderr, `"msg":"role: holder`) || !strings.Contains(stderr, `"msg":"http server listening"`) {
		t.Fatalf("fxdesk-web failed before it ran; the test is about a failure at runtime:\n%s", stderr)
	}
	if !strings.Contains(stderr, `"level":"ERROR","msg":"part failed; stopping the process","component":"FX","part":"tick engine"`) ||
		!strings.Contains(stderr, "refused the key") {
		t.Fatalf("no error log naming the tick engine and the refused key:\n%s", stderr)
	}
	var expired bool
	if err := e.sql.QueryRow("SELECT `expiresAt` <= NOW(3) FROM `engine_lease` WHERE `id` = ?", lease.Key).Scan(&expired); err != nil || !expired {
		t.Fatalf("lease row after the failure: expired=%v err=%v (not released)", expired, err)
	}
}
