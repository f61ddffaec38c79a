package swaps

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/tick"
)

// swapEvent is a swap.charged row as read back.
type swapEvent struct {
	User    int64
	Payload struct {
		AccountID      int64  `json:"accountId"`
		Type           string `json:"type"`
		Amount         string `json:"amount"`
		BalanceAfter   string `json:"balanceAfter"`
		Currency       string `json:"currency"`
		PositionID     int64  `json:"positionId"`
		Symbol         string `json:"symbol"`
		Volume         string `json:"volume"`
		IdempotencyKey string `json:"idempotencyKey"`
		RolloverDate   string `json:"rolloverDate"`
		Days           int    `json:"days"`
	}
}

// swapEventsOf is account's swap.charged events by idempotency key, failing on a key told twice.
func swapEventsOf(t *testing.T, account int64) map[string]swapEvent {
	t.Helper()
	rows, err := testDB.Query("SELECT `userId`, `payload` FROM `fx_event` WHERE `accountId` = ? AND `type` = 'swap.charged' ORDER BY `id`", account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]swapEvent{}
	for rows.Next() {
		var e swapEvent
		var text string
		if err := rows.Scan(&e.User, &text); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(text), &e.Payload); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[e.Payload.IdempotencyKey]; dup {
			t.Fatalf("swap charge %s told twice", e.Payload.IdempotencyKey)
		}
		out[e.Payload.IdempotencyKey] = e
	}
	return out
}

// wantSwapEvents asserts account's swap.charged events are exactly one per SWAP deal, each with
// its deal's figures, the rollover date its key names and the day multiplier days[date].
func wantSwapEvents(t *testing.T, account int64, days map[string]int) {
	t.Helper()
	es := swapEventsOf(t, account)
	rows, err := testDB.Query("SELECT `idempotencyKey`, `amount`, `balanceAfter`, `currency`, `positionId` FROM `fx_deal` WHERE `accountId` = ? AND `type` = 'SWAP'", account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key, currency string
		var amount, after decimal.Decimal
		var position int64
		if err := rows.Scan(&key, &amount, &after, &currency, &position); err != nil {
			t.Fatal(err)
		}
		n++
		e, ok := es[key]
		date := key[strings.LastIndex(key, ":")+1:]
		switch {
		case !ok:
			t.Errorf("SWAP deal %s has no swap.charged", key)
		case e.User != 7 || e.Payload.AccountID != account || e.Payload.Type != "SWAP" || e.Payload.Amount != amount.StringFixed(2) ||
			e.Payload.BalanceAfter != after.StringFixed(2) || e.Payload.Currency != currency || e.Payload.PositionID != position ||
			e.Payload.Symbol != "EURUSD" || e.Payload.Volume != "1" || e.Payload.RolloverDate != date || e.Payload.Days != days[date]:
			t.Errorf("swap.charged of %s = %+v, want deal %s %s → %s %s of position %d, %d day(s)", key, e, amount, currency, after, date, position, days[date])
		}
	}
	if n != len(es) || n != len(days) {
		t.Errorf("account %d: %d SWAP deals, %d swap.charged, want %d of each", account, n, len(es), len(days))
	}
}

// Runs racing for the same rollovers, and a rerun, tell each charge once: swap.charged is written
// in the charge's own transaction, with its deal's figures.
func TestSwapChargedToldOncePerCharge(t *testing.T) {
	at := utc(t, "2026-12-15T22:30:00Z")
	account, _ := seedLong(t, utc(t, "2026-12-08T12:00:00Z"), "") // the whole window: 12-09 (triple) … 12-15
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = newJob(1).Run(context.Background(), at) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newJob(1).Run(context.Background(), at); err != nil {
		t.Fatal(err)
	}
	wantSwapEvents(t, account, map[string]int{"2026-12-09": 3, "2026-12-10": 1, "2026-12-11": 1, "2026-12-14": 1, "2026-12-15": 1})
}

// eurusdPrices quotes EURUSD alone, fresh.
type eurusdPrices struct{}

func (eurusdPrices) LastTick(s string) (tick.Quote, bool) {
	if s != "EURUSD" {
		return tick.Quote{}, false
	}
	return tick.Quote{Bid: 1.08, Ask: 1.0802, ReceivedAt: time.Now(), ProviderTime: time.Now()}, true
}

func (eurusdPrices) SymbolState(s string) tick.State {
	if s == "EURUSD" {
		return tick.Quoting
	}
	return tick.QuotingHalted
}

// A charge parked for want of a conversion tells nothing; the retry that charges it tells it
// once, and a second retry nothing.
func TestPendingSwapToldWhenCharged(t *testing.T) {
	at := utc(t, "2026-12-15T22:30:00Z")
	account, _ := seedLong(t, utc(t, "2026-12-14T12:00:00Z"), "") // Monday's and Tuesday's rollovers
	if _, err := testDB.Exec("UPDATE `fx_account` SET `currency` = 'EUR' WHERE `id` = ?", account); err != nil {
		t.Fatal(err)
	}
	got, err := newJob(10).Run(context.Background(), at)
	if err != nil || got["pending"] != 2 {
		t.Fatalf("run without a EURUSD mid: %v %v, want 2 pending", got, err)
	}
	if es := swapEventsOf(t, account); len(es) != 0 {
		t.Fatalf("pending charges told: %v", es)
	}
	priced := New(Config{DB: testDB, Prices: func() tick.Prices { return eurusdPrices{} }, Batch: 10}, slog.New(slog.DiscardHandler))
	for range 2 {
		if _, err := priced.Run(context.Background(), at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	wantSwapEvents(t, account, map[string]int{"2026-12-14": 1, "2026-12-15": 1})
}
