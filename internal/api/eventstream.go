package api

import (
	"database/sql"
	"log/slog"
	"net/http"

	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
)

// eventsStreamParams are the query parameters GET /api/fx/events/stream takes.
var eventsStreamParams = []string{"after", "accountId"}

// handleEventsStream is the trader's events stream: server-sent events of the caller's own
// accounts (of one, with ?accountId=), in id order, each with id: the event id, event: its type
// and data: the event as the events page shows it. A client resuming with Last-Event-ID (or
// ?after=, for a client that cannot set headers; the header wins, as a reconnecting browser
// sends both) gets every event after it from the table, then the live ones, none twice; without
// either the stream starts with the next event to commit. Its buffer full, a stream is ended and
// its client resumes; past the stream caps it is refused with 429. Served by every web process
// from the database (EventHub).
func handleEventsStream(log *slog.Logger, db *sql.DB, hub *EventHub, m *metrics.Metrics) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		if hub == nil {
			return fx.Errorf(fx.EUNAVAILABLE, "This process serves no events stream; connect to a web process.")
		}
		ctx := r.Context()
		q := r.URL.Query()
		if err := checkQuery(q, eventsStreamParams, "the events stream"); err != nil {
			return err
		}
		after, from, err := resumeAfter(r)
		if err != nil {
			return err
		}
		account, err := wholeParam("accountId", q.Get("accountId"), q.Has("accountId"), 1)
		if err != nil {
			return err
		}
		user := principal(ctx).UserID
		if account != 0 {
			if _, err := book.LoadAccount(ctx, db, user, account); err != nil {
				return err
			}
		}
		flusher, ok := w.(http.Flusher)
		if !ok {
			return fx.Errorf(fx.EINTERNAL, "streaming unsupported")
		}
		s, pos, err := hub.join(ctx, tokenKey(ctx), user, account)
		if err != nil {
			if fx.ErrorCode(err) == fx.ELIMITED {
				w.Header().Set("Retry-After", streamRetryAfter)
			}
			return err
		}
		defer hub.leave(s)
		// sent is the last id the client has: everything after it, up to the hub's position, is
		// read from the table; everything after the position comes from the hub.
		var sent int64
		switch {
		case from == "":
			// A fresh stream starts with the next event to commit: the hub, up to a poll behind,
			// hands over what came before too, and the stream skips it.
			if sent, err = events.Newest(ctx, db); err != nil {
				return err
			}
		case after > pos:
			// Past what this process has read: a follower a poll behind the process the client
			// last heard, or an id never written.
			newest, err := events.Newest(ctx, db)
			if err != nil {
				return err
			}
			if after > newest {
				return fx.Errorf(fx.EINVALID, "%s %d names no event: the newest event id is %d.", from, after, newest)
			}
			sent = after
		default:
			sent = after
		}

		st, ok := startSSE(w, flusher, eventsPreamble)
		if !ok {
			return nil
		}

		for sent < pos {
			page, err := events.List(ctx, db, events.Filter{UserID: user, AccountID: account, After: sent, UpTo: pos, Limit: pageSize})
			if err != nil {
				// The stream has begun: ending it is the answer, and the client resumes.
				log.WarnContext(ctx, "events stream: reading the backlog failed; the stream ends", slog.Any("err", err))
				return nil
			}
			for _, e := range page {
				if !st.write(formatEvent(e).bytes) {
					return nil
				}
				m.EventsDelivered.Inc()
				sent = e.ID
			}
			st.flusher.Flush()
			if len(page) < pageSize {
				break
			}
		}

		// send writes f unless the client already has it (the backlog read past the hub's
		// position where the hub lags the table).
		send := func(f eventFrame) bool {
			if f.id <= sent {
				return true
			}
			if !st.write(f.bytes) {
				return false
			}
			m.EventsDelivered.Inc()
			sent = f.id
			return true
		}
		// Ends when the client leaves, or when the stream is dropped — behind by a whole buffer,
		// or the process is stopping: the client resumes from the last id it has.
		pump(ctx, st, s.gone, s.frames, send)
		return nil
	})
}

// resumeAfter is the id a stream resumes after and what named it: the Last-Event-ID header, else
// ?after=; from is empty where neither is given.
func resumeAfter(r *http.Request) (after int64, from string, err error) {
	if vs := r.Header.Values("Last-Event-ID"); len(vs) > 0 {
		if len(vs) > 1 {
			return 0, "", fx.Errorf(fx.EINVALID, "Last-Event-ID is given %d times; give it once.", len(vs))
		}
		after, err = wholeParam("Last-Event-ID", vs[0], true, 0)
		return after, "Last-Event-ID", err
	}
	q := r.URL.Query()
	if !q.Has("after") {
		return 0, "", nil
	}
	after, err = wholeParam("after", q.Get("after"), true, 0)
	return after, "after", err
}

var eventsPreamble = []byte(": fxdesk events stream\n\n")
