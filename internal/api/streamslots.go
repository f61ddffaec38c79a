package api

import (
	"sync"

	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
)

// StreamSlots are the front door's stream caps (docs/architecture.md, «The front door»): open
// server-sent-event streams per token and per process, counted together for the markets rail and
// the events stream, so a refusal costs a map lookup and nothing else.
type StreamSlots struct {
	perToken, perProcess int
	metrics              *metrics.Metrics

	mu     sync.Mutex
	perKey map[string]int
	open   int
}

// NewStreamSlots returns caps of perToken streams for one token and perProcess for the process
// (config.Limits).
func NewStreamSlots(perToken, perProcess int, m *metrics.Metrics) *StreamSlots {
	return &StreamSlots{perToken: perToken, perProcess: perProcess, metrics: m, perKey: map[string]int{}}
}

// take holds one slot for the token key, or refuses with ELIMITED past a cap.
func (s *StreamSlots) take(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= s.perProcess {
		s.metrics.Refused.WithLabelValues(metrics.RefusedStreamsProcess).Inc()
		return fx.Errorf(fx.ELIMITED, "This server has its most open streams (%d); retry shortly or connect to another.", s.perProcess)
	}
	if s.perKey[key] >= s.perToken {
		s.metrics.Refused.WithLabelValues(metrics.RefusedStreamsToken).Inc()
		return fx.Errorf(fx.ELIMITED, "This token already has %d open streams, the most it may hold; close one first (one markets stream can carry every symbol, one events stream every account).", s.perToken)
	}
	s.perKey[key]++
	s.open++
	return nil
}

// give releases a slot take held.
func (s *StreamSlots) give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perKey[key]--
	if s.perKey[key] <= 0 {
		delete(s.perKey, key)
	}
	s.open--
}

// Open is the number of open streams of every kind.
func (s *StreamSlots) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}
