package mirror

import "time"

// What makes the holder's prices the holder's on every follower, the same for both transports:
// one term fence and one age rule.

// termFence is the followers' rule on lease terms. Every snapshot and every tick carries its
// publisher's lease term, and a follower serves nothing of a term older than the newest it has
// served: that comes from a process that lost the lease (a write that passed its gate just
// before it froze). Term 0 is a publisher that was never numbered (a lease granted by Redis or
// fail-open, with no row): it is not fenced — refusing it would leave followers without prices —
// and it does not move the newest term. The snapshot is also fenced where it is stored (see
// guardScript); pub/sub has no store, so the stream is fenced here alone.
type termFence struct{ newest int64 }

// admit reports whether a message of term may be served, and remembers term if so.
func (f *termFence) admit(term int64) bool {
	if term != 0 && term < f.newest {
		return false
	}
	f.newest = max(f.newest, term)
	return true
}

// forget drops the newest term: the snapshot key was found missing, so its publisher has not
// written for KeyTTL (or Redis restarted empty), and a lease row whose count restarted must be
// served.
func (f *termFence) forget() { f.newest = 0 }

// receivedHere expresses a quote's receipt on this process's clock, so time.Since of the result
// is its age. The holder stamps receivedAt and sentAt (a snapshot's publishedAt, a tick's
// sentAt) on its own clock: their difference is how old the quote was when it left. inTransit is
// how long it then waited before this process first saw it at seenAt, measured without the
// holder's clock (a snapshot's time in Redis, from the key's remaining TTL as the Redis server
// counts it; zero for a tick, delivered at once). seenAt is this process's clock, read
// monotonically. Every term is measured on one machine's clock, so skew between the machines
// cancels out.
func receivedHere(receivedAt, sentAt time.Time, inTransit time.Duration, seenAt time.Time) time.Time {
	return seenAt.Add(-max(sentAt.Sub(receivedAt), 0) - inTransit)
}

// ageAt is the age at now of a quote received here at local (receivedHere); never negative.
func ageAt(local, now time.Time) time.Duration { return max(now.Sub(local), 0) }
