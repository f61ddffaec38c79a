package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/auth"
)

// The documentation's shell commands are run as written, against real installs, and what they
// print is checked against the doc's "# -> …" (see readDocCommands). A line that cannot run in a
// test carries notRunMarker and its reason; TestDocsHaveNoUnrunCommands keeps those few honest.

// notRunMarker marks a documented command the tests do not run (a benchmark, the soak, a server
// that runs until stopped). It is written as a comment at the end of the line, with the reason.
const notRunMarker = "# not-run:"

// docCommand is one pasteable line of a doc with the output the doc promises.
type docCommand struct {
	doc     string
	line    int
	section string // the "## " heading it sits under
	cmd     string
	expect  string // "" for lines that promise no output (setup lines, exit status only)
	notRun  string // the reason, when the line carries notRunMarker
}

func (c docCommand) where() string { return c.doc + ":" + strconv.Itoa(c.line) }

// shellFence opens a block of commands; other fenced blocks (sql, mermaid, sample output) are not.
var shellFence = regexp.MustCompile("^```(sh|bash|shell|console)\\b")

// readDocCommands collects every command line inside the shell blocks of the doc at path
// (relative to the repository root). Lines that are only a comment are prose.
func readDocCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docCommand
	in, section := false, ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case shellFence.MatchString(line):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && line != "" && !strings.HasPrefix(line, "#"):
			c := docCommand{doc: path, line: n, section: section}
			if cmd, why, ok := strings.Cut(line, notRunMarker); ok {
				c.cmd, c.notRun = strings.TrimSpace(cmd), strings.TrimSpace(why)
			} else {
				cmd, expect, _ := strings.Cut(line, "# ->")
				c.cmd, c.expect = strings.TrimSpace(cmd), strings.TrimSpace(expect)
			}
			out = append(out, c)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// exportedName is the variable a setup line exports ("… && export NAME=$token").
var exportedName = regexp.MustCompile(`\bexport ([A-Z_][A-Z0-9_]*)=`)

// docShell runs a doc's commands against one install, as an operator pastes them into one
// terminal: a variable one line exports is there for the lines after it.
type docShell struct {
	t        *testing.T
	rewrite  *strings.Replacer // the doc's addresses, database and Redis to the install's
	env      []string
	exported []string
	// holderPID is the pid <pid> stands for.
	holderPID int
	ran       int
}

func newDocShell(t *testing.T, e *deskEnv, holder *proc, addrs map[string]*proc) *docShell {
	t.Helper()
	for _, tool := range []string{"curl", "mysql", "redis-cli", "grep", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; scripts/services.sh installs the database clients", tool)
		}
	}
	cfg, _ := mysql.ParseDSN(e.db.DSN)
	_, redisPort, _ := strings.Cut(e.redis.Addr, ":")
	pairs := []string{
		"./bin/", binDir + "/",
		"-uroot fxdesk ", "-uroot " + cfg.DBName + " ",
		"redis-cli ", "redis-cli -p " + redisPort + " ",
	}
	for doc, p := range addrs {
		pairs = append(pairs, "http://"+doc, "http://"+p.addr)
	}
	// go test puts its own toolchain first in PATH, so `go` in a doc is the one running the test.
	path := binDir + ":" + os.Getenv("PATH")
	env := e.env("PATH=" + path)
	// `go run` in a doc needs the Go toolchain's own environment (its caches, its home).
	for _, v := range []string{"HOME", "GOCACHE", "GOPATH", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
		if val, ok := os.LookupEnv(v); ok {
			env = append(env, v+"="+val)
		}
	}
	return &docShell{t: t, rewrite: strings.NewReplacer(pairs...), env: env, holderPID: holder.pid()}
}

// sh runs one command from the repository root and returns its output, fields joined by one space.
func (s *docShell) sh(c docCommand, script string) string {
	t := s.t
	t.Helper()
	bound := 30 * time.Second
	if strings.Contains(c.cmd, "go run ") {
		bound = 5 * time.Minute // it compiles first, on a machine shared with the other tests
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+s.rewrite.Replace(script))
	cmd.Dir = ".."
	cmd.Env = append(append([]string{}, s.env...), s.exported...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	// A stream the doc bounds with --max-time ends that way: curl's "operation timed out" (28).
	if errors.As(err, &exit) && exit.ExitCode() == 28 && strings.Contains(c.cmd, "--max-time") {
		err = nil
	}
	if err != nil {
		t.Fatalf("%s %q: %v\n%s%s", c.where(), c.cmd, err, out, stderr.String())
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

// run runs every command of cmds that the doc does not mark, checking each promised output.
func (s *docShell) run(cmds []docCommand) {
	t := s.t
	t.Helper()
	placeholders := strings.NewReplacer(
		regexp.QuoteMeta("<host>"), "box",
		regexp.QuoteMeta("<pid>"), strconv.Itoa(s.holderPID),
		regexp.QuoteMeta("<time>"), `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?`,
		regexp.QuoteMeta("<ttl>"), `([1-9]|1\d|20)`,
		"…", ".*",
	)
	for _, c := range cmds {
		if c.notRun != "" {
			continue
		}
		s.ran++
		if m := exportedName.FindStringSubmatch(c.cmd); m != nil && c.expect == "" {
			v := s.sh(c, c.cmd+` && printf %s "$`+m[1]+`"`)
			if !strings.HasPrefix(v, "fxd_") && !auth.LooksLikeJWT(v) {
				t.Fatalf("%s exported %s=%q, not a token", c.where(), m[1], v)
			}
			s.exported = append(s.exported, m[1]+"="+v)
			continue
		}
		got := s.sh(c, c.cmd)
		if c.expect == "" {
			continue
		}
		want := "^" + placeholders.Replace(regexp.QuoteMeta(strings.Join(strings.Fields(c.expect), " "))) + "$"
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("%s %q printed %q, the doc says %q", c.where(), c.cmd, got, c.expect)
		}
	}
}

// inSections keeps the commands under the named "## " headings; outside keeps the others.
func inSections(cmds []docCommand, keep bool, sections ...string) []docCommand {
	var out []docCommand
	for _, c := range cmds {
		in := false
		for _, s := range sections {
			in = in || c.section == s
		}
		if in == keep {
			out = append(out, c)
		}
	}
	return out
}

// startMakeRunDesk starts what `make run` starts: the bundled test identity provider, and one
// fxdesk-web trusting it, with the demo data, the feed and venue simulators in-process and the
// markets always open. The docs' commands reach them as 127.0.0.1:4000 and 127.0.0.1:4010.
func startMakeRunDesk(e *deskEnv) (web, idp *proc) {
	idp = e.start("idp", "fxdesk-idp", "FXDESK_IDP_ADDR=127.0.0.1:0")
	web = e.start("web", "fxdesk-web", "FXDESK_DEMO=on", "FXDESK_FEED=sim", "FXDESK_VENUE=sim",
		"FXDESK_JWT_JWKS_URL=http://"+idp.addr+"/.well-known/jwks.json", "FXDESK_JWT_ISSUER=fxdesk-idp", "FXDESK_JWT_AUDIENCE=fxdesk")
	return web, idp
}

// Every command in docs/operations.md runs against a real split install (web with
// CRON_MODE=off and the scheduler) and prints what the doc says it prints; the single-process
// checklist runs against a `make run` desk.
func TestOperationsDocCommands(t *testing.T) {
	t.Parallel()
	cmds := readDocCommands(t, "docs/operations.md")
	setup := inSections(cmds, true, "")
	single := inSections(cmds, true, "Single-process checklist")
	split := inSections(cmds, false, "", "Single-process checklist")
	if len(setup) != 1 || len(single) < 4 || len(split) < 9 {
		t.Fatalf("docs/operations.md: %d setup, %d single-process and %d split-install commands; the test expects 1, at least 4 and at least 9", len(setup), len(single), len(split))
	}

	t.Run("split install", func(t *testing.T) {
		t.Parallel()
		e := newDeskEnv(t)
		web := e.start("web", "fxdesk-web", "CRON_MODE=off")
		cron := e.start("cron", "fxdesk-cron")
		cron.waitLog(10*time.Second, msgHas("fx quote mirror following"))
		// The mirror must have advanced once, or the unavailable check would race the first poll.
		eventually(t, 15*time.Second, 100*time.Millisecond, "mirror advancing", func() bool {
			m := cron.mirror().Mirror
			return m != nil && m.Advancing
		})
		// The doc reads EURUSD from the snapshot: a desk that has run a while has published it.
		eventually(t, 15*time.Second, 100*time.Millisecond, "EURUSD in the mirror snapshot", func() bool {
			v, _ := e.rdb.Get(context.Background(), e.names.QuoteMirrorSnapshot()).Result()
			return strings.Contains(v, `"EURUSD"`)
		})
		s := newDocShell(t, e, web, map[string]*proc{"127.0.0.1:4000": web, "127.0.0.1:4001": cron})
		s.run(append(setup, split...))
	})
	t.Run("single process", func(t *testing.T) {
		t.Parallel()
		e := newDeskEnv(t)
		web, idp := startMakeRunDesk(e)
		s := newDocShell(t, e, web, map[string]*proc{"127.0.0.1:4000": web, "127.0.0.1:4010": idp})
		s.run(append(setup, single...))
	})
}

// The README's quick start and the commands of the other pages written for a `make run` desk
// run, in the order a newcomer reads them, against one: each returns and prints what its page
// says it prints.
func TestReadmeAndDocsCommandsOnAMakeRunDesk(t *testing.T) {
	t.Parallel()
	e := newDeskEnv(t)
	web, idp := startMakeRunDesk(e)
	s := newDocShell(t, e, web, map[string]*proc{"127.0.0.1:4000": web, "127.0.0.1:4010": idp})
	for _, doc := range makeRunDocs {
		s.run(readDocCommands(t, doc))
	}
	if s.ran < 8 {
		t.Fatalf("only %d commands ran from %v", s.ran, makeRunDocs)
	}
}

// The web tier's checklist runs against two web processes forwarding to the holder, on this
// machine (the Procfile's web on 4000 and web2 on 4002).
func TestWebTierDocCommands(t *testing.T) {
	t.Parallel()
	cmds := readDocCommands(t, "docs/webtier.md")
	if len(cmds) < 5 {
		t.Fatalf("docs/webtier.md: %d commands; the checklist has at least 5", len(cmds))
	}
	e := newDeskEnv(t)
	tier := []string{"FXDESK_WEB_INSTANCES=2", "FXDESK_CLUSTER_SECRET=" + strings.Repeat("0123456789abcdef", 4)}
	holder := e.start("web", "fxdesk-web", append([]string{"CRON_MODE=off"}, tier...)...)
	holder.waitLog(10*time.Second, msgHas("fx ticks published for follower web processes"))
	follower := e.start("web2", "fxdesk-web", append([]string{"CRON_MODE=off"}, tier...)...)
	follower.waitLog(10*time.Second, msgHas("fx ticks followed from the lease holder"))
	s := newDocShell(t, e, holder, map[string]*proc{"127.0.0.1:4000": holder, "127.0.0.1:4002": follower})
	s.run(cmds)
}

// makeRunDocs are the pages whose commands are written for a `make run` desk, in reading order
// (the README's quick start exports the tokens the others use).
var makeRunDocs = []string{"README.md", "docs/configuration.md", "docs/abook.md", "docs/architecture.md",
	"docs/group-commit.md", "docs/mysql.md", "docs/cluster.md", "docs/testing.md", "docs/soak.md", "docs/groups.md", "docs/events.md", "docs/routing.md", "docs/fix.md", "docs/pnl.md", "docs/identity.md", "docs/eod.md", "docs/candles.md", "docs/prices.md", "docs/orders.md", "docs/boot.md", "CHANGELOG.md"}

// Every page is run by one of the tests above, and a command is left out only by its marker with
// a reason: a page added without a test, or a marker without a reason, fails here.
func TestDocsHaveNoUnrunCommands(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{"docs/operations.md": true, "docs/webtier.md": true}
	for _, d := range makeRunDocs {
		covered[d] = true
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../CHANGELOG.md")
	marked := 0
	for _, p := range pages {
		doc, _ := filepath.Rel("..", p)
		if !covered[doc] {
			t.Errorf("%s: no test runs its commands; add it to makeRunDocs or give it a test of its own", doc)
		}
		for _, c := range readDocCommands(t, doc) {
			if c.notRun == "" {
				continue
			}
			marked++
			if len(c.notRun) < 10 {
				t.Errorf("%s %q is marked not run without a reason", c.where(), c.cmd)
			}
		}
	}
	// The few that cannot run in a test: the benchmarks, the soak, the simulators as servers.
	if marked > 10 {
		t.Errorf("%d documented commands are marked not run; the marker is for the few that cannot run in a test", marked)
	}
}
