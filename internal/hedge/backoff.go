package hedge

import "time"

// A hedge send the venue refused, or that never reached it, is not tried again before a back-off
// — doubled from FirstBackoff after each failure up to MaxBackoff (or the caller's own longest,
// if longer) — or a venue refusing for hours would get an order, and the desk write a REJECTED or
// NOT_SENT row, on every pass and every fill. The hedger spaces its symbols with it
// (internal/hedger), the HEDGE n% rules their client positions' shares (Rules).
const (
	FirstBackoff = time.Second
	MaxBackoff   = time.Minute
)

// Backoff is the back-off of each key (a symbol, a client position's share) whose last send
// failed. It is not safe for concurrent use: its owner's pass holds it.
type Backoff[K comparable] struct {
	waits map[K]backoffWait
}

type backoffWait struct {
	until time.Time
	wait  time.Duration
}

// NewBackoff is an empty Backoff.
func NewBackoff[K comparable]() *Backoff[K] { return &Backoff[K]{waits: map[K]backoffWait{}} }

// Waiting is whether k's last send failed and its back-off runs past now, and until when.
func (b *Backoff[K]) Waiting(k K, now time.Time) (until time.Time, waiting bool) {
	w, ok := b.waits[k]
	return w.until, ok && now.Before(w.until)
}

// Failed is whether k's last send failed (its back-off may have run out).
func (b *Backoff[K]) Failed(k K) bool {
	_, ok := b.waits[k]
	return ok
}

// Fail records that k's send failed at now and answers when it may be sent again: the wait
// doubles from FirstBackoff up to max(longest, MaxBackoff).
func (b *Backoff[K]) Fail(k K, now time.Time, longest time.Duration) time.Time {
	w := b.waits[k]
	w.wait = min(max(2*w.wait, FirstBackoff), max(longest, MaxBackoff))
	w.until = now.Add(w.wait)
	b.waits[k] = w
	return w.until
}

// Done forgets k: its send went through, or it is not sent any more.
func (b *Backoff[K]) Done(k K) { delete(b.waits, k) }

// Keep forgets every key keep refuses.
func (b *Backoff[K]) Keep(keep func(K) bool) {
	for k := range b.waits {
		if !keep(k) {
			delete(b.waits, k)
		}
	}
}
