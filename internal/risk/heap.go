package risk

// A trigger is one price level that, once the market reaches it, hands work to the executor:
// a position's SL or TP, or a resting order's price. It lives in at most one triggerHeap and
// knows its slot there, so removing or moving it is O(log n) without a search.
type trigger struct {
	key  float64
	slot int // index in its heap; -1 when in none
	kind triggerKind
	pos  *position // set for SL and TP
	ord  *order    // set for order triggers
}

type triggerKind uint8

const (
	trigSL triggerKind = iota + 1
	trigTP
	trigOrder
)

// triggerHeap holds the triggers of one direction on one symbol. An "above" heap fires when the
// price is at or above a key, so it is a min-heap: every key ≤ price sits in a subtree hanging
// from the root. A "below" heap fires at or under a key and is a max-heap. Either way, the work
// a tick does is proportional to what it triggers, never to what it does not.
type triggerHeap struct {
	items []*trigger
	above bool
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
	h.items[i].slot = i
	h.items[j].slot = j
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

func (h *triggerHeap) push(t *trigger) {
	t.slot = len(h.items)
	h.items = append(h.items, t)
	h.up(t.slot)
}

func (h *triggerHeap) remove(t *trigger) {
	i := t.slot
	if i < 0 || i >= len(h.items) || h.items[i] != t {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	t.slot = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// fix restores order after t.key changed.
func (h *triggerHeap) fix(t *trigger) {
	if !h.down(t.slot) {
		h.up(t.slot)
	}
}

// popFired removes and returns the root if price reaches it.
func (h *triggerHeap) popFired(price float64) *trigger {
	if len(h.items) == 0 || !h.fires(h.items[0].key, price) {
		return nil
	}
	t := h.items[0]
	h.remove(t)
	return t
}

// eachFired visits, without removing anything, every trigger that price reaches: the fired
// subtree under the root. Used to name the work the gate drops.
func (h *triggerHeap) eachFired(price float64, fn func(*trigger)) {
	var walk func(i int)
	walk = func(i int) {
		if i >= len(h.items) || !h.fires(h.items[i].key, price) {
			return
		}
		fn(h.items[i])
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
}
