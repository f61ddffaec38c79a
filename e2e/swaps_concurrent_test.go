package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/swaps"
)

// The documented `fxdesk-cron run processFxSwaps --at <a few days ahead>`, run by the real
// binary while fills commit through HTTP, charges every due date of every position exactly once:
// after the run and a second one at the same instant, each open position — seeded before the
// run or filled during it — has one SWAP deal for each weekday rollover up to --at that it was
// open at, of its amount, and no other. Charging one pass per date, a fill that committed
// between the pass for one date and the next was charged from the later date on and the earlier
// one never: its watermark had moved past it, so the second run could not repair it.
func TestSwapsRunAheadWhileFillsCommit(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t, unlimitedRates...) // one token fills as fast as it can
	tok, usd := d.newTrader(501, "USD", "100", "1000000")
	d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
	// Enough positions that each rollover date's work takes the run a while.
	d.e.seedPositions(2000, 10)

	ro := firstWeekdayRolloverAfter(time.Now())
	for range 2 {
		ro = firstWeekdayRolloverAfter(ro.At)
	}
	at := ro.At.Add(time.Hour) // the third weekday rollover from now: a few days ahead

	var filled atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var fillErr atomic.Value
	wg.Go(func() {
		body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, usd)
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+d.web.addr+"/api/fx/orders", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				fillErr.Store(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				fillErr.Store(fmt.Errorf("fill: status %d", resp.StatusCode))
				return
			}
			filled.Add(1)
		}
	})
	eventually(t, 10*time.Second, 10*time.Millisecond, "fills committing", func() bool { return filled.Load() >= 5 })
	before := filled.Load()
	first := d.e.cronRun(swaps.JobName, at)
	during := filled.Load() - before
	close(stop)
	wg.Wait()
	if err, _ := fillErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	if during < 5 {
		t.Fatalf("only %d fill(s) committed while the run ran: nothing concurrent was tested", during)
	}
	second := d.e.cronRun(swaps.JobName, at)
	t.Logf("--at %s: first run %v with %d fills committed meanwhile, second run %v", at.UTC().Format(time.RFC3339), first, during, second)

	due, err := swaps.DueRollovers(at, swaps.DefaultExpireAfter)
	if err != nil {
		t.Fatal(err)
	}
	d.e.wantEveryHeldDateChargedOnce(due)
	d.e.checkAllLedgers()
}

// wantEveryHeldDateChargedOnce asserts each open EURUSD position has exactly one SWAP deal for
// each rollover of due it was open at, of lots × swap × day multiplier, and no other.
func (e *deskEnv) wantEveryHeldDateChargedOnce(due []fx.Rollover) {
	t := e.t
	t.Helper()
	perLot := map[string]decimal.Decimal{"BUY": decimal.RequireFromString("-7.50"), "SELL": decimal.RequireFromString("2.20")}
	type position struct {
		side     string
		volume   decimal.Decimal
		openedAt time.Time
		deals    map[string]decimal.Decimal
	}
	positions := map[int64]*position{}
	rows, err := e.sql.Query("SELECT `id`, `side`, `volume`, `openedAt` FROM `fx_position` WHERE `status` = 'OPEN' AND `symbol` = 'EURUSD'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		p := &position{deals: map[string]decimal.Decimal{}}
		if err := rows.Scan(&id, &p.side, &p.volume, &p.openedAt); err != nil {
			t.Fatal(err)
		}
		positions[id] = p
	}
	rows.Close()
	rows, err = e.sql.Query("SELECT `positionId`, `idempotencyKey`, `amount` FROM `fx_deal` WHERE `type` = 'SWAP'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var key string
		var amount decimal.Decimal
		if err := rows.Scan(&id, &key, &amount); err != nil {
			t.Fatal(err)
		}
		p := positions[id]
		if p == nil {
			t.Fatalf("swap deal %s of position %d, which is not an open EURUSD position", key, id)
		}
		p.deals[strings.TrimPrefix(key, fmt.Sprintf("swap:%d:", id))] = amount
	}
	rows.Close()
	bad := 0
	for id, p := range positions {
		want := map[string]string{}
		for _, ro := range due {
			if p.openedAt.Before(ro.At) {
				days := swaps.DayMultiplier(ro.Weekday(), time.Wednesday)
				want[ro.Date] = p.volume.Mul(perLot[p.side]).Mul(decimal.NewFromInt(int64(days))).StringFixed(2)
			}
		}
		got := map[string]string{}
		for date, a := range p.deals {
			got[date] = a.StringFixed(2)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			if bad++; bad <= 5 {
				t.Errorf("position %d opened %s: swap deals %v, want %v", id, p.openedAt.Format(time.RFC3339Nano), got, want)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d positions not charged exactly the dates they held", bad, len(positions))
	}
}
