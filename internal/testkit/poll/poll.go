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
