package risk

func (e *Engine) indexPositionLocked(idx int32) {
	p := &e.pos[idx]
	sl, tp := e.books[p.sym].stopHeaps(p.side)
	if p.sl > 0 {
		sl.push(2*idx, p.sl)
	}
	if p.tp > 0 {
		tp.push(2*idx+1, p.tp)
	}
	e.indexTrailLocked(idx)
}

func (e *Engine) unindexPositionLocked(idx int32) {
	p := &e.pos[idx]
	sl, tp := e.books[p.sym].stopHeaps(p.side)
	sl.remove(2 * idx)
	tp.remove(2*idx + 1)
	e.unindexTrailLocked(idx)
}

// setStop moves, adds or removes one stop of a watched position in O(log n).
func setStop(h *triggerHeap, ref int32, v float64) {
	if v <= 0 {
		h.remove(ref)
		return
	}
	h.set(ref, v)
}

func (e *Engine) indexOrderLocked(idx int32) {
	o := &e.ord[idx]
	e.books[o.sym].orderHeap(o).push(idx, o.price)
}

func (e *Engine) unindexOrderLocked(idx int32) {
	o := &e.ord[idx]
	e.books[o.sym].orderHeap(o).remove(idx)
}
