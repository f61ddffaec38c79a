package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/testkit/poll"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/trading"
)

// streamDesk is an API server with an events hub over a fresh database, and the trading service
// whose deposits write events.
type streamDesk struct {
	t       *testing.T
	ctx     context.Context
	hub     *EventHub
	stopHub context.CancelFunc
	hubDone chan struct{}
	svc     *trading.Service
	srv     *httptest.Server
	m       *metrics.Metrics
	newest  func() int64
	token   func(user int64) string
	account func(user int64) int64
	deposit func(account int64, nonce string)
	list    func(user int64, after int64) []events.Entry
}

func newStreamDesk(t *testing.T, name string, perToken, buffer int) *streamDesk {
	t.Helper()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	db, closeDB, err := dbtest.NewMigrated(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	parts := newTestParts(t, db, false)
	log, svc, admin := parts.log, parts.svc, parts.admin
	m := metrics.New("test")
	hub := NewEventHub(EventHubConfig{DB: db, Slots: NewStreamSlots(perToken, 100, m), Poll: 10 * time.Millisecond, Buffer: buffer, Metrics: m, Log: log})
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { hub.Run(hubCtx); close(hubDone) }()
	h, err := NewServer(Deps{Log: log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, log), Quotes: &desk.Quotes{}, Metrics: m,
		Trading: svc, Catalog: admin, Settings: catalog.NewSettings(db, log), Alerts: alert.NewInbox(db, log), Auth: auth.NewResolver(db), Events: hub})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// Before the server closes: the hub's end ends every stream, so the server has nothing to wait for.
	t.Cleanup(func() { stopHub(); poll.Receive(t, hubDone, 10*time.Second, "the hub's Run returning after its stop") })
	d := &streamDesk{t: t, ctx: ctx, hub: hub, stopHub: stopHub, hubDone: hubDone, svc: svc, srv: srv, m: m}
	d.newest = func() int64 {
		n, err := events.Newest(ctx, db)
		if err != nil {
			t.Error(err)
		}
		return n
	}
	d.token = func(user int64) string {
		tok, err := auth.Create(ctx, db, user, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	d.account = func(user int64) int64 {
		a, err := svc.Accounts().Open(ctx, user, "USD", 100)
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	// deposit may run off the test's goroutine: it reports with Error.
	d.deposit = func(account int64, nonce string) {
		if _, _, err := svc.Accounts().Deposit(ctx, account, decimal.NewFromInt(10), nonce); err != nil {
			t.Error(err)
		}
	}
	d.list = func(user int64, after int64) []events.Entry {
		var all []events.Entry
		for {
			page, err := events.List(ctx, db, events.Filter{UserID: user, After: after, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page...)
			if len(page) < 500 {
				return all
			}
			after = page[len(page)-1].ID
		}
	}
	return d
}

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct {
	id    int64
	typ   string
	data  string
	ended bool // the stream ended instead (the last value on the channel)
}

// open opens the events stream with the given query and headers, answering the status and,
// for a 200, a channel of its events that ends with an ended value when the stream does.
func (d *streamDesk) open(ctx context.Context, tok, query string, header map[string]string) (int, http.Header, <-chan sseEvent) {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.srv.URL+"/api/fx/events/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		d.t.Fatalf("stream Content-Type %q", ct)
	}
	ch := make(chan sseEvent, 100000)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.typ != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
		ch <- sseEvent{ended: true}
	}()
	return resp.StatusCode, resp.Header, ch
}

// readUntil collects a stream's events until one has id last, failing at a deadline or at the
// stream's end.
func readUntil(t *testing.T, ch <-chan sseEvent, last int64) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.ended {
				t.Fatalf("the stream ended after %d events, before id %d", len(got), last)
			}
			got = append(got, ev)
			if ev.id >= last {
				return got
			}
		case <-deadline:
			t.Fatalf("no event %d within 10s (%d read)", last, len(got))
		}
	}
}

// sameEvents fails unless got is exactly want: the same ids in the same order, each event's
// type and data as the events page encodes it.
func sameEvents(t *testing.T, what string, got []sseEvent, want []events.Entry) {
	t.Helper()
	ids := func() (g, w []int64) {
		for _, e := range got {
			g = append(g, e.id)
		}
		for _, e := range want {
			w = append(w, e.ID)
		}
		return g, w
	}
	if len(got) != len(want) {
		g, w := ids()
		t.Fatalf("%s: ids %v, want %v", what, g, w)
	}
	for i := range got {
		page, _ := json.Marshal(want[i])
		var a, b any
		json.Unmarshal(page, &a)
		json.Unmarshal([]byte(got[i].data), &b)
		if got[i].id != want[i].ID || got[i].typ != want[i].Type || fmt.Sprint(a) != fmt.Sprint(b) {
			g, w := ids()
			t.Fatalf("%s: event %d is %d %s %s, want %d %s %s (ids %v, want %v)", what, i, got[i].id, got[i].typ, got[i].data, want[i].ID, want[i].Type, page, g, w)
		}
	}
}

// The handover: streams opened at random moments while two traders' deposits commit from several
// writers at once, each resuming from a different id, each see exactly their own trader's
// events after that id, in order, once — the backlog from the table, then the live ones, with
// nothing lost or repeated between the two. A stream with no id starts at the next event.
func TestEventsStreamHandoverHasNoGapAndNoRepeat(t *testing.T) {
	t.Parallel()
	d := newStreamDesk(t, "api_events_stream", 50, 4096)
	mine, theirs := d.token(701), d.token(702)
	a1, a2, b := d.account(701), d.account(701), d.account(702)
	for i := range 5 {
		d.deposit(a1, fmt.Sprintf("pre%d", i))
	}

	// Four writers, each depositing into the three accounts in turn, while the streams open.
	const perWriter = 40
	var writers sync.WaitGroup
	started := make(chan struct{})
	for w := range 4 {
		writers.Go(func() {
			<-started
			for i := range perWriter {
				acct := []int64{a1, a2, b}[(w+i)%3]
				d.deposit(acct, fmt.Sprintf("w%d-%d", w, i))
			}
		})
	}
	type opened struct {
		after int64
		fresh bool
		ch    <-chan sseEvent
	}
	var streams []opened
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	close(started)
	for i := range 12 {
		// Resume from 0 (the whole history), from an id seen so far, or from nothing.
		o := opened{after: d.newest() * int64(i%3) / 2}
		if i%4 == 3 {
			o.fresh = true
		}
		hdr := map[string]string{"Last-Event-ID": strconv.FormatInt(o.after, 10)}
		if o.fresh {
			hdr = nil
		}
		code, _, ch := d.open(ctx, mine, "", hdr)
		if code != http.StatusOK {
			t.Fatalf("stream %d: %d", i, code)
		}
		if o.fresh {
			// A fresh stream starts at the hub's position when it joined: at most the newest id now.
			o.after = -1
		}
		o.ch = ch
		streams = append(streams, o)
		time.Sleep(time.Duration(i) * time.Millisecond) // spread the joins over the writes (not synchronisation)
	}
	_, _, other := d.open(ctx, theirs, "", map[string]string{"Last-Event-ID": "0"})
	writers.Wait()
	if t.Failed() {
		return
	}
	// A last event for each trader marks the end of what the streams must show.
	d.deposit(a2, "last-mine")
	d.deposit(b, "last-theirs")
	all := d.list(701, 0)
	last := all[len(all)-1].ID
	for i, o := range streams {
		got := readUntil(t, o.ch, last)
		after := o.after
		if o.fresh {
			after = got[0].id - 1 // wherever it joined, it sees everything from its first event on
		}
		sameEvents(t, fmt.Sprintf("stream %d after %d", i, after), got, d.list(701, after))
	}
	theirsAll := d.list(702, 0)
	sameEvents(t, "the other trader's stream", readUntil(t, other, theirsAll[len(theirsAll)-1].ID), theirsAll)
	if n := testutil.ToFloat64(d.m.EventStreams); n != 13 {
		t.Fatalf("fxdesk_event_stream_subscribers = %v, want 13", n)
	}
	cancel()
	eventually(t, func() bool { return d.hub.Open() == 0 }, "every stream left")
	if n := testutil.ToFloat64(d.m.EventStreams); n != 0 {
		t.Fatalf("fxdesk_event_stream_subscribers = %v after every client left, want 0", n)
	}
	if n := testutil.ToFloat64(d.m.EventsDelivered); n < float64(len(all)) {
		t.Fatalf("fxdesk_event_stream_delivered_total = %v, want at least %d", n, len(all))
	}
}

// A fresh stream sees its first event: the one committed after it joined, and not the ones
// before.
func TestEventsStreamFreshStartsAtTheNextEvent(t *testing.T) {
	t.Parallel()
	d := newStreamDesk(t, "api_events_fresh", 8, 64)
	tok := d.token(711)
	a := d.account(711)
	d.deposit(a, "before")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, ch := d.open(ctx, tok, "", nil)
	eventually(t, func() bool { return d.hub.Open() == 1 }, "the stream joined")
	d.deposit(a, "after")
	all := d.list(711, 0)
	sameEvents(t, "fresh stream", readUntil(t, ch, all[1].ID), all[1:])
}

// accountId narrows the stream to one of the caller's accounts; ?after= resumes like
// Last-Event-ID, which wins when both are given (a reconnecting browser sends both).
func TestEventsStreamAccountAndAfter(t *testing.T) {
	t.Parallel()
	d := newStreamDesk(t, "api_events_account", 8, 64)
	tok := d.token(721)
	a1, a2 := d.account(721), d.account(721)
	for i := range 3 {
		d.deposit(a1, fmt.Sprintf("a1-%d", i))
		d.deposit(a2, fmt.Sprintf("a2-%d", i))
	}
	all := d.list(721, 0)
	var onA2 []events.Entry
	for _, e := range all {
		if e.AccountID == a2 {
			onA2 = append(onA2, e)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, ch := d.open(ctx, tok, fmt.Sprintf("?accountId=%d&after=0", a2), nil)
	sameEvents(t, "one account from after=0", readUntil(t, ch, onA2[2].ID), onA2)

	_, _, ch = d.open(ctx, tok, "?after=0", map[string]string{"Last-Event-ID": strconv.FormatInt(all[3].ID, 10)})
	sameEvents(t, "Last-Event-ID over after", readUntil(t, ch, all[5].ID), all[4:])
}

// A bad or unknown parameter, a bad Last-Event-ID, one past the newest event and another's
// account are refused, and nothing is streamed.
func TestEventsStreamRefusesBadRequests(t *testing.T) {
	t.Parallel()
	d := newStreamDesk(t, "api_events_refuse", 8, 64)
	tok := d.token(731)
	a := d.account(731)
	theirs := d.account(732)
	d.deposit(a, "one")
	newest := d.newest()
	for _, c := range []struct {
		query, lastID string
		code          int
	}{
		{"?after=x", "", http.StatusBadRequest},
		{"?after=-1", "", http.StatusBadRequest},
		{"?after=1&after=2", "", http.StatusBadRequest},
		{"?since=1", "", http.StatusBadRequest},
		{"?limit=5", "", http.StatusBadRequest},
		{"?accountId=0", "", http.StatusBadRequest},
		{"", "x", http.StatusBadRequest},
		{"", "-3", http.StatusBadRequest},
		{"", strconv.FormatInt(newest+1, 10), http.StatusBadRequest},
		{"?after=" + strconv.FormatInt(newest+1000, 10), "", http.StatusBadRequest},
		{fmt.Sprintf("?accountId=%d", theirs), "", http.StatusNotFound},
		{"?accountId=999999", "", http.StatusNotFound},
	} {
		var hdr map[string]string
		if c.lastID != "" {
			hdr = map[string]string{"Last-Event-ID": c.lastID}
		}
		if code, _, _ := d.open(context.Background(), tok, c.query, hdr); code != c.code {
			t.Errorf("stream %q Last-Event-ID %q: %d, want %d", c.query, c.lastID, code, c.code)
		}
	}
	if n := d.hub.Open(); n != 0 {
		t.Fatalf("%d streams open after refusals", n)
	}
}

// Past the per-token cap a stream is refused with 429 and Retry-After; a slot freed is a slot
// again.
func TestEventsStreamCapIsRefusedWith429(t *testing.T) {
	t.Parallel()
	d := newStreamDesk(t, "api_events_cap", 1, 64)
	tok := d.token(741)
	ctx, cancel := context.WithCancel(context.Background())
	code, _, ch := d.open(ctx, tok, "", nil)
	if code != http.StatusOK {
		t.Fatalf("first stream: %d", code)
	}
	code, hdr, _ := d.open(context.Background(), tok, "", nil)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") != streamRetryAfter {
		t.Fatalf("second stream of one token: %d Retry-After %q, want 429 with %s", code, hdr.Get("Retry-After"), streamRetryAfter)
	}
	if n := testutil.ToFloat64(d.m.Refused.WithLabelValues(metrics.RefusedStreamsToken)); n != 1 {
		t.Fatalf("refused streams_token = %v, want 1", n)
	}
	cancel()
	for ev := range ch {
		if ev.ended {
			break
		}
	}
	eventually(t, func() bool { return d.hub.Open() == 0 }, "the first stream left")
	if code, _, _ := d.open(context.Background(), tok, "", nil); code != http.StatusOK {
		t.Fatalf("after the first left: %d, want 200", code)
	}
}

// A stream whose buffer fills is ended, not waited for, and counted; resumed from the last id it
// wrote, it loses nothing.
func TestEventsStreamSlowStreamIsEndedAndResumes(t *testing.T) {
	t.Parallel()
	d := newStreamDesk(t, "api_events_slow", 8, 16)
	a := d.account(751)
	s, pos, err := d.hub.join(context.Background(), "k", 751, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		d.deposit(a, fmt.Sprintf("d%d", i))
	}
	select {
	case <-s.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream 20 events behind a buffer of 16 was not ended")
	}
	if n := testutil.ToFloat64(d.m.EventStreamsDropped); n != 1 {
		t.Fatalf("fxdesk_event_stream_dropped_total = %v, want 1", n)
	}
	// What it held is the first 16 after its position; the rest is the table's.
	var held []int64
	for len(s.frames) > 0 {
		held = append(held, (<-s.frames).id)
	}
	d.hub.leave(s)
	all := d.list(751, pos)
	if len(held) != 16 || held[0] != all[0].ID || held[15] != all[15].ID {
		t.Fatalf("the dropped stream held %v, want the first 16 of %d events", held, len(all))
	}
	_, _, ch := d.open(context.Background(), d.token(751), "", map[string]string{"Last-Event-ID": strconv.FormatInt(held[len(held)-1], 10)})
	sameEvents(t, "resumed after the drop", readUntil(t, ch, all[len(all)-1].ID), all[16:])
}

// Stopping the hub ends every stream (the server then drains) and refuses new ones with 503.
func TestEventsStreamEndsWhenTheHubStops(t *testing.T) {
	t.Parallel()
	d := newStreamDesk(t, "api_events_stop", 8, 64)
	tok := d.token(761)
	_, _, ch := d.open(context.Background(), tok, "", nil)
	eventually(t, func() bool { return d.hub.Open() == 1 }, "the stream joined")
	d.stopHub()
	<-d.hubDone
	select {
	case ev := <-ch:
		if !ev.ended {
			t.Fatalf("read %+v, want the stream's end", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end when the hub stopped")
	}
	code, hdr, _ := d.open(context.Background(), tok, "", nil)
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("a stream after the hub stopped: %d Retry-After %q, want 503 with one", code, hdr.Get("Retry-After"))
	}
	if _, _, err := d.hub.join(context.Background(), "k", 761, 0); fx.ErrorCode(err) != fx.EUNAVAILABLE {
		t.Fatalf("join after stop: %v, want EUNAVAILABLE", err)
	}
}

// eventually polls cond until it holds, failing after 10 s.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, what, cond)
}

// The resume id a client sends, as a header or a query parameter, is a whole number 0 or more or
// a clear EINVALID naming where it came from; the header wins over the query.
func FuzzResumeAfter(f *testing.F) {
	for _, s := range []string{"0", "42", "-1", "", " 7", "1e3", "9223372036854775808", "0x10", "+5", "007"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, header, query string) {
		for _, withHeader := range []bool{true, false} {
			req := httptest.NewRequest(http.MethodGet, "/api/fx/events/stream?after="+url.QueryEscape(query), nil)
			raw, name := query, "after"
			if withHeader {
				req.Header.Set("Last-Event-ID", header)
				raw, name = header, "Last-Event-ID"
			}
			after, from, err := resumeAfter(req)
			if err != nil {
				if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), name) {
					t.Fatalf("%s %q: %v, want EINVALID naming %s", name, raw, err, name)
				}
				continue
			}
			n, perr := strconv.ParseInt(raw, 10, 64)
			if perr != nil || n < 0 || after != n || from != name {
				t.Fatalf("%s %q: resumed after %d from %q", name, raw, after, from)
			}
		}
	})
}
