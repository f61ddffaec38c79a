package risk

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A modified order fires only at its new price: OrderModified moves its trigger in its heap. An
// order the engine stopped watching (past its old expiry) is watched again at its new values.
func TestModifiedOrdersFireOnlyAtTheirNewPrice(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Orders: []Order{
		{ID: 7, AccountID: 1, Symbol: "EURUSD", Side: Buy, Type: Limit, Price: 1.09},
	}}
	r := newRig(t, snap, 1, nil)
	ctx := context.Background()
	r.e.Apply(ctx, Change{Kind: OrderModified, Order: Order{ID: 7, AccountID: 1, Symbol: "EURUSD", Side: Buy, Type: Limit, Price: 1.08}})
	r.tick("EURUSD", 1.0897, 1.0899) // the old price: nothing
	r.wantCalls()
	r.tick("EURUSD", 1.0797, 1.0799)
	r.wantCalls(call{kind: jobFill, id: 7})

	// An order the engine does not hold is added.
	r.e.Apply(ctx, Change{Kind: OrderModified, Order: Order{ID: 8, AccountID: 1, Symbol: "EURUSD", Side: Sell, Type: Stop, Price: 1.07, ExpiresAt: time.Now().Add(time.Hour)}})
	r.tick("EURUSD", 1.0699, 1.0701)
	r.wantCalls(call{kind: jobFill, id: 7}, call{kind: jobFill, id: 8})
}

// A fill the executor drops because a modify won the row (ErrOrderModified) puts the order back
// under watch at the price the modify carried, quietly: it is not an execution error.
func TestFillDroppedForAModifyIsWatchedAtTheNewPrice(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Orders: []Order{
		{ID: 7, AccountID: 1, Symbol: "EURUSD", Side: Buy, Type: Limit, Price: 1.09},
	}}
	drop := true
	r := newRig(t, snap, 1, func(r *rig) {
		r.exec.answer = func(c call) error {
			if drop {
				// The modify committed while the fill was queued: the engine hears of it first.
				r.e.Apply(context.Background(), Change{Kind: OrderModified, Order: Order{ID: 7, AccountID: 1, Symbol: "EURUSD", Side: Buy, Type: Limit, Price: 1.08}})
				return fmt.Errorf("fill order 7: %w", ErrOrderModified)
			}
			return nil
		}
	})
	r.tick("EURUSD", 1.0897, 1.0899)
	r.wantCalls(call{kind: jobFill, id: 7})
	drop = false
	r.tick("EURUSD", 1.0897, 1.0899) // still above the new price: nothing
	r.wantCalls(call{kind: jobFill, id: 7})
	r.tick("EURUSD", 1.0797, 1.0799)
	r.wantCalls(call{kind: jobFill, id: 7}, call{kind: jobFill, id: 7})
	if n := r.e.execErrors.Load(); n != 0 {
		t.Fatalf("a fill dropped for a modify counted as %d execution errors", n)
	}
}
