// Package poll waits, in tests, for a condition nothing announces: a row another process
// writes, a counter it moves, a state a simulator reports. Whatever logs, streams or closes a
// channel is waited on through that signal instead. It never sleeps for a fixed time to let
// something happen: it reads the condition again every interval and fails the test at the
// deadline, naming what it waited for.
package poll

import (
	"testing"
	"time"
)

// Until calls cond every interval until it holds, failing tb once timeout has passed.
func Until(tb testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(interval)
	}
}

// Receive waits up to timeout for a value on ch — a part's Run returning, a goroutine's result —
// and reports whether one came. At the deadline it marks tb failed with t.Errorf (not Fatal, so
// it is safe in a deferred stop or a Cleanup after the test already failed) and returns: a part
// that never returns is reported as a failure instead of hanging the test binary until its
// timeout, which would swallow whatever failed first.
func Receive[T any](tb testing.TB, ch <-chan T, timeout time.Duration, what string) (T, bool) {
	tb.Helper()
	select {
	case v := <-ch:
		return v, true
	case <-time.After(timeout):
		tb.Errorf("%s: not within %s", what, timeout)
		var zero T
		return zero, false
	}
}
