package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/shopspring/decimal"
)

// The holder SIGKILLed while clients keep it committing batches of market orders leaves no
// partial batch: every order written has its position and its commission deal, every position
// its order, Σ deals = balance on every account, and every order the desk answered is there.
func TestTradingHolderKilledMidBatchLeavesNoPartialBatch(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t, unlimitedRates...)
	tok := d.e.issueToken(700, false)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	accts := make([]int64, 8)
	for i := range accts {
		var a accountResp
		must(t, d.web, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`, http.StatusCreated, &a)
		d.fund(a.Account.ID, "1000000.00")
		accts[i] = a.Account.ID
	}

	// 24 clients, three per account, each sending its next order as soon as the last is
	// answered: the committer always has a batch in flight and the next one queued.
	const clients, killAfter = 24, 150
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		mu       sync.Mutex
		answered []int64
		n        atomic.Int64
		killed   = make(chan struct{})
		wg       sync.WaitGroup
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for c := range clients {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":"kill-%d-%d"}`,
					accts[c%len(accts)], c, i)
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+d.web.addr+"/api/fx/orders", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					return // the holder is gone
				}
				var o orderResp
				err = json.NewDecoder(resp.Body).Decode(&o)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated || err != nil {
					select {
					case <-killed:
						return // a half-written answer of the killed process
					default:
					}
					t.Errorf("order = %d (%v)", resp.StatusCode, err)
					stop()
					return
				}
				mu.Lock()
				answered = append(answered, o.Order.ID)
				mu.Unlock()
				if n.Add(1) == killAfter {
					close(killed)
				}
			}
		})
	}
	select {
	case <-killed:
		d.web.stop(syscall.SIGKILL)
	case <-ctx.Done(): // a client failed
	}
	stop()
	wg.Wait()
	if n.Load() < killAfter {
		t.Fatalf("only %d orders answered before the clients stopped", n.Load())
	}

	in := strings.TrimSuffix(strings.Repeat("?, ", len(accts)), ", ")
	args := make([]any, len(accts))
	for i, a := range accts {
		args[i] = a
	}
	var orders, broken, orphans int
	if err := d.e.sql.QueryRow("SELECT COUNT(*), COALESCE(SUM("+
		"(SELECT COUNT(*) FROM `fx_position` p WHERE p.`orderId` = o.`id`) <> 1 OR "+
		"(SELECT COUNT(*) FROM `fx_deal` d WHERE d.`idempotencyKey` = CONCAT('commission:order:', o.`id`)) <> 1 OR "+
		"o.`status` <> 'FILLED'), 0) FROM `fx_order` o WHERE o.`accountId` IN ("+in+")", args...).Scan(&orders, &broken); err != nil {
		t.Fatal(err)
	}
	if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` p LEFT JOIN `fx_order` o ON o.`id` = p.`orderId` "+
		"WHERE p.`accountId` IN ("+in+") AND o.`id` IS NULL", args...).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d orders answered before SIGKILL, %d written", len(answered), orders)
	if broken != 0 || orphans != 0 {
		t.Fatalf("%d of %d orders lack their position or commission deal, %d positions lack their order: a batch was written in part", broken, orders, orphans)
	}
	if orders < len(answered) {
		t.Fatalf("%d orders answered, %d written: an answer came before its commit", len(answered), orders)
	}
	for _, id := range answered {
		var found int
		d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_order` WHERE `id` = ?", id).Scan(&found)
		if found != 1 {
			t.Fatalf("order %d was answered but is not in the database", id)
		}
	}
	for _, a := range accts {
		var sum, bal decimal.Decimal
		if err := d.e.sql.QueryRow("SELECT COALESCE(SUM(`amount`), 0), (SELECT `balance` FROM `fx_account` WHERE `id` = ?) FROM `fx_deal` WHERE `accountId` = ?",
			a, a).Scan(&sum, &bal); err != nil {
			t.Fatal(err)
		}
		if !sum.Equal(bal) {
			t.Fatalf("account %d: Σ deals %s ≠ balance %s", a, sum, bal)
		}
	}
}
