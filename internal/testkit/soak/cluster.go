package soak

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"fxdesk/internal/auth"
	"fxdesk/internal/lease"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/soak/invariant"
	"fxdesk/internal/testkit/tcpproxy"
)

// Lease timing of the soaked desk: short, so kills and stops turn the lease over within seconds.
const (
	leaseTTL   = 3 * time.Second
	leaseFence = 1 * time.Second
	hostname   = "soakbox"
)

// cluster is one isolated install: its database, its redis-server, the proxies every desk
// process reaches them through, and the processes.
type cluster struct {
	dir    string // run folder: logs, journal, samples
	binDir string
	dbName string
	direct *sql.DB // the soak's own connection, never through a proxy
	rdb    redis.UniversalClient
	redis  *dbtest.Redis   // nil on Sentinel
	mysqlP *tcpproxy.Proxy // in front of the MySQL server, or of HAProxy's endpoint on Galera
	redisP *tcpproxy.Proxy // nil on Sentinel
	// server is the MySQL server the database lives on: the shared MariaDB, or HAProxy's
	// endpoint on Galera.
	server *mysql.Config
	// ha is the Galera and Sentinel clusters of a cluster soak (nil on the single servers).
	ha *haCluster
	// staff is one token per staff role the soak acts with, each a platform user of its own
	// (staffUsers): the admin lane's actions each with its role's, the viewer's for the soak's own
	// reads (the sampler's /desk, the flood's /metrics).
	staff map[auth.Role]string
	// approver is a second finance user's token: it approves the money requests the first one
	// asks for above the four-eyes threshold (docs/identity.md, «Four eyes on client money»).
	approver string
	// attacker is the token of the front-door faults' attacker, a platform user of its own.
	attacker string
	// host is the host platform's sign-in, whose tokens half the traders trade with.
	host *hostSignIn
	// scope is what the checks judge row by row: the whole database, or over a pre-filled
	// history the soak's own accounts and what was written after the fill (prefill.go).
	scope invariant.Scope
	// feed is the desk's primary price source, a feed simulator (cmd/feedsim) every web process
	// streams from: the venue prices from it too, so a gap moves the desk and the venue alike.
	// backup is the second source, another cmd/feedsim started with the same market seed, so the
	// two quote one market (docs/soak.md, «The price lane»). market is a third, never faulted,
	// that the venue prices from: the price lane's faults are on the desk's sources, not on the
	// market the venue fills at (a silent primary would halt the venue's prices too).
	feed, backup, market *sim
	// venue is the one venue both web processes send EXTERNAL orders to: the REST venue
	// simulator (cmd/venuesim) or the FIX venue (cmd/fixvenue), by the run's venue lane.
	venue venueLane

	mu        sync.Mutex
	procs     []*proc // every web and cron process started, dead ones included
	seq       int
	closeOnce sync.Once
}

// proc is one fxdesk-web or fxdesk-cron process.
type proc struct {
	name string
	kind string // "web" or "cron"
	cmd  *exec.Cmd
	pid  int
	addr string // HTTP
	done chan struct{}

	mu      sync.Mutex
	stopped bool // SIGSTOPped
	exited  bool
	// halts are when the process stopped being able to act: each SIGSTOP, and the SIGKILL or
	// SIGTERM that ended it. A trust window cannot be used past one.
	halts []time.Time
	// stops are its SIGSTOPs, each with the SIGCONT (or the kill) that ended it, kept as they are
	// sent: a check made before the fault that stopped it is noted reads them.
	stops []invariant.Stop
}

// resumed ends the open stop, if any, at t. p.mu is held.
func (p *proc) resumed(t time.Time) {
	if n := len(p.stops); n > 0 && p.stops[n-1].Resumed.IsZero() {
		p.stops[n-1].Resumed = t
	}
}

func (p *proc) halted(t time.Time) {
	p.mu.Lock()
	p.halts = append(p.halts, t)
	p.mu.Unlock()
}

// record is p as the checks read it, with its halts so far.
func (p *proc) record() *invariant.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &invariant.Process{Name: p.name, PID: p.pid, Halts: slices.Clone(p.halts), Stops: slices.Clone(p.stops)}
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) isStopped() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.stopped }

func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	switch sig {
	case syscall.SIGSTOP:
		now := time.Now()
		p.halts = append(p.halts, now)
		if p.stopped {
			break // already stopped: the open stop goes on
		}
		p.stops = append(p.stops, invariant.Stop{At: now})
		p.stopped = true
	case syscall.SIGCONT:
		p.resumed(time.Now())
		p.stopped = false
	}
	p.mu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// kill sends sig and waits for the exit (SIGKILL after 10 s).
func (p *proc) kill(sig syscall.Signal) {
	if !p.alive() {
		return
	}
	now := time.Now()
	p.halted(now)
	p.mu.Lock()
	p.resumed(now) // a stopped process killed never acts again
	p.mu.Unlock()
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func goBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	//lint:ignore SA1019 `make soak` runs $(GO) run, whose go need not be on PATH; the toolchain that built the soak is on this machine
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// binaries are what a soak on venue lane builds: the desk, the feed simulator and the lane's
// venue.
func binaries(lane string) []struct{ name, pkg string } {
	venue := struct{ name, pkg string }{"fxdesk-venuesim", "./cmd/venuesim"}
	if lane == invariant.LaneFIX {
		venue = struct{ name, pkg string }{"fxdesk-fixvenue", "./cmd/fixvenue"}
	}
	return []struct{ name, pkg string }{{"fxdesk-web", "./cmd/web"}, {"fxdesk-cron", "./cmd/cron"}, {"fxdesk-feedsim", "./cmd/feedsim"}, venue}
}

// binaryNames are binaries(lane)'s names, for the run log.
func binaryNames(lane string) string {
	var out []string
	for _, b := range binaries(lane) {
		out = append(out, b.name)
	}
	return strings.Join(out, ", ")
}

// buildBinaries builds binaries(lane) from the working tree into dir.
func buildBinaries(dir, lane string) error {
	for _, b := range binaries(lane) {
		cmd := exec.Command(goBinary(), "build", "-o", filepath.Join(dir, b.name), b.pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", b.name, err, out)
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// handedOut are the ports freeAddr has given out in this run. The kernel hands a port just
// closed to the next listener that asks, so two calls in a row can name the same port: a web
// process's HTTP address and its simulator's once did, and the replacement died at start.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// freeAddr is a loopback address no listener holds now and this run has not handed out before.
func freeAddr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 100 {
		p, err := freePort()
		if err != nil {
			return "", err
		}
		if !handedOut.ports[p] {
			handedOut.ports[p] = true
			return "127.0.0.1:" + strconv.Itoa(p), nil
		}
	}
	return "", errors.New("no loopback port this run has not used yet")
}

// newCluster creates the database fxdesk_soak_<random>, a private redis-server, the two
// proxies, the feed simulator and lane's venue, and migrates the database with the real
// binary. With ha, the database is created on the Galera cluster through HAProxy and the desk's
// Redis is the Sentinels' primary (ha.onGalera, ha.onSentinel say which).
func newCluster(ctx context.Context, dir, binDir string, ha *haCluster, lane string, seed uint64, prefill string, logf func(string, ...any)) (*cluster, error) {
	c := &cluster{dir: dir, binDir: binDir, dbName: "fxdesk_soak_" + randomHex(4), ha: ha}
	srv, err := mysql.ParseDSN(dbtest.ServerDSN())
	if err != nil {
		return nil, err
	}
	if ha != nil && ha.onGalera {
		if srv, err = ha.serverDSN(); err != nil {
			return nil, err
		}
	}
	c.server = srv
	admin, err := sql.Open("mysql", srv.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+c.dbName+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return nil, fmt.Errorf("create database (MariaDB on 127.0.0.1:3306; make soak starts it): %w", err)
	}
	if ha == nil || !ha.onSentinel {
		if c.redis, err = dbtest.StartRedis(); err != nil {
			c.dropDatabase()
			return nil, err
		}
		if c.redisP, err = tcpproxy.Start(c.redis.Addr); err != nil {
			c.close()
			return nil, err
		}
		c.rdb = redis.NewClient(&redis.Options{Addr: c.redis.Addr})
	} else if c.rdb, err = store.OpenRedis(ha.url); err != nil {
		c.close()
		return nil, err
	}
	if c.mysqlP, err = tcpproxy.Start(srv.Addr); err != nil {
		c.close()
		return nil, err
	}
	cfg := *srv
	cfg.DBName = c.dbName
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if ha != nil && ha.onGalera {
		// The soak's own reads (the checks' snapshot, the lease row) wait for what the cluster
		// committed, as the desk's do; the driver sets unknown parameters as session variables.
		cfg.Params = maps.Clone(cfg.Params)
		cfg.Params["wsrep_sync_wait"] = strconv.Itoa(store.GaleraSyncWait)
	}
	if c.direct, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		c.close()
		return nil, err
	}
	if c.host, err = startHostSignIn(); err != nil {
		c.close()
		return nil, err
	}
	if c.feed, err = startFeed(dir, binDir, "feedsim", marketSeedOf(seed)); err != nil {
		c.close()
		return nil, err
	}
	if c.backup, err = startFeed(dir, binDir, "feedsim-backup", marketSeedOf(seed)); err != nil {
		c.close()
		return nil, err
	}
	if c.market, err = startFeed(dir, binDir, "feedsim-market", marketSeedOf(seed)); err != nil {
		c.close()
		return nil, err
	}
	balance := "1000000"
	if prefill != "none" {
		balance = "20000000"
	}
	venue, err := startVenueLane(lane, dir, binDir, c.market, fixVenueKnobsOf(seed), balance)
	if err != nil {
		c.close()
		return nil, err
	}
	c.venue = venue
	if out, err := c.runOnce(ctx, "fxdesk-web", "migrate"); err != nil {
		c.close()
		return nil, fmt.Errorf("migrate: %v\n%s", err, out)
	}
	// The history goes in before anything of the soak's own: its accounts, audit rows and days
	// end where the soak's begin.
	if c.scope, err = fillHistory(ctx, cfg.FormatDSN(), c.direct, prefill, seed, logf); err != nil {
		c.close()
		return nil, err
	}
	c.staff = map[auth.Role]string{}
	for role, user := range staffUsers {
		if c.staff[role], err = c.issueToken(ctx, user, role); err != nil {
			c.close()
			return nil, err
		}
	}
	if c.approver, err = c.issueToken(ctx, approverUser, auth.RoleFinance); err != nil {
		c.close()
		return nil, err
	}
	if c.attacker, err = c.issueToken(ctx, invariant.AttackerUser, auth.RoleTrader); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// dsn is the desk's database DSN, through the MySQL proxy.
func (c *cluster) dsn() string {
	cfg := c.server.Clone()
	cfg.DBName = c.dbName
	cfg.Addr = c.mysqlP.Addr()
	cfg.Net = "tcp"
	return cfg.FormatDSN()
}

// redisURL is the desk's Redis: through the Redis proxy, or the Sentinels' URL.
func (c *cluster) redisURL() string {
	if c.redisP == nil {
		return c.ha.url
	}
	return "redis://" + c.redisP.Addr() + "/0"
}

// clusterSecret signs the requests the soak's follower forwards to the holder; it guards nothing
// but the soak's own loopback processes.
const clusterSecret = "e4da3b7fbbce2345d7772b0674a318d5a1b2c3d4e5f60718293a4b5c6d7e8f90" // as openssl rand -hex 32 prints

// env is a desk process's environment; extra entries override it.
func (c *cluster) env(extra ...string) []string {
	base := []string{
		"PATH=" + os.Getenv("PATH"),
		"FXDESK_MYSQL_DSN=" + c.dsn(),
		"FXDESK_REDIS_URL=" + c.redisURL(),
		"FXDESK_CALENDAR=always-open",
		// The two feeds, primary first; FXDESK_FEED stays unset (the desk refuses both).
		"FXDESK_PRICE_SOURCES=" + c.priceSources(),
		"FXDESK_HOSTNAME=" + hostname,
		"FXDESK_LEASE_TTL=" + leaseTTL.String(),
		"FXDESK_LEASE_FENCE=" + leaseFence.String(),
		"FXDESK_MIRROR_INTERVAL=" + invariant.MirrorInterval.String(),
		"FXDESK_WEB_INSTANCES=2",
		"FXDESK_CLUSTER_SECRET=" + clusterSecret, // two web processes: followers forward to the holder
		"GOMAXPROCS=1",                           // docs/operations.md "Sizing": a web process sharing a small machine with MariaDB
		"FXDESK_TRUSTED_PROXIES=127.0.0.1/32",
		"FXDESK_RATE_PER_TOKEN=" + strconv.Itoa(invariant.RatePerToken),
		"FXDESK_STREAMS_PER_TOKEN=" + strconv.Itoa(invariant.StreamsPerToken),
		"FXDESK_BODY_LIMIT_BYTES=" + strconv.Itoa(invariant.BodyLimit),
		"LOG_FORMAT=json",
		"LOG_LEVEL=info",
	}
	if c.host != nil {
		base = append(base, c.host.env()...)
	}
	if c.redisP == nil {
		// On Sentinel the relay records a batch only once the replica holds it: a failover must
		// not lose events the Redis Stream invariant expects (docs/events.md).
		base = append(base, "FXDESK_EVENTS_STREAM_REPLICAS=1")
	}
	return append(base, extra...)
}

// runOnce runs a binary to completion (one-off commands) and returns its combined output.
func (c *cluster) runOnce(ctx context.Context, binary string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, binary), args...)
	cmd.Env = c.env("LOG_LEVEL=warn")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// staffUsers are the soak's desk staff: one platform user per staff role it acts with. No
// superadmin: nothing the soak does needs every permission, and a role missing one is what the
// refused-request lane shows.
var staffUsers = map[auth.Role]int64{auth.RoleViewer: 11, auth.RoleSupport: 12, auth.RoleDealer: 13, auth.RoleRisk: 14, auth.RoleFinance: 15}

// approverUser is the second finance user, who approves what the first asks for.
const approverUser = 16

// issueToken runs `fxdesk-web token create` for user with role (a trader's with the full scopes
// unless extra names others; extra adds flags such as --expires) and returns the token from its
// last line.
func (c *cluster) issueToken(ctx context.Context, user int64, role auth.Role, extra ...string) (string, error) {
	args := append([]string{"token", "create", "--user", strconv.FormatInt(user, 10), "--role", string(role), "--label", "soak"}, extra...)
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "fxdesk-web"), args...)
	cmd.Env = c.env("LOG_LEVEL=warn")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("token create: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	tok := strings.TrimSpace(lines[len(lines)-1])
	if !strings.HasPrefix(tok, "fxd_") {
		return "", fmt.Errorf("token create printed %q on its last line", tok)
	}
	return tok, nil
}

// tokenOf is the one token issued to user, as `fxdesk-web token list` shows it, read on the
// soak's own connection.
func (c *cluster) tokenOf(ctx context.Context, user int64) (auth.Token, error) {
	ts, err := auth.List(ctx, c.direct, auth.ListFilter{UserID: user})
	if err != nil {
		return auth.Token{}, err
	}
	if len(ts) != 1 {
		return auth.Token{}, fmt.Errorf("user %d holds %d tokens, not one", user, len(ts))
	}
	return ts[0], nil
}

// revokeToken runs `fxdesk-web token revoke --id N` on user's one token until its row shows it
// revoked (the command reaches MySQL through the proxy a cut closes), and returns when the soak
// saw the revocation committed: no process takes the token from auth.CacheFor after that.
func (c *cluster) revokeToken(ctx context.Context, user int64) (time.Time, error) {
	var last error
	for ctx.Err() == nil {
		t, err := c.tokenOf(ctx, user)
		switch {
		case err == nil && t.RevokedAt != nil:
			return time.Now(), nil
		case err == nil:
			if out, err := c.runOnce(ctx, "fxdesk-web", "token", "revoke", "--id", strconv.FormatInt(t.ID, 10)); err != nil {
				last = fmt.Errorf("token revoke --id %d: %v: %s", t.ID, err, strings.TrimSpace(out))
				sleepCtx(ctx, 500*time.Millisecond) // a cut ends unannounced
			}
		default:
			last = err
			sleepCtx(ctx, 500*time.Millisecond)
		}
	}
	return time.Time{}, fmt.Errorf("revoke user %d's token: %w (last: %v)", user, ctx.Err(), last)
}

// start runs a web ("web") or the cron ("cron") process and waits until it answers /healthz.
func (c *cluster) start(ctx context.Context, kind string) (*proc, error) {
	c.mu.Lock()
	c.seq++
	name := fmt.Sprintf("%s%d", kind, c.seq)
	c.mu.Unlock()
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, kind: kind, addr: addr, done: make(chan struct{})}
	binary := "fxdesk-cron"
	env := []string{"FXDESK_HTTP_ADDR=" + addr}
	if kind == "web" {
		binary = "fxdesk-web"
		env = append(env, "CRON_MODE=off")
		env = append(env, c.venue.deskEnv()...)
	}
	logFile, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(c.binDir, binary))
	cmd.Env = c.env(env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A soak killed from outside must not leave desk processes behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	go func() {
		cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if !p.alive() {
			return nil, fmt.Errorf("%s (pid %d) exited during start; see %s.log", name, p.pid, name)
		}
		if resp, err := httpClient.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.kill(syscall.SIGKILL)
			return nil, fmt.Errorf("%s did not answer /healthz within 30 s", name)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond): // no readiness signal but the port
		}
	}
}

// live lists the processes of kind that have not exited.
func (c *cluster) live(kind string) []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*proc
	for _, p := range c.procs {
		if p.kind == kind && p.alive() {
			out = append(out, p)
		}
	}
	return out
}

// scheduledSwapRuns are the hourly processFxSwaps runs of the cron processes so far, read from
// their logs (invariant.ScheduledSwapRuns).
func (c *cluster) scheduledSwapRuns(now time.Time) []invariant.RolloverRun {
	var runs []invariant.RolloverRun
	for _, p := range c.all() {
		if p.kind != "cron" {
			continue
		}
		log, err := os.ReadFile(filepath.Join(c.dir, p.name+".log"))
		if err != nil {
			continue // none read: its deals are judged by the soak's runs alone
		}
		runs = append(runs, invariant.ScheduledSwapRuns(string(log), now)...)
	}
	return runs
}

func (c *cluster) all() []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*proc(nil), c.procs...)
}

func (c *cluster) readRow(ctx context.Context) (invariant.LeaseRow, bool, error) {
	r, _, ok, err := lease.ReadRow(ctx, c.direct, lease.Key)
	return r, ok, err
}

// holder is the live web process the lease row names, or nil.
func (c *cluster) holder(ctx context.Context) *proc {
	r, ok, err := c.readRow(ctx)
	if err != nil || !ok || !r.Live {
		return nil
	}
	for _, p := range c.live("web") {
		if p.pid == r.PID {
			return p
		}
	}
	return nil
}

// waitHolder waits until a live, running web process other than not holds the row.
func (c *cluster) waitHolder(ctx context.Context, timeout time.Duration, not *proc) (*proc, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if h := c.holder(ctx); h != nil && h != not && !h.isStopped() {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond): // the row has no change notification
		}
	}
	return nil, fmt.Errorf("no web process holds the lease after %s", timeout)
}

// waitRowExpired waits until the lease row has expired on the database clock.
func (c *cluster) waitRowExpired(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r, ok, err := c.readRow(ctx); err == nil && (!ok || !r.Live) {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // time passing on the database clock announces nothing
	}
	return fmt.Errorf("lease row still live after %s", timeout)
}

func (c *cluster) dropDatabase() error {
	db, err := sql.Open("mysql", c.server.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec("DROP DATABASE IF EXISTS `" + c.dbName + "`")
	return err
}

// close stops every process, the proxies and Redis; the database stays (drop decides).
func (c *cluster) close() { c.closeOnce.Do(c.closeNow) }

func (c *cluster) closeNow() {
	var wg sync.WaitGroup
	for _, p := range c.all() {
		if p.alive() {
			wg.Add(1)
			go func() { defer wg.Done(); p.kill(syscall.SIGTERM) }()
		}
	}
	wg.Wait()
	if c.mysqlP != nil {
		c.mysqlP.Close()
	}
	if c.redisP != nil {
		c.redisP.Close()
	}
	if c.rdb != nil {
		c.rdb.Close()
	}
	if c.redis != nil {
		c.redis.Stop()
	}
	if c.venue != nil {
		c.venue.stop()
	}
	if c.host != nil {
		c.host.close()
	}
	if c.feed != nil {
		c.feed.stop()
	}
	if c.backup != nil {
		c.backup.stop()
	}
	if c.market != nil {
		c.market.stop()
	}
	if c.direct != nil {
		c.direct.Close()
	}
}
