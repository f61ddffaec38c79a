package soak

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// The clusters a cluster soak runs the desk on (docs/cluster.md): scripts/cluster.sh starts them
// in the run folder — a three-node Galera cluster behind HAProxy and a Redis primary, replica
// and three Sentinels — and the soak points the desk at HAProxy's endpoint (still through its
// MySQL proxy, so the cut fault stays) and at the Sentinels' URL (the desk's failover client
// connects to the primary the Sentinels name, so no proxy can stand in front of it).

// clusterScript is run from the module root, where `make soak` and `go run ./cmd/soak` run.
const clusterScript = "scripts/cluster.sh"

// haCluster is what scripts/cluster.sh started, as its export lines name it.
type haCluster struct {
	dir        string       // the script's folder, under the run folder
	onGalera   bool         // the desk's database is on the Galera cluster
	onSentinel bool         // the desk's Redis is the primary the Sentinels name
	write      string       // HAProxy's write endpoint, host:port
	nodes      []galeraNode // n1, n2, n3
	master     string       // the primary's name at the Sentinels
	url        string       // the desk's redis-sentinel:// URL
	sentinels  *redis.SentinelClient
}

// galeraNode is one MariaDB Galera node: its name (wsrep_node_name), its SQL address and the pid
// file its process writes.
type galeraNode struct {
	name, addr, pidFile string
}

// clusterUp runs `scripts/cluster.sh up dir` and reads the endpoints it prints.
func clusterUp(ctx context.Context, dir string, galera, sentinel bool) (*haCluster, error) {
	h := &haCluster{dir: dir, onGalera: galera, onSentinel: sentinel}
	// As root the nodes run as mysql (scripts/cluster.sh), which must reach its datadir through
	// the run folder that os.MkdirTemp made private.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		return h, err
	}
	out, err := h.script(ctx, "up")
	if err != nil {
		return h, err
	}
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if ok && !strings.HasPrefix(k, "#") {
			env[k] = strings.Trim(v, "'")
		}
	}
	h.write = env["FXDESK_GALERA_WRITE"]
	for i, addr := range strings.Split(env["FXDESK_GALERA"], ",") {
		n := fmt.Sprintf("n%d", i+1)
		h.nodes = append(h.nodes, galeraNode{name: n, addr: addr, pidFile: filepath.Join(dir, "galera", n, "mysqld.pid")})
	}
	h.url = env["FXDESK_SENTINEL_URL"]
	opt, err := store.ParseRedisURL(h.url)
	if h.write == "" || len(h.nodes) != 3 || err != nil || opt.MasterName == "" {
		return h, fmt.Errorf("%s up printed no endpoints the soak can read:\n%s", clusterScript, out)
	}
	h.master = opt.MasterName
	h.sentinels = redis.NewSentinelClient(&redis.Options{Addr: opt.Addrs[0], DialTimeout: time.Second, ReadTimeout: time.Second})
	return h, nil
}

// script runs scripts/cluster.sh cmd dir and returns what it printed on stdout; its log lines
// go to cluster.log in the run folder.
func (h *haCluster) script(ctx context.Context, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	logFile, err := os.OpenFile(filepath.Join(filepath.Dir(h.dir), "cluster.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	c := exec.CommandContext(ctx, clusterScript, cmd, h.dir)
	var out strings.Builder
	c.Stdout, c.Stderr = &out, logFile
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v (see cluster.log)", clusterScript, cmd, err)
	}
	return out.String(), nil
}

// down keeps the cluster's logs in the run folder (cluster-logs/) and stops it.
func (h *haCluster) down() {
	if h.sentinels != nil {
		h.sentinels.Close()
	}
	keep := filepath.Join(filepath.Dir(h.dir), "cluster-logs")
	filepath.WalkDir(h.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") && !strings.HasSuffix(path, ".cfg") {
			return nil
		}
		rel, _ := filepath.Rel(h.dir, path)
		if b, err := os.ReadFile(path); err == nil {
			dst := filepath.Join(keep, strings.ReplaceAll(rel, string(filepath.Separator), "-"))
			os.MkdirAll(keep, 0o755)
			os.WriteFile(dst, b, 0o644)
		}
		return nil
	})
	// Never under the run's context: an interrupted soak stops its cluster too.
	h.script(context.Background(), "down")
}

// serverDSN is the MySQL server the desk's database lives on: HAProxy's write endpoint, with the
// tests' sql_mode.
func (h *haCluster) serverDSN() (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dbtest.ServerDSN())
	if err != nil {
		return nil, err
	}
	cfg.Addr, cfg.Net = h.write, "tcp"
	return cfg, nil
}

// nodeSQL runs one query on one node (or, with addr = h.write, on the node HAProxy sends a new
// connection to) on a connection of its own and returns the first column of its first row.
func nodeSQL(ctx context.Context, addr, query string) (string, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	cfg.Timeout, cfg.ReadTimeout = time.Second, 2*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return "", err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var v string
	err = db.QueryRowContext(ctx, query).Scan(&v)
	return v, err
}

// writer is the node HAProxy sends the desk's connections to now: the node a new connection
// through the endpoint lands on. With the one-entry stick table every connection goes there, so
// it is the node the holder writes through.
func (h *haCluster) writer(ctx context.Context) (galeraNode, error) {
	name, err := nodeSQL(ctx, h.write, "SELECT @@wsrep_node_name")
	if err != nil {
		return galeraNode{}, fmt.Errorf("which node HAProxy writes to: %w", err)
	}
	for _, n := range h.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return galeraNode{}, fmt.Errorf("HAProxy writes to %q, not a node of the cluster", name)
}

// nodeState is what node n says of itself: its state, the size of the component it is in and
// that component's configuration id.
func (h *haCluster) nodeState(ctx context.Context, n galeraNode) (state string, size, conf int, err error) {
	v, err := nodeSQL(ctx, n.addr, `SELECT CONCAT_WS(' ',
		MAX(IF(VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT', VARIABLE_VALUE, NULL)),
		MAX(IF(VARIABLE_NAME = 'WSREP_CLUSTER_SIZE', VARIABLE_VALUE, NULL)),
		MAX(IF(VARIABLE_NAME = 'WSREP_CLUSTER_CONF_ID', VARIABLE_VALUE, NULL)))
		FROM information_schema.GLOBAL_STATUS`)
	if err != nil {
		return "", 0, 0, err
	}
	if _, err := fmt.Sscan(v, &state, &size, &conf); err != nil {
		return "", 0, 0, fmt.Errorf("node %s state %q: %w", n.name, v, err)
	}
	return state, size, conf, nil
}

// pid is node n's process id, from its pid file.
func (n galeraNode) pid() (int, error) {
	b, err := os.ReadFile(n.pidFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// signal sends sig to node n's processes: mariadbd, which scripts/cluster.sh starts as the
// leader of a session of its own, and what it started (an SST script, its rsync), as a machine
// that dies or stops takes them all. A SIGKILLed mariadbd alone left its rsync holding the
// node's IST port, and the restarted node could not rejoin.
func (n galeraNode) signal(sig syscall.Signal) error {
	pid, err := n.pid()
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	return syscall.Kill(-pid, sig)
}

// gone waits until node n's process has exited: a SIGKILLed mariadbd takes a moment to release
// its memory, and the script restarts only a node whose pid no longer answers.
func (n galeraNode) gone(timeout time.Duration) error {
	pid, err := n.pid()
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) { // an exit of a process not ours announces nothing
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return nil
		}
	}
	return fmt.Errorf("node %s (pid %d) still running %s after SIGKILL", n.name, pid, timeout)
}

// waitWhole waits until the cluster is whole: every node Synced in one component of all three
// (one configuration id). A node just resumed from SIGSTOP still says Synced in the view it had
// before it was evicted; the configuration id tells it apart until it has rejoined.
func (h *haCluster) waitWhole(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		whole, confs := true, map[int]bool{}
		for _, n := range h.nodes {
			state, size, conf, err := h.nodeState(ctx, n)
			whole = whole && err == nil && state == "Synced" && size == len(h.nodes)
			confs[conf] = true
		}
		if whole && len(confs) == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Galera cluster is not whole (three Synced nodes in one component) after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond): // wsrep state changes announce nothing outside the node
		}
	}
}

// primary is the Redis primary the Sentinels name now.
func (h *haCluster) primary(ctx context.Context) (string, error) {
	a, err := h.sentinels.GetMasterAddrByName(ctx, h.master).Result()
	if err != nil || len(a) != 2 {
		return "", fmt.Errorf("ask a Sentinel for the primary: %v", err)
	}
	return a[0] + ":" + a[1], nil
}

// role is a Redis server's answer to ROLE: master or slave.
func redisRole(ctx context.Context, addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return "", fmt.Errorf("ROLE on %s: %v", addr, err)
	}
	s, _ := v[0].(string)
	return s, nil
}
