package api

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"fxdesk/internal/fx"
)

// rateLimits is one token bucket per key (a token, or a client address), refilled at perSecond
// with bursts of twice that (golang.org/x/time/rate). A key not seen for long enough to refill
// completely is forgotten: a fresh bucket is the same as a full one. Memory is bounded by
// maxKeys; past it the idle keys go first.
type rateLimits struct {
	every   rate.Limit
	burst   int
	idle    time.Duration // a bucket unused this long is full again
	maxKeys int
	now     func() time.Time

	mu   sync.Mutex
	keys map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// newRateLimits returns per-key limits of perSecond (0: nil, no limit).
func newRateLimits(perSecond float64, maxKeys int) *rateLimits {
	if perSecond <= 0 {
		return nil
	}
	burst := max(1, int(math.Ceil(2*perSecond)))
	return &rateLimits{every: rate.Limit(perSecond), burst: burst, maxKeys: maxKeys, now: time.Now,
		idle: time.Duration(float64(burst)/perSecond*float64(time.Second)) + time.Second,
		keys: map[string]*bucket{}}
}

// allow takes one request from key's bucket, or says how long until one is there.
func (l *rateLimits) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.keys[key]
	if b == nil {
		if len(l.keys) >= l.maxKeys {
			l.forgetIdleLocked(now)
		}
		b = &bucket{lim: rate.NewLimiter(l.every, l.burst)}
		l.keys[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// forgetIdleLocked drops buckets that have refilled; if every key is busy, all of them (an
// attacker holding that many addresses or tokens at once is past what a per-key limit is for).
func (l *rateLimits) forgetIdleLocked(now time.Time) {
	for k, b := range l.keys {
		if now.Sub(b.seen) > l.idle {
			delete(l.keys, k)
		}
	}
	if len(l.keys) >= l.maxKeys {
		clear(l.keys)
	}
}

// rateKeys bounds the keys one limiter remembers.
const rateKeys = 100_000

// refuseRate answers 429 with the whole seconds until the next request is allowed.
func refuseRate(w http.ResponseWriter, wait time.Duration, what string) error {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return fx.Errorf(fx.ELIMITED, "Too many requests from this %s; retry in %d s.", what, secs)
}

// clientAddress is the address the per-address limit counts: the peer's, or, when the peer is a
// trusted proxy, the nearest address in X-Forwarded-For that is not one (a client can write
// anything into the header, but not past the proxy that appends its own peer).
func clientAddress(r *http.Request, trusted []*net.IPNet) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(trusted) == 0 || !isTrusted(host, trusted) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		if !isTrusted(hop, trusted) {
			return hop
		}
		host = hop
	}
	return host
}

func isTrusted(addr string, trusted []*net.IPNet) bool {
	ip := net.ParseIP(addr)
	if ip == nil {
		return false
	}
	for _, n := range trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
