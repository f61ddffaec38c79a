// Package reading shares one reading of something costly to read — the open book's marking, the
// recent ledger, the desk's exposures — among every reader who asks within a few seconds, and
// answers a slightly older one while the next is read beside them, so a screen polled by many
// dealers costs the database one reading per interval and no poll waits for it
// (docs/pnl.md, «One reading of the open book and the recent ledger, shared»).
package reading

import (
	"context"
	"sync"
	"time"
)

// Shared is one value computed for many readers: the last one computed for a key, and the
// computation under way. Fresh, Stale and Timeout are set before the first Get.
type Shared[T any] struct {
	// Fresh is how old a value may be and still be answered as it is; Stale how old it may be
	// and still be answered while a new one is computed beside the read; Timeout bounds one
	// computation, which runs on no reader's context (a reader that leaves does not end it).
	Fresh, Stale, Timeout time.Duration

	mu      sync.Mutex
	last    *T
	lastKey time.Time
	lastAt  time.Time
	flight  *flight[T]
}

// flight is one computation under way; done closes when v and err are set.
type flight[T any] struct {
	key  time.Time
	done chan struct{}
	v    *T
	err  error
}

// Get is the value for key computed at most Fresh ago, or at most Stale ago while a new
// one is computed beside it, or a new one waited for (as long as ctx allows). A computation for
// another key under way is not waited for: this call then computes its own, unshared.
//
// compute is given the last value kept, whatever its key (nil: none), to build on; it must not
// change it.
func (s *Shared[T]) Get(ctx context.Context, now func() time.Time, key time.Time, compute func(ctx context.Context, began time.Time, last *T) (*T, error)) (*T, error) {
	s.mu.Lock()
	prev := s.last
	last, age := s.last, now().Sub(s.lastAt)
	if last == nil || !s.lastKey.Equal(key) {
		last = nil
	}
	if last != nil && age <= s.Fresh {
		s.mu.Unlock()
		return last, nil
	}
	f := s.flight
	if f == nil {
		f = &flight[T]{key: key, done: make(chan struct{})}
		s.flight = f
		go s.run(f, now, prev, compute)
	}
	s.mu.Unlock()
	if last != nil && age <= s.Stale {
		return last, nil
	}
	if !f.key.Equal(key) {
		return compute(ctx, now(), prev)
	}
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run computes f and keeps its value as the last one when it succeeds.
func (s *Shared[T]) run(f *flight[T], now func() time.Time, last *T, compute func(ctx context.Context, began time.Time, last *T) (*T, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	began := now()
	v, err := compute(ctx, began, last)
	s.mu.Lock()
	if err == nil {
		s.last, s.lastKey, s.lastAt = v, f.key, began
	}
	s.flight = nil
	f.v, f.err = v, err
	s.mu.Unlock()
	close(f.done)
}

// Last is the last value kept, whatever its key; nil before the first.
func (s *Shared[T]) Last() *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Settle waits for the computation under way, if there is one.
func (s *Shared[T]) Settle() {
	s.mu.Lock()
	f := s.flight
	s.mu.Unlock()
	if f != nil {
		<-f.done
	}
}
