package mirror

import "sync/atomic"

// quoteStore is where the follower keeps decoded quotes: a few buffers reused from poll to poll,
// so a poll does not allocate (and zero, and later collect) 5,000 quotes. Only the polling
// goroutine (under Follower.mu) uses it; LastTick reads a buffer through its view, lock-free.
//
// Reuse is safe because a buffer is written only when no reader can be inside it:
//
//   - A reader (Follower.lookup) loads the current view v, counts itself into v's buffer
//     (readers.Add(1)), then loads the current view again; only if it is still v does it read the
//     buffer, and it counts itself out (readers.Add(-1)) once it has copied the quote. Otherwise it
//     counts itself out and starts over with the new view, having read nothing.
//   - The poller writes only a buffer that is not the current view's and whose readers count is
//     zero (quoteStore.free). Any view that pointed at it was replaced before (views are never
//     reused: each is a new allocation, so a stale pointer cannot equal the current one).
//
// Go's atomics are sequentially consistent. If the poller's load of the count comes after a
// reader's Add(1), it sees that reader (unless it already counted itself out, which orders its
// reads before the poller's writes). If it comes before, then the store that replaced the
// reader's view came before too, so the reader's second load sees another view and it reads
// nothing. Either way no reader reads a buffer while it is being written: a torn quote is
// impossible, and the race detector sees the count's atomics order every read before the reuse.
// A buffer a slow reader still holds is simply skipped; a new one is made (kept when there are
// fewer than storeBuffers).
type quoteStore struct {
	bufs []*quoteBuf
}

// storeBuffers: the current view's, the one it replaced (a reader may still be inside), and one
// to decode into.
const storeBuffers = 3

// quoteBuf is one reusable quote slice and the readers inside it now.
type quoteBuf struct {
	quotes  []quote
	readers atomic.Int32
}

// parse decodes raw into a buffer no reader can reach. cur is the current view (nil before the
// first snapshot); its buffer is left alone.
func (st *quoteStore) parse(raw string, cur *view) (*snapshot, error) {
	var held *quoteBuf
	var prev []quote
	if cur != nil {
		held, prev = cur.snap.buf, cur.snap.quotes
	}
	b := st.free(held)
	s, err := parseSnapshotInto(raw, b.quotes, prev)
	if err != nil {
		return nil, err
	}
	if cap(s.quotes) > cap(b.quotes) {
		b.quotes = s.quotes[:cap(s.quotes)]
	}
	s.buf = b
	return s, nil
}

// free returns a buffer that is not held (the current view's) and has no reader inside.
func (st *quoteStore) free(held *quoteBuf) *quoteBuf {
	for _, b := range st.bufs {
		if b != held && b.readers.Load() == 0 {
			return b
		}
	}
	b := &quoteBuf{}
	if len(st.bufs) < storeBuffers {
		st.bufs = append(st.bufs, b)
	}
	return b
}

// lookup copies symbol's quote out of the current view, counted into its buffer as quoteStore
// describes. ok is false when there is no view or the symbol is not in it.
func (f *Follower) lookup(symbol string) (v *view, q quote, ok bool) {
	for {
		v = f.view.Load()
		if v == nil {
			return nil, quote{}, false
		}
		b := v.snap.buf
		if b != nil {
			b.readers.Add(1)
			if f.view.Load() != v {
				b.readers.Add(-1)
				continue
			}
		}
		i := v.snap.find(symbol)
		if i >= 0 {
			q, ok = v.snap.quotes[i], true
		}
		if b != nil {
			b.readers.Add(-1)
		}
		return v, q, ok
	}
}
