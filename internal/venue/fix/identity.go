package fix

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/store"
)

// identities commits orders' identity rows (fx_fix_order, SENDING) together: the orders decided
// while a commit is at the database share the next one, one multi-row INSERT (docs/fix.md, «The
// burst on one session»). The first order of a burst starts a batch at once; every order that
// arrives while that batch commits joins the next; each waits for its own batch's commit before
// its message is handed to the session (identity before action). There is no timer: a lone
// order commits at once, and a burst commits as many orders per statement as arrived during the
// last commit — the trading core's group commit (internal/book) works the same way, over the
// desk's book rather than this journal.
//
// A batch the server refused (a duplicate ClOrdID, a value the column refuses) is written row by
// row, so that only the refused order is refused; a batch that failed otherwise (the connection,
// a timeout) is refused whole — its rows may or may not have committed, and none of its
// messages leaves.
type identities struct {
	journal *journal

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*identity
	running bool // a goroutine is taking batches
	// holdUntil, set by tests only, keeps the queue from being taken until it holds this many
	// orders, so a test can put chosen orders in one batch.
	holdUntil int

	batches atomic.Int64 // statements that carried more than one order, for tests
}

// maxIdentities caps one batch's rows (six placeholders each).
const maxIdentities = 500

// identityTimeout bounds one batch's statement, which belongs to no single order.
const identityTimeout = 10 * time.Second

// identity is one order waiting for its batch.
type identity struct {
	o    order
	done chan error
}

func newIdentities(j *journal) *identities {
	c := &identities{journal: j}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// commit writes o's identity row with the orders decided with it and answers once their batch
// committed or failed — whatever the caller's context does meanwhile: an order is never reported
// unwritten while its row may still commit.
func (c *identities) commit(o order) error {
	it := &identity{o: o, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, it)
	if !c.running {
		c.running = true
		go c.run()
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	return <-it.done
}

// run takes batches until the queue is empty.
func (c *identities) run() {
	c.mu.Lock()
	for {
		for len(c.queue) > 0 && len(c.queue) < c.holdUntil {
			c.cond.Wait()
		}
		if len(c.queue) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		n := min(len(c.queue), maxIdentities)
		batch := slices.Clone(c.queue[:n])
		c.queue = append(c.queue[:0], c.queue[n:]...)
		c.mu.Unlock()
		c.write(batch)
		c.mu.Lock()
	}
}

// write commits one batch and answers each of its orders.
func (c *identities) write(batch []*identity) {
	ctx, cancel := context.WithTimeout(context.Background(), identityTimeout)
	defer cancel()
	os := make([]order, len(batch))
	for i, it := range batch {
		os[i] = it.o
	}
	err := c.journal.insertOrders(ctx, os)
	if len(batch) > 1 {
		c.batches.Add(1)
	}
	if len(batch) > 1 && store.ServerRefused(err) {
		// Nothing was written, and the server does not say whose row it refused.
		for _, it := range batch {
			c.write([]*identity{it})
		}
		return
	}
	for _, it := range batch {
		it.done <- err
	}
}

// HoldUntil keeps batches from being taken until n orders are queued (0: never). Only tests
// call it.
func (c *identities) HoldUntil(n int) {
	c.mu.Lock()
	c.holdUntil = n
	c.cond.Broadcast()
	c.mu.Unlock()
}
