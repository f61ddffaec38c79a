package api

import (
	"context"
	"log/slog"
	"net/http"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
)

type principalKey struct{}

// principal is the authenticated caller; requireToken guarantees one on every route it wraps.
func principal(ctx context.Context) auth.Principal {
	p, _ := ctx.Value(principalKey{}).(auth.Principal)
	return p
}

// requireToken answers 401 unless the request carries a live bearer token.
func requireToken(log *slog.Logger, res *auth.Resolver) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := res.Resolve(r.Context(), r.Header.Get("Authorization"))
			if err != nil {
				if fx.ErrorCode(err) == fx.EUNAUTH {
					w.Header().Set("WWW-Authenticate", `Bearer realm="fxdesk"`)
				}
				writeError(r.Context(), log, w, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		})
	}
}

// requireAdmin answers 403 to an authenticated caller without the admin role.
func requireAdmin(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !principal(r.Context()).Admin {
				writeError(r.Context(), log, w, fx.Errorf(fx.EFORBIDDEN, "This route needs the admin role."))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
