package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"regexp"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
)

type principalKey struct{}

type tokenKeyKey struct{}

// tokenKey names the caller's token for per-token limits (its hash, never the token).
func tokenKey(ctx context.Context) string {
	k, _ := ctx.Value(tokenKeyKey{}).(string)
	return k
}

// principal is the authenticated caller; requireToken guarantees one on every route it wraps.
func principal(ctx context.Context) auth.Principal {
	p, _ := ctx.Value(principalKey{}).(auth.Principal)
	return p
}

// requireToken answers 401 unless the request carries a live bearer token, and 429 past the
// token's request rate (perToken, nil for none). The token's use, and the client address it came
// from (read through trusted proxies), is noted for the resolver to record.
func requireToken(log *slog.Logger, res *auth.Resolver, perToken *rateLimits, trusted []*net.IPNet, m *metrics.Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			header := r.Header.Get("Authorization")
			p, err := res.Resolve(r.Context(), header)
			if errors.Is(err, auth.ErrBusy) {
				m.Refused.WithLabelValues(metrics.RefusedTokenLookups).Inc()
			}
			if err != nil {
				if fx.ErrorCode(err) == fx.EUNAUTH {
					w.Header().Set("WWW-Authenticate", `Bearer realm="fxdesk"`)
					if header != "" {
						m.Refused.WithLabelValues(metrics.RefusedUnknownToken).Inc()
					}
				}
				writeError(r.Context(), log, w, err)
				return
			}
			token, _ := auth.BearerToken(header)
			key := auth.Hash(token)
			if ok, wait := perToken.allow(key); !ok {
				m.Refused.WithLabelValues(metrics.RefusedRateToken).Inc()
				writeError(r.Context(), log, w, refuseRate(w, wait, "token"))
				return
			}
			res.Used(p, clientAddress(r, trusted))
			ctx := context.WithValue(context.WithValue(r.Context(), principalKey{}, p), tokenKeyKey{}, key)
			ctx = audit.WithActor(ctx, audit.Actor{TokenID: p.TokenID, UserID: p.UserID, Via: "api", RequestID: requestID(w, r)})
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// requestIDPattern is what an X-Request-Id a client (or a follower forwarding) sends must look like
// to be kept; anything else is replaced.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// requestID is the request's id: the client's X-Request-Id when it is well formed, otherwise a
// new random one. It is echoed in the answer's X-Request-Id and recorded with admin writes.
func requestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if !requestIDPattern.MatchString(id) {
		var b [8]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
		r.Header.Set("X-Request-Id", id) // a follower forwarding the request passes it on
	}
	w.Header().Set("X-Request-Id", id)
	return id
}
