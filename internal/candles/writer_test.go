package candles

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

var testDB *sql.DB

func TestMain(m *testing.M) {
	os.Exit(func() int {
		db, closeDB, err := dbtest.NewMigrated("candles")
		if err != nil {
			panic(err)
		}
		defer closeDB()
		testDB = db
		return m.Run()
	}())
}

var quiet = slog.New(slog.DiscardHandler)

// feed is a published-updates subscription the test writes to, as the engine does.
type feed struct {
	ch      chan tick.Update
	dropped atomic.Uint64
}

func newFeed() *feed { return &feed{ch: make(chan tick.Update, 1024)} }

func (f *feed) Updates([]string) (<-chan tick.Update, func()) {
	var once atomic.Bool
	return f.ch, func() {
		if !once.Swap(true) {
			close(f.ch)
		}
	}
}

func (f *feed) DroppedFor(<-chan tick.Update) uint64 { return f.dropped.Load() }

func (f *feed) send(symbol string, bid, ask float64, at time.Time) {
	f.ch <- tick.Update{Symbol: symbol, Quote: tick.Quote{Bid: bid, Ask: ask, ReceivedAt: at, ProviderTime: at.Add(-time.Hour)}}
}

// stored reads symbol's candles of g from the table.
func stored(t *testing.T, symbol string, g Granularity) []Candle {
	t.Helper()
	r, err := NewReader(testDB)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Latest(context.Background(), symbol, g, time.Time{}, MaxCandles)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A thousand ticks over three symbols and two minutes are written in one flush of
// ceil(candles / RowsPerStatement) statements, never a statement per tick; a second flush
// writes only the candles that changed, and adds their new ticks to the stored counts.
func TestWriterFlushesInBatches(t *testing.T) {
	t.Parallel()
	w, err := NewWriter(WriterConfig{DB: testDB, Prices: newFeed(), RowsPerStatement: 5, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 6, 10, 0, 0, 0, time.UTC)
	symbols := []string{"WBAAAA", "WBBBBB", "WBCCCC"}
	for i := range 1000 {
		w.add(tick.Update{Symbol: symbols[i%3], Quote: tick.Quote{Bid: 1 + float64(i%7)/1e4, Ask: 1.0002 + float64(i%7)/1e4,
			ReceivedAt: at.Add(time.Duration(i) * 120 * time.Millisecond)}})
	}
	// 1,000 ticks × 120 ms = 2 minutes: per symbol two M1 candles, one M5, one H1, one D1.
	rows, statements, err := w.Flush(context.Background())
	if err != nil || rows != 3*5 || statements != 3 {
		t.Fatalf("first flush: %d rows in %d statements (%v); want 15 rows in 3", rows, statements, err)
	}
	m1 := stored(t, "WBAAAA", M1)
	if len(m1) != 2 || m1[0].Ticks+m1[1].Ticks != 334 || m1[0].Bid.High != 1.0006 || m1[0].Bid.Low != 1 {
		t.Fatalf("WBAAAA M1 stored: %+v", m1)
	}
	// Two more ticks in the open minute of one symbol: one flush writes its four open candles.
	last := at.Add(999 * 120 * time.Millisecond)
	w.add(tick.Update{Symbol: "WBAAAA", Quote: tick.Quote{Bid: 1.5, Ask: 1.5002, ReceivedAt: last}})
	w.add(tick.Update{Symbol: "WBAAAA", Quote: tick.Quote{Bid: 0.5, Ask: 0.5002, ReceivedAt: last}})
	if rows, statements, err = w.Flush(context.Background()); err != nil || rows != 4 || statements != 1 {
		t.Fatalf("second flush: %d rows in %d statements (%v); want 4 in 1", rows, statements, err)
	}
	before := m1[1]
	m1 = stored(t, "WBAAAA", M1)
	if c := m1[1]; c.Ticks != before.Ticks+2 || c.Bid.Open != before.Bid.Open || c.Bid.High != 1.5 || c.Bid.Low != 0.5 || c.Bid.Close != 0.5 || c.Ask.Close != 0.5002 {
		t.Fatalf("WBAAAA open M1 after the second flush: %+v (before it %+v)", c, before)
	}
	if rows, statements, err = w.Flush(context.Background()); rows != 0 || statements != 0 || err != nil {
		t.Fatalf("a flush with nothing new: %d rows, %d statements, %v", rows, statements, err)
	}
}

// A takeover mid-period: the new holder's writer starts the period afresh and its flush merges
// with the old holder's row — the old open kept, the extremes widened, the close replaced and
// the ticks added — so the stored candle counts both holders' ticks.
func TestASecondHolderMergesIntoTheCandleInProgress(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 7, 10, 0, 10, 0, time.UTC)
	old, err := NewWriter(WriterConfig{DB: testDB, Prices: newFeed(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	old.add(tick.Update{Symbol: "TKOVER", Quote: tick.Quote{Bid: 1.2, Ask: 1.3, ReceivedAt: at}})
	old.add(tick.Update{Symbol: "TKOVER", Quote: tick.Quote{Bid: 1.0, Ask: 1.1, ReceivedAt: at.Add(time.Second)}})
	if _, _, err := old.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	successor, err := NewWriter(WriterConfig{DB: testDB, Prices: newFeed(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	successor.add(tick.Update{Symbol: "TKOVER", Quote: tick.Quote{Bid: 1.4, Ask: 1.5, ReceivedAt: at.Add(20 * time.Second)}})
	successor.add(tick.Update{Symbol: "TKOVER", Quote: tick.Quote{Bid: 1.1, Ask: 1.2, ReceivedAt: at.Add(21 * time.Second)}})
	if _, _, err := successor.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, g := range Granularities() {
		got := stored(t, "TKOVER", g)
		want := OHLC{Open: 1.2, High: 1.4, Low: 1.0, Close: 1.1}
		if len(got) != 1 || got[0].Bid != want || got[0].Ask.Open != 1.3 || got[0].Ask.Close != 1.2 || got[0].Ticks != 4 {
			t.Fatalf("%s after the takeover: %+v; want bid %+v and 4 ticks", g, got, want)
		}
	}
}

// Run reads the published updates, flushes on its period and, when stopped, reads what the
// subscription still buffers and flushes it: every tick sent before the stop is stored.
func TestWriterRunWritesEveryTickByItsStop(t *testing.T) {
	t.Parallel()
	f := newFeed()
	w, err := NewWriter(WriterConfig{DB: testDB, Prices: f, FlushEvery: time.Hour, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	at := time.Date(2025, 1, 8, 23, 59, 0, 0, time.UTC)
	for i := range 500 {
		f.send("RUNSTP", 1+float64(i)/1e5, 1.0001+float64(i)/1e5, at.Add(time.Duration(i)*250*time.Millisecond))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 500 ticks from 23:59:00 over 125 s: M1 23:59, 00:00, 00:01.
	m1 := stored(t, "RUNSTP", M1)
	total := 0
	for _, c := range m1 {
		total += c.Ticks
	}
	if len(m1) != 3 || total != 500 || m1[2].Bid.Close != 1+499/1e5 {
		t.Fatalf("RUNSTP M1 after the stop: %+v (ticks %d)", m1, total)
	}
	if s := w.Stats(); s.Ticks != 500 || s.Statements != 1 || s.Flushes != 1 {
		t.Fatalf("stats %+v: want 500 ticks in one flush of one statement", s)
	}
}

// While the lease is not held a flush writes nothing and keeps its candles; once it is held
// again they are written.
func TestWriterWritesOnlyWhileHoldingTheLease(t *testing.T) {
	t.Parallel()
	var holding atomic.Bool
	w, err := NewWriter(WriterConfig{DB: testDB, Prices: newFeed(), Holding: holding.Load, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 9, 10, 0, 0, 0, time.UTC)
	w.add(tick.Update{Symbol: "LEASED", Quote: tick.Quote{Bid: 1, Ask: 1.1, ReceivedAt: at}})
	if rows, _, err := w.Flush(context.Background()); rows != 0 || err != nil || len(stored(t, "LEASED", M1)) != 0 || w.Stats().Skipped != 1 {
		t.Fatalf("flush without the lease: %d rows, %v, stats %+v", rows, err, w.Stats())
	}
	holding.Store(true)
	if rows, _, err := w.Flush(context.Background()); rows != 4 || err != nil || len(stored(t, "LEASED", M1)) != 1 {
		t.Fatalf("flush with the lease: %d rows, %v", rows, err)
	}
}

// A failed flush keeps its candles pending: written by the next flush that succeeds, with every
// tick counted once.
func TestAFailedFlushIsWrittenByTheNext(t *testing.T) {
	t.Parallel()
	db, closeDB, err := dbtest.NewMigrated("candles_fail")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	w, err := NewWriter(WriterConfig{DB: db, Prices: newFeed(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 10, 10, 0, 0, 0, time.UTC)
	w.add(tick.Update{Symbol: "FAILED", Quote: tick.Quote{Bid: 1, Ask: 1.1, ReceivedAt: at}})
	if _, err := db.Exec("RENAME TABLE `fx_candle` TO `fx_candle_away`"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Flush(context.Background()); err == nil || w.Stats().Failures != 1 {
		t.Fatalf("flush into a missing table: %v, stats %+v", err, w.Stats())
	}
	if _, err := db.Exec("RENAME TABLE `fx_candle_away` TO `fx_candle`"); err != nil {
		t.Fatal(err)
	}
	w.add(tick.Update{Symbol: "FAILED", Quote: tick.Quote{Bid: 2, Ask: 2.1, ReceivedAt: at.Add(time.Second)}})
	if rows, _, err := w.Flush(context.Background()); rows != 4 || err != nil {
		t.Fatalf("the next flush: %d rows, %v", rows, err)
	}
	r, _ := NewReader(db)
	got, err := r.Latest(context.Background(), "FAILED", M1, time.Time{}, 10)
	if err != nil || len(got) != 1 || got[0].Ticks != 2 || got[0].Bid.High != 2 {
		t.Fatalf("stored after the retry: %+v %v", got, err)
	}
}

// feedSource is a tick.Source the test offers through, as a provider would.
type feedSource struct{ feed chan tick.Feed }

func (s *feedSource) Name() string { return "primary" }
func (s *feedSource) Run(ctx context.Context, f tick.Feed) error {
	f.SetConnected(true, nil)
	s.feed <- f
	<-ctx.Done()
	return nil
}

// A writer built before its engine runs has every tick the engine publishes, those before the
// writer's Run included: the soak saw a new holder's first ticks missing from their candles when
// the writer subscribed in Run, after the engine had begun publishing.
func TestAWriterBuiltBeforeTheEngineRunsHasItsFirstTick(t *testing.T) {
	t.Parallel()
	src := &feedSource{feed: make(chan tick.Feed, 1)}
	e := tick.New(tick.Config{Sources: []tick.Source{src}}, quiet)
	if err := e.SetWanted([]string{"FSTTCK"}); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(WriterConfig{DB: testDB, Prices: e, FlushEvery: time.Hour, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ectx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	go e.Run(ectx)
	f := <-src.feed
	at := time.Now()
	f.Offer("FSTTCK", 1.5, 1.5002, at)
	if _, ok := e.LastTick("FSTTCK"); !ok {
		t.Fatal("the engine did not publish the first tick")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m1 := stored(t, "FSTTCK", M1); len(m1) != 1 || m1[0].Ticks != 1 {
		t.Fatalf("FSTTCK M1 %+v: want the first tick's candle", m1)
	}
}
