package candles

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

// The prune deletes only candles past their granularity's retention, in DELETEs of at most
// Batch rows with its progress logged, and keeps the granularities without one for ever.
func TestPrunerDeletesPastRetentionInBatches(t *testing.T) {
	t.Parallel()
	db, closeDB, err := dbtest.NewMigrated("candles_prune")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	w, err := NewWriter(WriterConfig{DB: db, Prices: newFeed(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Two symbols, one tick a minute over the 40 hours before now: 2,400 M1 candles each, of
	// which the 960 of the last 16 hours are within a 16-hour retention.
	start := now.Add(-40 * time.Hour)
	for i := range 2400 {
		for _, sym := range []string{"PRUNEA", "PRUNEB"} {
			w.b.Add(sym, 1, 1.1, start.Add(time.Duration(i)*time.Minute))
		}
	}
	if _, _, err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	count := func(g Granularity) (n int) {
		if err := db.QueryRow("SELECT COUNT(*) FROM `fx_candle` WHERE `granularity` = ?", g.String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	h1 := count(H1)
	var logs dbtest.LogBuffer
	p, err := NewPruner(PrunerConfig{DB: db, Retention: map[Granularity]time.Duration{M1: 16 * time.Hour}, Batch: 500, Pause: time.Millisecond,
		Now: func() time.Time { return now }, Log: slogTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := p.Prune(context.Background())
	if err != nil || deleted != 2*1440 || count(M1) != 2*960 || count(H1) != h1 || p.Deleted() != deleted {
		t.Fatalf("pruned %d (%v): M1 left %d, want %d; H1 %d, want %d", deleted, err, count(M1), 2*960, count(H1), h1)
	}
	var oldest time.Time
	if err := db.QueryRow("SELECT MIN(`openTime`) FROM `fx_candle` WHERE `granularity` = 'M1'").Scan(&oldest); err != nil || !oldest.Equal(now.Add(-16*time.Hour)) {
		t.Fatalf("oldest M1 kept %s (%v), want %s", oldest, err, now.Add(-16*time.Hour))
	}
	// 1,440 rows per symbol in batches of 500: two full batches logged per symbol, then the rest.
	if got := strings.Count(logs.String(), "candles: pruning"); got != 4 {
		t.Fatalf("%d progress lines, want 4:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "candles: pruned") {
		t.Fatalf("no summary line:\n%s", logs.String())
	}
	if again, err := p.Prune(context.Background()); again != 0 || err != nil {
		t.Fatalf("a second pass deleted %d (%v)", again, err)
	}
}

func slogTo(b *dbtest.LogBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
