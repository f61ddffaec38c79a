package risk

import "math"

// Trailing stops (docs/orders.md, «Trailing stops»). A BUY position's trail of distance d sits
// at level = max(level, bid − d) and fires when bid ≤ level; a SELL's at min(level, ask + d),
// firing when ask ≥ level. A trailBook holds one side of one symbol. The SELL side works on
// negated prices (x = −ask, level′ = −level), where its rules are the BUY side's, so the code
// below is written once, for the BUY side.
//
// Moving each trail on each new high would cost a tick O(trails). Instead a trail is stored as
// its anchor a (the high-water mark, a = level + d) and its distance, and the trails that share
// an anchor form a group: a tick that makes a new high x over a group's anchor moves the whole
// group by setting its anchor to x, in O(1), whatever its size; groups the high passes merge
// into one (they all now trail x). Inside a group the trail with the least distance has the
// highest level, so a group is a heap of distances (a leftist heap: two merge in O(log n)), and
// the groups sit in two heaps of their own: by anchor (the lowest is the next a new high moves)
// and by their highest level (the next to fire). A tick therefore visits only the groups it
// moves or fires and, inside a firing group, only the trails that fire: its cost does not grow
// with the trails it cannot reach, as for plain stops (BenchmarkTrailingTick).
//
// A trail set at the market joins the group anchored at the current high, or starts one; a
// trail with a level stored by a previous holder starts its own group at level + d and joins the
// others once the market passes it. A trail's level is materialised (anchor − d) only when it
// fires, is handed off, or is flushed (Engine.MovedTrails): the flush walks the groups that moved
// since the last one. Removing a trail (closed, handed off, changed) marks its heap node dead,
// in O(1); dead nodes leave as they reach the top of their heap, and the book is rebuilt once
// they outnumber the live ones, so the memory stays proportional to the trails watched.
//
// Nodes record the group they were inserted into; merged groups point at the group they joined
// (a union-find with path halving), so a node's anchor is found without touching every node at
// a merge. Groups are created only by inserts and reclaimed by the rebuild.
type trailBook struct {
	neg      bool // the SELL side: prices negated
	nodes    []trailNode
	nodeFree []int32
	groups   []trailGroup
	gslots   []int32     // heap slots: byAnchor ref 2·g, byLevel ref 2·g+1
	byAnchor triggerHeap // min-heap of group anchors: a new high above one moves it
	byLevel  triggerHeap // max-heap of each group's highest level: a price at or under one fires it
	// bottom is the group with the lowest anchor (byAnchor's root), the one every new high
	// moves. It is kept out of byLevel and checked on its own, so a tick that moves it re-keys
	// no heap: a rising market costs a tick O(1), not a sift through the other groups.
	bottom int32   // −1: none
	dirty  []int32 // groups whose anchor moved since the last MovedTrails
	// byKey finds the group of an anchor a trail is added at, so trails a previous holder stored
	// from one high-water mark join one group at the load instead of one group each. Entries go
	// stale as groups move, merge and retire; a lookup checks the group still has that anchor.
	// Emptied by the rebuild.
	byKey map[float64]int32
	live  int32 // trails watched
	dead  int32 // removed nodes still in a heap
	// relink tells the owner a trail's node changed (the rebuild renumbers them).
	relink func(pos, node int32)
	// scratch
	stack []int32
}

// trailNode is one trail in its group's heap of distances.
type trailNode struct {
	d           float64
	left, right int32 // −1 = none
	rank        int32 // null-path length, for the leftist merge
	grp         int32 // the group it was inserted into (find gives the one it is in now)
	pos         int32 // e.pos index; −1 once removed
}

// trailGroup is the trails that share an anchor.
type trailGroup struct {
	anchor float64
	root   int32 // −1: empty
	parent int32 // −1: a group of its own; else the group it merged into
	alive  bool
	dirty  bool
}

func newTrailBook(neg bool, relink func(pos, node int32)) *trailBook {
	t := &trailBook{neg: neg, relink: relink, bottom: -1, byKey: map[float64]int32{}}
	t.byAnchor = newHeap(&t.gslots, true)
	t.byLevel = newHeap(&t.gslots, false)
	return t
}

// in maps a real price to the book's side of it.
func (t *trailBook) in(p float64) float64 {
	if t.neg {
		return -p
	}
	return p
}

// add watches a trail of distance d at level (real prices) for position pos and returns its
// node. A level is where the trail stands now: bid − d for a BUY just set at the market, or the
// level a previous holder stored.
func (t *trailBook) add(pos int32, d, level float64) int32 {
	anchor := anchorOf(t.in(level) + d)
	g := int32(-1)
	if t.byAnchor.Len() > 0 && t.byAnchor.items[0].key == anchor {
		g = t.byAnchor.items[0].ref >> 1 // the market's group: the usual case
	} else if k, ok := t.byKey[anchor]; ok && t.groups[k].alive && t.groups[k].parent < 0 && t.groups[k].anchor == anchor {
		g = k
	}
	if g < 0 {
		if int(t.live)+64 < len(t.groups)/2 {
			t.rebuild()
		}
		g = int32(len(t.groups))
		t.groups = append(t.groups, trailGroup{anchor: anchor, root: -1, parent: -1, alive: true})
		t.gslots = append(t.gslots, -1, -1)
		t.byAnchor.push(2*g, anchor)
		t.byKey[anchor] = g
	}
	n := t.newNode(pos, d, g)
	gr := &t.groups[g]
	gr.root = t.merge(gr.root, n)
	t.live++
	t.rebottom()
	t.settle(g)
	return n
}

// anchorOf rounds a high-water mark computed as level + distance to 1e-9, so the trails a
// previous holder stored from one mark (level = mark − distance, each on the instrument's grid)
// share it again, whatever the last bit of each float sum.
func anchorOf(a float64) float64 { return math.Round(a*1e9) / 1e9 }

// rebottom keeps bottom the group at byAnchor's root, out of byLevel; the group it replaces
// goes into byLevel at its highest level.
func (t *trailBook) rebottom() {
	g := int32(-1)
	if t.byAnchor.Len() > 0 {
		g = t.byAnchor.items[0].ref >> 1
	}
	if g == t.bottom {
		return
	}
	if old := t.bottom; old >= 0 && t.groups[old].alive && t.groups[old].root >= 0 {
		t.byLevel.set(2*old+1, t.groups[old].anchor-t.nodes[t.groups[old].root].d)
	}
	t.bottom = g
	if g >= 0 {
		t.byLevel.remove(2*g + 1)
	}
}

func (t *trailBook) newNode(pos int32, d float64, g int32) int32 {
	nd := trailNode{d: d, left: -1, right: -1, rank: 1, grp: g, pos: pos}
	if k := len(t.nodeFree); k > 0 {
		n := t.nodeFree[k-1]
		t.nodeFree = t.nodeFree[:k-1]
		t.nodes[n] = nd
		return n
	}
	t.nodes = append(t.nodes, nd)
	return int32(len(t.nodes) - 1)
}

// remove stops watching node n (O(1)): it stays in its heap, dead, until it surfaces.
func (t *trailBook) remove(n int32) {
	t.nodes[n].pos = -1
	t.live--
	t.dead++
	if t.dead > t.live+256 {
		t.rebuild()
	}
}

// level is node n's level now, in real prices.
func (t *trailBook) level(n int32) float64 {
	l := t.groups[t.find(t.nodes[n].grp)].anchor - t.nodes[n].d
	if t.neg {
		return -l
	}
	return l
}

// find is the group g's nodes are in now.
func (t *trailBook) find(g int32) int32 {
	for t.groups[g].parent >= 0 {
		p := t.groups[g].parent
		if gp := t.groups[p].parent; gp >= 0 {
			t.groups[g].parent = gp
		}
		g = p
	}
	return g
}

func (t *trailBook) rank(n int32) int32 {
	if n < 0 {
		return 0
	}
	return t.nodes[n].rank
}

// merge melds two leftist heaps of distances (least first) in O(log n).
func (t *trailBook) merge(a, b int32) int32 {
	if a < 0 {
		return b
	}
	if b < 0 {
		return a
	}
	if t.nodes[b].d < t.nodes[a].d {
		a, b = b, a
	}
	r := t.merge(t.nodes[a].right, b)
	na := &t.nodes[a]
	na.right = r
	if t.rank(na.left) < t.rank(na.right) {
		na.left, na.right = na.right, na.left
	}
	na.rank = t.rank(na.right) + 1
	return a
}

// pop removes group g's root node and frees it.
func (t *trailBook) pop(g int32) {
	gr := &t.groups[g]
	n := gr.root
	gr.root = t.merge(t.nodes[n].left, t.nodes[n].right)
	t.nodes[n] = trailNode{pos: -1}
	t.nodeFree = append(t.nodeFree, n)
}

// settle drops group g's dead top nodes, then re-keys it by its highest level, or retires it
// when nothing is left in it.
func (t *trailBook) settle(g int32) {
	gr := &t.groups[g]
	for gr.root >= 0 && t.nodes[gr.root].pos < 0 {
		t.pop(g)
		t.dead--
	}
	if gr.root < 0 {
		gr.alive = false
		t.byAnchor.remove(2 * g)
		t.byLevel.remove(2*g + 1)
		if g == t.bottom {
			t.bottom = -1
		}
		t.rebottom()
		return
	}
	if g != t.bottom {
		t.byLevel.set(2*g+1, gr.anchor-t.nodes[gr.root].d)
	}
}

// trailHit is a trail and its level (real prices).
type trailHit struct {
	pos   int32
	level float64
}

// fire removes every trail price (real) reaches and appends it to dst with its level. It visits
// only the groups whose highest level price reaches, and inside them only the trails that fire
// (plus dead nodes on their way out).
func (t *trailBook) fire(dst []trailHit, price float64) []trailHit {
	x := t.in(price)
	for {
		g := int32(-1)
		if b := t.bottom; b >= 0 && x <= t.groups[b].anchor-t.nodes[t.groups[b].root].d {
			g = b
		} else if t.byLevel.Len() > 0 && x <= t.byLevel.items[0].key {
			g = t.byLevel.items[0].ref >> 1
		} else {
			break
		}
		gr := &t.groups[g]
		for gr.root >= 0 {
			nd := t.nodes[gr.root]
			if nd.pos < 0 {
				t.pop(g)
				t.dead--
				continue
			}
			lvl := gr.anchor - nd.d
			if x > lvl {
				break
			}
			t.pop(g)
			t.live--
			if t.neg {
				lvl = -lvl
			}
			dst = append(dst, trailHit{pos: nd.pos, level: lvl})
		}
		t.settle(g)
	}
	return dst
}

// move raises to price (real) the anchor of every group under it, merging them into one. A tick
// that makes no new high over any group visits none.
func (t *trailBook) move(price float64) {
	x := t.in(price)
	if t.byAnchor.Len() == 0 || t.byAnchor.items[0].key >= x {
		return
	}
	// The bottom group takes the new high; raised in place it sinks under any other group the
	// high passed, each of which then surfaces and merges into it.
	into := t.bottom
	t.byAnchor.set(2*into, x)
	for {
		g := t.byAnchor.items[0].ref >> 1
		if g == into {
			break
		}
		t.byAnchor.remove(2 * g)
		t.byLevel.remove(2*g + 1)
		t.groups[into].root = t.merge(t.groups[into].root, t.groups[g].root)
		t.groups[g].root, t.groups[g].parent, t.groups[g].alive = -1, into, false
	}
	gr := &t.groups[into]
	gr.anchor = x
	if !gr.dirty {
		gr.dirty = true
		t.dirty = append(t.dirty, into)
	}
	t.settle(into)
}

// moved appends to dst every trail whose group moved since the last call, with its level.
func (t *trailBook) moved(dst []trailHit) []trailHit {
	for _, g := range t.dirty {
		gr := &t.groups[g]
		gr.dirty = false
		if !gr.alive || gr.parent >= 0 {
			continue // merged away: its trails are in a dirty group of their own
		}
		t.stack = append(t.stack[:0], gr.root)
		for len(t.stack) > 0 {
			n := t.stack[len(t.stack)-1]
			t.stack = t.stack[:len(t.stack)-1]
			if n < 0 {
				continue
			}
			nd := &t.nodes[n]
			if nd.pos >= 0 {
				l := gr.anchor - nd.d
				if t.neg {
					l = -l
				}
				dst = append(dst, trailHit{pos: nd.pos, level: l})
			}
			t.stack = append(t.stack, nd.left, nd.right)
		}
	}
	t.dirty = t.dirty[:0]
	return dst
}

// rebuild drops the dead nodes and the retired groups: every live trail is inserted again at
// its level, in its group's order, and the groups that had moved since the last flush stay
// marked. O(trails); run when the dead outnumber the live.
func (t *trailBook) rebuild() {
	type keep struct {
		pos   int32
		d, a  float64
		dirty bool
	}
	var kept []keep
	for g := range t.groups {
		gr := &t.groups[g]
		if !gr.alive || gr.parent >= 0 {
			continue
		}
		t.stack = append(t.stack[:0], gr.root)
		for len(t.stack) > 0 {
			n := t.stack[len(t.stack)-1]
			t.stack = t.stack[:len(t.stack)-1]
			if n < 0 {
				continue
			}
			nd := t.nodes[n]
			if nd.pos >= 0 {
				kept = append(kept, keep{pos: nd.pos, d: nd.d, a: gr.anchor, dirty: gr.dirty})
			}
			t.stack = append(t.stack, nd.left, nd.right)
		}
	}
	t.nodes, t.nodeFree, t.groups, t.gslots = t.nodes[:0], t.nodeFree[:0], t.groups[:0], t.gslots[:0]
	t.byAnchor.items, t.byLevel.items, t.dirty = t.byAnchor.items[:0], t.byLevel.items[:0], t.dirty[:0]
	t.live, t.dead, t.bottom = 0, 0, -1
	clear(t.byKey)
	byAnchor := t.byKey
	for _, k := range kept {
		g, ok := byAnchor[k.a]
		if !ok {
			g = int32(len(t.groups))
			byAnchor[k.a] = g
			t.groups = append(t.groups, trailGroup{anchor: k.a, root: -1, parent: -1, alive: true})
			t.gslots = append(t.gslots, -1, -1)
			t.byAnchor.push(2*g, k.a)
		}
		gr := &t.groups[g]
		if k.dirty && !gr.dirty {
			gr.dirty = true
			t.dirty = append(t.dirty, g)
		}
		n := t.newNode(k.pos, k.d, g)
		gr.root = t.merge(gr.root, n)
		t.live++
		t.relink(k.pos, n)
	}
	for g := range t.groups {
		gr := &t.groups[g]
		t.byLevel.set(int32(2*g+1), gr.anchor-t.nodes[gr.root].d)
	}
	t.rebottom()
}

// validTrail reports whether d is a distance the engine can trail by.
func validTrail(d float64) bool { return d > 0 && !math.IsInf(d, 0) && !math.IsNaN(d) }
