package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// docCommand is one pasteable line of docs/operations.md with the output the doc promises.
type docCommand struct {
	line   int
	cmd    string
	expect string // "" for setup lines without "# ->"
}

// readOperationsDoc collects every command line inside the doc's ```sh blocks.
func readOperationsDoc(t *testing.T) []docCommand {
	t.Helper()
	f, err := os.Open("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docCommand
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && line != "":
			cmd, expect, _ := strings.Cut(line, "# ->")
			out = append(out, docCommand{line: n, cmd: strings.TrimSpace(cmd), expect: strings.TrimSpace(expect)})
		}
	}
	return out
}

// Every command in docs/operations.md runs against a real split install and prints what the doc
// says it prints.
func TestOperationsDocCommands(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"curl", "mysql", "redis-cli", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; scripts/services.sh installs the database clients", tool)
		}
	}
	e := newDeskEnv(t)
	web := e.start("web", "fxdesk-web", "CRON_MODE=off")
	cron := e.start("cron", "fxdesk-cron")
	cron.waitLog(10*time.Second, msgHas("fx quote mirror following"))
	// The mirror must have advanced once, or the unavailable check would race the first poll.
	eventually(t, 15*time.Second, 100*time.Millisecond, "mirror advancing", func() bool {
		m := cron.mirror().Mirror
		return m != nil && m.Advancing
	})

	cfg, _ := mysql.ParseDSN(e.db.DSN)
	_, redisPort, _ := strings.Cut(e.redis.Addr, ":")
	rewrite := strings.NewReplacer(
		"http://127.0.0.1:4000", "http://"+web.addr,
		"http://127.0.0.1:4001", "http://"+cron.addr,
		"-uroot fxdesk ", "-uroot "+cfg.DBName+" ",
		"redis-cli ", "redis-cli -p "+redisPort+" ",
	)
	env := append(e.env(), "PATH="+binDir+":"+os.Getenv("PATH"))
	sh := func(c docCommand, extra ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+rewrite.Replace(c.cmd))
		cmd.Env = append(append([]string{}, env...), extra...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("operations.md:%d %q: %v\n%s", c.line, c.cmd, err, out)
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}
	placeholders := strings.NewReplacer(
		regexp.QuoteMeta("<host>"), "box",
		regexp.QuoteMeta("<pid>"), strconv.Itoa(web.pid()),
		regexp.QuoteMeta("<time>"), `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?`,
		regexp.QuoteMeta("<ttl>"), `([1-9]|1\d|20)`,
	)

	var token string
	ran := 0
	for _, c := range readOperationsDoc(t) {
		if c.expect == "" {
			// A setup line: it exports the admin token the other lines use.
			if !strings.HasPrefix(c.cmd, "export FXDESK_ADMIN_TOKEN=") {
				t.Fatalf("operations.md:%d %q has no expected output (# -> …)", c.line, c.cmd)
			}
			token = sh(docCommand{line: c.line, cmd: c.cmd + `; printf %s "$FXDESK_ADMIN_TOKEN"`})
			if !strings.HasPrefix(token, "fxd_") {
				t.Fatalf("operations.md:%d exported %q, not a token", c.line, token)
			}
			ran++
			continue
		}
		got := sh(c, "FXDESK_ADMIN_TOKEN="+token)
		want := "^" + placeholders.Replace(regexp.QuoteMeta(strings.Join(strings.Fields(c.expect), " "))) + "$"
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("operations.md:%d %q printed %q, the doc says %q", c.line, c.cmd, got, c.expect)
		}
		ran++
	}
	if ran < 10 {
		t.Fatalf("only %d commands found in docs/operations.md", ran)
	}
}
