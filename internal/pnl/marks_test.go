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
	"fxdesk/internal/ledger"
	"fxdesk/internal/pnl"
	"fxdesk/internal/testkit/poll"
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
	// Posted after the reading, so dated after it, as the database dates a deal at its insert.
	post(t, usd, []dated{{deal(fx.DealCommission, "-7", 0, nil, fmt.Sprintf("recent:2:%d", runs)), first.Add(time.Second)}})
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

// A new reading of the recent ledger reads only what the last one could not settle and what was
// written since, and answers as the whole ledger read again: after new deals, after a deal
// whose transaction was open across the last reading commits (dated before that reading's end),
// and after the summaries move on over part of what it kept. The margin is off, so the oldest
// open transaction alone must keep that deal from being settled unread.
func TestRecentLedgerReadsOnlyWhatIsNew(t *testing.T) {
	ctx := context.Background()
	runs++
	var dbNow time.Time
	if err := testDB.QueryRow("SELECT NOW(3)").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	// The summaries end at z, two hours or more ago; the range starts an hour before it. The
	// cursor goes back where it was afterwards, as in TestRecentLedgerIsSharedThenReplaced.
	z := dbNow.UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	var was sql.NullTime
	if err := testDB.QueryRow("SELECT `through` FROM `fx_pnl_summary` WHERE `id` = 1").Scan(&was); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDB.Exec("UPDATE `fx_pnl_summary` SET `through` = ? WHERE `id` = 1", was) })
	if _, err := testDB.Exec("INSERT INTO `fx_pnl_summary` (`id`, `through`) VALUES (1, ?) ON DUPLICATE KEY UPDATE `through` = ?", z, z); err != nil {
		t.Fatal(err)
	}
	usd, eur, slow := account(t, "USD"), account(t, "EUR"), account(t, "USD")
	key := func(k string) string { return fmt.Sprintf("new:%s:%d", k, runs) }
	p := position(t, usd, nil, "CLOSED", "0", "1.19", ptr("2.00"), z.Add(10*time.Minute))
	post(t, usd, []dated{
		{deal(fx.DealSwap, "-3", p, nil, key("swap")), z.Add(20 * time.Minute)},
		{deal(fx.DealProfit, "-100", p, ptr("4.00"), key("close")), z.Add(70 * time.Minute)},
		{deal(fx.DealCommission, "-7", p, nil, key("commission")), z.Add(80 * time.Minute)},
	})
	post(t, eur, []dated{{deal(fx.DealCommission, "-1", 0, nil, key("eur")), z.Add(90 * time.Minute)}})
	// A writer's transaction open across the first reading: its deal is dated at its insert,
	// before that reading's end, and committed after it.
	late, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback()
	postIn(t, late, slow, []ledger.Deal{deal(fx.DealSwap, "-40", 0, nil, key("late"))})

	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	// Ahead of the database's clock: every deal written here is before a reading's end.
	now := dbNow.Add(time.Hour)
	marks := pnl.NewMarks(testDB)
	marks.SetClock(func() time.Time { return now })
	marks.SetMargin(0)
	from := z.Add(-time.Hour)
	// read is a report through marks, a new reading waited for, checked against the ledger read
	// whole; it returns how many deals and openings the reading's statements ranged over, and
	// how many of them above what it settled (the next reading reads those again).
	var lastSettled time.Time
	read := func(step string, wantFrom time.Time, open int) (n, unsettled int) {
		t.Helper()
		// The server's list of open transactions is a copy, refreshed by a read 0.1 s or more
		// after the last read: polled more often it would never change. The reading then sees
		// this database's as they are.
		poll.Until(t, time.Minute, 150*time.Millisecond, fmt.Sprintf("%d transactions open", open), func() bool {
			var n int
			err := testDB.QueryRow("SELECT COUNT(*) FROM `information_schema`.`INNODB_TRX` t JOIN `information_schema`.`PROCESSLIST` c " +
				"ON c.`ID` = t.`trx_mysql_thread_id` WHERE c.`DB` = DATABASE()").Scan(&n)
			return err == nil && n == open
		})
		now = now.Add(pnl.MarkStale + time.Millisecond)
		got, err := marks.Read(ctx, cat, quotes{}, from, now, true)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		want, err := pnl.Read(ctx, testDB, cat, quotes{}, from, now, true)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if g, w := figuresOf(got), figuresOf(want); g != w {
			t.Errorf("%s: figures\n got %s\nwant %s", step, g, w)
		}
		if g, w := seriesOf(got.Hours), seriesOf(want.Hours); g != w {
			t.Errorf("%s: hours\n got %s\nwant %s", step, g, w)
		}
		if got.UnrecordedMarkup != want.UnrecordedMarkup || !got.LedgerAt.Equal(now) {
			t.Errorf("%s: unrecorded %d, ledger read through %s; want %d, %s", step, got.UnrecordedMarkup, got.LedgerAt, want.UnrecordedMarkup, now)
		}
		readFrom, readTo, settled := marks.LastRecent()
		if !readFrom.Equal(wantFrom) || !readTo.Equal(got.LedgerAt) {
			t.Errorf("%s: read [%s, %s), want from %s", step, readFrom, readTo, wantFrom)
		}
		lastSettled = settled
		return rowsIn(t, readFrom, readTo), rowsIn(t, settled, readTo)
	}
	n, unsettled := read("the first reading: all of it", z, 1)
	if n < 5 {
		t.Errorf("the first reading ranged over %d rows, want the 5 written", n)
	}
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	writeNow := func(account int64, deals ...ledger.Deal) {
		t.Helper()
		tx, err := testDB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		postIn(t, tx, account, deals)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	writeNow(usd, deal(fx.DealCommission, "-2", p, nil, key("new1")), deal(fx.DealSwap, "-1", p, nil, key("new2")))
	want := unsettled + 3
	if n, unsettled = read("after new deals and the late one", lastSettled, 0); n != want || n >= rowsIn(t, z, now) {
		t.Errorf("the second reading ranged over %d rows, want %d: the late deal, the 2 new and what the first could not settle", n, want)
	}
	// The summaries reach z + 1h: the kept groups of that hour go, the later ones stay.
	if h, err := pnl.Summarise(ctx, testDB, z.Add(time.Hour)); err != nil || h != 1 {
		t.Fatalf("summarised %d hours, %v; want 1", h, err)
	}
	writeNow(eur, deal(fx.DealCommission, "-4", 0, nil, key("new3")))
	want = unsettled + 1
	if n, _ = read("after the summaries moved on", lastSettled, 0); n != want || n >= rowsIn(t, z, now) {
		t.Errorf("the third reading ranged over %d rows, want %d: the new one and what the second could not settle", n, want)
	}
}

// rowsIn is how many deals and openings are dated in [from, to): the rows a reading of that span
// ranges over.
func rowsIn(t *testing.T, from, to time.Time) int {
	t.Helper()
	var n int
	if err := testDB.QueryRow("SELECT (SELECT COUNT(*) FROM `fx_deal` WHERE `createdAt` >= ? AND `createdAt` < ?) + "+
		"(SELECT COUNT(*) FROM `fx_position` WHERE `openedAt` >= ? AND `openedAt` < ?)", from, to, from, to).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
