package pnl_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
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

// The ledger the summaries have not reached is read once for the reads of a few seconds too: a
// deal posted within MarkFresh of the reading is in the next one, and the answer says how far
// its reading went (LedgerAt).
func TestRecentLedgerIsSharedThenReplaced(t *testing.T) {
	ctx := context.Background()
	runs++
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC).AddDate(0, 0, runs)
	// The summaries reach at least t0 + 2h: the last, partial hour is the recent ledger. The
	// cursor goes back where it was afterwards (docs/pnl.md, «Summaries», re-summarising), so
	// the other tests' rows dated by hand are read from the ledger as before.
	var was sql.NullTime
	if err := testDB.QueryRow("SELECT `through` FROM `fx_pnl_summary` WHERE `id` = 1").Scan(&was); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDB.Exec("UPDATE `fx_pnl_summary` SET `through` = ? WHERE `id` = 1", was) })
	if _, err := pnl.Summarise(ctx, testDB, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	usd := account(t, "USD")
	post(t, usd, []dated{{deal(fx.DealCommission, "-5", 0, nil, fmt.Sprintf("recent:1:%d", runs)), t0.Add(130 * time.Minute)}})
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(150 * time.Minute)
	marks := pnl.NewMarks(testDB)
	marks.SetClock(func() time.Time { return now })
	read := func(step, want string, wantAt time.Time) {
		t.Helper()
		rep, err := marks.Read(ctx, cat, quotes{}, t0, now, true)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := "<none>"
		for _, c := range rep.Currencies {
			for _, s := range c.Symbols {
				if c.Currency == "USD" && s.Symbol == "EURUSD" {
					got = s.Figures.Commission.StringFixed(2)
				}
			}
		}
		if got != want || !rep.LedgerAt.Equal(wantAt) {
			t.Errorf("%s: commission %s read through %s, want %s through %s", step, got, rep.LedgerAt, want, wantAt)
		}
	}
	read("the first read", "5.00", now)
	first := now
	post(t, usd, []dated{{deal(fx.DealCommission, "-7", 0, nil, fmt.Sprintf("recent:2:%d", runs)), t0.Add(140 * time.Minute)}})
	now = first.Add(time.Second)
	read("within MarkFresh: the same reading", "5.00", first)
	now = first.Add(pnl.MarkFresh + time.Millisecond)
	read("past MarkFresh: the last reading, while the next runs", "5.00", first)
	second := now
	marks.Settle()
	now = second.Add(time.Second)
	read("the next poll: the new reading", "12.00", second)
	marks.Settle()
}
