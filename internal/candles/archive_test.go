package candles

import (
	"context"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// The archive moves only candles past their granularity's retention to fx_candle_archive, in
// transactions of at most the batch's opens, skipping the hours without a candle, and keeps the
// granularities without a retention for ever.
func TestArchiveMovesPastRetentionInBatches(t *testing.T) {
	t.Parallel()
	db, closeDB, err := dbtest.NewMigrated("candles_archive")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	w, err := NewWriter(WriterConfig{DB: db, Prices: newFeed(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Two symbols, one tick a minute over the 40 hours before now but for a silent 4 hours
	// (hours 10 to 14): 2,160 M1 candles each, of which the 960 of the last 16 hours are within
	// a 16-hour retention.
	start := now.Add(-40 * time.Hour)
	for i := range 2400 {
		if i >= 600 && i < 840 {
			continue
		}
		for _, sym := range []string{"ARCHA", "ARCHB"} {
			w.b.Add(sym, 1, 1.1, start.Add(time.Duration(i)*time.Minute))
		}
	}
	if _, _, err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	count := func(table string, g Granularity) (n int) {
		if err := db.QueryRow("SELECT COUNT(*) FROM `"+table+"` WHERE `granularity` = ?", g.String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	h1 := count("fx_candle", H1)
	a, err := NewArchiveTask(db, map[Granularity]time.Duration{M1: 16 * time.Hour}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	backlog, err := a.Plan(context.Background())
	// Each lane's span from its first candle to the cutoff: 24 hours of opens.
	if err != nil || backlog != 2*(24*60+1) {
		t.Fatalf("backlog %d (%v), want %d", backlog, err, 2*(24*60+1))
	}
	var moved int64
	batches := 0
	for left := backlog; left > 0; batches++ {
		var n int64
		if n, left, err = a.Step(context.Background(), 500); err != nil || n > 500 {
			t.Fatalf("a batch of 500 opens moved %d (%v)", n, err)
		}
		moved += n
	}
	// 1,440 minutes, 240 of them silent, per symbol: 3 batches each, the silent span skipped.
	if moved != 2*1200 || a.Moved() != moved || batches != 6 {
		t.Fatalf("moved %d in %d batches (counter %d), want %d in 6", moved, batches, a.Moved(), 2*1200)
	}
	if count("fx_candle", M1) != 2*960 || count("fx_candle_archive", M1) != 2*1200 || count("fx_candle", H1) != h1 || count("fx_candle_archive", H1) != 0 {
		t.Fatalf("M1 kept %d, archived %d; H1 kept %d of %d, archived %d", count("fx_candle", M1), count("fx_candle_archive", M1),
			count("fx_candle", H1), h1, count("fx_candle_archive", H1))
	}
	var oldest time.Time
	if err := db.QueryRow("SELECT MIN(`openTime`) FROM `fx_candle` WHERE `granularity` = 'M1'").Scan(&oldest); err != nil || !oldest.Equal(now.Add(-16*time.Hour)) {
		t.Fatalf("oldest M1 kept %s (%v), want %s", oldest, err, now.Add(-16*time.Hour))
	}
	var same int
	if err := db.QueryRow("SELECT COUNT(*) FROM `fx_candle_archive` AS `a` WHERE `a`.`bidOpen` = 1 AND `a`.`askClose` = 1.1 AND `a`.`ticks` = 1").Scan(&same); err != nil || same != 2*1200 {
		t.Fatalf("%d archived candles carry their prices (%v), want %d", same, err, 2*1200)
	}
	if again, err := a.Plan(context.Background()); again != 0 || err != nil {
		t.Fatalf("a second pass found %d (%v)", again, err)
	}
	if none, _ := NewArchiveTask(db, map[Granularity]time.Duration{M1: 0}, nil); none.Any() {
		t.Fatal("a task without a retention has work")
	}
}
