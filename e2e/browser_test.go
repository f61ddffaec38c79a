package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// chromium finds a headless browser. `make test` installs Debian's chromium when it is missing;
// where that was impossible the test says so and skips.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no headless Chromium: scripts/browser.sh installs Debian's chromium package; it could not be installed here")
	return ""
}

// browserTab is one page of a headless Chromium driven over the DevTools protocol: enough to load
// a page, fill and submit its forms and read the document, as an operator's browser would (a
// dumped DOM cannot post a form).
type browserTab struct {
	t    *testing.T
	conn *websocket.Conn
	ctx  context.Context

	mu      sync.Mutex
	next    int64
	replies map[int64]chan cdpMessage
	loads   chan struct{} // one per Page.loadEventFired
}

type cdpMessage struct {
	ID     int64           `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// openTab starts a headless Chromium with a fresh profile and attaches to its first page.
func openTab(t *testing.T, browser string) *browserTab {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--user-data-dir="+t.TempDir(), "about:blank")
	// Chromium's renderers and helpers are its children: the whole process group goes at the
	// end, or they keep writing into the profile while the test removes it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	// Chromium names its DevTools endpoint on stderr once it listens.
	endpoint := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if ws, ok := strings.CutPrefix(sc.Text(), "DevTools listening on "); ok {
				endpoint <- ws
			}
		}
		close(endpoint)
	}()
	var ws string
	select {
	case ws = <-endpoint:
	case <-time.After(60 * time.Second):
		t.Fatal("chromium did not open its DevTools endpoint within 60s")
	}
	if ws == "" {
		t.Fatal("chromium exited before opening its DevTools endpoint")
	}
	host := strings.SplitN(strings.TrimPrefix(ws, "ws://"), "/", 2)[0]
	resp, err := http.Get("http://" + host + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	var targets []struct{ Type, WebSocketDebuggerURL string }
	err = json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	page := ""
	for _, tg := range targets {
		if tg.Type == "page" {
			page = tg.WebSocketDebuggerURL
		}
	}
	if page == "" {
		t.Fatalf("chromium has no page target: %+v", targets)
	}
	conn, _, err := websocket.Dial(ctx, page, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(16 << 20)
	b := &browserTab{t: t, conn: conn, ctx: ctx, replies: map[int64]chan cdpMessage{}, loads: make(chan struct{}, 16)}
	go b.read()
	b.call("Page.enable", nil)
	return b
}

// read hands each reply to its caller and each page load to the loads channel.
func (b *browserTab) read() {
	for {
		_, data, err := b.conn.Read(b.ctx)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m.Method == "Page.loadEventFired" {
			select {
			case b.loads <- struct{}{}:
			default:
			}
			continue
		}
		b.mu.Lock()
		ch := b.replies[m.ID]
		delete(b.replies, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends one DevTools command and returns its result.
func (b *browserTab) call(method string, params any) json.RawMessage {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.replies[id] = ch
	b.mu.Unlock()
	msg, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err := b.conn.Write(b.ctx, websocket.MessageText, msg); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			b.t.Fatalf("%s: %s", method, m.Error.Message)
		}
		return m.Result
	case <-time.After(30 * time.Second):
		b.t.Fatalf("%s: no answer within 30s", method)
		return nil
	}
}

// navigating runs act, which makes the page load another document, and waits for that load.
func (b *browserTab) navigating(what string, act func()) {
	b.t.Helper()
	for len(b.loads) > 0 { // loads of earlier documents (the status page refreshes itself)
		<-b.loads
	}
	act()
	select {
	case <-b.loads:
	case <-time.After(30 * time.Second):
		b.t.Fatalf("%s: no page loaded within 30s", what)
	}
}

// load opens url and waits until it (or where it redirects) has loaded.
func (b *browserTab) load(url string) {
	b.t.Helper()
	b.navigating("load "+url, func() { b.call("Page.navigate", map[string]string{"url": url}) })
}

// eval runs a JavaScript expression in the page and returns its value as text.
func (b *browserTab) eval(expr string) string {
	b.t.Helper()
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails any `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}), &r); err != nil {
		b.t.Fatal(err)
	}
	if r.ExceptionDetails != nil {
		b.t.Fatalf("%s threw: %v", expr, r.ExceptionDetails)
	}
	if r.Result.Value == nil {
		return ""
	}
	return fmt.Sprint(r.Result.Value)
}

// path is the path of the document shown.
func (b *browserTab) path() string { return b.eval("location.pathname") }

// dom is the document as rendered.
func (b *browserTab) dom() string { return b.eval("document.documentElement.outerHTML") }

// submit runs js (which fills the page's form) and clicks the form's button at selector, as a
// person would, then waits for the answer to load.
func (b *browserTab) submit(selector, js string) {
	b.t.Helper()
	b.navigating("submit "+selector, func() {
		b.eval(js + ";document.querySelector(" + jsString(selector) + ").click()")
	})
}

func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}
