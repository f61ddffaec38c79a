package relay_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/audit"
	"fxdesk/internal/relay"
	"fxdesk/internal/testkit/poll"
)

// receiver is a real HTTP server standing in for the host: it verifies every post's signature
// and answers each with the next status of its script (the last one repeats).
type receiver struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	script []int
	posts  []post
	got    chan post
	srv    *httptest.Server
}

type post struct {
	eventID  int64
	status   int
	verified bool
	body     []byte
}

func newReceiver(t *testing.T, secret string, script ...int) *receiver {
	r := &receiver{t: t, secret: secret, script: script, got: make(chan post, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id, _ := strconv.ParseInt(req.Header.Get(relay.HeaderEventID), 10, 64)
	err := relay.Verify(r.secret, req.Header.Get(relay.HeaderTimestamp), req.Header.Get(relay.HeaderSignature), body, time.Now(), 5*time.Minute)
	r.mu.Lock()
	status := r.script[0]
	if len(r.script) > 1 {
		r.script = r.script[1:]
	}
	p := post{eventID: id, status: status, verified: err == nil, body: body}
	r.posts = append(r.posts, p)
	r.mu.Unlock()
	w.WriteHeader(status)
	select { // never hold a post (and the server's Close) on a test that stopped reading; posts has them all
	case r.got <- p:
	default:
	}
}

// setScript replaces what the receiver answers from now on.
func (r *receiver) setScript(script ...int) {
	r.mu.Lock()
	r.script = script
	r.mu.Unlock()
}

// next waits for the receiver's next post.
func (r *receiver) next() post {
	r.t.Helper()
	select {
	case p := <-r.got:
		return p
	case <-time.After(20 * time.Second):
		r.t.Fatal("no webhook post arrived")
		return post{}
	}
}

func adminCtx() context.Context {
	return audit.WithActor(context.Background(), audit.Actor{UserID: 1, Via: "api"})
}

// startWebhooks runs the webhook relay until the test ends.
func startWebhooks(t *testing.T, attempts int) *prometheus.CounterVec {
	t.Helper()
	g, _, _ := newGate(t)
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"endpoint"})
	w, err := relay.NewWebhooks(relay.WebhooksConfig{DB: testDB, Gate: g, Lease: holder, Interval: 10 * time.Millisecond, Refresh: 20 * time.Millisecond,
		Sender: relay.Sender{Timeout: 2 * time.Second, Attempts: attempts, Backoff: time.Millisecond, BackoffMax: 4 * time.Millisecond}, Failures: failures,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); poll.Receive(t, done, 10*time.Second, "Run returning after its context ended") })
	return failures
}

// waitCursor waits until a webhook's cursor reaches pos.
func waitCursor(t *testing.T, id, pos int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p, _ := position(t, "webhook:"+strconv.FormatInt(id, 10)); p >= pos {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook %d's cursor did not reach %d", id, pos)
		}
		time.Sleep(5 * time.Millisecond) // polling the cursor row
	}
}

// An endpoint that fails twice and then accepts gets the event accepted once, signed so that it
// verifies; the two failures are counted and retried with backoff, and the cursor moves past it.
// A second endpoint that never answers 2xx ends with the event in its dead letters, holding
// back only itself; an admin replay, once it accepts, marks the dead letter replayed (audited).
func TestWebhooksRetryDeadLetterAndReplay(t *testing.T) {
	admin := relay.NewAdmin(testDB, relay.Sender{Timeout: 2 * time.Second})
	flaky := newReceiver(t, "flaky-secret-0123456789", 500, 503, 200)
	down := newReceiver(t, "down-secret-0123456789", 500)
	wf, _, err := admin.Create(adminCtx(), relay.NewWebhook{URL: flaky.srv.URL + "/hook", Secret: "flaky-secret-0123456789", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	wd, secret, err := admin.Create(adminCtx(), relay.NewWebhook{URL: down.srv.URL, Secret: "down-secret-0123456789", Enabled: true})
	if err != nil || secret != "down-secret-0123456789" {
		t.Fatal(secret, err)
	}
	ids := addEvents(t, 2)
	failures := startWebhooks(t, 3)

	// The flaky endpoint: two failures, then the first event accepted; then the second at once.
	for i, want := range []struct {
		id     int64
		status int
	}{{ids[0], 500}, {ids[0], 503}, {ids[0], 200}, {ids[1], 200}} {
		p := flaky.next()
		if p.eventID != want.id || p.status != want.status || !p.verified {
			t.Fatalf("flaky post %d = event %d answered %d (verified %v), want event %d answered %d, verified", i, p.eventID, p.status, p.verified, want.id, want.status)
		}
	}
	waitCursor(t, wf.ID, ids[1])
	if got := testutil.ToFloat64(failures.WithLabelValues(strconv.FormatInt(wf.ID, 10))); got != 2 {
		t.Errorf("flaky failures = %v, want 2", got)
	}

	// The endpoint that is down: three attempts per event, then its dead letter.
	waitCursor(t, wd.ID, ids[1])
	dead, err := admin.DeadLetters(adminCtx(), wd.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].EventID != ids[0] || dead[0].Attempts != 3 || dead[0].LastStatus == nil || *dead[0].LastStatus != 500 {
		t.Fatalf("dead letters = %+v, want events %v after 3 attempts, HTTP 500", dead, ids)
	}
	st, err := relay.ReadStatus(context.Background(), testDB)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadLetters < 2 {
		t.Errorf("status counts %d dead letters, want at least 2", st.DeadLetters)
	}

	// A replay while it still fails changes nothing; once it accepts, the dead letter is replayed.
	if _, err := admin.Replay(adminCtx(), wd.ID, ids[0]); err == nil {
		t.Fatal("a replay the endpoint refused succeeded")
	}
	down.setScript(200)
	// Drain the posts of the attempts so far, then the replay's.
	for len(down.got) > 0 {
		<-down.got
	}
	d, err := admin.Replay(adminCtx(), wd.ID, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if d.ReplayedAt == nil {
		t.Errorf("replayed dead letter = %+v, want replayedAt set", d)
	}
	if p := down.next(); p.eventID != ids[0] || !p.verified {
		t.Errorf("replay post = %+v, want event %d, verified", p, ids[0])
	}
	if _, err := admin.Replay(adminCtx(), wd.ID, ids[0]); err == nil {
		t.Error("a second replay of the same dead letter succeeded")
	}
	open, err := admin.DeadLetters(adminCtx(), wd.ID, false)
	if err != nil || len(open) != 1 || open[0].EventID != ids[1] {
		t.Errorf("open dead letters after the replay = %+v (%v), want event %d alone", open, err, ids[1])
	}
	var audited int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `action` = 'webhook.replay' AND `entityId` = ?", strconv.FormatInt(wd.ID, 10)).Scan(&audited); err != nil || audited != 1 {
		t.Errorf("audited replays = %d (%v), want 1", audited, err)
	}
}

// A disabled endpoint is posted nothing; enabled again, it resumes from its cursor.
func TestWebhookDisabledThenEnabledResumes(t *testing.T) {
	admin := relay.NewAdmin(testDB, relay.Sender{})
	r := newReceiver(t, "resume-secret-0123456789", 200)
	w, _, err := admin.Create(adminCtx(), relay.NewWebhook{URL: r.srv.URL, Secret: "resume-secret-0123456789", Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	ids := addEvents(t, 1)
	startWebhooks(t, 2)
	if pos, _ := position(t, "webhook:"+strconv.FormatInt(w.ID, 10)); pos >= ids[0] {
		t.Fatalf("a disabled endpoint's cursor moved to %d", pos)
	}
	on := true
	if _, err := admin.Update(adminCtx(), w.ID, relay.WebhookChange{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	for {
		if p := r.next(); p.eventID == ids[0] {
			break
		}
	}
	waitCursor(t, w.ID, ids[0])
}

// The admin refuses what it must not store, and stores nothing then.
func TestWebhookAdminRefusals(t *testing.T) {
	t.Parallel()
	admin := relay.NewAdmin(testDB, relay.Sender{})
	before, err := admin.List(adminCtx())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []relay.NewWebhook{
		{URL: ""}, {URL: "ftp://host/x"}, {URL: "/relative"}, {URL: "https://user:pw@host/x"}, {URL: "https://host/x#frag"},
		{URL: "https://host/x", Secret: "short"},
	} {
		if _, _, err := admin.Create(adminCtx(), n); err == nil {
			t.Errorf("Create(%+v) succeeded", n)
		}
	}
	if _, _, err := admin.Create(context.Background(), relay.NewWebhook{URL: "https://host/x"}); err == nil {
		t.Error("Create without an actor succeeded")
	}
	after, err := admin.List(adminCtx())
	if err != nil || len(after) != len(before) {
		t.Errorf("endpoints %d → %d (%v): a refused create stored something", len(before), len(after), err)
	}
	w, secret, err := admin.Create(adminCtx(), relay.NewWebhook{URL: "https://host.example/hook", Enabled: false})
	if err != nil || len(secret) != len("whsec_")+64 {
		t.Fatalf("generated secret %q (%v)", secret, err)
	}
	if _, err := admin.Update(adminCtx(), w.ID, relay.WebhookChange{}); err == nil {
		t.Error("an empty update succeeded")
	}
	if _, err := admin.Update(adminCtx(), 1<<40, relay.WebhookChange{URL: &w.URL}); err == nil {
		t.Error("updating a missing webhook succeeded")
	}
}

// A receiver that never answers holds back only its own endpoint: another endpoint gets the
// same event while the slow one's post is still open, and the slow one's posts end at the
// timeout and are retried until the event is dead-lettered.
func TestWebhookSlowEndpointHoldsBackOnlyItself(t *testing.T) {
	admin := relay.NewAdmin(testDB, relay.Sender{})
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the retries go on after the test has seen the first: never block them
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done(): // the relay's timeout
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	fast := newReceiver(t, "fast-secret-0123456789", 200)
	ws, _, err := admin.Create(adminCtx(), relay.NewWebhook{URL: slow.URL, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Create(adminCtx(), relay.NewWebhook{URL: fast.srv.URL, Secret: "fast-secret-0123456789", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	ids := addEvents(t, 1)

	g, _, _ := newGate(t)
	w, err := relay.NewWebhooks(relay.WebhooksConfig{DB: testDB, Gate: g, Lease: holder, Interval: 10 * time.Millisecond, Refresh: 20 * time.Millisecond,
		Sender: relay.Sender{Timeout: 300 * time.Millisecond, Attempts: 2, Backoff: time.Millisecond, BackoffMax: time.Millisecond},
		Log:    slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); poll.Receive(t, done, 10*time.Second, "Run returning after its context ended") })

	<-entered // the slow endpoint's first post is open
	for {
		if p := fast.next(); p.eventID == ids[0] {
			break
		}
	}
	if len(entered) != 0 {
		t.Fatal("the slow endpoint was posted again before the fast one was served")
	}
	<-entered // its retry, after the first post timed out
	waitCursor(t, ws.ID, ids[0])
	dead, err := admin.DeadLetters(adminCtx(), ws.ID, false)
	if err != nil || len(dead) != 1 || dead[0].EventID != ids[0] || dead[0].LastStatus != nil || dead[0].Attempts != 2 {
		t.Fatalf("slow endpoint's dead letters = %+v (%v), want event %d after 2 attempts with no answer", dead, err, ids[0])
	}
}

// A cursor's lag in seconds is the age, on the database clock, of the first event after its
// position: sought from that position on the primary key (one statement per cursor).
func TestStatusLagIsTheAgeOfTheFirstEventNotRelayed(t *testing.T) {
	ids := addEvents(t, 2)
	ctx := context.Background()
	if _, err := testDB.ExecContext(ctx, "UPDATE `fx_event` SET `createdAt` = NOW(3) - INTERVAL 90 SECOND WHERE `id` = ?", ids[0]); err != nil {
		t.Fatal(err)
	}
	name := "status-lag-" + strconv.FormatInt(ids[0], 10)
	if _, err := testDB.ExecContext(ctx, "INSERT INTO `fx_event_relay` (`name`, `position`, `term`, `updatedAt`) VALUES (?, ?, 0, NOW(3))", name, ids[0]-1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = testDB.ExecContext(ctx, "DELETE FROM `fx_event_relay` WHERE `name` = ?", name) })
	st, err := relay.ReadStatus(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Cursors {
		if c.Name != name {
			continue
		}
		if c.LagEvents < 2 || c.LagSeconds < 90 || c.LagSeconds > 150 || c.Enabled {
			t.Fatalf("cursor %+v (newest %d): want at least 2 events behind, about 90 s, not enabled", c, st.Newest)
		}
		return
	}
	t.Fatalf("status %+v has no cursor %s", st.Cursors, name)
}
