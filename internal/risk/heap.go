package risk

import "slices"

// A heapEntry is one price level that, once the market reaches it, makes the engine act: a
// position's SL or TP, a resting order's price, or one edge of an account's margin band. The key
// sits in the entry, so ordering the heap never leaves its array; ref names the owner, whose slot
// (its index in items) the heap keeps current in *slots, so removing or moving it is O(log n)
// without a search.
type heapEntry struct {
	key float64
	ref int32
}

// triggerHeap holds the levels of one direction on one symbol. An "above" heap fires when the
// price is at or above a key, so it is a min-heap: every key ≤ price sits in a subtree hanging
// from the root. A "below" heap fires at or under a key and is a max-heap. Either way, the work
// a tick does is proportional to what it reaches, never to what it does not.
//
// Neither the heap nor its slot table holds a pointer the garbage collector must follow.
type triggerHeap struct {
	items []heapEntry
	slots *[]int32 // ref → index in items, −1 when in no heap; shared by the heaps of one kind
	above bool
}

func newHeap(slots *[]int32, above bool) triggerHeap {
	return triggerHeap{slots: slots, above: above}
}

func (h *triggerHeap) Len() int { return len(h.items) }

func (h *triggerHeap) less(i, j int) bool {
	if h.above {
		return h.items[i].key < h.items[j].key
	}
	return h.items[i].key > h.items[j].key
}

// fires reports whether price reaches key in this heap's direction (inclusive).
func (h *triggerHeap) fires(key, price float64) bool {
	if h.above {
		return price >= key
	}
	return price <= key
}

func (h *triggerHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	s := *h.slots
	s[h.items[i].ref] = int32(i)
	s[h.items[j].ref] = int32(j)
}

func (h *triggerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *triggerHeap) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// slot is ref's index in this heap, or −1.
func (h *triggerHeap) slot(ref int32) int {
	i := int((*h.slots)[ref])
	if i < 0 || i >= len(h.items) || h.items[i].ref != ref {
		return -1
	}
	return i
}

func (h *triggerHeap) push(ref int32, key float64) {
	i := len(h.items)
	h.items = append(h.items, heapEntry{key: key, ref: ref})
	(*h.slots)[ref] = int32(i)
	h.up(i)
}

func (h *triggerHeap) remove(ref int32) {
	i := h.slot(ref)
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items = h.items[:last]
	(*h.slots)[ref] = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// set moves ref to key, pushing it when it is in no heap.
func (h *triggerHeap) set(ref int32, key float64) {
	i := h.slot(ref)
	switch {
	case i < 0:
		h.push(ref, key)
	case h.items[i].key != key:
		h.items[i].key = key
		if !h.down(i) {
			h.up(i)
		}
	}
}

// popFired removes and returns the root if price reaches it.
func (h *triggerHeap) popFired(price float64) (heapEntry, bool) {
	if len(h.items) == 0 || !h.fires(h.items[0].key, price) {
		return heapEntry{}, false
	}
	it := h.items[0]
	h.remove(it.ref)
	return it, true
}

// takeFired removes every entry price reaches and appends them to dst. When a few fire they come
// nearest-to-fire first, as popFired gives them. When a gap reaches a large share of the heap,
// they come in the heap's level order (each level no further than the one below it) from a single
// pass over the array, instead of a sift-down with scattered slot writes per entry: they all
// execute at the same gapped quote, so a strict order would buy nothing.
func (h *triggerHeap) takeFired(dst []heapEntry, price float64) []heapEntry {
	if bulk := max(32, len(h.items)/8); h.countFired(0, price, bulk) < bulk {
		for it, ok := h.popFired(price); ok; it, ok = h.popFired(price) {
			dst = append(dst, it)
		}
		return dst
	}
	s := *h.slots
	kept := h.items[:0]
	for _, it := range h.items {
		if h.fires(it.key, price) {
			s[it.ref] = -1
			dst = append(dst, it)
			continue
		}
		s[it.ref] = int32(len(kept))
		kept = append(kept, it)
	}
	h.items = kept
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return dst
}

// countFired counts the entries under i that price reaches, up to limit: O(min(fired, limit)).
func (h *triggerHeap) countFired(i int, price float64, limit int) int {
	if limit <= 0 || i >= len(h.items) || !h.fires(h.items[i].key, price) {
		return 0
	}
	n := 1
	n += h.countFired(2*i+1, price, limit-n)
	return n + h.countFired(2*i+2, price, limit-n)
}

// appendFired appends, without removing anything, every ref that price reaches: the fired
// subtree under the root.
func (h *triggerHeap) appendFired(dst []int32, price float64) []int32 {
	return h.appendFiredFrom(dst, 0, price)
}

func (h *triggerHeap) appendFiredFrom(dst []int32, i int, price float64) []int32 {
	if i >= len(h.items) || !h.fires(h.items[i].key, price) {
		return dst
	}
	dst = append(dst, h.items[i].ref)
	dst = h.appendFiredFrom(dst, 2*i+1, price)
	return h.appendFiredFrom(dst, 2*i+2, price)
}

// takeIndex returns an index into *items for a new entry: the last one freed, or else a new zero
// entry appended to *items with its refs heap slots (−1, in no heap) appended to *slots.
func takeIndex[T any](items *[]T, free, slots *[]int32, refs int) int32 {
	if n := len(*free); n > 0 {
		idx := (*free)[n-1]
		*free = (*free)[:n-1]
		return idx
	}
	// Doubling, not append's quarter: a view installed from batches (a holder's boot) grows these
	// to tens of thousands, and append's growth would copy each several times over.
	if len(*items) == cap(*items) {
		*items = slices.Grow(*items, max(len(*items), 64))
	}
	if len(*slots)+refs > cap(*slots) {
		*slots = slices.Grow(*slots, max(len(*slots), 64))
	}
	var zero T
	*items = append(*items, zero)
	for range refs {
		*slots = append(*slots, -1)
	}
	return int32(len(*items) - 1)
}
