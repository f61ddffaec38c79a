package fix

import "sync"

// mailbox is one waiter's answers: a queue without bound, so that the intake, which hands on a
// whole journaled batch at once, never drops a report a waiter has not read yet (a close filled
// in many executions, whose final report comes last), and never blocks on a waiter.
type mailbox struct {
	mu     sync.Mutex
	queue  []answer
	signal chan struct{} // one pending signal: answers are queued
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

// put queues a and signals the waiter.
func (m *mailbox) put(a answer) {
	m.mu.Lock()
	m.queue = append(m.queue, a)
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default: // a signal is already pending: the waiter takes every queued answer on it
	}
}

// ready fires when answers are queued; the waiter then takes them all.
func (m *mailbox) ready() <-chan struct{} { return m.signal }

// take is the oldest queued answer; ok is false when none is.
func (m *mailbox) take() (a answer, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) == 0 {
		return answer{}, false
	}
	a = m.queue[0]
	m.queue[0] = answer{}
	m.queue = m.queue[1:]
	return a, true
}
