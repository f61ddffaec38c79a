package mirror

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"fxdesk/internal/gate"
	"fxdesk/internal/redisname"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// fakeEngine hands the publisher the updates a test sends.
type fakeEngine struct{ ch chan tick.Update }

func (e *fakeEngine) Updates([]string) (<-chan tick.Update, func()) { return e.ch, func() {} }

// A quote's age is measured on the holder's clock: a follower whose clock is an hour off still
// reads the age the holder gave it, plus its own (monotonic) time since it heard the tick.
func TestDecodeAgesOnTheHoldersClock(t *testing.T) {
	t.Parallel()
	holderNow := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	u := tick.Update{Symbol: "EURUSD", Quote: tick.Quote{Bid: 1.1, Ask: 1.1002, ReceivedAt: holderNow.Add(-300 * time.Millisecond), ProviderTime: holderNow.Add(-time.Second), Source: "backup"}}
	b, err := encodeTick(u, 5, 4, holderNow)
	if err != nil {
		t.Fatal(err)
	}
	followerNow := time.Now().Add(time.Hour) // skewed, and monotonic
	sym, q, term, ok := decodeTick(b, followerNow)
	if !ok || sym != "EURUSD" || term != 4 || q.Bid != 1.1 || q.Ask != 1.1002 || q.Source != "backup" {
		t.Fatalf("decode = %s %+v term %d ok %v", sym, q, term, ok)
	}
	if age := followerNow.Sub(q.ReceivedAt); age != 300*time.Millisecond {
		t.Fatalf("age = %s, want the holder's 300ms", age)
	}
	if !q.ProviderTime.Equal(u.Quote.ProviderTime) {
		t.Fatalf("provider time = %s", q.ProviderTime)
	}
	// Undated, crossed or unparsable ticks are never stored.
	for _, bad := range []string{`{"symbol":"EURUSD","bid":"1.1","ask":"1.2","t":0,"receivedAt":"2026-03-02T10:00:00Z","sentAt":"2026-03-02T10:00:00Z"}`,
		`{"symbol":"EURUSD","bid":"1.3","ask":"1.2","t":5,"receivedAt":"2026-03-02T10:00:00Z","sentAt":"2026-03-02T10:00:00Z"}`,
		`{"symbol":"EURUSD","bid":"x","ask":"1.2","t":5,"receivedAt":"2026-03-02T10:00:00Z","sentAt":"2026-03-02T10:00:00Z"}`,
		`not json`} {
		if _, _, _, ok := decodeTick([]byte(bad), followerNow); ok {
			t.Errorf("stored %s", bad)
		}
	}
}

// End to end over a real Redis: the holder's accepted ticks reach a follower's LastTick,
// SymbolState and Updates, and past the trust window nothing is published at all.
func TestTicksReachTheFollower(t *testing.T) {
	t.Parallel()
	r, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	log := slog.New(slog.DiscardHandler)
	lease := &gatetest.Lease{}
	dropped := gate.NewDropped()
	g, err := gate.New(gate.Config{Lease: lease, Log: log, Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	eng := &fakeEngine{ch: make(chan tick.Update, 16)}
	pub, err := NewStreamPublisher(StreamPublisherConfig{Redis: rdb, Quotes: eng, Gate: g, Digits: func(string) int { return 5 },
		Term: func() int64 { return 5 }}, log)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewStreamFollower(StreamFollowerConfig{Redis: rdb}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pub.Run(ctx)
	go f.Run(ctx)
	updates, stop := f.Updates([]string{"EURUSD"})
	defer stop()

	send := func(bid float64) {
		now := time.Now()
		eng.ch <- tick.Update{Symbol: "EURUSD", Quote: tick.Quote{Bid: bid, Ask: bid + 0.0002, ReceivedAt: now, ProviderTime: now}}
	}
	// The subscription may not be registered yet: send until the first tick is heard.
	deadline := time.After(10 * time.Second)
	for heard := false; !heard; {
		send(1.1)
		select {
		case u := <-updates:
			heard = u.Quote.Bid == 1.1
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("no tick heard")
		}
	}
	if q, ok := f.LastTick("EURUSD"); !ok || q.Bid != 1.1 || f.SymbolState("EURUSD") != tick.Quoting {
		t.Fatalf("LastTick = %+v %v, state %s", q, ok, f.SymbolState("EURUSD"))
	}
	if f.SymbolState("USDJPY") != tick.QuotingHalted {
		t.Fatal("a symbol never heard is not QUOTING_HALTED")
	}

	// Past the trust window ticks are dropped at the gate, never published.
	lease.Lose()
	send(1.5)
	for testutil.ToFloat64(dropped.WithLabelValues("tick_publish", "gate")) < 1 {
		select {
		case <-deadline:
			t.Fatal("the tick past the trust window was never dropped at the gate")
		case <-time.After(time.Millisecond): // the publisher signals nothing else; the counter is the signal
		}
	}
	lease.Restore()
	send(1.6)
	select {
	case u := <-updates:
		if u.Quote.Bid != 1.6 {
			t.Fatalf("heard %+v; want 1.6 (1.5 was dropped at the gate)", u)
		}
	case <-deadline:
		t.Fatal("no tick heard after the lease was restored")
	}
}

// A deposed holder still publishing (an older term than one already heard) is not shown.
func TestFollowerIgnoresAnOlderTerm(t *testing.T) {
	t.Parallel()
	f, err := NewStreamFollower(StreamFollowerConfig{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	msg := func(bid float64, term int64) []byte {
		b, err := encodeTick(tick.Update{Symbol: "EURUSD", Quote: tick.Quote{Bid: bid, Ask: bid + 0.0002, ReceivedAt: now, ProviderTime: now}}, 5, term, now)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, step := range []struct {
		bid  float64
		term int64
		want float64
	}{{1.1, 5, 1.1}, {1.2, 6, 1.2}, {1.3, 5, 1.2}, {1.4, 6, 1.4}} {
		f.apply(msg(step.bid, step.term), now)
		if q, _ := f.LastTick("EURUSD"); q.Bid != step.want {
			t.Fatalf("after bid %v of term %d, LastTick = %v, want %v", step.bid, step.term, q.Bid, step.want)
		}
	}
}

// install is one desk's holder publisher and one follower, on its own database of a shared
// redis-server, under its own names.
type install struct {
	name    string
	eng     *fakeEngine
	updates <-chan tick.Update
	f       *StreamFollower
}

func startInstall(t *testing.T, ctx context.Context, addr string, db int, names redisname.Names) *install {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	t.Cleanup(func() { rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	g, err := gate.New(gate.Config{Lease: &gatetest.Lease{}, Log: log, Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	in := &install{name: names.Prefix(), eng: &fakeEngine{ch: make(chan tick.Update, 16)}}
	// Both installs publish the same term: a follower that heard the other's ticks would show them.
	pub, err := NewStreamPublisher(StreamPublisherConfig{Redis: rdb, Names: names, Quotes: in.eng, Gate: g, Digits: func(string) int { return 5 },
		Term: func() int64 { return 1 }}, log)
	if err != nil {
		t.Fatal(err)
	}
	if in.f, err = NewStreamFollower(StreamFollowerConfig{Redis: rdb, Names: names}, log); err != nil {
		t.Fatal(err)
	}
	go pub.Run(ctx)
	go in.f.Run(ctx)
	var stop func()
	in.updates, stop = in.f.Updates([]string{"EURUSD"})
	t.Cleanup(stop)
	return in
}

func (in *install) send(bid float64) {
	now := time.Now()
	in.eng.ch <- tick.Update{Symbol: "EURUSD", Quote: tick.Quote{Bid: bid, Ask: bid + 0.0002, ReceivedAt: now, ProviderTime: now}}
}

// next returns the next bid the install's follower shows.
func (in *install) next(t *testing.T) float64 {
	t.Helper()
	select {
	case u := <-in.updates:
		return u.Quote.Bid
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no tick heard", in.name)
		return 0
	}
}

// Two installs on one redis-server — production on DB 0 with the default prefix, staging on DB 1
// with its own, as seen live — each show only their own holder's ticks, although pub/sub ignores
// the database number: each follower's stream carries its own prices and never the other's.
func TestTwoInstallsOnOneRedisHearOnlyTheirOwnTicks(t *testing.T) {
	t.Parallel()
	r, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	staging, err := redisname.New("staging")
	if err != nil {
		t.Fatal(err)
	}
	prod, stage := startInstall(t, ctx, r.Addr, 0, redisname.Names{}), startInstall(t, ctx, r.Addr, 1, staging)

	// Subscriptions are not signalled: each install sends a priming price until its own follower
	// hears it. Primes still in flight arrive later, and are the only other price allowed.
	const prodPrime, stagePrime, prodBid, stageBid, stageBid2 = 1.0, 2.0, 1.1, 2.1, 2.2
	for _, p := range []struct {
		in    *install
		prime float64
	}{{prod, prodPrime}, {stage, stagePrime}} {
		deadline := time.After(10 * time.Second)
		for heard := false; !heard; {
			p.in.send(p.prime)
			select {
			case u := <-p.in.updates:
				heard = u.Quote.Bid == p.prime
				if !heard {
					t.Fatalf("%s heard %v while priming with %v", p.in.name, u.Quote.Bid, p.prime)
				}
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%s: its follower never heard its own holder", p.in.name)
			}
		}
	}

	// Staging's price is published before its own follower hears it, and Redis writes a published
	// message to every subscriber of the channel at once: had production's follower shared the
	// channel, staging's price would be ahead of production's next one on its connection.
	stage.send(stageBid)
	for bid := stage.next(t); bid != stageBid; bid = stage.next(t) {
		if bid != stagePrime {
			t.Fatalf("staging's follower showed %v", bid)
		}
	}
	prod.send(prodBid)
	for bid := prod.next(t); bid != prodBid; bid = prod.next(t) {
		if bid != prodPrime {
			t.Fatalf("production's follower showed %v: another install's tick", bid)
		}
	}
	if q, _ := prod.f.LastTick("EURUSD"); q.Bid != prodBid {
		t.Fatalf("production's follower LastTick %v, want %v", q.Bid, prodBid)
	}
	// And the other way round, now that production's price is in flight too.
	stage.send(stageBid2)
	for bid := stage.next(t); bid != stageBid2; bid = stage.next(t) {
		t.Fatalf("staging's follower showed %v: another install's tick", bid)
	}
}
