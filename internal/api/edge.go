package api

import (
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
)

// bodyRules bounds every request body before anything reads it, on every process alike (a
// follower and the holder answer an oversized body the same way), and refuses a body on an API
// route that does not say it is JSON: a form or a text body would otherwise be read as JSON by
// accident of its bytes. A body announced larger than limit is refused before it is read at all;
// one that grows past it while read is refused where it is read (decodeStrict).
func bodyRules(log *slog.Logger, limit int64, m *metrics.Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				m.Refused.WithLabelValues(metrics.RefusedBody).Inc()
				// The client is told, and the connection closed rather than drained.
				w.Header().Set("Connection", "close")
				writeError(r.Context(), log, w, fx.TooLarge(limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if strings.HasPrefix(r.URL.Path, "/api/") && r.ContentLength != 0 && r.Body != http.NoBody {
				if err := checkJSONType(r.Header.Get("Content-Type")); err != nil {
					writeError(r.Context(), log, w, err)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// defaultBodyBytes bounds a body when no limit is configured; no desk request comes near it.
const defaultBodyBytes = 64 << 10

// perAddress answers 429 past the client address's request rate (limits nil: no limit).
func perAddress(log *slog.Logger, limits *rateLimits, trusted []*net.IPNet, m *metrics.Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if limits == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ok, wait := limits.allow(clientAddress(r, trusted)); !ok {
				m.Refused.WithLabelValues(metrics.RefusedRateAddr).Inc()
				writeError(r.Context(), log, w, refuseRate(w, wait, "address"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// writeDeadline bounds the time to answer one request (0: none). A stream replaces it with a
// deadline per write.
func writeDeadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
			next.ServeHTTP(w, r)
		})
	}
}

// checkJSONType accepts application/json, with no charset or charset=utf-8.
func checkJSONType(ct string) error {
	if ct == "" {
		return fx.Errorf(fx.EINVALID, "A request body needs Content-Type: application/json.")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fx.Errorf(fx.EINVALID, "Content-Type %q is not accepted: send the body as application/json.", ct)
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return fx.Errorf(fx.EINVALID, "Content-Type %q is not accepted: application/json takes no parameter but charset=utf-8.", ct)
		}
	}
	return nil
}
