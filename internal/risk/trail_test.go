package risk

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveTrail is the definition the grouped book must agree with: each trail moves on its own.
// BUY: level = max(level, bid − d), fires when bid ≤ level; SELL on the ask, mirrored.
type naiveTrail struct {
	d, level float64
	sell     bool
}

// TestTrailBookAgreesWithPerTrailDefinition drives the grouped book and the per-trail definition
// through random tick streams with trails set at the market, restored from stored levels,
// removed and set again, and requires the same trails to fire on the same tick at the same
// level, and every watched trail's level to be equal, after every step. Prices are whole
// numbers of points, so both sides compute exactly and equal means equal.
func TestTrailBookAgreesWithPerTrailDefinition(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 39))
			node := map[int32]int32{} // pos → node
			relink := func(pos, n int32) { node[pos] = n }
			books := [2]*trailBook{newTrailBook(false, relink), newTrailBook(true, relink)}
			naive := map[int32]*naiveTrail{}
			bid := 100_000.0
			spread := 2.0
			next := int32(0)
			steps := 200 + rng.IntN(800)
			for step := range steps {
				ask := bid + spread
				switch r := rng.IntN(10); {
				case r < 3: // set at the market, or restored from a level stored earlier
					sell := rng.IntN(2) == 1
					d := float64(5 + rng.IntN(200))
					level := bid - d
					if sell {
						level = ask + d
					}
					if rng.IntN(3) == 0 {
						off := float64(rng.IntN(300))
						if sell {
							level -= off
						} else {
							level += off
						}
					}
					if (!sell && bid <= level) || (sell && ask >= level) {
						continue // a stored level the market is already through fires at once; not set here
					}
					pos := next
					next++
					b := books[0]
					if sell {
						b = books[1]
					}
					node[pos] = b.add(pos, d, level)
					naive[pos] = &naiveTrail{d: d, level: level, sell: sell}
				case r < 4 && len(naive) > 0: // removed: closed elsewhere, or its distance changed
					keys := slices.Sorted(maps.Keys(naive))
					pos := keys[rng.IntN(len(keys))]
					b := books[0]
					if naive[pos].sell {
						b = books[1]
					}
					b.remove(node[pos])
					delete(node, pos)
					delete(naive, pos)
				default: // a tick: a random walk with a gap now and then
					move := float64(rng.IntN(21) - 10)
					if rng.IntN(40) == 0 {
						move *= 30
					}
					bid += move
					ask = bid + spread
					var got []trailHit
					got = books[0].fire(got, bid)
					books[0].move(bid)
					got = books[1].fire(got, ask)
					books[1].move(ask)
					var want []trailHit
					for pos, n := range naive {
						px := bid
						if n.sell {
							px = ask
						}
						if (!n.sell && px <= n.level) || (n.sell && px >= n.level) {
							want = append(want, trailHit{pos: pos, level: n.level})
							continue
						}
						if n.sell {
							n.level = min(n.level, px+n.d)
						} else {
							n.level = max(n.level, px-n.d)
						}
					}
					for _, h := range want {
						delete(naive, h.pos)
						delete(node, h.pos)
					}
					byPos := func(a, b trailHit) int { return int(a.pos - b.pos) }
					slices.SortFunc(got, byPos)
					slices.SortFunc(want, byPos)
					if !slices.Equal(got, want) {
						t.Fatalf("step %d bid %v: fired %v, want %v", step, bid, got, want)
					}
				}
				for pos, n := range naive {
					b := books[0]
					if n.sell {
						b = books[1]
					}
					if l := b.level(node[pos]); l != n.level {
						t.Fatalf("step %d: trail %d at %v, want %v", step, pos, l, n.level)
					}
				}
				if int(books[0].live+books[1].live) != len(naive) {
					t.Fatalf("step %d: %d live in the books, want %d", step, books[0].live+books[1].live, len(naive))
				}
			}
		})
	}
}

// TestTrailBookFlushReportsEveryMovedTrailOnce: after ticks move some groups, moved lists each
// trail of a moved group once at its current level, and nothing the market did not move; a
// second call lists nothing.
func TestTrailBookFlushReportsEveryMovedTrailOnce(t *testing.T) {
	t.Parallel()
	b := newTrailBook(false, func(int32, int32) {})
	b.add(1, 10, 90)  // at the market (bid 100)
	b.add(2, 20, 80)  // at the market
	b.add(3, 10, 150) // stored by a previous holder: anchor 160, far above
	b.move(105)
	got := b.moved(nil)
	slices.SortFunc(got, func(a, b trailHit) int { return int(a.pos - b.pos) })
	if want := []trailHit{{1, 95}, {2, 85}}; !slices.Equal(got, want) {
		t.Fatalf("moved %v, want %v", got, want)
	}
	if again := b.moved(nil); len(again) != 0 {
		t.Fatalf("moved again %v, want nothing", again)
	}
	b.move(104) // not a new high
	if got := b.moved(nil); len(got) != 0 {
		t.Fatalf("a lower tick moved %v", got)
	}
	b.move(170) // passes the stored trail's anchor: all three now trail 170
	got = b.moved(nil)
	slices.SortFunc(got, func(a, b trailHit) int { return int(a.pos - b.pos) })
	if want := []trailHit{{1, 160}, {2, 150}, {3, 160}}; !slices.Equal(got, want) {
		t.Fatalf("moved %v, want %v", got, want)
	}
}

// TestTrailBookRebuildKeepsLevelsAndNodes: removing most trails rebuilds the book; the survivors
// keep their levels and the owner learns their new nodes.
func TestTrailBookRebuildKeepsLevelsAndNodes(t *testing.T) {
	t.Parallel()
	node := map[int32]int32{}
	b := newTrailBook(true, func(pos, n int32) { node[pos] = n })
	for i := range int32(2000) {
		node[i] = b.add(i, float64(1+i%50), 100+float64(i%7)) // SELL levels above an ask of ~99
	}
	b.move(95)
	for i := range int32(2000) {
		if i%10 != 0 {
			b.remove(node[i])
			delete(node, i)
		}
	}
	if b.dead > b.live+256 {
		t.Fatalf("%d dead beside %d live: the book was not rebuilt", b.dead, b.live)
	}
	for i, n := range node {
		if want := 95 + float64(1+i%50); b.level(n) != min(want, 100+float64(i%7)) {
			t.Fatalf("trail %d at %v after the rebuild, want %v", i, b.level(n), min(want, 100+float64(i%7)))
		}
	}
}

// TestTrailBookRestoredTrailsOfOneMarkShareAGroup: trails a previous holder stored from one
// high-water mark (level = mark − distance, on a 5-digit grid) load into one group, whatever
// the last bit of each level + distance, and in any order among other marks.
func TestTrailBookRestoredTrailsOfOneMarkShareAGroup(t *testing.T) {
	t.Parallel()
	b := newTrailBook(false, func(int32, int32) {})
	rng := rand.New(rand.NewPCG(1, 2))
	marks := []float64{1.10345, 1.10212, 1.09987}
	for i := range int32(3000) {
		mark := marks[rng.IntN(len(marks))]
		d := float64(50+rng.IntN(500)) / 1e5
		level := math.Round((mark-d)*1e5) / 1e5
		b.add(i, d, level)
	}
	if n := b.byAnchor.Len(); n != len(marks) {
		t.Fatalf("%d groups, want one per mark (%d)", n, len(marks))
	}
}
