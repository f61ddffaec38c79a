package pnl

import "time"

// SetClock makes c read the time from now.
func (c *Marks) SetClock(now func() time.Time) { c.now = now }

// Settle waits for the readings under way, if any are.
func (c *Marks) Settle() {
	c.marks.Settle()
	c.recent.Settle()
}

// SetMargin makes c's recent ledger settle what was committed before the database clock less
// margin (and before the oldest open transaction).
func (c *Marks) SetMargin(margin time.Duration) { c.margin = margin }

// LastRecent is the span of the ledger the last reading of the recent ledger read, and the time
// it settled the ledger to: the next reading reads from there.
func (c *Marks) LastRecent() (readFrom, readTo, settledTo time.Time) {
	if r := c.recent.Last(); r != nil {
		return r.read.from, r.read.to, r.settledTo
	}
	return
}
