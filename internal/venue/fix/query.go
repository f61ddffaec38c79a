package fix

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Queries are asked again. A status, mass status or position request is read-only, so asking
// twice is always safe, and an ask can be lost without a trace: the library does not resend a
// query (ToApp), so one the venue asks to have resent — a takeover's logon, where the venue's
// ResendRequest covers a query sent a moment after — is gap-filled and never answered. A query
// is therefore sent again each patience without an answer, until its timeout. Orders are never
// sent again (api.go); this file is for queries only.

// patience is how long a query waits for an answer before it is asked again: a fifth of the
// timeout, at least a second (a venue that answers at all answers well within it; asking
// sooner would only double the queries of a slow one). The default FXDESK_VENUE_TIMEOUT of 10 s
// asks at 0, 2, 4, 6 and 8 s; a timeout under 2 s asks once.
func patience(timeout time.Duration) time.Duration { return max(time.Second, timeout/5) }

// asking is one query's asks: the first at once, another each patience without an answer while
// a whole patience is left after it before the timeout (an ask with less could only be answered
// after the query gave up).
type asking struct {
	s     *Session
	what  string // the query, for the log and errors: "order status", "mass status", …
	attrs []any  // what identifies it in the log (the ClOrdID)
	send  func() error
	start time.Time
	asks  int

	wait     time.Duration
	next     *time.Timer // the next ask
	deadline *time.Timer // the timeout
}

// ask sends a query with send and starts timing it; the caller selects on again() (then calls
// askAgain) and expired(), and calls stop when it returns.
func (s *Session) ask(what string, send func() error, attrs ...any) (*asking, error) {
	q := &asking{s: s, what: what, attrs: attrs, send: send, start: time.Now(), wait: patience(s.cfg.Timeout)}
	if err := send(); err != nil {
		return nil, err
	}
	q.asks = 1
	q.deadline = time.NewTimer(s.cfg.Timeout)
	q.arm()
	return q, nil
}

// arm times the next ask, if a whole patience will be left after it before the timeout.
func (q *asking) arm() {
	if time.Since(q.start)+2*q.wait > q.s.cfg.Timeout {
		q.next = nil
		return
	}
	if q.next == nil {
		q.next = time.NewTimer(q.wait)
		return
	}
	q.next.Reset(q.wait)
}

// again fires when the query is to be asked again; never once no ask is left.
func (q *asking) again() <-chan time.Time {
	if q.next == nil {
		return nil
	}
	return q.next.C
}

// expired fires at the query's timeout.
func (q *asking) expired() <-chan time.Time { return q.deadline.C }

// askAgain sends the query again. A send the session refuses (not logged on) is not an answer
// nor the end: an earlier ask's answer may still come (the venue resends its reports at the next
// logon), and the next patience tries again.
func (q *asking) askAgain(ctx context.Context) {
	defer q.arm()
	if err := q.send(); err != nil {
		q.s.log.DebugContext(ctx, "FIX query unanswered; could not ask again", append([]any{slog.String("query", q.what), slog.Any("err", err)}, q.attrs...)...)
		return
	}
	q.asks++
	q.s.log.InfoContext(ctx, "FIX query unanswered; asking again", append([]any{slog.String("query", q.what), slog.Int("ask", q.asks),
		slog.Duration("after", time.Since(q.start).Round(time.Millisecond))}, q.attrs...)...)
}

// timedOut words the timeout: how long, and how often the venue was asked.
func (q *asking) timedOut() string {
	return fmt.Sprintf("no answer within %s to %d asks", q.s.cfg.Timeout, q.asks)
}

func (q *asking) stop() {
	if q.next != nil {
		q.next.Stop()
	}
	q.deadline.Stop()
}
