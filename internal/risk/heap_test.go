package risk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTriggerHeap runs random pushes, moves and removals against a plain slice, then checks
// that popFired and eachFired return exactly the keys a price reaches, in both directions.
func TestTriggerHeap(t *testing.T) {
	t.Parallel()
	for _, above := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(1, 2))
		h := &triggerHeap{above: above}
		live := map[*trigger]bool{}
		for range 5000 {
			switch op := rng.IntN(4); {
			case op < 2 || len(live) == 0:
				tr := &trigger{key: float64(rng.IntN(1000)), slot: -1}
				h.push(tr)
				live[tr] = true
			case op == 2:
				for tr := range live {
					tr.key = float64(rng.IntN(1000))
					h.fix(tr)
					break
				}
			default:
				for tr := range live {
					h.remove(tr)
					delete(live, tr)
					if tr.slot != -1 {
						t.Fatal("removed trigger keeps a slot")
					}
					break
				}
			}
		}
		for i, tr := range h.items {
			if tr.slot != i {
				t.Fatalf("slot %d holds a trigger that thinks it is at %d", i, tr.slot)
			}
		}
		price := 500.0
		var want []float64
		for tr := range live {
			if (above && price >= tr.key) || (!above && price <= tr.key) {
				want = append(want, tr.key)
			}
		}
		var peeked []float64
		h.eachFired(price, func(tr *trigger) { peeked = append(peeked, tr.key) })
		var popped []float64
		for tr := h.popFired(price); tr != nil; tr = h.popFired(price) {
			popped = append(popped, tr.key)
		}
		if !above {
			slices.Reverse(popped) // a max-heap pops the nearest-to-fire first: descending
		}
		if !slices.IsSorted(popped) {
			t.Fatalf("above=%v: pops out of order: %v", above, popped)
		}
		slices.Sort(want)
		slices.Sort(peeked)
		if !slices.Equal(popped, want) || !slices.Equal(peeked, want) {
			t.Fatalf("above=%v: popped %d, peeked %d, want %d fired", above, len(popped), len(peeked), len(want))
		}
		if h.Len() != len(live)-len(want) {
			t.Fatalf("above=%v: %d left, want %d", above, h.Len(), len(live)-len(want))
		}
		if h.Len() > 0 && h.fires(h.items[0].key, price) {
			t.Fatal("a fired trigger is left at the root")
		}
	}
}
