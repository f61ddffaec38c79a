package trading

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// breakout is an OCO pair on EURUSD around 1.1000/1.1002: a buy stop above, a sell stop below.
func breakout(account int64, nonce string) OCORequest {
	leg := func(side fx.Side, price string) OrderRequest {
		return OrderRequest{Symbol: "EURUSD", Side: side, Type: fx.Stop, Volume: decimal.RequireFromString("0.01"), Price: ptrDec(price)}
	}
	return OCORequest{AccountID: account, RequestNonce: nonce, Legs: [2]OrderRequest{leg(fx.Buy, "1.10500"), leg(fx.Sell, "1.09500")}}
}

func countEvents(t *testing.T, account int64, typ string) int {
	t.Helper()
	var n int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE `accountId` = ? AND `type` = ?", account, typ).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A pair is placed linked both ways; its nonce replays the pair and refuses another body; a
// cancel of one leg cancels both.
func TestOCOPlaceReplayCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9911
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	res, err := svc.PlaceOCO(ctx, user, breakout(a.ID, "pair-1"))
	if err != nil {
		t.Fatal(err)
	}
	l0, l1 := storedOrder(t, res.Orders[0].ID), storedOrder(t, res.Orders[1].ID)
	if l0.OCOOrderID == nil || *l0.OCOOrderID != l1.ID || l1.OCOOrderID == nil || *l1.OCOOrderID != l0.ID || l0.Status != fx.OrderPending || l1.Status != fx.OrderPending {
		t.Fatalf("legs %+v / %+v; want both PENDING, each naming the other", l0, l1)
	}
	if n := countEvents(t, a.ID, "order.accepted"); n != 2 {
		t.Fatalf("%d order.accepted; want 2", n)
	}
	again, err := svc.PlaceOCO(ctx, user, breakout(a.ID, "pair-1"))
	if err != nil || !again.Replayed || again.Orders[0].ID != l0.ID || again.Orders[1].ID != l1.ID {
		t.Fatalf("retry: %+v, %v; want the same pair replayed", again, err)
	}
	other := breakout(a.ID, "pair-1")
	other.Legs[1].Price = ptrDec("1.09400")
	if _, err := svc.PlaceOCO(ctx, user, other); fx.ErrorCode(err) != fx.EKEYREUSED {
		t.Fatalf("another pair on the nonce: %v; want %s", err, fx.EKEYREUSED)
	}
	market := breakout(a.ID, "")
	market.Legs[0].Type, market.Legs[0].Price = fx.Market, nil
	before := counts(t, a.ID)
	if _, err := svc.PlaceOCO(ctx, user, market); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("a MARKET leg: %v; want %s", err, fx.EINVALID)
	}
	if after := counts(t, a.ID); after != before {
		t.Fatalf("a refused pair wrote: %v → %v", before, after)
	}
	if _, err := svc.CancelOrder(ctx, user, l1.ID); err != nil {
		t.Fatal(err)
	}
	if s0, s1 := storedOrder(t, l0.ID).Status, storedOrder(t, l1.ID).Status; s0 != fx.OrderCancelled || s1 != fx.OrderCancelled {
		t.Fatalf("after cancelling one leg: %s / %s; want both CANCELLED", s0, s1)
	}
	if _, err := svc.CancelOrder(ctx, user, l0.ID); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("cancel of the other leg after: %v; want %s", err, fx.ECONFLICT)
	}
}

// Both legs of a pair handed to the fill at once (one gap through both): exactly one fills, the
// other is CANCELLED by that fill, and the loser answers "already closed".
func TestOCOBothLegsTriggerExactlyOneFills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9912
	prices := newLiveQuotes()
	prices.set("EURUSD", "1.10000", "1.10020")
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, user)
	for round := 0; round < 10; round++ {
		res, err := svc.PlaceOCO(ctx, user, breakout(a.ID, ""))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range res.Orders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = svc.fillPending(ctx, res.Orders[i].ID, tick.Quote{})
			}()
		}
		wg.Wait()
		filled, cancelled := 0, 0
		for i, o := range res.Orders {
			switch storedOrder(t, o.ID).Status {
			case fx.OrderFilled:
				filled++
				if errs[i] != nil {
					t.Fatalf("round %d: leg %d filled but answered %v", round, i, errs[i])
				}
			case fx.OrderCancelled:
				cancelled++
				if !errors.Is(errs[i], risk.ErrAlreadyClosed) {
					t.Fatalf("round %d: leg %d cancelled but answered %v; want ErrAlreadyClosed", round, i, errs[i])
				}
			}
		}
		if filled != 1 || cancelled != 1 {
			t.Fatalf("round %d: %d filled, %d cancelled; want exactly one of each", round, filled, cancelled)
		}
	}
	var deals, balance decimal.Decimal
	testDB.QueryRow("SELECT COALESCE(SUM(`amount`), 0) FROM `fx_deal` WHERE `accountId` = ?", a.ID).Scan(&deals)
	testDB.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", a.ID).Scan(&balance)
	if !deals.Equal(balance) {
		t.Fatalf("Σ deals %s ≠ balance %s", deals, balance)
	}
}

// The dealer's cancel of one leg cancels both, each with its order.cancelled, and tells the
// engine of both.
func TestOCODealerCancelCancelsBoth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 9913
	var changes changeLog
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g, OnChange: changes.add})
	a := fundedAccount(t, svc, user)
	res, err := svc.PlaceOCO(ctx, user, breakout(a.ID, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Dealer().CancelOrder(asDealer("oco-1"), res.Orders[0].ID); err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Orders {
		if s := storedOrder(t, o.ID).Status; s != fx.OrderCancelled {
			t.Fatalf("leg %d is %s after the dealer's cancel; want CANCELLED", o.ID, s)
		}
	}
	if n := countEvents(t, a.ID, "order.cancelled"); n != 2 {
		t.Fatalf("%d order.cancelled; want 2", n)
	}
	told := map[int64]bool{}
	changes.mu.Lock()
	for _, c := range changes.cs {
		if c.Kind == risk.OrderCancelled {
			told[c.Order.ID] = true
		}
	}
	changes.mu.Unlock()
	if !told[res.Orders[0].ID] || !told[res.Orders[1].ID] {
		t.Fatalf("engine told of cancels %v; want both legs", told)
	}
}
