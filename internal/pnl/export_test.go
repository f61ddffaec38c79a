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

// SetMargin makes c's recent ledger settle what was committed before the database clock less
// margin (and before the oldest open transaction).
func (c *Marks) SetMargin(margin time.Duration) { c.margin = margin }

// LastRecent is the span of the ledger the last reading of the recent ledger read, and the time
// it settled the ledger to: the next reading reads from there.
func (c *Marks) LastRecent() (readFrom, readTo, settledTo time.Time) {
	c.recent.mu.Lock()
	defer c.recent.mu.Unlock()
	if r := c.recent.last; r != nil {
		return r.read.from, r.read.to, r.settledTo
	}
	return
}
