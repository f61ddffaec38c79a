package pnl_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/pnl"
	"fxdesk/internal/tick"
)

// movingQuotes quotes EURUSD at a bid = ask the test moves.
type movingQuotes struct{ bid atomic.Value }

func (q *movingQuotes) LastTick(s string) (tick.Quote, bool) {
	b := q.bid.Load().(float64)
	return tick.Quote{Bid: b, Ask: b, ReceivedAt: time.Now()}, s == "EURUSD"
}

func (q *movingQuotes) SymbolState(s string) tick.State { return quotes{}.SymbolState(s) }

// The shared marking: fresh reads share it, a stale one is served while the next runs, and past
// MarkStale a read waits for a new one — each answer saying when its marking was taken.
func TestMarksAreSharedThenReplaced(t *testing.T) {
	ctx := context.Background()
	runs++
	t0 := time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC).AddDate(0, 0, runs)
	usd := account(t, "USD")
	p := position(t, usd, nil, "OPEN", "0.01", "1.19", ptr("0.00"), t0)
	t.Cleanup(func() { testDB.Exec("UPDATE `fx_position` SET `status` = 'CLOSED', `volume` = 0 WHERE `id` = ?", p) })
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	q := &movingQuotes{}
	q.bid.Store(1.20)
	now := t0
	marks := pnl.NewMarks(testDB)
	marks.SetClock(func() time.Time { return now })
	read := func(step string, wantFloating string, wantAt time.Time) {
		t.Helper()
		rep, err := marks.Read(ctx, cat, q, t0, now, true)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := "<none>"
		for _, c := range rep.Currencies {
			for _, s := range c.Symbols {
				if c.Currency == "USD" && s.Symbol == "EURUSD" && s.Figures.BBookFloating != nil {
					got = s.Figures.BBookFloating.StringFixed(2)
				}
			}
		}
		if got != wantFloating || !rep.FloatingAt.Equal(wantAt) {
			t.Errorf("%s: floating %s marked at %s, want %s marked at %s", step, got, rep.FloatingAt, wantFloating, wantAt)
		}
	}
	// −(bid − 1.19) × 1,000.
	read("the first read marks", "-10.00", t0)
	q.bid.Store(1.21)
	now = t0.Add(pnl.MarkFresh)
	read("within MarkFresh: the same marking", "-10.00", t0)
	now = t0.Add(pnl.MarkFresh + time.Millisecond)
	t1 := now
	read("past MarkFresh: the last marking, while the next runs", "-10.00", t0)
	marks.Settle()
	now = t1.Add(time.Second)
	read("the next poll: the new marking", "-20.00", t1)
	q.bid.Store(1.22)
	now = t1.Add(pnl.MarkStale + time.Millisecond)
	read("past MarkStale: a new marking, waited for", "-30.00", now)
	marks.Settle()

	// A past range marks nothing.
	rep, err := marks.Read(ctx, cat, q, t0, t0.Add(time.Hour), false)
	if err != nil || !rep.FloatingAt.IsZero() {
		t.Errorf("a past range: marked at %s, %v", rep.FloatingAt, err)
	}
}
