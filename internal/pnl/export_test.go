package pnl

import "time"

// SetClock makes c read the time from now.
func (c *Marks) SetClock(now func() time.Time) { c.now = now }

// Settle waits for the marking under way, if one is.
func (c *Marks) Settle() {
	c.mu.Lock()
	f := c.flight
	c.mu.Unlock()
	if f != nil {
		<-f.done
	}
}
