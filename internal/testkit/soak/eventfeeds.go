package soak

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/redisname"
	"fxdesk/internal/testkit/soak/invariant"
)

// The events feeds (docs/architecture.md, «Events»): each trader holds the trader's events
// stream open for the whole load, resuming across every kill, stop and cut, and at the end the
// soak reads the host platform's Redis Stream whole.
const (
	// streamIdle is how long a stream may send nothing before its client gives up on it: the
	// desk sends a keep-alive every 15 s, a SIGSTOPped process sends nothing.
	streamIdle = 20 * time.Second
	// feedsSettle bounds the end's waits: for each client to have its user's newest event, and
	// for the relay to reach the table's newest.
	feedsSettle = 30 * time.Second
)

// streamHTTP is the stream clients' own pool: a held stream must not take a connection the
// traders' requests wait for. A stream whose status line is late is as good as refused.
var streamHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second,
	ResponseHeaderTimeout: 5 * time.Second, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}

// eventClient is one trader's events stream client.
type eventClient struct {
	t    *trader
	rng  *rand.Rand    // its own: the trader's draws stay the trader's
	idle time.Duration // streamIdle

	mu  sync.Mutex
	rec invariant.StreamClient
}

func newEventClient(t *trader, seed uint64, i int) *eventClient {
	return &eventClient{t: t, rng: rand.New(rand.NewPCG(seed^0xe4e7, uint64(i+1))), idle: streamIdle,
		rec: invariant.StreamClient{Client: t.name, User: t.user}}
}

func (ec *eventClient) last() int64 {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if n := len(ec.rec.Seen); n > 0 {
		return ec.rec.Seen[n-1].ID
	}
	return ec.rec.After
}

func (ec *eventClient) record() invariant.StreamClient {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	r := ec.rec
	r.Seen = append([]invariant.SeenEvent(nil), ec.rec.Seen...)
	return r
}

// web picks a live, running web process as the trader lane does (at random among them).
func (ec *eventClient) web() *proc {
	var up []*proc
	for _, w := range ec.t.c.live("web") {
		if !w.isStopped() {
			up = append(up, w)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[ec.rng.IntN(len(up))]
}

// run holds a stream open until ctx ends, resuming after the last event it has whenever one
// ends, fails or goes quiet.
func (ec *eventClient) run(ctx context.Context) {
	first := true
	for ctx.Err() == nil {
		if p := ec.web(); p != nil {
			ec.stream(ctx, p, first)
			first = false
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(200+ec.rng.IntN(300)) * time.Millisecond):
		}
	}
}

// stream opens one stream on p — the first with ?after=, a resume with Last-Event-ID, as a
// browser's EventSource does — and records its events until it ends.
func (ec *eventClient) stream(ctx context.Context, p *proc, first bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	after := ec.last()
	path := "/api/fx/events/stream"
	if first {
		path += "?after=" + strconv.FormatInt(after, 10)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+ec.t.token)
	req.Header.Set("X-Forwarded-For", clientAddress(ec.t.name))
	req.Header.Set("Accept", "text/event-stream")
	if !first {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := streamHTTP.Do(req)
	if err != nil {
		ec.refused()
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		ec.refused()
		return
	}
	ec.mu.Lock()
	ec.rec.Connects++
	ec.mu.Unlock()
	// No byte for streamIdle ends the stream: a SIGSTOPped process holds it open and silent.
	idle := time.AfterFunc(ec.idle, cancel)
	defer idle.Stop()
	rd := bufio.NewReader(&touchReader{r: resp.Body, touch: func() { idle.Reset(ec.idle) }})
	var id, typ, data string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return // the partial frame is dropped: the resume asks for it again
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if id != "" {
				ec.seen(id, typ, data)
			}
			id, typ, data = "", "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "event:"):
			typ = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[5:], " ")
		}
	}
}

func (ec *eventClient) refused() {
	ec.mu.Lock()
	ec.rec.Refused++
	ec.mu.Unlock()
}

// seen records one whole frame; a frame whose id or data cannot be read is recorded as id 0
// of type "unreadable: …", which no table event matches.
func (ec *eventClient) seen(id, typ, data string) {
	e := invariant.SeenEvent{Type: typ}
	var b struct {
		AccountID int64 `json:"accountId"`
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err == nil {
		err = json.Unmarshal([]byte(data), &b)
	}
	if err != nil {
		e.Type = "unreadable: " + invariant.Truncate(id+" "+data, 80)
	} else {
		e.ID, e.Account = n, b.AccountID
	}
	ec.mu.Lock()
	ec.rec.Seen = append(ec.rec.Seen, e)
	ec.mu.Unlock()
}

// touchReader calls touch on every read that returned bytes.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t *touchReader) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// eventFeeds are the stream clients of one soak.
type eventFeeds struct {
	clients []*eventClient
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// startEventFeeds opens a stream for each trader, from the first event (?after=0): what each
// sees is compared with all its user's events.
func startEventFeeds(traders []*trader, seed uint64) *eventFeeds {
	ctx, stop := context.WithCancel(context.Background())
	f := &eventFeeds{stop: stop}
	for i, t := range traders {
		ec := newEventClient(t, seed, i)
		f.clients = append(f.clients, ec)
		f.wg.Go(func() { ec.run(ctx) })
	}
	return f
}

// finish waits, within feedsSettle, until every client has its user's newest event in db, then
// closes the streams and returns what each saw.
func (f *eventFeeds) finish(ctx context.Context, db *sql.DB) []invariant.StreamClient {
	deadline := time.Now().Add(feedsSettle)
	var wg sync.WaitGroup
	for _, ec := range f.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				var newest int64
				err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(`id`), 0) FROM `fx_event` WHERE `userId` = ?", ec.t.user).Scan(&newest)
				if err == nil {
					ec.mu.Lock()
					ec.rec.UpTo = newest
					ec.mu.Unlock()
					if ec.last() >= newest {
						return
					}
				}
				if time.Now().After(deadline) {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	f.stop()
	f.wg.Wait()
	var out []invariant.StreamClient
	for _, ec := range f.clients {
		out = append(out, ec.record())
	}
	return out
}

// close ends the streams without waiting for anything (an interrupted or failed soak).
func (f *eventFeeds) close() {
	f.stop()
	f.wg.Wait()
}

// readRedisStream waits, within feedsSettle, until the relay's position (fx_event_relay
// 'stream') reaches the table's newest event, then reads the whole Redis Stream of the soak's
// desk (the default prefix's <prefix>:events) from the soak's own Redis client, in pages.
func (c *cluster) readRedisStream(ctx context.Context) invariant.RedisStream {
	var rs invariant.RedisStream
	if err := c.direct.QueryRowContext(ctx, "SELECT COALESCE(MAX(`id`), 0) FROM `fx_event`").Scan(&rs.Target); err != nil {
		rs.Err = "the table's newest event: " + err.Error()
		return rs
	}
	deadline := time.Now().Add(feedsSettle)
	for ctx.Err() == nil {
		err := c.direct.QueryRowContext(ctx, "SELECT `position` FROM `fx_event_relay` WHERE `name` = 'stream'").Scan(&rs.Position)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			rs.Err = "the relay's position: " + err.Error()
			return rs
		}
		if rs.Position >= rs.Target || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	key := redisname.Names{}.Events()
	start := "-"
	for {
		page, err := c.rdb.XRangeN(ctx, key, start, "+", 1000).Result()
		if err != nil {
			rs.Err = fmt.Sprintf("XRANGE %s %s + COUNT 1000: %v", key, start, err)
			return rs
		}
		for _, m := range page {
			rs.Entries = append(rs.Entries, streamEntry(m))
		}
		if len(page) < 1000 {
			return rs
		}
		next, err := nextEntryID(page[len(page)-1].ID)
		if err != nil {
			rs.Err = err.Error()
			return rs
		}
		start = next
	}
}

// streamEntry reads the fields the check compares of one entry.
func streamEntry(m redis.XMessage) invariant.StreamEntry {
	e := invariant.StreamEntry{EntryID: m.ID}
	var bad []string
	num := func(field string) int64 {
		s, _ := m.Values[field].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s=%v", field, m.Values[field]))
		}
		return n
	}
	e.ID, e.Account, e.User = num("id"), num("accountId"), num("userId")
	e.Type, _ = m.Values["type"].(string)
	if len(bad) > 0 {
		e.Unreadable = strings.Join(bad, " ")
	}
	return e
}

// nextEntryID is the smallest entry id after id (ms-seq).
func nextEntryID(id string) (string, error) {
	ms, seq, ok := strings.Cut(id, "-")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil {
		return "", fmt.Errorf("stream entry id %q is not ms-seq", id)
	}
	return ms + "-" + strconv.FormatUint(n+1, 10), nil
}

// finalFeedsCheck ends the stream clients once each has its user's newest event, reads the
// Redis Stream once the relay has caught up, and judges both on a snapshot read after them:
// every event either saw is in it.
func finalFeedsCheck(ctx context.Context, c *cluster, f *eventFeeds, logger interface{ Printf(string, ...any) }) []invariant.Result {
	clients := f.finish(ctx, c.direct)
	rs := c.readRedisStream(ctx)
	seen, connects, refused := 0, 0, 0
	for _, cl := range clients {
		seen, connects, refused = seen+len(cl.Seen), connects+cl.Connects, refused+cl.Refused
	}
	logger.Printf("soak: events feeds: %d stream clients saw %d events over %d streams (%d attempts refused or unanswered); "+
		"the Redis Stream holds %d entries, the relay at %d of %d", len(clients), seen, connects, refused, len(rs.Entries), rs.Position, rs.Target)
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var s *invariant.Snapshot
		if s, err = invariant.ReadSnapshot(ctx, c.direct, c.scope); err == nil {
			return []invariant.Result{invariant.CheckEventStreams(s, clients), invariant.CheckRedisStream(s, rs)}
		}
		logger.Printf("soak: final feeds check: %v", err)
	}
	rows := []invariant.Result{{Name: "eventStreams"}, {Name: "redisStream"}}
	for i := range rows {
		rows[i].Add("snapshot", "no snapshot to judge on: %v", err)
	}
	return rows
}
