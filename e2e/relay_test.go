package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/relay"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/poll"
)

// The host platform's feed end to end (docs/events.md): the real fxdesk-web holder relays the
// events outbox to the Redis Stream and to webhooks; a host reads them.

// hostReader is the host platform reading the install's stream through a consumer group, as
// docs/events.md shows, for as long as the test runs: every entry it is handed, in order.
type hostReader struct {
	mu   sync.Mutex
	got  []int64
	more chan struct{}
}

func readStream(t *testing.T, rdb *redis.Client, stream string) *hostReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &hostReader{more: make(chan struct{}, 1)}
	if err := rdb.XGroupCreateMkStream(ctx, stream, "host", "0").Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "host", Consumer: "c1", Streams: []string{stream, ">"}, Count: 100, Block: 200 * time.Millisecond}).Result()
			if err != nil {
				continue // redis.Nil: nothing new within Block
			}
			for _, m := range res[0].Messages {
				id, _ := strconv.ParseInt(fmt.Sprint(m.Values["id"]), 10, 64)
				h.mu.Lock()
				h.got = append(h.got, id)
				h.mu.Unlock()
				rdb.XAck(ctx, stream, "host", m.ID)
			}
			select {
			case h.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); poll.Receive(t, done, 10*time.Second, "Run returning after its context ended") })
	return h
}

// ids is what the host was handed so far.
func (h *hostReader) ids() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// waitFor waits until the host has been handed every id in want.
func (h *hostReader) waitFor(t *testing.T, want []int64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		have := map[int64]bool{}
		for _, id := range h.ids() {
			have[id] = true
		}
		missing := 0
		for _, id := range want {
			if !have[id] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-h.more:
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("the host misses %d of %d events", missing, len(want))
		}
	}
}

// tableIDs is every event id in the outbox, in order.
func tableIDs(t *testing.T, db *sql.DB) []int64 {
	t.Helper()
	ids, err := store.QueryAll(context.Background(), db, "event ids", func(sc store.Scanner) (int64, error) {
		var id int64
		err := sc.Scan(&id)
		return id, err
	}, "SELECT `id` FROM `fx_event` ORDER BY `id`")
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// streamPosition is the stream relay's cursor.
func streamPosition(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var pos int64
	if err := db.QueryRow("SELECT `position` FROM `fx_event_relay` WHERE `name` = 'stream'").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	return pos
}

// holdRelay locks the stream relay's cursor row, as an operator can, and returns once the
// holder's relay waits for it: from then on it sends nothing until release.
func holdRelay(t *testing.T, e *deskEnv) (release func()) {
	t.Helper()
	tx, err := e.sql.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT `position` FROM `fx_event_relay` WHERE `name` = 'stream' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// The relay's next cycle asks for the row: its transaction, on this install's database, then
	// waits for our lock.
	eventually(t, 10*time.Second, 5*time.Millisecond, "the holder's relay waits for the cursor lock", func() bool {
		// The relay's locking read, running (a lookup by primary key waits for the row lock in
		// the optimizer's "Statistics" state, which INNODB_TRX does not always list).
		var n int
		if err := e.sql.QueryRow("SELECT COUNT(*) FROM `information_schema`.`PROCESSLIST` WHERE `DB` = DATABASE() AND `ID` <> CONNECTION_ID() " +
			"AND `COMMAND` = 'Query' AND `INFO` LIKE '%fx_event_relay%FOR UPDATE%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	return func() { tx.Rollback() }
}

// The holder is SIGKILLed after a fill committed and before its relay sent the fill's events
// (the relay held still on its cursor's lock): the replacement's relay delivers them. A host
// reading the stream through a consumer group across the kill sees every event of the table,
// each once after de-duplication by id, none missing.
func TestRelayKilledHolderReplacementDelivers(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	e := d.e
	host := readStream(t, e.rdb, e.names.Events())
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1001, "USD", "100", "10000")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10010")
	d.openMarket(tok, acct, "BUY", "0.10", "")
	host.waitFor(t, tableIDs(t, e.sql))

	release := holdRelay(t, e)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	before := streamPosition(t, e.sql)
	fill := d.openMarket(tok, acct, "SELL", "0.20", "")
	all := tableIDs(t, e.sql)
	unsent := all[slices.Index(all, before)+1:]
	if len(unsent) < 2 {
		t.Fatalf("the fill of position %d wrote events %v after the relay's position %d, want its order and position events", fill, unsent, before)
	}
	for _, id := range host.ids() {
		if slices.Contains(unsent, id) {
			t.Fatalf("event %d reached the host while the relay was held", id)
		}
	}

	d.web.stop(syscall.SIGKILL)
	release()
	released = true
	// The replacement on the same host takes over at once (the holder's pid is dead) and relays
	// from the stored position.
	b := e.start("web-b", "fxdesk-web", "FXDESK_FEED="+d.sim.url, "FXDESK_FEED_KEY=test", "FXDESK_LEASE_TTL=6s", "FXDESK_LEASE_FENCE=2s")
	b.waitLog(10*time.Second, msgHas("role: holder"))
	b.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	want := tableIDs(t, e.sql)
	host.waitFor(t, want)

	got := host.ids()
	seen := map[int64]int{}
	for _, id := range got {
		seen[id]++
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("event %d handed to the host %d times, want once (Redis keeps one entry per id)", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("the host saw %d distinct events, the table holds %d", len(seen), len(want))
	}
	if !slices.IsSorted(got) {
		t.Errorf("the host was handed the events out of order: %v", got)
	}
	// The cursor is written just after the XADDs the host already read.
	eventually(t, 10*time.Second, 10*time.Millisecond, "the stream's cursor at the newest event", func() bool {
		return streamPosition(t, e.sql) == want[len(want)-1]
	})
}

// webhookReceiver is the host's webhook endpoint: a real HTTP server that verifies every
// post's signature and answers from a script (the last status repeats).
type webhookReceiver struct {
	t      *testing.T
	secret string
	srv    *httptest.Server
	mu     sync.Mutex
	script []int
	posts  []webhookPost
	more   chan struct{}
}

type webhookPost struct {
	event    int64
	status   int
	verified bool
}

func newWebhookReceiver(t *testing.T, secret string, script ...int) *webhookReceiver {
	r := &webhookReceiver{t: t, secret: secret, script: script, more: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id, _ := strconv.ParseInt(req.Header.Get(relay.HeaderEventID), 10, 64)
		err := relay.Verify(r.secret, req.Header.Get(relay.HeaderTimestamp), req.Header.Get(relay.HeaderSignature), body, time.Now(), 5*time.Minute)
		r.mu.Lock()
		status := r.script[0]
		if len(r.script) > 1 {
			r.script = r.script[1:]
		}
		r.posts = append(r.posts, webhookPost{event: id, status: status, verified: err == nil && strings.Contains(string(body), fmt.Sprintf(`"id":%d,`, id))})
		r.mu.Unlock()
		w.WriteHeader(status)
		select {
		case r.more <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *webhookReceiver) setScript(script ...int) {
	r.mu.Lock()
	r.script = script
	r.mu.Unlock()
}

// postsOf is every post of event id so far.
func (r *webhookReceiver) postsOf(id int64) []webhookPost {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []webhookPost
	for _, p := range r.posts {
		if p.event == id {
			out = append(out, p)
		}
	}
	return out
}

// waitPosts waits until the receiver holds n posts of event id.
func (r *webhookReceiver) waitPosts(id int64, n int) []webhookPost {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if ps := r.postsOf(id); len(ps) >= n {
			return ps
		}
		select {
		case <-r.more:
		case <-time.After(time.Second):
		case <-deadline:
			r.t.Fatalf("event %d was posted %d times, want %d", id, len(r.postsOf(id)), n)
		}
	}
}

type webhookResp struct {
	Webhook struct {
		ID          int64 `json:"id"`
		Position    int64 `json:"position"`
		DeadLetters int   `json:"deadLetters"`
	} `json:"webhook"`
	Secret string `json:"secret"`
}

// A receiver that fails twice and then accepts gets the event accepted once, with a signature it
// verifies; one that always fails ends with the event in its dead letters — on /desk, on the
// status page and in the admin API — and an admin call replays it once the receiver is back.
func TestRelayWebhooksRetryDeadLetterReplay(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t, "FXDESK_WEBHOOK_ATTEMPTS=3", "FXDESK_WEBHOOK_BACKOFF=20ms", "FXDESK_WEBHOOK_BACKOFF_MAX=80ms", "FXDESK_WEBHOOK_TIMEOUT=2s")
	flaky := newWebhookReceiver(t, "flaky-endpoint-secret-1", 500, 502, 200)
	down := newWebhookReceiver(t, "down-endpoint-secret-22", 500)
	var wf, wd webhookResp
	must(t, d.web, d.admin, "POST", "/api/admin/fx/webhooks", fmt.Sprintf(`{"url":%q,"secret":"flaky-endpoint-secret-1"}`, flaky.srv.URL), http.StatusCreated, &wf)
	must(t, d.web, d.admin, "POST", "/api/admin/fx/webhooks", fmt.Sprintf(`{"url":%q,"secret":"down-endpoint-secret-22"}`, down.srv.URL), http.StatusCreated, &wd)
	// A refused create changes nothing.
	if code, _ := call(t, d.web, d.admin, "POST", "/api/admin/fx/webhooks", `{"url":"https://user:pw@host.example/x"}`); code != http.StatusBadRequest {
		t.Fatalf("a URL with credentials answered %d, want 400", code)
	}

	// The deposit's event is the first both endpoints hear.
	_, acct := d.newTrader(1001, "USD", "100", "500")
	ids := tableIDs(t, d.e.sql)
	ev := ids[len(ids)-1]

	posts := flaky.waitPosts(ev, 3)
	for i, want := range []int{500, 502, 200} {
		if posts[i].status != want || !posts[i].verified {
			t.Errorf("flaky post %d of event %d: %+v, want answered %d with a signature that verifies", i, ev, posts[i], want)
		}
	}
	down.waitPosts(ev, 3)
	var dead struct {
		DeadLetters []relay.DeadLetter `json:"deadLetters"`
	}
	path := fmt.Sprintf("/api/admin/fx/webhooks/%d/dead-letters", wd.Webhook.ID)
	eventually(t, 10*time.Second, 20*time.Millisecond, "the event in the dead letters", func() bool {
		must(t, d.web, d.admin, "GET", path, "", http.StatusOK, &dead)
		return len(dead.DeadLetters) == 1
	})
	if dl := dead.DeadLetters[0]; dl.EventID != ev || dl.Attempts != 3 || dl.LastStatus == nil || *dl.LastStatus != 500 || dl.ReplayedAt != nil {
		t.Fatalf("dead letter = %+v, want event %d after 3 attempts, HTTP 500, open", dl, ev)
	}
	var st struct {
		Relay relay.Status `json:"relay"`
	}
	must(t, d.web, d.admin, "GET", "/api/admin/fx/desk", "", http.StatusOK, &st)
	if st.Relay.DeadLetters != 1 || len(st.Relay.Dead) != 1 || st.Relay.Dead[0].EventID != ev {
		t.Errorf("/desk relay = %+v, want the one dead letter of event %d", st.Relay, ev)
	}
	code, page := call(t, d.web, d.admin, "GET", "/admin/status", "")
	if code != http.StatusOK || !strings.Contains(string(page), "1 webhook dead letters") || !strings.Contains(string(page), "<td>"+strconv.FormatInt(ev, 10)+"</td>") {
		t.Errorf("status page (%d) does not show the dead letter of event %d", code, ev)
	}

	// The flaky endpoint accepted the event once; the down one's cursor moved past it, so the
	// next event is posted to both.
	must(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", acct), `{"amount":"5"}`, http.StatusCreated, nil)
	ids = tableIDs(t, d.e.sql)
	next := ids[len(ids)-1]
	flaky.waitPosts(next, 1)
	down.waitPosts(next, 3)
	accepted := 0
	for _, p := range flaky.postsOf(ev) {
		if p.status == 200 {
			accepted++
		}
	}
	if accepted != 1 {
		t.Errorf("the flaky endpoint accepted event %d %d times, want once", ev, accepted)
	}

	// The metrics: the flaky endpoint's two failures, the down one's dead letter, no lag left.
	// (The down endpoint's second dead letter is written just after its last post.)
	want := map[string]string{
		fmt.Sprintf(`fxdesk_webhook_failures_total{endpoint="%d"}`, wf.Webhook.ID):        "2",
		fmt.Sprintf(`fxdesk_webhook_dead_letters{endpoint="%d"}`, wd.Webhook.ID):          "2",
		fmt.Sprintf(`fxdesk_events_relay_lag_events{cursor="webhook:%d"}`, wf.Webhook.ID): "0",
		`fxdesk_events_relay_lag_events{cursor="stream"}`:                                 "0",
	}
	eventually(t, 10*time.Second, 50*time.Millisecond, "the relay's metrics", func() bool {
		m := d.web.metrics()
		for series, w := range want {
			if got, _ := metricValue(m, series); got != w {
				return false
			}
		}
		return true
	})

	// Replayed while the endpoint still fails: 503 and nothing changes. Back up: replayed.
	replay := fmt.Sprintf("/api/admin/fx/webhooks/%d/dead-letters/%d/replay", wd.Webhook.ID, ev)
	if code, body := call(t, d.web, d.admin, "POST", replay, ""); code != http.StatusServiceUnavailable {
		t.Fatalf("a replay the endpoint refused answered %d %s, want 503", code, body)
	}
	down.setScript(200)
	n := len(down.postsOf(ev))
	var replayed struct {
		DeadLetter relay.DeadLetter `json:"deadLetter"`
	}
	must(t, d.web, d.admin, "POST", replay, "", http.StatusOK, &replayed)
	if replayed.DeadLetter.ReplayedAt == nil {
		t.Errorf("replayed dead letter = %+v, want replayedAt", replayed.DeadLetter)
	}
	if ps := down.postsOf(ev); len(ps) != n+1 || ps[n].status != 200 || !ps[n].verified {
		t.Errorf("the replay's post = %+v, want one more post of event %d, accepted, verified", ps[n:], ev)
	}
	if code, _ := call(t, d.web, d.admin, "POST", replay, ""); code != http.StatusConflict {
		t.Errorf("a second replay answered %d, want 409", code)
	}
	var audited int
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `action` IN ('webhook.create', 'webhook.replay')").Scan(&audited); err != nil || audited != 3 {
		t.Errorf("audit rows of the webhook writes = %d (%v), want 3 (two creates, one replay)", audited, err)
	}
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_webhook_dead` WHERE `replayedAt` IS NULL AND `eventId` = ?", ev).Scan(&audited); err != nil || audited != 0 {
		t.Errorf("open dead letters of event %d = %d (%v), want 0", ev, audited, err)
	}
	if code, b := call(t, d.web, d.admin, "POST", "/api/admin/fx/webhooks", `{"url":"https://host.example/x","bogus":1}`); code != http.StatusBadRequest || !strings.Contains(string(b), "bogus") {
		t.Errorf("an unknown field answered %d %s, want 400 naming it", code, b)
	}
}
