package eod

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/fx"
)

// A day's closing prices are one capture's. A later capture, or one racing the first, leaves the
// day as the first wrote it and adds no symbol the first lacked: a freeze that already read the
// day marked nothing at that symbol, and the day must not list a price its marks did not use.
func TestADaysClosingPricesAreOneCaptures(t *testing.T) {
	d := newDesk(t)
	day := weekday(t, time.Now().Add(24*time.Hour))
	first := quotes{"EURUSD": {1.08500, 1.08520}}
	if _, err := Capture(d.ctx, testDB, day, first, "holder:1"); err != nil {
		t.Fatal(err)
	}
	later := quotes{"EURUSD": {1.09000, 1.09020}, "GBPUSD": {1.27000, 1.27020}}
	if _, err := Capture(d.ctx, testDB, day, later, "cron:2"); err != nil {
		t.Fatal(err)
	}
	if got := capturedBy(t, day.Date); got != "EURUSD 1.0850000000 holder:1" {
		t.Fatalf("day %s holds %q after a later capture; want the first capture's EURUSD alone", day.Date, got)
	}

	// Two captures at once, one of them with symbols the other lacks: each day ends up with one
	// capture's prices, whole — whichever won.
	for i := range 20 {
		race := fx.Rollover{Date: fmt.Sprintf("2031-01-%02d", i+1), At: day.At}
		var wg sync.WaitGroup
		for _, c := range []struct {
			by   string
			view quotes
		}{{"holder:1", first}, {"cron:2", later}} {
			wg.Go(func() {
				if _, err := Capture(d.ctx, testDB, race, c.view, c.by); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		switch got := capturedBy(t, race.Date); got {
		case "EURUSD 1.0850000000 holder:1", "EURUSD 1.0900000000 cron:2; GBPUSD 1.2700000000 cron:2":
		default:
			t.Fatalf("two captures racing on %s left %q; want one capture's prices, whole", race.Date, got)
		}
	}
}

// capturedBy is day's closing prices as "SYMBOL bid by; …", in symbol order.
func capturedBy(t *testing.T, day string) string {
	t.Helper()
	rows, err := testDB.Query("SELECT CONCAT(`symbol`, ' ', `bid`, ' ', `capturedBy`) FROM `fx_eod_price` WHERE `tradingDay` = ? ORDER BY `symbol`", day)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if out != "" {
			out += "; "
		}
		out += s
	}
	return out
}
