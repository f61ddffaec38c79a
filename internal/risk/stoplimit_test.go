package risk

import (
	"context"
	"testing"
)

// A STOP_LIMIT rests in the engine as a STOP at its stop; when its stop is handed to Fill and
// the executor answers that it now rests as a LIMIT (an OrderPlaced upsert of the same id,
// trading's stoplimit.go), the engine watches it in the LIMIT heap at its limit: a tick past the
// limit does not hand it over again, a tick at the limit does. The upsert may reach the engine
// before or after the fill's own answer is settled (Apply runs on the worker, the answer under
// the next lock); either order ends with the order watched once, as a LIMIT.
func TestStopLimitRestsAsALimitAfterItsStop(t *testing.T) {
	t.Parallel()
	for _, applyFirst := range []bool{true, false} {
		stop := Order{ID: 7, AccountID: 1, Symbol: "EURUSD", Side: Buy, Type: Stop, Price: 1.1050}
		asLimit := stop
		asLimit.Type, asLimit.Price = Limit, 1.1040
		r := newRig(t, Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Orders: []Order{stop}}, 2, nil)
		r.exec.answer = func(c call) error {
			if applyFirst && c.kind == jobFill && len(r.exec.got()) == 1 {
				r.e.Apply(context.Background(), Change{Kind: OrderPlaced, Order: asLimit})
			}
			return nil
		}
		gap := r.tick("EURUSD", 1.1080, 1.1082) // through the stop and past the limit
		r.wantCalls(call{kind: jobFill, id: 7, at: gap.Quote})
		if !applyFirst {
			r.e.Apply(context.Background(), Change{Kind: OrderPlaced, Order: asLimit})
		}
		r.tick("EURUSD", 1.1060, 1.1062) // still above its limit: a buy limit waits
		r.tick("EURUSD", 1.1090, 1.1092) // above the old stop again: it is no stop any more
		r.wantCalls(call{kind: jobFill, id: 7, at: gap.Quote})
		if s := r.e.Stats(); s.Orders != 1 {
			t.Fatalf("apply first %v: %d orders watched; want 1", applyFirst, s.Orders)
		}
		at := r.tick("EURUSD", 1.1037, 1.1039)
		r.wantCalls(call{kind: jobFill, id: 7, at: gap.Quote}, call{kind: jobFill, id: 7, at: at.Quote})
	}
}
