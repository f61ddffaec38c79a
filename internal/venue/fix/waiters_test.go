package fix

import (
	"strconv"
	"testing"
)

// A waiter that is not reading while the intake hands it many reports (a close the venue fills
// in many executions, a batch journaled at once) loses none of them: the report path has no
// queue that drops, so the final report is there when the waiter looks.
func TestWaitersLoseNoReport(t *testing.T) {
	t.Parallel()
	s := &Session{waiters: map[string][]*mailbox{}}
	w, done := s.wait("7")
	defer done()
	const n = 50
	for i := range n {
		s.deliver("7", answer{r: report{ClOrdID: "7", ExecID: strconv.Itoa(i)}})
	}
	got := 0
	for {
		select {
		case <-w.ready():
			for a, ok := w.take(); ok; a, ok = w.take() {
				if a.r.ExecID != strconv.Itoa(got) {
					t.Fatalf("answer %d is %s: out of order", got, a.r.ExecID)
				}
				got++
			}
			continue
		default:
		}
		break
	}
	if got != n {
		t.Fatalf("the waiter read %d of %d reports", got, n)
	}
}
