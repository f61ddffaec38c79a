package pnl

import "time"

// SetClock makes c read the time from now.
func (c *Marks) SetClock(now func() time.Time) { c.now = now }

// Settle waits for the readings under way, if any are.
func (c *Marks) Settle() {
	settle(&c.marks)
	settle(&c.recent)
}

func settle[T any](s *shared[T]) {
	s.mu.Lock()
	f := s.flight
	s.mu.Unlock()
	if f != nil {
		<-f.done
	}
}
