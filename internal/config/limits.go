package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Limits are the front door's bounds: what one client, or all of them together, can hold of a
// process. Every one has a documented refusal (docs/operations.md, "Front door").
type Limits struct {
	// MaxConns is FXDESK_MAX_CONNS, the open HTTP connections one process keeps (default 4096);
	// a connection past it is answered 503 with Retry-After and closed.
	MaxConns int
	// ReadTimeout bounds reading a whole request, body included (FXDESK_HTTP_READ_TIMEOUT, default
	// 15s); IdleTimeout closes a keep-alive connection with no request (FXDESK_HTTP_IDLE_TIMEOUT,
	// default 60s); WriteTimeout bounds answering one request (FXDESK_HTTP_WRITE_TIMEOUT, default
	// 60s; streams have their own heartbeat deadlines instead).
	ReadTimeout, IdleTimeout, WriteTimeout time.Duration
	// BodyBytes is FXDESK_BODY_LIMIT_BYTES, the largest request body read, the same on holder
	// and follower (default 65536); a larger one answers 413 before it is buffered.
	BodyBytes int64
	// StreamsPerToken and StreamsPerProcess cap open server-sent-event streams
	// (FXDESK_STREAMS_PER_TOKEN default 8, FXDESK_STREAMS_PER_PROCESS default 1000); past them 429.
	StreamsPerToken, StreamsPerProcess int
	// RatePerToken and RatePerAddr are requests per second a token, and a client address, may
	// make (FXDESK_RATE_PER_TOKEN default 50, FXDESK_RATE_PER_ADDR default 200; 0 turns one off),
	// with bursts of twice as many; past them 429 with Retry-After.
	RatePerToken, RatePerAddr float64
	// TrustedProxies are the peers (FXDESK_TRUSTED_PROXIES, comma-separated CIDRs, default none)
	// whose X-Forwarded-For names the client address the per-address limit counts.
	TrustedProxies []*net.IPNet
	// ForwardInFlight is FXDESK_FORWARD_INFLIGHT, the most requests one follower forwards to the
	// holder at once (default 256); ForwardTimeout bounds one (FXDESK_FORWARD_TIMEOUT, default
	// 60s).
	ForwardInFlight int
	ForwardTimeout  time.Duration
}

func loadLimits(env func(key, def string) string, duration func(key, def string) time.Duration) (Limits, []error) {
	var errs []error
	whole := func(key, def string, lo, hi int) int {
		raw := env(key, def)
		n, err := strconv.Atoi(raw)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Errorf("%s=%q must be a whole number from %d to %d", key, raw, lo, hi))
		}
		return n
	}
	rate := func(key, def string) float64 {
		raw := env(key, def)
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || f < 0 || f > 1e6 {
			errs = append(errs, fmt.Errorf("%s=%q must be requests per second from 0 (off) to 1000000", key, raw))
		}
		return f
	}
	l := Limits{
		MaxConns:          whole("FXDESK_MAX_CONNS", "4096", 16, 1_000_000),
		ReadTimeout:       duration("FXDESK_HTTP_READ_TIMEOUT", "15s"),
		IdleTimeout:       duration("FXDESK_HTTP_IDLE_TIMEOUT", "60s"),
		WriteTimeout:      duration("FXDESK_HTTP_WRITE_TIMEOUT", "60s"),
		BodyBytes:         int64(whole("FXDESK_BODY_LIMIT_BYTES", "65536", 1024, 16<<20)),
		StreamsPerToken:   whole("FXDESK_STREAMS_PER_TOKEN", "8", 1, 100_000),
		StreamsPerProcess: whole("FXDESK_STREAMS_PER_PROCESS", "1000", 1, 1_000_000),
		RatePerToken:      rate("FXDESK_RATE_PER_TOKEN", "50"),
		RatePerAddr:       rate("FXDESK_RATE_PER_ADDR", "200"),
		ForwardInFlight:   whole("FXDESK_FORWARD_INFLIGHT", "256", 1, 100_000),
		ForwardTimeout:    duration("FXDESK_FORWARD_TIMEOUT", "60s"),
	}
	for key, d := range map[string]time.Duration{"FXDESK_HTTP_READ_TIMEOUT": l.ReadTimeout, "FXDESK_HTTP_IDLE_TIMEOUT": l.IdleTimeout,
		"FXDESK_HTTP_WRITE_TIMEOUT": l.WriteTimeout, "FXDESK_FORWARD_TIMEOUT": l.ForwardTimeout} {
		if d < time.Second {
			errs = append(errs, fmt.Errorf("%s=%s must be at least 1s", key, d))
		}
	}
	if l.StreamsPerToken > l.StreamsPerProcess {
		errs = append(errs, fmt.Errorf("FXDESK_STREAMS_PER_TOKEN=%d must not exceed FXDESK_STREAMS_PER_PROCESS=%d", l.StreamsPerToken, l.StreamsPerProcess))
	}
	for raw := range strings.SplitSeq(env("FXDESK_TRUSTED_PROXIES", ""), ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		if !strings.Contains(raw, "/") {
			if ip := net.ParseIP(raw); ip != nil && ip.To4() != nil {
				raw += "/32"
			} else {
				raw += "/128"
			}
		}
		_, n, err := net.ParseCIDR(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("FXDESK_TRUSTED_PROXIES: %q is not an address or CIDR (example: 10.0.0.0/8,127.0.0.1)", raw))
			continue
		}
		l.TrustedProxies = append(l.TrustedProxies, n)
	}
	return l, errs
}
