package e2e

import (
	"bufio"
	"database/sql"
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

	"github.com/shopspring/decimal"
)

// The FIX harness: a real fxdesk-fixvenue process per test, priced from the test's own
// fxdesk-feedsim, and the desk's session file pointing at it.

// fixVenue is one fxdesk-fixvenue process.
type fixVenue struct {
	t       *testing.T
	cmd     *exec.Cmd
	done    chan struct{}
	addr    string // host:port the desk connects to
	control string // http://CONTROL-ADDR
	file    string // the desk's session file
	// sender and target are the desk's SenderCompID and TargetCompID on the session.
	sender, target string

	mu  sync.Mutex
	log []string
}

// startFIXVenue starts a FIX venue priced by feed with latency (e.g. "20ms") and writes the
// desk's session file for it.
func startFIXVenue(t *testing.T, feed *feedSim, latency string) *fixVenue {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "fxdesk-fixvenue"), "-addr", "127.0.0.1:0", "-control-addr", "127.0.0.1:0",
		"-latency", latency, "-feed-control", feed.base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
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
	v := &fixVenue{t: t, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			v.mu.Lock()
			v.log = append(v.log, sc.Text())
			v.mu.Unlock()
		}
		cmd.Wait()
		close(v.done)
	}()
	t.Cleanup(func() {
		v.cmd.Process.Kill()
		<-v.done
		if t.Failed() {
			v.mu.Lock()
			t.Logf("--- fixvenue log ---\n%s", strings.Join(v.log, "\n"))
			v.mu.Unlock()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("fixvenue printed nothing: %v", err)
	}
	go io.Copy(io.Discard, out)
	fields := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, val, ok := strings.Cut(f, "="); ok {
			fields[k] = val
		}
	}
	if !strings.HasPrefix(line, "fixvenue listening ") || fields["addr"] == "" || fields["control"] == "" {
		t.Fatalf("fixvenue printed %q", line)
	}
	v.addr, v.control, v.sender, v.target = fields["addr"], fields["control"], fields["sender"], fields["target"]
	host, port, _ := net.SplitHostPort(v.addr)
	v.file = filepath.Join(t.TempDir(), "fix-session.cfg")
	cfg := fmt.Sprintf("[DEFAULT]\nConnectionType=initiator\nReconnectInterval=1\nHeartBtInt=30\n\n[SESSION]\nBeginString=FIX.4.4\nSenderCompID=%s\nTargetCompID=%s\nSocketConnectHost=%s\nSocketConnectPort=%s\n",
		fields["sender"], fields["target"], host, port)
	if err := os.WriteFile(v.file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return v
}

// logHas is whether the venue logged a line containing text.
func (v *fixVenue) logHas(text string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, l := range v.log {
		if strings.Contains(l, text) {
			return true
		}
	}
	return false
}

// env is what a web process needs to trade over this session.
func (v *fixVenue) env() []string {
	return []string{"FXDESK_VENUE=fix", "FXDESK_FIX_SESSION=" + v.file, "FXDESK_VENUE_INTERVAL=500ms"}
}

// fixState is GET /control/state.
type fixState struct {
	LoggedOn  bool       `json:"loggedOn"`
	Orders    []fixOrder `json:"orders"`
	Held      []string   `json:"held"`
	Positions []struct {
		Symbol string          `json:"symbol"`
		Units  decimal.Decimal `json:"units"`
	} `json:"positions"`
}

type fixOrder struct {
	ClOrdID string          `json:"clOrdId"`
	Symbol  string          `json:"symbol"`
	Side    string          `json:"side"`
	Qty     decimal.Decimal `json:"qty"`
	CumQty  decimal.Decimal `json:"cumQty"`
	AvgPx   decimal.Decimal `json:"avgPx"`
	Status  string          `json:"status"`
	SeqNums []int           `json:"seqNums"` // the messages that carried it (a resend keeps its number)
}

func (s fixState) ordersOf(clOrdID string) []fixOrder {
	var out []fixOrder
	for _, o := range s.Orders {
		if o.ClOrdID == clOrdID {
			out = append(out, o)
		}
	}
	return out
}

func (s fixState) net(symbol string) decimal.Decimal {
	for _, p := range s.Positions {
		if p.Symbol == symbol {
			return p.Units
		}
	}
	return decimal.Zero
}

func (v *fixVenue) state() fixState {
	v.t.Helper()
	return controlState[fixState](v.t, v.control, "fixvenue")
}

func (v *fixVenue) post(what, body string) {
	v.t.Helper()
	resp, err := http.Post(v.control+"/control/"+what, "application/json", strings.NewReader(body))
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		v.t.Fatalf("fixvenue control/%s %s = %d %s", what, body, resp.StatusCode, b)
	}
}

// fixDesk is a desk whose holder trades over a FIX session with a fixVenue.
type fixDesk struct {
	*tradingDesk
	venue *fixVenue
	env   []string
}

// newFIXDesk starts a feed simulator, a FIX venue priced by it and one holder web process
// trading over the session; env entries override the web process's environment.
func newFIXDesk(t *testing.T, env ...string) *fixDesk {
	t.Helper()
	e := newDeskEnv(t)
	feed := startFeedSim(t)
	v := startFIXVenue(t, feed, "20ms")
	td, webEnv := startExternalDesk(e, feed, v.env(), "web", env...)
	d := &fixDesk{tradingDesk: td, venue: v, env: webEnv}
	d.web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	return d
}

// seqNums is the desk's stored (outgoing, incoming) sequence numbers: the number a new holder
// resumes sending at (a reservation past every number sent; the exact next one after a clean
// stop) and the next one it expects (written a few ms after it moves).
func (d *fixDesk) seqNums() (int, int) {
	d.e.t.Helper()
	var out, in int
	if err := d.e.sql.QueryRow("SELECT `outgoing_seqnum`, `incoming_seqnum` FROM `fx_fix_sessions`").Scan(&out, &in); err != nil {
		d.e.t.Fatal(err)
	}
	return out, in
}

// tradeOf is the public id of the desk trade ClOrdID cid opened at the venue: its first opening
// execution in the FIX journal ("" when none).
func (d *fixDesk) tradeOf(cid string) string {
	d.e.t.Helper()
	var id sql.NullInt64
	if err := d.e.sql.QueryRow("SELECT MIN(`id`) FROM `fx_fix_execution` WHERE `clOrdId` = ?", cid).Scan(&id); err != nil {
		d.e.t.Fatal(err)
	}
	if !id.Valid {
		return ""
	}
	return strconv.FormatInt(id.Int64, 10)
}
