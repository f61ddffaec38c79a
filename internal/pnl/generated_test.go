package pnl_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/pnl"
	"fxdesk/internal/tick"
)

// generatedDB opens the generated database FXDESK_PNL_DB names (cmd/fxgen; a DSN), or skips:
// these measure a broker's history, which the package's own database does not hold.
func generatedDB(t testing.TB) *sql.DB {
	dsn := os.Getenv("FXDESK_PNL_DB")
	if dsn == "" {
		t.Skip("FXDESK_PNL_DB names no generated database (e.g. root@tcp(127.0.0.1:3306)/fxdesk_year?parseTime=true&loc=UTC)")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestGeneratedReports measures, on a generated history, summarising it from scratch and the
// dealer's reports the issue names — today, 7, 30 and 365 days, each ending now — p50/p99 over
// FXDESK_PNL_N reads (default 30), and checks every one against the ledger read the old way.
// It prints the figures; it passes or fails on the figures' equality alone, never on time.
//
//	FXDESK_PNL_DB='root@tcp(127.0.0.1:3306)/fxdesk_year?parseTime=true&loc=UTC' go test -count=1 -run TestGeneratedReports -v ./internal/pnl
func TestGeneratedReports(t *testing.T) {
	db := generatedDB(t)
	ctx := context.Background()
	if os.Getenv("FXDESK_PNL_RESUMMARISE") != "" {
		for _, q := range []string{"DELETE FROM `fx_pnl_hour`", "DELETE FROM `fx_pnl_day`", "DELETE FROM `fx_pnl_series`", "DELETE FROM `fx_pnl_summary`"} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	t0 := time.Now()
	n, err := pnl.Summarise(ctx, db, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summarise: %d hours in %s", n, time.Since(t0).Round(time.Millisecond))
	cat, err := catalog.Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	reads := 30
	if v := os.Getenv("FXDESK_PNL_N"); v != "" {
		fmt.Sscan(v, &reads)
	}
	for _, r := range []struct {
		name string
		days int
	}{{"today", 0}, {"7 days", 7}, {"30 days", 30}, {"365 days", 365}} {
		now := time.Now().UTC().Truncate(time.Millisecond) // as the columns hold it
		from := now.AddDate(0, 0, -r.days)
		if r.days == 0 {
			from = lastRollover(t, now).UTC()
		}
		prices := everyQuote{}
		s := time.Now()
		want, err := oldReport(ctx, db, from, now, book.NewMarket(prices, cat))
		if err != nil {
			t.Fatal(err)
		}
		old := time.Since(s)
		got, err := pnl.Read(ctx, db, cat, prices, from, now, false)
		if err != nil {
			t.Fatal(err)
		}
		if g := figuresOf(got); g != want.figures || got.Total == nil || !got.Total.Equal(want.total) || got.UnrecordedMarkup != want.unrecorded {
			t.Errorf("%s: figures\n got %s %v\nwant %s %s", r.name, g, got.Total, want.figures, want.total)
		}
		var took []time.Duration
		for range reads {
			s := time.Now()
			if _, err := pnl.Read(ctx, db, cat, prices, from, now, true); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(s))
		}
		slices.Sort(took)
		t.Logf("%-8s p50 %6.1f ms  p99 %6.1f ms  (%d reads, floating marked; the old statements: %s, same figures)", r.name, ms(took[len(took)/2]),
			ms(took[(len(took)*99-1)/100]), reads, old.Round(time.Millisecond))
	}
}

// everyQuote quotes every symbol at 1.1, so every open position is marked (the cost of a
// report that ends now) and every currency converts.
type everyQuote struct{}

func (everyQuote) LastTick(string) (tick.Quote, bool) {
	return tick.Quote{Bid: 1.1, Ask: 1.1, ReceivedAt: time.Now()}, true
}

func (everyQuote) SymbolState(string) tick.State { return tick.Quoting }

// lastRollover is the trading day's start.
func lastRollover(t *testing.T, now time.Time) time.Time {
	r, err := fx.LastRollover(now)
	if err != nil {
		t.Fatal(err)
	}
	return r.At
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
