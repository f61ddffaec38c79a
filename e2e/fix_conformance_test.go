package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FIX conformance (docs/fix.md, «Conformance»): the desk's initiator and the bundled FIX venue
// each trade with a counterparty built on another FIX engine — the C++ QuickFIX Debian packages
// (libquickfix-dev), in e2e/testdata/fixpeer, built by scripts/quickfix.sh. That engine validates
// every message it receives against the FIX 4.4 data dictionary (lengths and checksums included)
// and the peer fails on any reject either side raises. Each run covers logon, an order and its
// fill, a resend the peer asks for (the counterparty's orders or reports come again with
// PossDupFlag=Y, body unchanged) and a resend the peer serves (a message that reaches the
// counterparty only through its ResendRequest).

// fixPeerBinary is the built peer and its data dictionary, or a skip — a failure with
// FXDESK_CONFORMANCE=require, as `make test` runs — when scripts/quickfix.sh has not built it
// from the current source.
func fixPeerBinary(t *testing.T) (bin, dict string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "bin", "fixpeer"))
	if err != nil {
		t.Fatal(err)
	}
	bin, dict = filepath.Join(dir, "fixpeer"), filepath.Join(dir, "FIX44.xml")
	src, err := os.ReadFile(filepath.Join("testdata", "fixpeer", "peer.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	stamp, stampErr := os.ReadFile(filepath.Join(dir, "peer.cpp.sha256"))
	_, binErr := os.Stat(bin)
	_, dictErr := os.Stat(dict)
	var why string
	switch {
	case binErr != nil || dictErr != nil || stampErr != nil:
		why = "the FIX conformance peer is not built"
	case strings.TrimSpace(string(stamp)) != hex.EncodeToString(sum[:]):
		why = "the FIX conformance peer is older than testdata/fixpeer/peer.cpp"
	default:
		return bin, dict
	}
	why += ": run scripts/quickfix.sh (it installs Debian's libquickfix-dev and builds the peer)"
	if os.Getenv("FXDESK_CONFORMANCE") == "require" {
		t.Fatal(why)
	}
	t.Skip(why + "; FXDESK_CONFORMANCE=require makes this a failure")
	return "", ""
}

// fixPeer is one running peer: commands go to its stdin, milestone lines come from its stdout.
type fixPeer struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}

	mu  sync.Mutex
	out []string // everything it printed, stdout and stderr, for a failure's log
}

func startFIXPeer(t *testing.T, mode string, args ...string) *fixPeer {
	t.Helper()
	bin, dict := fixPeerBinary(t)
	cmd := exec.Command(bin, append([]string{mode, "-dict", dict, "-store", t.TempDir()}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &fixPeer{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1024), done: make(chan struct{})}
	keep := func(l string) { p.mu.Lock(); p.out = append(p.out, l); p.mu.Unlock() }
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			keep("stderr: " + sc.Text())
		}
	}()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			keep(sc.Text())
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("--- fixpeer %s ---\n%s", mode, strings.Join(p.out, "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// send writes one command.
func (p *fixPeer) send(command string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, command+"\n"); err != nil {
		p.t.Fatalf("fixpeer %q: %v", command, err)
	}
}

// upTo reads lines until one starts with milestone and answers every line read, that one last.
// A FAIL line, the peer's exit or 30 s without the milestone fail the test.
func (p *fixPeer) upTo(milestone string) []string {
	p.t.Helper()
	var got []string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("fixpeer exited before %s", milestone)
			}
			if strings.HasPrefix(l, "FAIL") {
				p.t.Fatalf("fixpeer: %s", l)
			}
			got = append(got, l)
			if strings.HasPrefix(l, milestone) {
				return got
			}
		case <-deadline:
			p.t.Fatalf("fixpeer printed no %s within 30s (read %q)", milestone, got)
		}
	}
}

// quit logs the peer out and checks it exits cleanly: it exits non-zero on any reject or failure.
func (p *fixPeer) quit() {
	p.t.Helper()
	p.send("quit")
	p.upTo("DONE")
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.t.Fatal("fixpeer did not exit after DONE")
	}
	if !p.cmd.ProcessState.Success() {
		p.t.Fatalf("fixpeer exited %v", p.cmd.ProcessState)
	}
}

// milestone is the first of lines that starts with name, as its key=value fields (nil: none).
func milestone(lines []string, name string) map[string]string {
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != name {
			continue
		}
		out := map[string]string{}
		for _, kv := range f[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				out[k] = v
			}
		}
		return out
	}
	return nil
}

// resentOrders is the ClOrdIDs of the resent messages of type msgType among lines.
func resentOrders(lines []string, msgType string) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		if strings.HasPrefix(l, "RESENT ") && strings.Contains(l, " type="+msgType+" ") {
			out[milestone([]string{l}, "RESENT")["clOrdId"]]++
		}
	}
	return out
}

// The desk's initiator against a C++ QuickFIX venue: an EXTERNAL open fills at that venue's ask
// and is booked at it; the close's fill reaches the desk only through the desk's own
// ResendRequest (PossDupFlag=Y) and is booked once, at the venue's bid; a report lost after
// execution is found by the desk's OrderStatusRequest and adopted; asked for a resend, the desk
// resends its orders unchanged. No reject on either side.
func TestFIXConformanceDeskInitiatorWithCQuickFIX(t *testing.T) {
	t.Parallel()
	peer := startFIXPeer(t, "acceptor", "-sender", "FXVENUE", "-target", "FXDESK", "-bid", "1.09990", "-ask", "1.10010")
	port := milestone(peer.upTo("LISTENING"), "LISTENING")["port"]
	file := filepath.Join(t.TempDir(), "fix-session.cfg")
	cfg := "[DEFAULT]\nConnectionType=initiator\nReconnectInterval=1\nHeartBtInt=30\n\n[SESSION]\nBeginString=FIX.4.4\nSenderCompID=FXDESK\nTargetCompID=FXVENUE\nSocketConnectHost=127.0.0.1\nSocketConnectPort=" + port + "\n"
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newDeskEnv(t)
	feed := startFeedSim(t)
	d, _ := startExternalDesk(e, feed, []string{"FXDESK_VENUE=fix", "FXDESK_FIX_SESSION=" + file, "FXDESK_VENUE_INTERVAL=500ms"}, "web", "FXDESK_VENUE_TIMEOUT=1s")
	d.web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	peer.upTo("LOGON")
	tok, acct := d.externalTrader(2870, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fixconf-open"), http.StatusCreated, &o)
	open := strconv.FormatInt(o.Order.ID, 10)
	lines := peer.upTo("FILL")
	if ord, fill := milestone(lines, "ORDER"), milestone(lines, "FILL"); ord["clOrdId"] != open || ord["side"] != "1" || ord["qty"] == "" || !dec(ord["qty"]).Equal(dec("10000")) || fill["clOrdId"] != open {
		t.Fatalf("the venue saw %q; want order %s, a buy of 10000, filled", lines, open)
	}
	if o.Order.Status != "FILLED" || o.Order.FillPrice == nil || !dec(*o.Order.FillPrice).Equal(dec("1.1001")) || o.Position == nil {
		t.Fatalf("open = %+v; want FILLED at the C++ venue's ask 1.10010", o.Order)
	}

	peer.send("fill-resent")
	peer.upTo("ARMED")
	var c closeResp
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusOK, &c)
	lines = peer.upTo("RESEND_SERVED")
	fill, asked := milestone(lines, "FILL"), milestone(lines, "RESEND_REQUESTED")
	closeID := fill["clOrdId"]
	if !strings.HasPrefix(closeID, open+".c") || fill["via"] != "resend" || asked == nil || asked["begin"] != milestone(lines, "RESEND_SERVED")["seq"] {
		t.Fatalf("the close at the venue: %q; want a close of %s filled, its report sent only when the desk asked for it", lines, open)
	}
	if p := d.e.positionRow(o.Position.ID); c.Position.Status != "CLOSED" || p.Status != "CLOSED" || !p.ClosePrice.Decimal.Equal(dec("1.0999")) {
		t.Fatalf("close = %+v, row %+v; want CLOSED at the C++ venue's bid 1.09990", c, p)
	}

	// A report lost after execution: the desk's OrderStatusRequest finds the fill and the
	// reconciler adopts it.
	peer.send("lose-next")
	peer.upTo("ARMED")
	if a := send(d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.20", "fixconf-lost")); a.err != nil || a.code != http.StatusGatewayTimeout {
		t.Fatalf("order with its report lost = %d %s (%v); want 504", a.code, a.body, a.err)
	}
	var lostID int64
	if err := d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ? AND `requestNonce` = 'fixconf-lost'", acct).Scan(&lostID); err != nil {
		t.Fatal(err)
	}
	lost := strconv.FormatInt(lostID, 10)
	if st := milestone(peer.upTo("STATUS"), "STATUS"); st["clOrdId"] != lost || st["ordStatus"] != "2" {
		t.Fatalf("status answered %v; want order %s filled", st, lost)
	}
	eventually(t, 15*time.Second, 50*time.Millisecond, "the reconciler adopted the lost order", func() bool {
		r := d.e.orderRow(lostID)
		return r.Status == "FILLED" && r.FillPrice.Decimal.Equal(dec("1.1001"))
	})

	peer.send("resend-request")
	lines = peer.upTo("RESEND_OK")
	if got := resentOrders(lines, "D"); len(got) != 3 || got[open] != 1 || got[closeID] != 1 || got[lost] != 1 {
		t.Fatalf("the desk resent orders %v (%q); want %s, %s and %s once each", got, lines, open, closeID, lost)
	}

	// Each fill booked once: the resent report and the resent orders added nothing.
	var execs, deals int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_fix_execution` WHERE `clOrdId` IN (?, ?, ?)", open, closeID, lost).Scan(&execs); err != nil {
		t.Fatal(err)
	}
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `positionId` = ? AND `type` = 'PROFIT'", o.Position.ID).Scan(&deals); err != nil {
		t.Fatal(err)
	}
	if execs != 3 || deals != 1 || len(d.e.positionsOfOrder(lostID)) != 1 {
		t.Fatalf("%d executions journaled, %d close deals booked, %d positions of the lost order; want 3, 1 and 1", execs, deals, len(d.e.positionsOfOrder(lostID)))
	}
	d.checkLedgerBalanced(acct)
	d.web.stop(syscall.SIGTERM)
	peer.quit()
}

// The bundled FIX venue against a C++ QuickFIX taker: an order fills at the feed's ask; the
// venue's position report (a repeating group) reads cleanly; asked for a resend, the venue resends
// its execution report unchanged and gap-fills the rest; an order that reaches it only through
// its own ResendRequest executes once. No reject on either side.
func TestFIXConformanceBundledVenueWithCQuickFIX(t *testing.T) {
	t.Parallel()
	fixPeerBinary(t) // skips before anything starts
	feed := startFeedSim(t)
	if err := feed.control("quote", quoteBody("EURUSD", "1.10000", "1.10020")); err != nil {
		t.Fatal(err)
	}
	v := startFIXVenue(t, feed, "5ms")
	host, port, err := net.SplitHostPort(v.addr)
	if err != nil {
		t.Fatal(err)
	}
	peer := startFIXPeer(t, "initiator", "-sender", v.sender, "-target", v.target, "-host", host, "-port", port)
	peer.upTo("LOGON")

	peer.send("order 1 10000")
	fill := milestone(peer.upTo("FILL"), "FILL")
	if fill["clOrdId"] != "CONF-1" || !dec(fill["px"]).Equal(dec("1.1002")) || fill["qty"] != "10000" {
		t.Fatalf("fill %v; want CONF-1's 10000 at the ask 1.10020", fill)
	}
	peer.send("positions")
	if l := peer.upTo("POSITIONS"); l[len(l)-1] != "POSITIONS EURUSD=10000" {
		t.Fatalf("positions %q; want EURUSD long 10000", l)
	}

	peer.send("resend-request")
	lines := peer.upTo("RESEND_OK")
	if got := resentOrders(lines, "8"); len(got) != 1 || got["CONF-1"] != 1 || milestone(lines, "GAPFILL") == nil {
		t.Fatalf("the venue resent reports %v (%q); want CONF-1's once and its position answers gap-filled", got, lines)
	}

	peer.send("order-resent 2 10000")
	lines = peer.upTo("RESEND_SERVED")
	fill, asked := milestone(lines, "FILL"), milestone(lines, "RESEND_REQUESTED")
	if fill["clOrdId"] != "CONF-2" || !dec(fill["px"]).Equal(dec("1.1")) || asked == nil || asked["begin"] != milestone(lines, "RESEND_SERVED")["seq"] {
		t.Fatalf("the order sent only by a resend: %q; want the venue to ask for it and fill CONF-2 at the bid 1.10000", lines)
	}
	peer.send("positions")
	if l := peer.upTo("POSITIONS"); l[len(l)-1] != "POSITIONS none" {
		t.Fatalf("positions %q; want flat", l)
	}

	st := v.state()
	if len(st.Orders) != 2 || len(st.ordersOf("CONF-1")) != 1 || len(st.ordersOf("CONF-2")) != 1 || !st.net("EURUSD").IsZero() {
		t.Fatalf("venue %+v; want CONF-1 and CONF-2 executed once each, flat", st)
	}
	peer.quit()
}
