package risk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTriggerHeapAgreesWithAMapUnderRandomEdits runs random pushes, moves and removals against a
// plain map, then checks that popFired and appendFired return exactly the keys a price reaches, in
// both directions, and that every slot the heap keeps names the entry's real index.
func TestTriggerHeapAgreesWithAMapUnderRandomEdits(t *testing.T) {
	t.Parallel()
	for _, above := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(1, 2))
		slots := make([]int32, 4096)
		for i := range slots {
			slots[i] = -1
		}
		h := newHeap(&slots, above)
		live := map[int32]float64{}
		next := int32(0)
		for range 5000 {
			switch op := rng.IntN(4); {
			case (op < 2 || len(live) == 0) && next < int32(len(slots)):
				k := float64(rng.IntN(1000))
				h.push(next, k)
				live[next] = k
				next++
			case op == 2 && len(live) > 0:
				for ref := range live {
					k := float64(rng.IntN(1000))
					h.set(ref, k)
					live[ref] = k
					break
				}
			case len(live) > 0:
				for ref := range live {
					h.remove(ref)
					delete(live, ref)
					if slots[ref] != -1 {
						t.Fatal("removed entry keeps a slot")
					}
					break
				}
			}
		}
		for i, it := range h.items {
			if slots[it.ref] != int32(i) {
				t.Fatalf("slot %d holds ref %d, which thinks it is at %d", i, it.ref, slots[it.ref])
			}
			if live[it.ref] != it.key {
				t.Fatalf("ref %d has key %v in the heap, want %v", it.ref, it.key, live[it.ref])
			}
		}
		price := 500.0
		var want []float64
		for _, k := range live {
			if (above && price >= k) || (!above && price <= k) {
				want = append(want, k)
			}
		}
		var peeked []float64
		for _, ref := range h.appendFired(nil, price) {
			peeked = append(peeked, live[ref])
		}
		var popped []float64
		for it, ok := h.popFired(price); ok; it, ok = h.popFired(price) {
			if it.key != live[it.ref] {
				t.Fatalf("popped ref %d with key %v, want %v", it.ref, it.key, live[it.ref])
			}
			popped = append(popped, it.key)
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
			t.Fatal("a fired entry is left at the root")
		}
	}
}

// TestTakeFiredLeavesExactlyTheRestInHeapOrder: taking what a price reaches leaves exactly the
// rest, in heap order with true slots, whether a few entries fire (popped one by one,
// nearest-to-fire first) or a gap reaches a large share of the heap (removed in one pass), on heaps
// that fire above and below a price.
func TestTakeFiredLeavesExactlyTheRestInHeapOrder(t *testing.T) {
	t.Parallel()
	for _, above := range []bool{true, false} {
		// Nothing, a few, more than 32 but under an eighth (still popped one by one), a share,
		// all; for a heap that fires below a price, the same shares from the other end.
		for _, at := range []float64{-1, 1, 5, 100, 400, 600, 1000} {
			price := at
			if !above {
				price = 999 - at
			}
			rng := rand.New(rand.NewPCG(3, 4))
			slots := make([]int32, 2000)
			h := newHeap(&slots, above)
			keys := map[int32]float64{}
			for ref := range int32(len(slots)) {
				keys[ref] = float64(rng.IntN(1000))
				h.push(ref, keys[ref])
			}
			fired := h.takeFired(nil, price)
			for i, it := range fired {
				if !h.fires(it.key, price) || keys[it.ref] != it.key || slots[it.ref] != -1 {
					t.Fatalf("above=%v price=%v: fired %+v (slot %d) should not have", above, price, it, slots[it.ref])
				}
				if len(fired) < max(32, len(keys)/8) && i > 0 && (above && it.key < fired[i-1].key || !above && it.key > fired[i-1].key) {
					t.Fatalf("above=%v price=%v: popped one by one, out of order at %d", above, price, i)
				}
			}
			for i, it := range h.items {
				if h.fires(it.key, price) || slots[it.ref] != int32(i) {
					t.Fatalf("above=%v price=%v: left %+v at %d (slot %d)", above, price, it, i, slots[it.ref])
				}
				if i > 0 && h.less(i, (i-1)/2) {
					t.Fatalf("above=%v price=%v: heap order broken at %d", above, price, i)
				}
			}
			if len(fired)+h.Len() != len(keys) {
				t.Fatalf("above=%v price=%v: %d fired + %d left ≠ %d", above, price, len(fired), h.Len(), len(keys))
			}
		}
	}
}
