package risk

// markStaleLocked notes that an account's marks changed without a tick: it is re-marked, and its
// band set anew, on the next tick of any symbol it depends on.
func (e *Engine) markStaleLocked(a *account) {
	if a.stale {
		return
	}
	a.stale = true
	for _, d := range a.deps {
		e.queueStaleLocked(d.band)
	}
}

func (e *Engine) queueStaleLocked(id int32) {
	be := &e.bands[id]
	if be.listed == be.sym+1 {
		return
	}
	be.listed = be.sym + 1
	b := e.books[be.sym]
	b.stale = append(b.stale, id)
	if len(b.stale) > 2*b.lo.Len()+64 {
		e.compactStaleLocked(b)
	}
}

// compactStaleLocked drops the entries freed (or moved to another book) since they were listed:
// an account that churns a symbol that never ticks cannot grow the list without bound.
func (e *Engine) compactStaleLocked(b *book) {
	mark := b.idx + 1
	kept := b.stale[:0]
	for _, id := range b.stale {
		if be := &e.bands[id]; be.live && be.sym == b.idx && be.listed == mark {
			be.listed = -mark // kept once
			kept = append(kept, id)
		}
	}
	for _, id := range kept {
		e.bands[id].listed = mark
	}
	b.stale = kept
}

// takeStaleLocked appends to dst the accounts listed stale on b that this generation has not
// picked yet, and empties the list when consume is set.
func (e *Engine) takeStaleLocked(dst []int32, b *book, gen uint64, consume bool) []int32 {
	mark := b.idx + 1
	for _, id := range b.stale {
		be := &e.bands[id]
		if !be.live || be.sym != b.idx || be.listed != mark {
			continue
		}
		if consume {
			be.listed = 0
		}
		if a := e.accts[be.acct]; a.stale && a.seen != gen {
			a.seen = gen
			dst = append(dst, a.idx)
		}
	}
	if consume {
		b.stale = b.stale[:0]
	}
	return dst
}
