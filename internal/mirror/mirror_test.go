package mirror_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/alert"
	"fxdesk/internal/mirror"
	"fxdesk/internal/redisname"
	"fxdesk/internal/session"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/tick"
)

var (
	testRedis *dbtest.Redis
	testDB    *sql.DB
	keySeq    atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainWithRedis(m, "mirror", &testDB, &testRedis, nil)) }

// clock moves only when told. It starts from time.Now, so it carries a monotonic reading as the
// real clock does; Set replaces the reading with a wall time (used for calendar tests only).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(offset time.Duration) *clock { return &clock{now: time.Now().Add(offset)} }
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// source stands in for the tick engine with the same costs for the two reads the publisher
// makes: LastTick is a map read, Wanted clones a list kept sorted as symbols are added.
type source struct {
	mu     sync.RWMutex
	q      map[string]tick.Quote
	wanted []string
}

func newSource() *source { return &source{q: map[string]tick.Quote{}} }
func (s *source) Set(symbol string, bid, ask float64, receivedAt time.Time) {
	s.mu.Lock()
	if _, ok := s.q[symbol]; !ok {
		s.wanted = nil
	}
	s.q[symbol] = tick.Quote{Bid: bid, Ask: ask, ReceivedAt: receivedAt, ProviderTime: receivedAt.Add(-time.Millisecond).Truncate(time.Millisecond)}
	s.mu.Unlock()
}
func (s *source) LastTick(symbol string) (tick.Quote, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q, ok := s.q[symbol]
	return q, ok
}
func (s *source) SymbolState(string) tick.State { return tick.Quoting }
func (s *source) Wanted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wanted == nil {
		s.wanted = slices.Sorted(maps.Keys(s.q))
	}
	return slices.Clone(s.wanted)
}

// logBuf collects JSON log lines from several goroutines.
type logBuf = dbtest.LogBuffer

type env struct {
	t      testing.TB
	rdb    *redis.Client
	names  redisname.Names
	keys   keyNames // names's mirror keys, for the test's own reads
	leader *clock
	local  *clock // the follower's machine
	src    *source
	logs   *logBuf
	log    *slog.Logger

	mu     sync.Mutex
	pinned [][]string // every SetPinned call
}

// keyNames are the quote mirror's Redis names of one install, as the test reads them.
type keyNames struct{ Snapshot, Pins, PinChannel string }

func keysOf(n redisname.Names) keyNames {
	return keyNames{Snapshot: n.QuoteMirrorSnapshot(), Pins: n.QuoteMirrorPins(), PinChannel: n.QuoteMirrorPinRequests()}
}

// newEnv gives each test its own install prefix, so tests share one redis-server and run in
// parallel.
func newEnv(t testing.TB) *env {
	rdb := redis.NewClient(&redis.Options{Addr: testRedis.Addr})
	t.Cleanup(func() { rdb.Close() })
	names, err := redisname.New(fmt.Sprintf("test%d", keySeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuf{}
	return &env{names: names, keys: keysOf(names),
		t: t, rdb: rdb, src: newSource(), logs: logs,
		log:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		leader: newClock(0), local: newClock(0),
	}
}

func (e *env) publisher(mod func(*mirror.SnapshotPublisherConfig)) *mirror.SnapshotPublisher {
	cfg := mirror.SnapshotPublisherConfig{
		Redis: e.rdb, Quotes: e.src, Names: e.names, Now: e.leader.Now,
		SetPinned: func(legs []string) error {
			e.mu.Lock()
			e.pinned = append(e.pinned, legs)
			e.mu.Unlock()
			return nil
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	return mustPublisher(e, cfg)
}

func (e *env) follower(mod func(*mirror.SnapshotFollowerConfig)) *mirror.SnapshotFollower {
	cfg := mirror.SnapshotFollowerConfig{Redis: e.rdb, Names: e.names, Now: e.local.Now}
	if mod != nil {
		mod(&cfg)
	}
	return mustFollower(e, cfg)
}

func (e *env) lastPinned() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pinned) == 0 {
		return nil
	}
	return e.pinned[len(e.pinned)-1]
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ageOf is what conversion code would compute: the follower's now minus the quote's ReceivedAt.
func ageOf(t testing.TB, f *mirror.SnapshotFollower, c *clock, symbol string) time.Duration {
	t.Helper()
	q, ok := f.LastTick(symbol)
	if !ok {
		t.Fatalf("LastTick(%s): no quote", symbol)
	}
	return c.Now().Sub(q.ReceivedAt)
}

func near(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }

// The snapshot appears under its key with a 15-minute TTL, the follower reads exact prices from
// it, and a later publish advances it.
func TestSnapshotAppearsAndAdvances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.src.Set("EURUSD", 1.08501, 1.08512, e.leader.Now())
	e.src.Set("USDJPY", 151.201, 151.215, e.leader.Now())
	pub, fol := e.publisher(nil), e.follower(nil)

	if _, ok := fol.LastTick("EURUSD"); ok {
		t.Fatal("a follower that never polled must have no quote")
	}
	must(t, pub.PublishOnce(ctx))
	ttl := e.rdb.PTTL(ctx, e.keys.Snapshot).Val()
	if !near(ttl, mirror.KeyTTL, 5*time.Second) {
		t.Fatalf("snapshot TTL %v, want about %v", ttl, mirror.KeyTTL)
	}
	must(t, fol.PollOnce(ctx))
	q, ok := fol.LastTick("EURUSD")
	if !ok || q.Bid != 1.08501 || q.Ask != 1.08512 {
		t.Fatalf("EURUSD = %+v, %v", q, ok)
	}
	if _, ok := fol.LastTick("GBPUSD"); ok {
		t.Fatal("GBPUSD was never published")
	}
	first := fol.Status()
	if first.Mode != mirror.Following || first.Symbols != 2 || !first.Advancing || first.LastPublishedAt.IsZero() {
		t.Fatalf("follower status %+v", first)
	}

	e.leader.Advance(5 * time.Second)
	e.local.Advance(5 * time.Second)
	e.src.Set("EURUSD", 1.08601, 1.08611, e.leader.Now())
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if q, _ := fol.LastTick("EURUSD"); q.Bid != 1.08601 {
		t.Fatalf("after advance EURUSD bid = %v", q.Bid)
	}
	second := fol.Status()
	if !second.LastPublishedAt.After(first.LastPublishedAt) {
		t.Fatalf("publishedAt did not advance: %v then %v", first.LastPublishedAt, second.LastPublishedAt)
	}
	if ps := pub.Status(); ps.Mode != mirror.Publishing || ps.Symbols != 2 || ps.Bytes != len(e.rdb.Get(ctx, e.keys.Snapshot).Val()) || ps.Dropped != 0 {
		t.Fatalf("publisher status %+v", ps)
	}
}

// What an operator sees with redis-cli GET: JSON with one line per symbol, prices as decimal
// strings in the instrument's digits, times RFC 3339 UTC with milliseconds, and the term.
func TestPlainGetIsReadableJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.leader = &clock{now: time.Date(2026, 12, 1, 18, 20, 10, 123_456_000, time.UTC)}
	e.src.Set("EURUSD", 1.085, 1.08512, e.leader.Now().Add(-22*time.Millisecond))
	e.src.Set("USDJPY", 151.201, 151.215, e.leader.Now().Add(-253*time.Millisecond))
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.Digits = func(s string) int { return map[string]int{"EURUSD": 5, "USDJPY": 3}[s] }
		c.Term = func() int64 { return 7 }
	})
	must(t, pub.PublishOnce(ctx))
	raw, err := e.rdb.Get(ctx, e.keys.Snapshot).Result()
	must(t, err)
	var doc struct {
		Version     int    `json:"version"`
		PublishedAt string `json:"publishedAt"`
		Term        int64  `json:"term"`
		Symbols     int    `json:"symbols"`
		Quotes      map[string]struct {
			Bid        string `json:"bid"`
			Ask        string `json:"ask"`
			ReceivedAt string `json:"receivedAt"`
		} `json:"quotes"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("GET %s is not JSON: %v\n%s", e.keys.Snapshot, err, raw)
	}
	eur, jpy := doc.Quotes["EURUSD"], doc.Quotes["USDJPY"]
	if doc.Version != 1 || doc.PublishedAt != "2026-12-01T18:20:10.123Z" || doc.Term != 7 || doc.Symbols != 2 ||
		eur.Bid != "1.08500" || eur.Ask != "1.08512" || eur.ReceivedAt != "2026-12-01T18:20:10.101Z" ||
		jpy.Bid != "151.201" || jpy.Ask != "151.215" || jpy.ReceivedAt != "2026-12-01T18:20:09.870Z" {
		t.Fatalf("GET %s reads %+v\n%s", e.keys.Snapshot, doc, raw)
	}
	if lines := strings.Count(raw, "\n"); lines != 3 {
		t.Fatalf("want one line per symbol (3 newlines), got %d:\n%s", lines, raw)
	}
}

// symbols returns n distinct desk symbols: AAAAAA, AAAAAB, …
func symbols(n int) []string {
	out := make([]string, n)
	for i := range n {
		b := []byte("AAAAAA")
		for j, v := 5, i; j >= 0 && v > 0; j, v = j-1, v/26 {
			b[j] = byte('A' + v%26)
		}
		out[i] = string(b)
	}
	return out
}

// Over the 5,000-symbol cap the snapshot keeps pinned and exposed symbols (which sort last here,
// so symbol order alone would drop them), fills the rest in symbol order, and logs at error how
// many were dropped.
func TestTruncationKeepsPinnedAndExposedFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	all := symbols(mirror.DefaultMaxSymbols + 10)
	for _, s := range all {
		e.src.Set(s, 1.1, 1.2, e.leader.Now())
	}
	for _, s := range []string{"USDJPY", "XAUUSD", "ZZZZZZ"} {
		e.src.Set(s, 2.1, 2.2, e.leader.Now())
	}
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.Exposed = func(context.Context) ([]string, error) { return []string{"XAUUSD", "ZZZZZZ"}, nil }
	})
	fol := e.follower(nil)
	must(t, fol.Pin(ctx, "USDJPY"))
	must(t, pub.PublishOnce(ctx)) // reads the pin
	must(t, pub.PublishOnce(ctx)) // publishes with it first
	must(t, fol.PollOnce(ctx))

	st := pub.Status()
	if st.Symbols != mirror.DefaultMaxSymbols || st.Dropped != 13 {
		t.Fatalf("published %d, dropped %d; want %d and 13", st.Symbols, st.Dropped, mirror.DefaultMaxSymbols)
	}
	for _, s := range []string{"USDJPY", "XAUUSD", "ZZZZZZ", all[0], all[mirror.DefaultMaxSymbols-4]} {
		if _, ok := fol.LastTick(s); !ok {
			t.Errorf("%s should have been kept", s)
		}
	}
	if _, ok := fol.LastTick(all[mirror.DefaultMaxSymbols-3]); ok {
		t.Errorf("%s should have been dropped to make room", all[mirror.DefaultMaxSymbols-3])
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `"level":"ERROR","msg":"quote mirror snapshot truncated`) || !strings.Contains(logs, `"dropped":13`) {
		t.Fatalf("no error log with the dropped count:\n%.2000s", logs)
	}
}

// Ages are measured on the leader's clock plus the follower's own monotonic time, so a leader
// clock hours ahead of or behind the follower's changes nothing.
func TestFollowerAgeIgnoresClockSkew(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{0, 3 * time.Hour, -7 * time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t)
			e.leader = newClock(skew)
			e.src.Set("EURUSD", 1.1, 1.2, e.leader.Now().Add(-2*time.Second)) // 2 s old when published
			pub := e.publisher(nil)
			fol := e.follower(func(c *mirror.SnapshotFollowerConfig) { c.MaxAge = time.Minute })
			must(t, pub.PublishOnce(ctx))
			must(t, fol.PollOnce(ctx))
			// The tolerance covers the real milliseconds between SET and the PTTL read.
			if got := ageOf(t, fol, e.local, "EURUSD"); !near(got, 2*time.Second, 200*time.Millisecond) {
				t.Fatalf("age right after the poll = %v, want 2s", got)
			}
			e.local.Advance(10 * time.Second)
			if got := ageOf(t, fol, e.local, "EURUSD"); !near(got, 12*time.Second, 200*time.Millisecond) {
				t.Fatalf("age 10 s later = %v, want 12s", got)
			}
			must(t, fol.PollOnce(ctx)) // the same snapshot again: its first sighting still counts
			if got := ageOf(t, fol, e.local, "EURUSD"); !near(got, 12*time.Second, 200*time.Millisecond) {
				t.Fatalf("age after re-reading the same snapshot = %v, want 12s", got)
			}
			e.local.Advance(49 * time.Second) // 61 s: past MaxAge, session open (no calendar)
			if _, ok := fol.LastTick("EURUSD"); ok {
				t.Fatal("a mid older than MaxAge in an open session must be refused")
			}
		})
	}
}

// A snapshot that sat in Redis before the follower first saw it (a follower starting next to a
// dead leader) is as old as the key's TTL says, not as fresh as the follower's first sighting.
func TestFollowerCountsTimeInRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.src.Set("EURUSD", 1.1, 1.2, e.leader.Now())
	must(t, e.publisher(nil).PublishOnce(ctx))
	must(t, e.rdb.PExpire(ctx, e.keys.Snapshot, mirror.KeyTTL-4*time.Minute).Err()) // as if published 4 min ago
	fol := e.follower(nil)
	must(t, fol.PollOnce(ctx))
	if got := ageOf(t, fol, e.local, "EURUSD"); !near(got, 4*time.Minute, time.Second) {
		t.Fatalf("age = %v, want 4m", got)
	}
}

// saturdayNoonNY is when the forex calendar is closed.
var saturdayNoonNY = func() time.Time {
	ny, _ := time.LoadLocation(session.NewYork)
	return time.Date(2025, 6, 14, 12, 0, 0, 0, ny)
}()

// While a symbol's session is closed its last mid serves however old it is; a symbol whose
// session is open is refused past MaxAge.
func TestClosedSessionServesLastMid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.local = &clock{now: saturdayNoonNY}
	e.src.Set("EURUSD", 1.1, 1.2, e.leader.Now())
	e.src.Set("XAUUSD", 2300.1, 2300.5, e.leader.Now())
	must(t, e.publisher(nil).PublishOnce(ctx))
	fol := e.follower(func(c *mirror.SnapshotFollowerConfig) {
		c.MaxAge = time.Minute
		c.CalendarFor = func(symbol string) *session.Calendar {
			if symbol == "EURUSD" {
				return session.Forex()
			}
			return session.AlwaysOpen()
		}
	})
	must(t, fol.PollOnce(ctx))
	e.local.Advance(2 * time.Hour) // still Saturday
	if q, ok := fol.LastTick("EURUSD"); !ok || q.Bid != 1.1 {
		t.Fatalf("closed session: EURUSD = %+v, %v; the last mid must serve", q, ok)
	}
	if _, ok := fol.LastTick("XAUUSD"); ok {
		t.Fatal("open session: a 2-hour-old XAUUSD must be refused")
	}
	must(t, fol.PollOnce(ctx))
	if got := fol.Status().Refused; !slices.Equal(got, []string{"XAUUSD"}) {
		t.Fatalf("refused = %v, want [XAUUSD]", got)
	}
}

// Before the leader has published anything, the follower's GET finds no snapshot; its pin
// write in the same round trip still counts, so the next poll within PinRefresh leaves the
// stamp alone instead of rewriting it on every poll.
func TestPinWrittenWithoutSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	fol := e.follower(nil)
	must(t, fol.Pin(ctx, "USDJPY"))
	fol.PollOnce(ctx) // no snapshot yet: the poll reports it, and writes the pin set
	stamp := e.rdb.HGet(ctx, e.keys.Pins, "USDJPY").Val()
	e.local.Advance(mirror.PinRefresh / 2)
	fol.PollOnce(ctx)
	if got := e.rdb.HGet(ctx, e.keys.Pins, "USDJPY").Val(); got != stamp {
		t.Fatalf("pin rewritten within PinRefresh while no snapshot exists: %q → %q", stamp, got)
	}
}

// A leg the follower pins reaches the engine through SetPinned, appears in a later snapshot, is
// kept alive by the follower's refreshes and let go once they stop.
func TestPinRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.src.Set("EURUSD", 1.1, 1.2, e.leader.Now())
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.SetPinned = func(legs []string) error { // the engine: subscribing brings quotes
			e.mu.Lock()
			e.pinned = append(e.pinned, legs)
			e.mu.Unlock()
			for _, s := range legs {
				e.src.Set(s, 151.2, 151.3, e.leader.Now())
			}
			return nil
		}
	})
	fol := e.follower(nil)
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if _, ok := fol.LastTick("USDJPY"); ok {
		t.Fatal("USDJPY before the pin")
	}
	if err := fol.Pin(ctx, "usdjpy"); err == nil {
		t.Fatal("a lower-case pin must be refused")
	}
	must(t, fol.Pin(ctx, "USDJPY"))
	if ttl := e.rdb.PTTL(ctx, e.keys.Pins).Val(); !near(ttl, mirror.KeyTTL, 5*time.Second) {
		t.Fatalf("pin key TTL %v", ttl)
	}
	// Under Run the announcement on the pin channel makes the leader read the pins at once
	// (TestPinNudgeUnderRun). Without it, a publish within PinRefresh of the last read does not
	// read them; the first one after does: the safety net for a missed announcement.
	must(t, pub.PublishOnce(ctx))
	if got := e.lastPinned(); len(got) != 0 {
		t.Fatalf("pins read again within PinRefresh: SetPinned got %v", got)
	}
	e.leader.Advance(mirror.PinRefresh)
	must(t, pub.PublishOnce(ctx))
	if got := e.lastPinned(); !slices.Equal(got, []string{"USDJPY"}) {
		t.Fatalf("SetPinned got %v", got)
	}
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if q, ok := fol.LastTick("USDJPY"); !ok || q.Bid != 151.2 {
		t.Fatalf("USDJPY after the pin = %+v, %v", q, ok)
	}
	if st := pub.Status(); !slices.Equal(st.Pinned, []string{"USDJPY"}) {
		t.Fatalf("publisher status pinned %v", st.Pinned)
	}

	// The follower keeps refreshing: 14 minutes later the pin is still live. A poll within
	// PinRefresh of the last write leaves the stamp alone; the one after rewrites it.
	stamp := e.rdb.HGet(ctx, e.keys.Pins, "USDJPY").Val()
	e.local.Advance(mirror.PinRefresh / 2)
	must(t, fol.PollOnce(ctx))
	if got := e.rdb.HGet(ctx, e.keys.Pins, "USDJPY").Val(); got != stamp {
		t.Fatalf("pin rewritten before PinRefresh: %q → %q", stamp, got)
	}
	e.leader.Advance(14 * time.Minute)
	e.local.Advance(14 * time.Minute)
	must(t, fol.PollOnce(ctx))
	if got := e.rdb.HGet(ctx, e.keys.Pins, "USDJPY").Val(); got == stamp {
		t.Fatal("pin not rewritten after PinRefresh")
	}
	must(t, pub.PublishOnce(ctx))
	e.leader.Advance(14 * time.Minute)
	must(t, pub.PublishOnce(ctx))
	if got := e.lastPinned(); !slices.Equal(got, []string{"USDJPY"}) {
		t.Fatalf("refreshed pin lapsed: %v", got)
	}
	// No refresh for a whole TTL on the leader's clock: the leg is let go.
	e.leader.Advance(2 * time.Minute)
	must(t, pub.PublishOnce(ctx))
	if got := e.lastPinned(); len(got) != 0 {
		t.Fatalf("unrefreshed pin still live: %v", got)
	}
}

// A pin read that SetPinned refused does not count as read: the next publish reads again rather
// than a PinRefresh later.
func TestRefusedPinsReadAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	var calls int
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		c.SetPinned = func(legs []string) error {
			calls++
			if calls == 1 {
				return errors.New("subscription refused")
			}
			return nil
		}
	})
	must(t, e.follower(nil).Pin(ctx, "USDJPY"))
	if err := pub.PublishOnce(ctx); err == nil {
		t.Fatal("the refused SetPinned was not reported")
	}
	e.leader.Advance(mirror.DefaultInterval)
	must(t, pub.PublishOnce(ctx))
	if calls != 2 {
		t.Fatalf("SetPinned called %d times, want a second call on the next publish", calls)
	}
	if st := pub.Status(); !slices.Equal(st.Pinned, []string{"USDJPY"}) {
		t.Fatalf("pinned after the retry: %v", st.Pinned)
	}
}

// runPublisher runs a publisher under Run for the rest of the test, with no periodic cycle
// after the first (its interval is an hour), and returns a wait for its next SetPinned call.
// Before returning it waits for that first cycle's call, made once the pin subscription is
// confirmed, and checks that it pinned nothing. client, when not nil, is the publisher's Redis.
func runPublisher(t *testing.T, e *env, client *redis.Client) (wait func() []string) {
	t.Helper()
	calls := make(chan []string, 64)
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
		if client != nil {
			c.Redis = client
		}
		c.Interval = time.Hour // only a nudge or a resubscription can deliver within the test
		c.Now = time.Now
		c.SetPinned = func(legs []string) error {
			select { // never block the publisher on a test that stopped waiting: its stop would hang
			case calls <- legs:
			default:
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pub.Run(ctx) }()
	t.Cleanup(func() { cancel(); poll.Receive(t, done, 10*time.Second, "Run returning after its context ended") })
	wait = func() []string {
		t.Helper()
		select {
		case legs := <-calls:
			return legs
		case <-time.After(10 * time.Second):
			t.Fatal("SetPinned was not called")
			return nil
		}
	}
	if got := wait(); len(got) != 0 {
		t.Fatalf("first SetPinned %v", got)
	}
	return wait
}

// A pin written while the leader's subscription was down (its nudge lost) is read as soon as
// the subscription comes back, not a PinRefresh later.
func TestPinsReadAfterResubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	// The leader's own client, named, so that only its subscription is cut (the package's tests
	// share one redis-server).
	name := "leader-" + e.keys.Pins
	leader := redis.NewClient(&redis.Options{Addr: testRedis.Addr, ClientName: name})
	t.Cleanup(func() { leader.Close() })
	wait := runPublisher(t, e, leader)
	// The pin lands without its nudge, as when the announcement is published while the
	// leader's subscription is down; then the subscription connection is cut.
	must(t, e.rdb.HSet(ctx, e.keys.Pins, "USDJPY", "1-1").Err())
	var killed int
	for line := range strings.Lines(e.rdb.ClientList(ctx).Val()) {
		if strings.Contains(line, " name="+name+" ") && strings.Contains(line, "sub=1") {
			for f := range strings.FieldsSeq(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					must(t, e.rdb.Do(ctx, "CLIENT", "KILL", "ID", id).Err())
					killed++
				}
			}
		}
	}
	if killed != 1 {
		t.Fatalf("cut %d subscription connections of the leader, want 1:\n%s", killed, e.rdb.ClientList(ctx).Val())
	}
	if got := wait(); !slices.Equal(got, []string{"USDJPY"}) {
		t.Fatalf("SetPinned after the resubscription %v", got)
	}
}

// Under Run, a pin reaches SetPinned through the nudge at once, without waiting for the interval.
func TestPinNudgeUnderRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wait := runPublisher(t, e, nil)
	must(t, e.follower(nil).Pin(context.Background(), "GBPJPY", "EURUSD"))
	if got := wait(); !slices.Equal(got, []string{"EURUSD", "GBPJPY"}) {
		t.Fatalf("SetPinned after the nudge %v", got)
	}
}

func clearAlerts(t *testing.T) *alert.Inbox {
	t.Helper()
	_, err := testDB.Exec("DELETE FROM `fx_execution_alert`")
	must(t, err)
	return alert.NewInbox(testDB, slog.New(slog.DiscardHandler))
}

func alertsWith(t *testing.T, in *alert.Inbox, code string) []alert.Alert {
	t.Helper()
	all, err := in.List(context.Background(), alert.Filter{Code: code})
	must(t, err)
	return all
}

// quote-mirror-unavailable is raised only while the desk has exposure, names both causes, and is
// resolved when the snapshot advances; a snapshot that stops advancing raises it again.
// Not parallel: the alert codes are fixed and the table is shared.
func TestUnavailableAlertOnlyWithExposure(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	inbox := clearAlerts(t)
	var exposed atomic.Bool
	fol := e.follower(func(c *mirror.SnapshotFollowerConfig) {
		c.Alerts = inbox
		c.HasExposure = func(context.Context) (bool, error) { return exposed.Load(), nil }
	})

	must(t, fol.PollOnce(ctx)) // no snapshot, idle desk
	if got := alertsWith(t, inbox, mirror.AlertUnavailable); len(got) != 0 {
		t.Fatalf("idle desk raised %+v", got)
	}
	exposed.Store(true)
	must(t, fol.PollOnce(ctx))
	got := alertsWith(t, inbox, mirror.AlertUnavailable)
	if len(got) != 1 || got[0].Status != alert.Open || got[0].Severity != alert.Critical {
		t.Fatalf("with exposure: %+v", got)
	}
	for _, cause := range []string{"CRON_MODE=off", "do not share the same Redis"} {
		if !strings.Contains(got[0].Message, cause) {
			t.Errorf("message lacks %q: %s", cause, got[0].Message)
		}
	}
	if fol.Status().Advancing {
		t.Fatal("status says advancing with no snapshot")
	}

	e.src.Set("EURUSD", 1.1, 1.2, e.leader.Now())
	pub := e.publisher(nil)
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if got := alertsWith(t, inbox, mirror.AlertUnavailable); len(got) != 1 || got[0].Status != alert.Resolved {
		t.Fatalf("after the snapshot appeared: %+v", got)
	}

	// The leader stops: two intervals of the same snapshot are tolerated, more are not.
	e.local.Advance(2 * mirror.DefaultInterval)
	must(t, fol.PollOnce(ctx))
	if got := alertsWith(t, inbox, mirror.AlertUnavailable); got[0].Status != alert.Resolved {
		t.Fatalf("raised within two intervals: %+v", got[0])
	}
	e.local.Advance(time.Second)
	must(t, fol.PollOnce(ctx))
	must(t, fol.PollOnce(ctx))
	got = alertsWith(t, inbox, mirror.AlertUnavailable)
	if len(got) != 2 || got[0].Status != alert.Open || got[0].Count != 2 || !strings.Contains(string(got[0].Details), `"not advancing"`) {
		t.Fatalf("stopped leader: %+v", got)
	}

	e.leader.Advance(mirror.DefaultInterval)
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if got := alertsWith(t, inbox, mirror.AlertUnavailable); got[0].Status != alert.Resolved {
		t.Fatalf("leader back: %+v", got[0])
	}
	if !fol.Status().Advancing {
		t.Fatal("status says not advancing after the leader returned")
	}
}

// quote-mirror-stale names each symbol refused for age in an open session, and is resolved once
// none is. Not parallel: the alert codes are fixed and the table is shared.
func TestStaleAlertNamesSymbols(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	inbox := clearAlerts(t)
	now := e.leader.Now()
	e.src.Set("EURUSD", 1.1, 1.2, now)
	e.src.Set("NZDCHF", 0.5, 0.6, now.Add(-20*time.Minute)) // a quiet cross
	e.src.Set("USDSEK", 10.1, 10.2, now.Add(-16*time.Minute))
	pub := e.publisher(nil)
	fol := e.follower(func(c *mirror.SnapshotFollowerConfig) { c.Alerts = inbox })
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	got := alertsWith(t, inbox, mirror.AlertStale)
	if len(got) != 1 || got[0].Status != alert.Open {
		t.Fatalf("stale alert: %+v", got)
	}
	for _, s := range []string{"NZDCHF", "USDSEK"} {
		if !strings.Contains(got[0].Message, s) || !strings.Contains(string(got[0].Details), `"`+s+`"`) {
			t.Errorf("stale alert does not name %s: %s %s", s, got[0].Message, got[0].Details)
		}
	}
	if strings.Contains(got[0].Message, "EURUSD") {
		t.Errorf("stale alert names the fresh EURUSD: %s", got[0].Message)
	}
	if got := alertsWith(t, inbox, mirror.AlertUnavailable); len(got) != 0 {
		t.Fatalf("a fresh snapshot raised unavailable: %+v", got)
	}

	e.leader.Advance(mirror.DefaultInterval)
	e.src.Set("NZDCHF", 0.5, 0.6, e.leader.Now())
	e.src.Set("USDSEK", 10.1, 10.2, e.leader.Now())
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if got := alertsWith(t, inbox, mirror.AlertStale); got[0].Status != alert.Resolved {
		t.Fatalf("stale alert not resolved: %+v", got[0])
	}
}

// A value that is not a snapshot is reported, and the last good snapshot keeps serving.
func TestFollowerRejectsGarbage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.src.Set("EURUSD", 1.1, 1.2, e.leader.Now())
	fol := e.follower(nil)
	must(t, e.publisher(nil).PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	must(t, e.rdb.Set(ctx, e.keys.Snapshot, `{"EURUSD":1}`, time.Minute).Err())
	if err := fol.PollOnce(ctx); err == nil {
		t.Fatal("garbage snapshot accepted")
	}
	if _, ok := fol.LastTick("EURUSD"); !ok {
		t.Fatal("the last good snapshot must keep serving")
	}
}

// walkingSource adds the tick engine's ordered walk to the test source.
type walkingSource struct {
	*source
	walks *atomic.Int32
}

func (w walkingSource) EachWantedQuote(fn func(string, *tick.Quote)) {
	w.walks.Add(1)
	for _, s := range w.Wanted() {
		if q, ok := w.LastTick(s); ok {
			fn(s, &q)
		}
	}
}

// A source that walks its quotes (the tick engine) is encoded in one pass: every quote arrives
// intact, beyond the buffer's first size, and over the cap the publisher falls back to the
// truncating path that logs what it dropped.
func TestWalkingSourcePublishesEverySymbol(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	syms := symbols(130)
	for i, s := range syms {
		e.src.Set(s, 1+float64(i)/1000, 1.0001+float64(i)/1000, e.leader.Now())
	}
	walk := walkingSource{e.src, new(atomic.Int32)}
	pub, fol := e.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Quotes = walk }), e.follower(nil)
	must(t, pub.PublishOnce(ctx))
	must(t, fol.PollOnce(ctx))
	if walk.walks.Load() != 1 {
		t.Fatalf("publisher walked the source %d times, want once", walk.walks.Load())
	}
	if got := fol.Status().Symbols; got != len(syms) {
		t.Fatalf("follower sees %d symbols, want %d", got, len(syms))
	}
	for i, s := range syms {
		q, ok := fol.LastTick(s)
		if !ok || q.Bid != 1+float64(i)/1000 || q.Ask != 1.0001+float64(i)/1000 {
			t.Fatalf("%s = %+v, %v", s, q, ok)
		}
	}

	capped := e.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Quotes = walk; c.MaxSymbols = 100 })
	must(t, capped.PublishOnce(ctx))
	if st := capped.Status(); st.Symbols != 100 || st.Dropped != 30 {
		t.Fatalf("capped publish: %d symbols, %d dropped; want 100 and 30", st.Symbols, st.Dropped)
	}
}

// engineSource keeps quotes as the tick engine does: the wanted symbols, walked in order, and a
// slot per symbol ever wanted, so LastTick still answers for a symbol no longer wanted. It counts
// the calls a publish makes outside the walk.
type engineSource struct {
	wanted  []string // sorted
	q       map[string]*tick.Quote
	lookups atomic.Int32 // LastTick
	lists   atomic.Int32 // Wanted
}

func newEngineSource(wanted []string, alsoQuoted ...string) *engineSource {
	s := &engineSource{wanted: wanted, q: map[string]*tick.Quote{}}
	for i, sym := range append(slices.Clone(wanted), alsoQuoted...) {
		s.q[sym] = &tick.Quote{Bid: 1 + float64(i)/1000, Ask: 1.0002 + float64(i)/1000, ReceivedAt: time.Now(), ProviderTime: time.Now()}
	}
	return s
}

func (s *engineSource) EachWantedQuote(fn func(string, *tick.Quote)) {
	for _, sym := range s.wanted {
		if q := s.q[sym]; q != nil {
			fn(sym, q)
		}
	}
}

func (s *engineSource) LastTick(symbol string) (tick.Quote, bool) {
	s.lookups.Add(1)
	if q := s.q[symbol]; q != nil {
		return *q, true
	}
	return tick.Quote{}, false
}

func (s *engineSource) SymbolState(string) tick.State { return tick.Quoting }

func (s *engineSource) Wanted() []string {
	s.lists.Add(1)
	return slices.Clone(s.wanted)
}

// Pins and exposure only order the snapshot when the cap bites, so under it a publish that has
// them still encodes straight from the engine's walk — what a split install with open positions
// does every interval. A priority leg the engine no longer wants but still has a quote for is
// published as it was before the walk took this path.
func TestPriorityLegsUnderTheCapKeepTheWalk(t *testing.T) {
	t.Parallel()
	wanted := symbols(40)
	for _, tc := range []struct {
		name            string
		exposed, pinned []string
		alsoQuoted      []string // the engine has a quote but no longer wants them
		published       []string // beyond the wanted
		leavesTheWalk   bool
	}{
		{name: "no priority legs"},
		{name: "legs among the wanted", exposed: []string{wanted[39], wanted[3]}, pinned: []string{wanted[0], wanted[3]}},
		{name: "a leg never quoted", exposed: []string{wanted[5], "XAUUSD"}},
		{name: "a leg no longer wanted but quoted", exposed: []string{"USDJPY", wanted[5]}, alsoQuoted: []string{"USDJPY"},
			published: []string{"USDJPY"}, leavesTheWalk: true},
		{name: "a quoted symbol nobody asks for", alsoQuoted: []string{"USDJPY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t)
			src := newEngineSource(wanted, tc.alsoQuoted...)
			pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) {
				c.Quotes = src
				c.Exposed = func(context.Context) ([]string, error) { return tc.exposed, nil }
				c.Pinned = func() []string { return tc.pinned }
			})
			fol := e.follower(nil)
			must(t, pub.PublishOnce(ctx))
			must(t, fol.PollOnce(ctx))

			if left := src.lists.Load() > 0; left != tc.leavesTheWalk {
				t.Errorf("publish read the wanted list %d times; want leaving the walk = %v", src.lists.Load(), tc.leavesTheWalk)
			}
			if !tc.leavesTheWalk && int(src.lookups.Load()) > len(tc.exposed)+len(tc.pinned) {
				t.Errorf("%d LastTick look-ups for %d priority legs", src.lookups.Load(), len(tc.exposed)+len(tc.pinned))
			}
			all := append(slices.Clone(wanted), tc.published...)
			if st := fol.Status(); st.Symbols != len(all) {
				t.Fatalf("follower sees %d symbols, want %d", st.Symbols, len(all))
			}
			for _, s := range all {
				q, ok := fol.LastTick(s)
				if want := src.q[s]; !ok || q.Bid != want.Bid || q.Ask != want.Ask {
					t.Errorf("%s = %+v, %v; want %v / %v", s, q, ok, want.Bid, want.Ask)
				}
			}
		})
	}
}

// Two installs on one Redis server and database — production with the default prefix, staging
// with its own — keep their own snapshots and pins: each follower reads its own leader's prices,
// and a pin reaches only its own leader. Without prefixes both would share every name (pub/sub
// channels are shared by every database of a server anyway).
func TestTwoInstallsOnOneRedisKeepTheirOwnSnapshotsAndPins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prod, staging := newEnv(t), newEnv(t)
	prod.names, prod.keys = redisname.Names{}, keysOf(redisname.Names{})
	if prod.keys.Snapshot != "fx:quote-mirror:snapshot" || staging.keys.Snapshot == prod.keys.Snapshot {
		t.Fatalf("snapshot keys %q and %q", prod.keys.Snapshot, staging.keys.Snapshot)
	}
	prod.src.Set("EURUSD", 1.10001, 1.10011, prod.leader.Now())
	staging.src.Set("EURUSD", 1.20001, 1.20011, staging.leader.Now())
	for _, e := range []*env{prod, staging} {
		must(t, e.publisher(nil).PublishOnce(ctx))
	}
	for _, tc := range []struct {
		e   *env
		bid float64
	}{{prod, 1.10001}, {staging, 1.20001}} {
		f := tc.e.follower(nil)
		must(t, f.PollOnce(ctx))
		if q, ok := f.LastTick("EURUSD"); !ok || q.Bid != tc.bid {
			t.Fatalf("follower of %s reads EURUSD %+v, %v; want its own leader's bid %v", tc.e.names.Prefix(), q, ok, tc.bid)
		}
	}

	// Each leader's SetPinned calls arrive in order: staging's first call after its start being
	// its own pin alone proves it never picked up production's, announced before it.
	waitProd, waitStaging := runPublisher(t, prod, nil), runPublisher(t, staging, nil)
	must(t, prod.follower(nil).Pin(ctx, "USDJPY"))
	if got := waitProd(); !slices.Equal(got, []string{"USDJPY"}) {
		t.Fatalf("production's SetPinned %v, want [USDJPY]", got)
	}
	must(t, staging.follower(nil).Pin(ctx, "GBPJPY"))
	if got := waitStaging(); !slices.Equal(got, []string{"GBPJPY"}) {
		t.Fatalf("staging's SetPinned %v, want [GBPJPY] alone", got)
	}
	if pins := prod.rdb.HKeys(ctx, prod.keys.Pins).Val(); !slices.Equal(pins, []string{"USDJPY"}) {
		t.Fatalf("%s holds %v", prod.keys.Pins, pins)
	}
}
