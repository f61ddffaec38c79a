package desk

import (
	"testing"

	"fxdesk/internal/tick"
)

// Changed tells a subscriber that its Updates channel belongs to a source the view no longer
// shows: each change closes the channel handed out before it, and only that one.
func TestQuotesChangedOnEverySourceChange(t *testing.T) {
	var q Quotes
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for _, change := range []struct {
		what string
		do   func()
	}{
		{"follow", func() { q.SetFollowed(tick.New(tick.Config{URL: "ws://127.0.0.1:1"}, nil)) }},
		{"stop following", q.StopFollowing},
		{"attach the engine", func() { q.SetEngine(tick.New(tick.Config{URL: "ws://127.0.0.1:1"}, nil)) }},
	} {
		before := q.Changed()
		if closed(before) {
			t.Fatalf("before %s: Changed is already closed", change.what)
		}
		change.do()
		if !closed(before) {
			t.Errorf("%s: Changed not closed", change.what)
		}
		if closed(q.Changed()) {
			t.Errorf("after %s: the next Changed is closed already", change.what)
		}
	}
}
