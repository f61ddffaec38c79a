package api

import (
	"context"
	"net/http"
	"time"
)

// sseStream is one server-sent-events response, shared by the markets rail and the events
// stream: it is read once, at its start, so the server's read deadline must not end it later,
// and every write has its own deadline, so a client that stops reading is let go, not waited for.
type sseStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	flusher http.Flusher
}

// startSSE answers 200 with the event-stream headers and writes preamble. It reports false when
// the client is already gone.
func startSSE(w http.ResponseWriter, flusher http.Flusher, preamble []byte) (*sseStream, bool) {
	s := &sseStream{w: w, rc: http.NewResponseController(w), flusher: flusher}
	s.rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !s.write(preamble) {
		return nil, false
	}
	s.flusher.Flush()
	return s, true
}

// write writes b within streamWriteTimeout, reporting whether it went out.
func (s *sseStream) write(b []byte) bool {
	s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := s.w.Write(b)
	return err == nil
}

// pump hands what in brings to send until ctx ends (the client left), gone closes (the stream
// was dropped: its client reconnects) or a write fails, with a keep-alive comment every
// streamHeartbeat. Whatever else is already waiting goes out in the same flush.
func pump[T any](ctx context.Context, s *sseStream, gone <-chan struct{}, in <-chan T, send func(T) bool) {
	heartbeat := time.NewTicker(streamHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-gone:
			return
		case <-heartbeat.C:
			if !s.write(railKeepAlive) {
				return
			}
			s.flusher.Flush()
		case v := <-in:
			if !send(v) {
				return
			}
			for more := true; more; {
				select {
				case v := <-in:
					if !send(v) {
						return
					}
				default:
					more = false
				}
			}
			s.flusher.Flush()
		}
	}
}
