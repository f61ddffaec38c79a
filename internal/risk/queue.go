package risk

import (
	"sync"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

type jobKind uint8

const (
	jobClose jobKind = iota + 1
	jobFill
	jobAlert
)

// job is one unit of work handed off the tick path.
type job struct {
	kind    jobKind
	idx     int32 // the position's or order's slot in the view
	id      int64 // position, order or account
	account int64 // a close's: its position's account, so the executor need not read it
	reason  fx.CloseReason
	symbol  string
	quote   tick.Quote
	level   float64   // an alert's margin level; a trailing stop's close: the level it fired at
	cleared bool      // an alert: the margin call ended
	arrived time.Time // when the engine received the tick (or began the sweep) that decided it
	stop    *StopOut  // a stop-out's decision, for its record; nil for every other job
}

// queue is a FIFO that never blocks the producer. It needs no bound of its own: a position or
// order is queued at most once (it is marked while queued or in flight), so the queue never
// holds more jobs than the engine holds positions and orders, plus the margin calls' starts and
// ends (each a crossing of an account's margin-call level).
//
// It also carries the executor's answers back: a worker hands in the answer to its last job
// and takes its next one under one lock (next), so a burst costs each close one lock round
// trip on the worker side, not three.
type queue struct {
	mu      sync.Mutex
	ready   *sync.Cond // an item arrived, or the queue closed
	idle    *sync.Cond // nothing queued and nothing in flight
	items   []job
	head    int
	busy    int
	waiting int // workers blocked in ready.Wait
	closed  bool
	settled []settlement // answers not yet applied to the view (Engine.drainLocked)
}

// settlement is the executor's answer to one job.
type settlement struct {
	j   job
	err error
}

func newQueue() *queue {
	q := &queue{}
	q.ready = sync.NewCond(&q.mu)
	q.idle = sync.NewCond(&q.mu)
	return q
}

func (q *queue) push(j job) {
	q.mu.Lock()
	q.items = append(q.items, j)
	q.mu.Unlock()
	q.ready.Signal()
}

// pushAll appends js in order and wakes up to len(js) workers; a worker that is busy takes its
// next job without being woken.
func (q *queue) pushAll(js []job) {
	q.mu.Lock()
	q.items = append(q.items, js...)
	wake := min(len(js), q.waiting)
	q.mu.Unlock()
	for range wake {
		q.ready.Signal()
	}
}

// pop waits for a job; ok is false once the queue is closed. The caller must call done.
func (q *queue) pop() (job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popLocked()
}

// next records the answer to the caller's previous job, if it had one (it is then done with
// it), and waits for its next; ok is false once the queue is closed.
func (q *queue) next(prev settlement, had bool) (job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if had {
		q.settled = append(q.settled, prev)
		q.doneLocked()
	}
	return q.popLocked()
}

func (q *queue) popLocked() (job, bool) {
	for q.head == len(q.items) && !q.closed {
		q.waiting++
		q.ready.Wait()
		q.waiting--
	}
	if q.closed {
		return job{}, false
	}
	j := q.items[q.head]
	q.items[q.head] = job{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.busy++
	return j, true
}

func (q *queue) done() {
	q.mu.Lock()
	q.doneLocked()
	q.mu.Unlock()
}

func (q *queue) doneLocked() {
	q.busy--
	if q.busy == 0 && q.head == len(q.items) {
		q.idle.Broadcast()
	}
}

// takeSettled hands over the answers recorded since the last call and keeps spare's array for
// the next ones.
func (q *queue) takeSettled(spare []settlement) []settlement {
	q.mu.Lock()
	defer q.mu.Unlock()
	got := q.settled
	q.settled = spare[:0]
	return got
}

// close wakes every waiter and returns what was still queued.
func (q *queue) close() []job {
	q.mu.Lock()
	left := append([]job(nil), q.items[q.head:]...)
	q.items, q.head, q.closed = nil, 0, true
	q.mu.Unlock()
	q.ready.Broadcast()
	q.idle.Broadcast()
	return left
}

// waitIdle returns once nothing is queued and nothing is in flight (or the queue is closed).
func (q *queue) waitIdle() {
	q.mu.Lock()
	for !q.closed && (q.busy > 0 || q.head != len(q.items)) {
		q.idle.Wait()
	}
	q.mu.Unlock()
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}
