package risk

// modifyOrderLocked follows a modify in place of a resting order (docs/orders.md, «Modify a
// resting order»): its price and expiry change, its side and type never do, so it keeps its
// heap and its trigger moves there in O(log n). An order being filled is out of its heap: it
// takes the new values, and settleLocked re-indexes it with them if the fill is dropped (the
// executor refuses a fill its order no longer triggers at, ErrOrderModified). An order the
// engine does not hold (it stopped watching it past an expiry the modify extended) is added.
func (e *Engine) modifyOrderLocked(os Order) {
	idx, ok := e.ordByID[os.ID]
	if !ok {
		e.addOrderLocked(os)
		return
	}
	o := &e.ord[idx]
	o.price, o.exp = os.Price, 0
	if !os.ExpiresAt.IsZero() {
		o.exp = os.ExpiresAt.UnixNano()
	}
	if o.filling {
		return
	}
	e.books[o.sym].orderHeap(o).set(idx, o.price)
}
