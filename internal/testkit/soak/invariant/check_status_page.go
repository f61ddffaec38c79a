package invariant

import (
	"fmt"
	"time"
)

// PageSample is one read of the holder's status page: sent and answered, its status, and when
// the lots of its book were read (nil: the page showed no lots — no open position, or the book
// unreadable within its bound).
type PageSample struct {
	Proc       string     `json:"proc"`
	PID        int        `json:"pid"`
	Sent       time.Time  `json:"sent"`
	Recv       time.Time  `json:"recv"`
	Code       int        `json:"code"`
	LotsReadAt *time.Time `json:"lotsReadAt,omitempty"`
	Unparsed   string     `json:"unparsed,omitempty"` // the page's datetime, when it did not parse
}

// PageLotsStale is how old the status page's book may be when the page reads it: it shows the
// process's shared reading up to 3 s old and waits for a new one past that (docs/operations.md,
// «The dealer's book»).
const PageLotsStale = 3 * time.Second

// Every status page that shows the book's lots read them at most PageLotsStale before it was
// asked for, and not after it answered: the shared reading never serves a book older than its
// bound, whatever the faults (a stalled database leaves the page without lots, never with old
// ones). Not judged: a page whose process the soak SIGSTOPped between the lots' read and its
// answer — a reading begun just before the stop ends after it, and a page asked for during the
// stop waits for it, older by the pause.
func checkStatusPageBook(ev *Evidence) Result {
	r := Result{Name: "statusPageBook"}
	shown, halted := 0, 0
	var oldest time.Duration
	for _, p := range ev.Pages {
		if p.Unparsed != "" {
			r.Add("", "%s status page at %s: lots read at %q, not a time", p.Proc, TimeOfDay(p.Sent), p.Unparsed)
			continue
		}
		if p.LotsReadAt == nil {
			continue
		}
		shown++
		at := *p.LotsReadAt
		// The page prints milliseconds: a reading may show up to 1 ms before it began.
		age := p.Sent.Sub(at)
		oldest = max(oldest, age)
		if proc := ev.Procs[p.PID]; proc != nil && age > PageLotsStale+time.Millisecond {
			if h := proc.HaltAfter(at); !h.IsZero() && !h.After(p.Recv) {
				halted++
				continue
			}
		}
		switch {
		case age > PageLotsStale+time.Millisecond:
			r.Add("", "%s status page asked at %s (answered %s, %s) showed lots read at %s, %v before it was asked (at most %v)",
				p.Proc, TimeOfDay(p.Sent), TimeOfDay(p.Recv), ev.during(p.Sent, p.Recv), TimeOfDay(at), age.Round(time.Millisecond), PageLotsStale)
		case at.After(p.Recv):
			r.Add("", "%s status page asked at %s showed lots read at %s, after it answered at %s", p.Proc, TimeOfDay(p.Sent), TimeOfDay(at), TimeOfDay(p.Recv))
		}
	}
	r.Figures = fmt.Sprintf("%d status pages, %d showing lots, oldest %v before its request (%d older across a stop of their process)",
		len(ev.Pages), shown, oldest.Round(time.Millisecond), halted)
	return r
}
