package api

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
)

// EventHub is the events stream's one reader per process (docs/architecture.md, «Events»). Every
// web process runs one, holder or follower: it reads the outbox in id order, id > the last it
// read, every poll interval — one query for the process, however many streams are open — and
// hands each event, formatted once into the bytes of its server-sent event, to the streams of
// the event's user (and account, where a stream asked for one). Ids are dense and given in commit
// order, so an id read means every id below it is committed and read too: the reader never
// waits on a gap.
//
// A stream that resumes (Last-Event-ID) joins the hub first and learns the hub's position, then
// reads its backlog from the table up to that position, then writes what the hub handed it
// since: nothing falls between the two, and an id at or below the last one written is skipped,
// so nothing is written twice. Nobody is waited for: a stream whose buffer is full is ended, and
// its client resumes from its last id.
type EventHub struct {
	db      *sql.DB
	slots   *StreamSlots
	poll    time.Duration
	buffer  int
	metrics *metrics.Metrics
	log     *slog.Logger

	ready     chan struct{} // closed once the hub knows its position, or has stopped
	readyOnce sync.Once

	mu      sync.Mutex
	pos     int64 // the highest id read and handed out
	stopped bool
	byUser  map[int64]map[*eventStream]struct{}
}

// eventStream is one subscriber: the frames it has yet to write, and gone, closed when the hub
// ends it (it fell behind, or the hub stopped).
type eventStream struct {
	user, account int64 // account 0: every account of user
	key           string
	frames        chan eventFrame
	gone          chan struct{}
	ended         bool // under EventHub.mu
}

// eventFrame is one event as a stream writes it.
type eventFrame struct {
	id    int64
	bytes []byte
}

// EventHubConfig sizes the hub.
type EventHubConfig struct {
	DB *sql.DB
	// Slots are the stream caps the events stream shares with the markets rail.
	Slots *StreamSlots
	// Poll is how often the hub reads the outbox (config.Config.EventsPoll).
	Poll time.Duration
	// Buffer is how many events a stream may have unwritten before it is ended
	// (config.Config.EventsBuffer).
	Buffer  int
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// pageSize is how many events one read of the hub or of a backlog takes (events.List's most).
const pageSize = 500

// NewEventHub returns a hub; Run feeds it.
func NewEventHub(c EventHubConfig) *EventHub {
	return &EventHub{db: c.DB, slots: c.Slots, poll: c.Poll, buffer: c.Buffer, metrics: c.Metrics, log: c.Log,
		ready: make(chan struct{}), byUser: map[int64]map[*eventStream]struct{}{}}
}

// Run reads the outbox until ctx ends, then ends every stream. It starts at the newest event: a
// stream wants what happens from its own start or its own last id, which it reads from the table
// itself. A failed read is logged once and retried at the next poll.
func (h *EventHub) Run(ctx context.Context) error {
	defer h.stop()
	t := time.NewTicker(h.poll)
	defer t.Stop()
	failing := false
	started := false
	for {
		var err error
		if !started {
			var pos int64
			if pos, err = events.Newest(ctx, h.db); err == nil {
				h.mu.Lock()
				h.pos = pos
				h.mu.Unlock()
				h.readyOnce.Do(func() { close(h.ready) })
				started = true
			}
		} else {
			err = h.read(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			h.log.WarnContext(ctx, "events stream: reading the outbox failed; streams wait and resume when it reads again", slog.Any("err", err))
			failing = true
		case err == nil && failing:
			h.log.InfoContext(ctx, "events stream: reading the outbox again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// read hands out every event after the hub's position, a page at a time. With no stream open it
// only moves the position to the newest id, reading no payloads.
func (h *EventHub) read(ctx context.Context) error {
	for {
		h.mu.Lock()
		pos, idle := h.pos, len(h.byUser) == 0
		h.mu.Unlock()
		if idle {
			newest, err := events.Newest(ctx, h.db)
			if err != nil {
				return err
			}
			h.mu.Lock()
			// A stream that joined meanwhile was told the old position and reads its backlog
			// only up to it: the events after it are the hub's to hand over, so the position
			// stays, and the next round reads them.
			idle = len(h.byUser) == 0
			if idle {
				h.pos = max(h.pos, newest)
			}
			h.mu.Unlock()
			if idle {
				return nil
			}
			continue
		}
		page, err := events.List(ctx, h.db, events.Filter{After: pos, Limit: pageSize})
		if err != nil {
			return err
		}
		if len(page) > 0 {
			h.handOut(page)
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// handOut formats each event of page once and offers it to its user's streams. The position
// moves under the same lock a stream joins under, so a stream that joins sees either the page
// to come or a position past it (and reads it from the table).
func (h *EventHub) handOut(page []events.Entry) {
	frames := make([]eventFrame, len(page))
	for i, e := range page {
		frames[i] = formatEvent(e)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, e := range page {
		for s := range h.byUser[e.UserID] {
			if s.account != 0 && s.account != e.AccountID {
				continue
			}
			select {
			case s.frames <- frames[i]:
			default:
				// Behind by a whole buffer: events cannot be skipped, so the stream ends and its
				// client resumes from the last id it wrote. Counted before it is told, so that
				// whoever sees it end sees it counted.
				h.metrics.EventStreamsDropped.Inc()
				h.endLocked(s)
			}
		}
	}
	h.pos = page[len(page)-1].ID
}

// join opens a stream of user's events (of account alone unless 0) for the token key and returns
// the hub's position: every event after it is handed to the stream, every one up to it is the
// stream's to read from the table. It refuses past a stream cap (ELIMITED), and while the hub has
// not started or has stopped (EUNAVAILABLE).
func (h *EventHub) join(ctx context.Context, key string, user, account int64) (*eventStream, int64, error) {
	if err := h.slots.take(key); err != nil {
		return nil, 0, err
	}
	wait, cancel := context.WithTimeout(ctx, h.poll+5*time.Second)
	defer cancel()
	select {
	case <-h.ready:
	case <-wait.Done():
		h.slots.give(key)
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, fx.Errorf(fx.EUNAVAILABLE, "The events stream is not reading the event log yet; retry shortly.")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		h.slots.give(key)
		return nil, 0, fx.Errorf(fx.EUNAVAILABLE, "This server is shutting down; connect to another.")
	}
	s := &eventStream{user: user, account: account, key: key, frames: make(chan eventFrame, h.buffer), gone: make(chan struct{})}
	set := h.byUser[user]
	if set == nil {
		set = map[*eventStream]struct{}{}
		h.byUser[user] = set
	}
	set[s] = struct{}{}
	h.metrics.EventStreams.Inc()
	return s, h.pos, nil
}

// leave releases s's slot; safe after the hub ended it.
func (h *EventHub) leave(s *eventStream) {
	h.mu.Lock()
	h.endLocked(s)
	h.metrics.EventStreams.Dec()
	h.mu.Unlock()
	h.slots.give(s.key)
}

// endLocked removes s from the hand-out and tells its stream to end.
func (h *EventHub) endLocked(s *eventStream) {
	if s.ended {
		return
	}
	s.ended = true
	if set := h.byUser[s.user]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.byUser, s.user)
		}
	}
	close(s.gone)
}

// stop ends every stream and refuses new ones: the process is shutting down, and its server
// drains the requests that were streaming.
func (h *EventHub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.readyOnce.Do(func() { close(h.ready) }) // a stream waiting to join is refused at once
	for _, set := range h.byUser {
		for s := range set {
			h.endLocked(s)
		}
	}
}

// Open is the number of open events streams.
func (h *EventHub) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, set := range h.byUser {
		n += len(set)
	}
	return n
}

// formatEvent is e's server-sent event: id the event's id, event its type, data the event as the
// events page shows it.
func formatEvent(e events.Entry) eventFrame {
	// Encoded as the page encodes it (writeJSON), on one line: the encoder compacts the payload.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		// An Entry always encodes but for a payload that is not JSON, which the writers never
		// store; the client still learns the id and type and can read the page.
		buf.Reset()
		buf.WriteString(`{"id":` + strconv.FormatInt(e.ID, 10) + `}`)
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b := make([]byte, 0, len(data)+len(e.Type)+40)
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, e.ID, 10)
	b = append(b, "\nevent: "...)
	b = append(b, e.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return eventFrame{id: e.ID, bytes: b}
}
