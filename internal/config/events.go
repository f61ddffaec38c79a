package config

import (
	"fmt"
	"strconv"
	"time"
)

// EventsConfig is the host platform's feed (docs/events.md): the relay of the events outbox to
// a Redis Stream and to webhooks, on the lease holder, and the outbox's retention.
type EventsConfig struct {
	// RelayInterval is FXDESK_EVENTS_RELAY_INTERVAL, how often the relay looks for new events
	// when the last look found none (default 100ms); a full batch is followed at once.
	RelayInterval time.Duration
	// RelayBatch is FXDESK_EVENTS_RELAY_BATCH, events per read and per pipelined XADD (1..500,
	// default 500).
	RelayBatch int
	// StreamMaxLen is FXDESK_EVENTS_STREAM_MAXLEN, the approximate length the Redis Stream is
	// trimmed to (XADD MAXLEN ~; default 1000000).
	StreamMaxLen int64
	// StreamReplicas is FXDESK_EVENTS_STREAM_REPLICAS (default 0): with Redis replicas (Sentinel),
	// how many must hold a batch of entries (WAIT) before the relay records its position, so a
	// failover to a replica that missed them cannot lose events the relay counts as delivered.
	StreamReplicas int
	// Retention is FXDESK_EVENTS_RETENTION: events older than this and already relayed to the
	// stream and every enabled webhook are deleted from the outbox (default 0: kept for ever).
	Retention time.Duration
	// WebhookTimeout is FXDESK_WEBHOOK_TIMEOUT, one post's bound (default 5s).
	WebhookTimeout time.Duration
	// WebhookAttempts is FXDESK_WEBHOOK_ATTEMPTS, posts of one event before it goes to the
	// endpoint's dead letters (default 8).
	WebhookAttempts int
	// WebhookBackoff and WebhookBackoffMax are FXDESK_WEBHOOK_BACKOFF (default 1s) and
	// FXDESK_WEBHOOK_BACKOFF_MAX (default 1m): the wait after the first failure, doubled after
	// each further one up to the max.
	WebhookBackoff, WebhookBackoffMax time.Duration
}

func loadEvents(env func(key, def string) string, duration func(key, def string) time.Duration) (EventsConfig, []error) {
	var errs []error
	e := EventsConfig{
		RelayInterval:     duration("FXDESK_EVENTS_RELAY_INTERVAL", "100ms"),
		Retention:         duration("FXDESK_EVENTS_RETENTION", "0s"),
		WebhookTimeout:    duration("FXDESK_WEBHOOK_TIMEOUT", "5s"),
		WebhookBackoff:    duration("FXDESK_WEBHOOK_BACKOFF", "1s"),
		WebhookBackoffMax: duration("FXDESK_WEBHOOK_BACKOFF_MAX", "1m"),
	}
	whole := func(key, def string, lo, hi int64) int64 {
		n, err := strconv.ParseInt(env(key, def), 10, 64)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Errorf("%s=%q must be a whole number from %d to %d", key, env(key, def), lo, hi))
		}
		return n
	}
	e.RelayBatch = int(whole("FXDESK_EVENTS_RELAY_BATCH", "500", 1, 500))
	e.StreamMaxLen = whole("FXDESK_EVENTS_STREAM_MAXLEN", "1000000", 1000, 1<<40)
	e.StreamReplicas = int(whole("FXDESK_EVENTS_STREAM_REPLICAS", "0", 0, 16))
	e.WebhookAttempts = int(whole("FXDESK_WEBHOOK_ATTEMPTS", "8", 1, 100))
	if e.RelayInterval < 10*time.Millisecond || e.RelayInterval > time.Minute {
		errs = append(errs, fmt.Errorf("FXDESK_EVENTS_RELAY_INTERVAL=%s must be from 10ms to 1m", e.RelayInterval))
	}
	if e.Retention != 0 && e.Retention < time.Hour {
		errs = append(errs, fmt.Errorf("FXDESK_EVENTS_RETENTION=%s must be 0 (keep every event) or at least 1h", e.Retention))
	}
	if e.WebhookTimeout < 100*time.Millisecond || e.WebhookTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("FXDESK_WEBHOOK_TIMEOUT=%s must be from 100ms to 1m", e.WebhookTimeout))
	}
	if e.WebhookBackoff < time.Millisecond || e.WebhookBackoffMax < e.WebhookBackoff {
		errs = append(errs, fmt.Errorf("FXDESK_WEBHOOK_BACKOFF=%s must be at least 1ms and at most FXDESK_WEBHOOK_BACKOFF_MAX (%s)", e.WebhookBackoff, e.WebhookBackoffMax))
	}
	return e, errs
}
