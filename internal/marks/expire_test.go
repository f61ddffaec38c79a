package marks

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/testkit/dbtest"
)

var testDB *sql.DB

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, "marks", &testDB)) }

// restingOrder writes a PENDING LIMIT order of account with tif and expiry, straight into the
// database, and returns its id.
func restingOrder(t *testing.T, account int64, tif string, expires any) int64 {
	t.Helper()
	res, err := testDB.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `timeInForce`, `expiresAt`, `status`) "+
		"VALUES (?, 'EURUSD', 'BUY', 'LIMIT', 0.1, 1.05, ?, ?, 'PENDING')", account, tif, expires)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

// Each order the reconcile expires is told once, by order.expired in the transaction that
// expires it, whichever of two racing runs expires it; an order not yet due, a GTC order and one
// already filled are left alone and told nothing.
func TestExpiryTellsEachOrderOnce(t *testing.T) {
	ctx := context.Background()
	res, err := testDB.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (41, 'USD', 100)")
	if err != nil {
		t.Fatal(err)
	}
	account, _ := res.LastInsertId()
	at := time.Date(2026, 12, 15, 22, 30, 0, 0, time.UTC)
	past, later := at.Add(-time.Minute), at.Add(time.Hour)
	gtd, day := restingOrder(t, account, "GTD", past), restingOrder(t, account, "DAY", past)
	notYet, gtc := restingOrder(t, account, "GTD", later), restingOrder(t, account, "GTC", nil)
	filled := restingOrder(t, account, "GTD", past)
	if _, err := testDB.Exec("UPDATE `fx_order` SET `status` = 'FILLED' WHERE `id` = ?", filled); err != nil {
		t.Fatal(err)
	}

	// Batches of one, so the two runs interleave order by order.
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i := range counts {
		wg.Go(func() {
			n, err := New(Config{DB: testDB, Batch: 1}, slog.New(slog.DiscardHandler)).expireOrders(ctx, at)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	if counts[0]+counts[1] != 2 {
		t.Fatalf("runs expired %v orders, want 2 between them", counts)
	}

	rows, err := testDB.Query("SELECT `userId`, `type`, `payload`, `term` FROM `fx_event` WHERE `accountId` = ? ORDER BY `id`", account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	told := map[int64]int{}
	for rows.Next() {
		var user, term int64
		var typ, text string
		if err := rows.Scan(&user, &typ, &text, &term); err != nil {
			t.Fatal(err)
		}
		var p struct {
			ID          int64  `json:"id"`
			Status      string `json:"status"`
			TimeInForce string `json:"timeInForce"`
			Price       string `json:"price"`
			ExpiresAt   string `json:"expiresAt"`
		}
		if err := json.Unmarshal([]byte(text), &p); err != nil {
			t.Fatal(err)
		}
		if user != 41 || typ != "order.expired" || term != 0 || p.Status != "EXPIRED" || p.Price != "1.05" || p.ExpiresAt == "" {
			t.Fatalf("event %s of user %d, term %d: %s", typ, user, term, text)
		}
		told[p.ID]++
	}
	if len(told) != 2 || told[gtd] != 1 || told[day] != 1 {
		t.Fatalf("order.expired per order %v, want one each of %d and %d", told, gtd, day)
	}
	for id, want := range map[int64]string{gtd: "EXPIRED", day: "EXPIRED", notYet: "PENDING", gtc: "PENDING", filled: "FILLED"} {
		var st string
		if err := testDB.QueryRow("SELECT `status` FROM `fx_order` WHERE `id` = ?", id).Scan(&st); err != nil || st != want {
			t.Fatalf("order %d is %s (%v), want %s", id, st, err, want)
		}
	}
}
