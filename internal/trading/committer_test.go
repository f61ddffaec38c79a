package trading

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

// inOneBatch makes svc's committer wait until n writes are queued, so the next n writes the
// test sends are one batch.
func inOneBatch(svc *Service, n int) {
	svc.commits.HoldUntil(n)
}

// concurrently runs each fn in its own goroutine and waits for all of them.
func concurrently(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(fn)
	}
	wg.Wait()
}

func marketBuy(account int64, volume, nonce string) OrderRequest {
	return OrderRequest{AccountID: account, Symbol: "EURUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString(volume), RequestNonce: nonce}
}

var eurusd = fixedPrices{"EURUSD": {1.1, 1.1002}}

// Two orders of one account in one batch: the second is checked against the margin the first
// took, as if they had been sent one after the other, and is refused alone.
func TestBatchSecondOrderSeesTheFirstsMargin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9101) // 1,000 USD at 1:100: 0.5 lot EURUSD needs 550.05, twice does not fit
	inOneBatch(svc, 2)
	var res [2]OrderResult
	var errs [2]error
	concurrently(
		func() { res[0], errs[0] = svc.PlaceOrder(ctx, 9101, marketBuy(a.ID, "0.5", "")) },
		func() { res[1], errs[1] = svc.PlaceOrder(ctx, 9101, marketBuy(a.ID, "0.5", "")) },
	)
	if st := svc.CommitStats(); st.Batches != 1 || st.LastSize != 2 {
		t.Fatalf("committer %+v, want the two orders in one batch", st)
	}
	filled, refused := 0, 0
	for i := range errs {
		switch {
		case errs[i] == nil && res[i].Position != nil:
			filled++
		case fx.ErrorCode(errs[i]) == fx.ECONFLICT && strings.Contains(fx.ErrorMessage(errs[i]), "Not enough free margin"):
			refused++
		default:
			t.Fatalf("order %d: %+v, %v", i, res[i], errs[i])
		}
	}
	if filled != 1 || refused != 1 {
		t.Fatalf("%d filled, %d refused for margin; want one of each", filled, refused)
	}
	if c := counts(t, a.ID); c[0] != "1" || c[1] != "2" {
		t.Fatalf("orders, deals = %v: want one order and its commission next to the deposit", c)
	}
	amounts, balance := ledgerOf(t, a.ID)
	sum := decimal.Zero
	for _, d := range amounts {
		sum = sum.Add(d)
	}
	if !sum.Equal(balance) {
		t.Fatalf("Σ deals %s ≠ balance %s", sum, balance)
	}
}

// Closes of one batch share its one position UPDATE, whatever they share: two full closes of
// EURUSD at one price (one the trader's, one an SL), a full close of GBPUSD at another, and a
// partial close that leaves its position open. Each row ends as its own close left it.
func TestBatchOfMixedCloses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prices := newLiveQuotes()
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9106)
	if _, _, err := svc.Accounts().Deposit(asAdmin(ctx), a.ID, dd("9000"), "seed-mixed"); err != nil {
		t.Fatal(err)
	}
	prices.set("EURUSD", "1.1", "1.1002")
	prices.set("GBPUSD", "1.25", "1.2502")
	open := func(symbol, lots string) int64 {
		t.Helper()
		res, err := svc.PlaceOrder(ctx, 9106, OrderRequest{AccountID: a.ID, Symbol: symbol, Side: fx.Buy, Type: fx.Market, Volume: dd(lots)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Position.ID
	}
	client, sl, gbp, partial := open("EURUSD", "0.1"), open("EURUSD", "0.1"), open("GBPUSD", "0.1"), open("EURUSD", "0.3")
	prices.set("EURUSD", "1.1012", "1.1014")
	prices.set("GBPUSD", "1.2490", "1.2492")
	inOneBatch(svc, 4)
	part := dd("0.1")
	var res [4]CloseResult
	var errs [4]error
	concurrently(
		func() { res[0], errs[0] = svc.ClosePosition(ctx, 9106, client, nil, fx.CloseClient) },
		func() { res[1], errs[1] = svc.closePosition(ctx, 0, 0, sl, nil, fx.CloseSL, nil, time.Now()) },
		func() { res[2], errs[2] = svc.ClosePosition(ctx, 9106, gbp, nil, fx.CloseClient) },
		func() { res[3], errs[3] = svc.ClosePosition(ctx, 9106, partial, &part, fx.CloseClient) },
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	if st := svc.CommitStats(); st.LastSize != 4 {
		t.Fatalf("committer %+v, want the four closes in one batch", st)
	}
	for _, c := range []struct {
		id   int64
		deal decimal.Decimal
		want string
	}{
		{client, res[0].Deal.Amount, "CLOSED 0.0000 1.1012000000 CLIENT closed"},
		{sl, res[1].Deal.Amount, "CLOSED 0.0000 1.1012000000 SL closed"},
		{gbp, res[2].Deal.Amount, "CLOSED 0.0000 1.2490000000 CLIENT closed"},
		{partial, res[3].Deal.Amount, "OPEN 0.2000 <nil> <nil> open"},
	} {
		var status, volume string
		var price, reason *string
		var profit decimal.Decimal
		var closedAt *time.Time
		if err := testDB.QueryRow("SELECT `status`, `volume`, `closePrice`, `closeReason`, `realizedProfit`, `closedAt` FROM `fx_position` WHERE `id` = ?", c.id).
			Scan(&status, &volume, &price, &reason, &profit, &closedAt); err != nil {
			t.Fatal(err)
		}
		at := "open"
		if closedAt != nil {
			at = "closed"
		}
		got := fmt.Sprintf("%s %s %s %s %s", status, volume, deref(price), deref(reason), at)
		if got != c.want || !profit.Equal(c.deal) {
			t.Errorf("position %d: %s, realized %s; want %s, realized %s (its deal)", c.id, got, profit, c.want, c.deal)
		}
	}
	wantLedgerBalanced(t, a.ID)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// The same request nonce twice in one batch opens one order; both submits are answered with it.
func TestBatchSameNonceTwiceOpensOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9102)
	inOneBatch(svc, 2)
	var res [2]OrderResult
	var errs [2]error
	concurrently(
		func() { res[0], errs[0] = svc.PlaceOrder(ctx, 9102, marketBuy(a.ID, "0.1", "twice")) },
		func() { res[1], errs[1] = svc.PlaceOrder(ctx, 9102, marketBuy(a.ID, "0.1", "twice")) },
	)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("submits: %v, %v", errs[0], errs[1])
	}
	if st := svc.CommitStats(); st.Batches != 1 || st.LastSize != 2 {
		t.Fatalf("committer %+v, want both submits in one batch", st)
	}
	if res[0].Order.ID == 0 || res[0].Order.ID != res[1].Order.ID || res[0].Position == nil || res[1].Position == nil ||
		res[0].Position.ID != res[1].Position.ID {
		t.Fatalf("answers name different orders: %+v / %+v", res[0], res[1])
	}
	if res[0].Replayed == res[1].Replayed {
		t.Fatalf("replayed = %v, %v: want exactly one replay", res[0].Replayed, res[1].Replayed)
	}
	if c := counts(t, a.ID); c[0] != "1" {
		t.Fatalf("%s orders for one nonce", c[0])
	}
}

// A fence refusal fails the whole batch — a close and a fill of two accounts — with the pricing
// text, consults the fence once for both, and writes nothing.
func TestBatchFenceRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &switchLease{}
	tg := newGate(t, &gatetest.Lease{})
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: l, Gate: tg.g})
	a, b := fundedAccount(t, svc, 9103), fundedAccount(t, svc, 9103)
	open, err := svc.PlaceOrder(ctx, 9103, marketBuy(a.ID, "0.1", ""))
	if err != nil {
		t.Fatal(err)
	}
	before := [2][3]string{counts(t, a.ID), counts(t, b.ID)}
	l.fenced.Store(true)
	calls := l.calls.Load()
	inOneBatch(svc, 2)
	var closeErr, fillErr error
	concurrently(
		func() { _, closeErr = svc.ClosePosition(ctx, 9103, open.Position.ID, nil, fx.CloseClient) },
		func() { _, fillErr = svc.PlaceOrder(ctx, 9103, marketBuy(b.ID, "0.1", "")) },
	)
	for what, err := range map[string]error{"close": closeErr, "fill": fillErr} {
		if !errors.Is(err, gate.ErrNotHolder) || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
			t.Errorf("fenced %s: %v", what, err)
		}
		if n := testutil.ToFloat64(tg.dropped.WithLabelValues(what, "fence")); n != 1 {
			t.Errorf("fxdesk_gate_dropped_total{work=%s,at=fence} = %v, want 1", what, n)
		}
	}
	if n := l.calls.Load() - calls; n != 1 {
		t.Errorf("fence consulted %d times for one batch", n)
	}
	if after := [2][3]string{counts(t, a.ID), counts(t, b.ID)}; after != before {
		t.Fatalf("the refused batch wrote: %v → %v", before, after)
	}
}

// A statement the database refuses for one write of a batch — here a trigger refusing one
// account's position — makes the batch write its requests one by one: the others commit, the
// refused one alone is dropped, logged with what it was, and counted.
func TestBatchWithOneRefusedRowCommitsTheOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &dbtest.LogBuffer{}
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	var accts [3]book.Account
	for i := range accts {
		accts[i] = fundedAccount(t, svc, 9104)
	}
	refused := accts[1].ID
	trigger := fmt.Sprintf("fx_test_refuse_%d", refused)
	if _, err := testDB.Exec(fmt.Sprintf("CREATE TRIGGER `%s` BEFORE INSERT ON `fx_position` FOR EACH ROW "+
		"BEGIN IF NEW.`accountId` = %d THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF; END", trigger, refused)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testDB.Exec("DROP TRIGGER `" + trigger + "`") })
	before := counts(t, refused)

	inOneBatch(svc, len(accts))
	var errs [3]error
	var fns []func()
	for i := range accts {
		fns = append(fns, func() { _, errs[i] = svc.PlaceOrder(ctx, 9104, marketBuy(accts[i].ID, "0.1", "")) })
	}
	concurrently(fns...)
	for i, err := range errs {
		if accts[i].ID == refused {
			if fx.ErrorCode(err) != fx.EINTERNAL || !strings.Contains(err.Error(), "refused by the test") {
				t.Errorf("the refused order: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("order on account %d: %v", accts[i].ID, err)
		}
		if c := counts(t, accts[i].ID); c[0] != "1" {
			t.Errorf("account %d has %s orders, want 1", accts[i].ID, c[0])
		}
	}
	if after := counts(t, refused); after != before {
		t.Errorf("the refused order wrote: %v → %v", before, after)
	}
	if st := svc.CommitStats(); st.Split != 1 || st.Refused != 1 {
		t.Errorf("committer %+v: want one split batch and one refused row", st)
	}
	if !strings.Contains(logs.String(), `msg="desk write refused by the database; dropped" op="fill order"`) ||
		!strings.Contains(logs.String(), fmt.Sprintf("account_id=%d", refused)) {
		t.Errorf("no log line naming the dropped order:\n%s", logs)
	}
}

// A deadlock between a batch and another writer that takes the same accounts in the other
// order (a swap batch holding one account and then asking for another) is retried: the
// server rolls the batch back as the lighter transaction, the writer goes on, and the batch's
// retry commits both closes.
func TestBatchDeadlockIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a, b := fundedAccount(t, svc, 9105), fundedAccount(t, svc, 9105) // a.ID < b.ID
	var pos [2]int64
	for i, acct := range []int64{a.ID, b.ID} {
		o, err := svc.PlaceOrder(ctx, 9105, marketBuy(acct, "0.1", ""))
		if err != nil {
			t.Fatal(err)
		}
		pos[i] = o.Position.ID
	}
	if _, err := testDB.Exec("CREATE TABLE IF NOT EXISTS `fx_test_ballast` (`id` INT AUTO_INCREMENT PRIMARY KEY, `n` INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}

	// The other writer: heavier than the batch (it inserted rows), so the server picks the batch
	// as the deadlock's victim; it holds account b.
	other, err := testDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var rows []string
	for i := range 200 {
		rows = append(rows, fmt.Sprintf("(%d)", i))
	}
	for _, q := range []string{"START TRANSACTION", "INSERT INTO `fx_test_ballast` (`n`) VALUES " + strings.Join(rows, ", "),
		fmt.Sprintf("SELECT `id` FROM `fx_account` WHERE `id` = %d FOR UPDATE", b.ID)} {
		if _, err := other.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	inOneBatch(svc, 2)
	var errs [2]error
	done := make(chan struct{})
	go func() {
		defer close(done)
		concurrently(
			func() { _, errs[0] = svc.ClosePosition(ctx, 9105, pos[0], nil, fx.CloseClient) },
			func() { _, errs[1] = svc.ClosePosition(ctx, 9105, pos[1], nil, fx.CloseClient) },
		)
	}()
	// The batch has locked a and waits for b: the server says so (its transaction list; the
	// information_schema lock tables do not always show a wait that began in a locking read).
	// Only the TRANSACTIONS section is read: the report's LATEST DETECTED DEADLOCK section can
	// hold an earlier run's batch of the same ids (every run's fresh database numbers its
	// accounts from 1), whose old wait would let the test go on before this batch waits.
	waiting := fmt.Sprintf("FROM `fx_account` FORCE INDEX (PRIMARY) WHERE `id` IN (%d, %d) ORDER BY `id` FOR UPDATE", a.ID, b.ID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var typ, name, status string
		if err := testDB.QueryRow("SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
			t.Fatal(err)
		}
		_, live, _ := strings.Cut(status, "\nTRANSACTIONS\n")
		if slices.ContainsFunc(strings.Split(live, "---TRANSACTION")[1:], func(trx string) bool {
			return strings.Contains(trx, "LOCK WAIT") && strings.Contains(trx, waiting)
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch never waited for the other writer's lock:\n%s", status)
		}
		time.Sleep(5 * time.Millisecond) // polling the server's lock table; it has no notification
	}
	if _, err := other.ExecContext(ctx, fmt.Sprintf("SELECT `id` FROM `fx_account` WHERE `id` = %d FOR UPDATE", a.ID)); err != nil {
		t.Fatalf("the other writer was the deadlock's victim, not the batch: %v", err)
	}
	if _, err := other.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	<-done
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("closes after the deadlock: %v, %v", errs[0], errs[1])
	}
	if st := svc.CommitStats(); st.Retried < 1 {
		t.Fatalf("committer %+v: the batch was not retried", st)
	}
	for _, id := range pos {
		if p, err := book.LoadPosition(ctx, testDB, 9105, id); err != nil || p.Status != fx.PositionClosed {
			t.Fatalf("position %d after the retried batch: %+v, %v", id, p, err)
		}
	}
}

// The group commit is a part with a lifecycle: a write submitted while it does not run —
// before Run, or after Run's context ended — is refused at once with nothing written, never
// left waiting; and Run returns once its context ends.
func TestGroupCommitRefusesWritesWhileNotRunning(t *testing.T) {
	t.Parallel()
	svc, err := New(Config{DB: testDB, Prices: fixedPrices{}, Gate: newGate(t, &gatetest.Lease{}).g})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(when string) {
		t.Helper()
		w := &closeWrite{Queued: book.NewQueued(context.Background(), gate.RiskClose, "close position", 1), id: 1}
		svc.commits.Submit(w)
		if !errors.Is(w.Err, book.ErrNotCommitting) || fx.ErrorCode(w.Err) != fx.EUNAVAILABLE {
			t.Fatalf("a write %s: %v, want errNotCommitting (503)", when, w.Err)
		}
	}
	refused("before Run")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := svc.Run(ctx); err != nil {
		t.Fatalf("Run of an ended context: %v", err)
	}
	refused("after Run returned")
}
