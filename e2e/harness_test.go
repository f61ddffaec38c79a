package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"fxdesk/internal/testkit/poll"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/lease"
	"fxdesk/internal/redisname"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// binDir holds the real binaries, built once for the package.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "fxdesk-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// go test puts its own toolchain's bin first on the test's PATH.
		goBin := "go"
		for _, b := range []struct{ name, pkg string }{{"fxdesk-web", "./cmd/web"}, {"fxdesk-cron", "./cmd/cron"}, {"fxdesk-feedsim", "./cmd/feedsim"}, {"fxdesk-venuesim", "./cmd/venuesim"}, {"fxdesk-fixvenue", "./cmd/fixvenue"}, {"fxdesk-idp", "./cmd/idp"}} {
			cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, b.name), b.pkg)
			cmd.Dir = ".."
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.name, err, out)
				return 1
			}
		}
		binDir = dir
		return m.Run()
	}())
}

// deskEnv is one isolated install: its own database and its own Redis server, so tests that all
// use the default Redis names can run side by side — or, from newDeskEnvOn, a Redis server
// shared with other installs under names of its own.
type deskEnv struct {
	t     *testing.T
	db    *dbtest.Database
	redis *dbtest.Redis
	names redisname.Names // FXDESK_REDIS_PREFIX of every process of the install
	sql   *sql.DB
	rdb   *redis.Client
	// mysqlDSN, when set, is the FXDESK_MYSQL_DSN every process of the install gets instead of
	// db.DSN: an operator's DSN with options of its own (a session time_zone).
	mysqlDSN string

	adminOnce sync.Once
	admin     string

	approverOnce sync.Once
	approver     string
}

func newDeskEnv(t *testing.T) *deskEnv {
	t.Helper()
	r, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return newDeskEnvOn(t, r, redisname.Names{})
}

// newDeskEnvOn is an install with its own database on the Redis server r, under names.
func newDeskEnvOn(t *testing.T, r *dbtest.Redis, names redisname.Names) *deskEnv {
	t.Helper()
	d, err := dbtest.NewDatabase("e2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	db, err := store.Connect(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	return &deskEnv{t: t, db: d, redis: r, names: names, sql: db, rdb: rdb}
}

// env is the base environment of a process of this install; extra entries override it.
func (e *deskEnv) env(extra ...string) []string {
	base := []string{
		"PATH=" + os.Getenv("PATH"),
		"FXDESK_MYSQL_DSN=" + cmp.Or(e.mysqlDSN, e.db.DSN),
		"FXDESK_REDIS_URL=redis://" + e.redis.Addr + "/0",
		"FXDESK_REDIS_PREFIX=" + e.names.Prefix(),
		"FXDESK_HTTP_ADDR=127.0.0.1:0",
		"FXDESK_SIM_ADDR=127.0.0.1:0",
		"FXDESK_CALENDAR=always-open",
		"FXDESK_HOSTNAME=box",
		"FXDESK_LEASE_TTL=3s",
		"FXDESK_LEASE_FENCE=1s",
		"LOG_FORMAT=json",
		"LOG_LEVEL=debug",
	}
	return append(base, extra...)
}

// unlimitedRates switches the per-token and per-address rate limits off, for tests and
// benchmarks that drive one token (from one address) harder than any trader may: they measure
// the desk behind the front door, not the door.
var unlimitedRates = []string{"FXDESK_RATE_PER_TOKEN=0", "FXDESK_RATE_PER_ADDR=0"}

type logLine map[string]any

func (l logLine) msg() string   { s, _ := l["msg"].(string); return s }
func (l logLine) level() string { s, _ := l["level"].(string); return s }

// proc is a running fxdesk binary whose JSON log lines the test can wait on.
type proc struct {
	t    *testing.T
	env  *deskEnv
	name string
	cmd  *exec.Cmd
	addr string

	stdout syncBuffer // what it printed on stdout (its logs are on stderr)

	mu     sync.Mutex
	lines  []logLine
	raw    []string
	change chan struct{} // closed and replaced on every new line and at exit
	exited bool
	done   chan struct{}
}

// start runs binary with env and waits until its HTTP server listens.
func (e *deskEnv) start(name, binary string, env ...string) *proc {
	t := e.t
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, binary))
	cmd.Env = e.env(env...)
	// A test binary killed by its timeout must not leave desk processes behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, env: e, name: name, cmd: cmd, change: make(chan struct{}), done: make(chan struct{})}
	cmd.Stdout = &p.stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stderr)
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("--- %s (pid %d) log ---\n%s", p.name, p.pid(), strings.Join(p.rawLines(), "\n"))
		}
	})
	l := p.waitLog(30*time.Second, func(l logLine) bool { return l.msg() == "http server listening" })
	p.addr, _ = l["addr"].(string)
	return p
}

func (p *proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			l = logLine{"msg": sc.Text()}
		}
		p.mu.Lock()
		p.lines = append(p.lines, l)
		p.raw = append(p.raw, sc.Text())
		close(p.change)
		p.change = make(chan struct{})
		p.mu.Unlock()
	}
	p.cmd.Wait()
	p.mu.Lock()
	p.exited = true
	close(p.change)
	p.change = make(chan struct{})
	p.mu.Unlock()
	close(p.done)
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// syncBuffer is a bytes.Buffer the process's output copier and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (p *proc) rawLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.raw...)
}

// findLog returns the first line read so far that matches pred, if any. A line the process wrote
// may not have been read yet: to see one, waitLog; to prove one absent, first wait for a line the
// process writes after it would have.
func (p *proc) findLog(pred func(logLine) bool) (logLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if pred(l) {
			return l, true
		}
	}
	return nil, false
}

// countLog counts the lines read so far that match pred (see findLog on lines not yet read).
func (p *proc) countLog(pred func(logLine) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if pred(l) {
			n++
		}
	}
	return n
}

// waitLog waits for a line matching pred, failing the test at the deadline or if the process
// exits first.
func (p *proc) waitLog(timeout time.Duration, pred func(logLine) bool) logLine {
	p.t.Helper()
	l, _ := p.waitNth(timeout, 0, 1, pred)
	return l
}

// lineCount is how many lines have been read so far: an index for waitNth and matching. A line
// the process writes after this call lands at or past it; so may one it wrote just before (the
// reader can lag behind the pipe), so a wait that must exclude earlier lines anchors on a line
// the process can only have written later instead.
func (p *proc) lineCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// waitNth waits for the nth (from 1) line matching pred at index from or later and returns it
// with its index, failing the test at the deadline or if the process exits first.
func (p *proc) waitNth(timeout time.Duration, from, n int, pred func(logLine) bool) (logLine, int) {
	p.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := from
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if pred(p.lines[seen]) {
				if n--; n == 0 {
					l, i := p.lines[seen], seen
					p.mu.Unlock()
					return l, i
				}
			}
		}
		exited, change := p.exited, p.change
		p.mu.Unlock()
		if exited {
			p.t.Fatalf("%s exited before the awaited log line", p.name)
		}
		select {
		case <-change:
		case <-deadline.C:
			p.t.Fatalf("%s: awaited log line did not appear within %s", p.name, timeout)
		}
	}
}

// matching returns the lines read so far at index from or later that match pred.
func (p *proc) matching(from int, pred func(logLine) bool) []logLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []logLine
	for _, l := range p.lines[min(from, len(p.lines)):] {
		if pred(l) {
			out = append(out, l)
		}
	}
	return out
}

// lastLog returns the last line read so far that matches pred, if any.
func (p *proc) lastLog(pred func(logLine) bool) (logLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if pred(p.lines[i]) {
			return p.lines[i], true
		}
	}
	return nil, false
}

func msgIs(m string) func(logLine) bool { return func(l logLine) bool { return l.msg() == m } }
func msgHas(m string) func(logLine) bool {
	return func(l logLine) bool { return strings.Contains(l.msg(), m) }
}

// signal sends sig and, for terminating signals, waits for the exit.
func (p *proc) stop(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("%s did not exit after %v", p.name, sig)
	}
}

// getAs fetches path from the process with a bearer token (none when token is empty) and
// decodes the JSON body into v.
func (p *proc) getAs(token, path string, v any) int {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			p.t.Fatalf("decode %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

type deskStatus struct {
	Process     string `json:"process"`
	Role        string `json:"role"`
	Reason      string `json:"reason"`
	ThisProcess string `json:"thisProcess"`
	Takeover    string `json:"takeover"`
	Lease       *struct {
		Trusted     bool   `json:"holdsLease"`
		Term        int64  `json:"term"`
		TrustLeftMs int64  `json:"trustLeftMs"`
		Lost        bool   `json:"lost"`
		FailOpen    bool   `json:"failOpen"`
		Arbiter     string `json:"arbiter"`
		// LastRenewTookMs is how long the last renew took; nil before the first.
		LastRenewTookMs *float64 `json:"lastRenewTookMs"`
	} `json:"lease"`
	Holder struct {
		Row *struct {
			Hostname    string `json:"hostname"`
			PID         int    `json:"pid"`
			Term        int64  `json:"term"`
			Live        bool   `json:"live"`
			ExpiresInMs int64  `json:"expiresInMs"`
		} `json:"row"`
		Redis string `json:"redis"`
		Agree bool   `json:"agree"`
	} `json:"holder"`
	Feed *struct {
		Connected bool `json:"connected"`
	} `json:"feed"`
	Mirror *struct {
		Mode string `json:"mode"`
	} `json:"mirror"`
	Risk *struct {
		Loaded bool `json:"loaded"`
	} `json:"risk"`
	Commits *struct {
		Batches *uint64 `json:"batches"`
	} `json:"commits"` // the holder's group commit
	Jobs   []struct{ Name string } `json:"jobs"`
	Alerts []any                   `json:"alerts"`
}

func (p *proc) desk() deskStatus {
	p.t.Helper()
	var s deskStatus
	if code := p.getAs(p.env.adminToken(), "/api/admin/fx/desk", &s); code != http.StatusOK {
		p.t.Fatalf("%s desk status = %d", p.name, code)
	}
	return s
}

// row reads the lease row the way operators do.
func (e *deskEnv) row() (lease.Holder, bool) {
	e.t.Helper()
	h, _, ok, err := lease.ReadRow(context.Background(), e.sql, lease.Key)
	if err != nil {
		e.t.Fatal(err)
	}
	return h, ok
}

func (e *deskEnv) redisValue() string {
	v, err := e.rdb.Get(context.Background(), e.names.EngineLease(lease.Key)).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// eventually polls cond every interval until it holds, failing with what at the deadline. It is
// for conditions no process announces (a database clock passing a time, a counter another
// process moves); everything that logs or streams is waited on through that signal instead.
func eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, timeout, interval, what, cond)
}

// guardedProbe gives a holder guarded work that passes the gate on a short timer, whatever else
// it runs: the quote mirror publisher (armed by CRON_MODE=off) every 100 ms. A test watching a
// holder lose the lease reads that work's drops (gateDropped, the gate's warning) as the proof
// that its guarded work stopped.
var guardedProbe = []string{"CRON_MODE=off", "FXDESK_MIRROR_INTERVAL=100ms"}

// gateDropped is fxdesk_gate_dropped_total{at="gate"} summed over every kind of work: guarded
// work the gate turned away. The gate counts every drop, where its log names only the first of a
// periodic kind's run.
func (p *proc) gateDropped() float64 {
	p.t.Helper()
	var n float64
	for _, line := range strings.Split(p.metrics(), "\n") {
		if !strings.HasPrefix(line, `fxdesk_gate_dropped_total{at="gate",`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			p.t.Fatalf("%s: /metrics line %q: %v", p.name, line, err)
		}
		n += v
	}
	return n
}

// waitRowGrant waits until the lease row has granted p the lease — at boot (arbiter mysql), or at
// a renew that moved a Redis grant back to the row (MySQL did not answer p's boot claim in time)
// — and returns the row's term. A test that reasons about terms starts from it: a boot claim
// under load may have gone to Redis at term 0, or taken a term past the one the test expects.
func (p *proc) waitRowGrant(timeout time.Duration) int64 {
	p.t.Helper()
	l := p.waitLog(timeout, func(l logLine) bool {
		return l.msg() == "engine lease acquired" && l["arbiter"] == "mysql" || l.msg() == "engine lease row reachable again; the row decides"
	})
	term, ok := l["term"].(float64)
	if !ok || term < 1 {
		p.t.Fatalf("%s: the row's grant names no term: %v", p.name, l)
	}
	return int64(term)
}

// waitRowExpired polls the database clock until the lease row has expired. There is no event for
// time passing on another machine's clock.
func (e *deskEnv) waitRowExpired(timeout time.Duration) {
	e.t.Helper()
	eventually(e.t, timeout, 50*time.Millisecond, "lease row expired", func() bool {
		h, ok := e.row()
		return ok && !h.Live
	})
}

// runOnce runs a binary to completion and returns its combined output.
func runOnce(env []string, binary string, args ...string) (string, error) {
	return runOnceWithin(30*time.Second, env, binary, args...)
}

// runOnceWithin is runOnce with its own deadline, for a run that works through a benchmark's
// whole book.
func runOnceWithin(timeout time.Duration, env []string, binary string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, binary), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// issueToken runs `fxdesk-web token create` against this install's database and returns the
// token from the last line of its output: a trader's, or with admin a superadmin's.
func (e *deskEnv) issueToken(user int64, admin bool) string {
	e.t.Helper()
	if admin {
		return e.createToken(user, "--admin")
	}
	return e.createToken(user)
}

// issueRoleToken issues user a token of a staff role (viewer, support, dealer, risk, finance,
// superadmin).
func (e *deskEnv) issueRoleToken(user int64, role string) string {
	e.t.Helper()
	return e.createToken(user, "--role", role)
}

// createToken runs `fxdesk-web token create --user user` with args and returns the token.
func (e *deskEnv) createToken(user int64, args ...string) string {
	e.t.Helper()
	args = append([]string{"token", "create", "--user", strconv.FormatInt(user, 10)}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "fxdesk-web"), args...)
	cmd.Env = e.env("LOG_LEVEL=warn")
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("token create: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	tok := strings.TrimSpace(lines[len(lines)-1])
	if !strings.HasPrefix(tok, "fxd_") {
		e.t.Fatalf("token create printed %q on its last line", tok)
	}
	return tok
}

// approverToken is a finance token of user 2 for the install, issued on first use: the second
// pair of eyes on the admin's deposits above the four-eyes threshold (tradingDesk.fund).
func (e *deskEnv) approverToken() string {
	e.approverOnce.Do(func() { e.approver = e.issueRoleToken(2, "finance") })
	return e.approver
}

// adminToken is one admin token (user 1) for the install, issued on first use.
func (e *deskEnv) adminToken() string {
	e.adminOnce.Do(func() { e.admin = e.issueToken(1, true) })
	return e.admin
}

// authorize adds the install's admin token to req.
func (p *proc) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+p.env.adminToken())
}
