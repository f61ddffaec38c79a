package api

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
)

// guards records what each guarded route needs, "GET /api/fx/orders" → "scope read" or
// "POST /api/admin/fx/accounts/{id}/deposit" → "permission money": the routes' own account of
// their guards, which the tests walk against the router so that an unguarded route fails them.
type guards map[string]string

// under returns a recorder for routes registered below prefix (the Route block's path).
func (g guards) under(prefix string) guardSet { return guardSet{g: g, prefix: prefix} }

type guardSet struct {
	g      guards
	prefix string
}

// permit returns r with a guard that refuses (403) a caller whose role holds none of perms, and
// records perms against every route registered through it.
func (s guardSet) permit(r chi.Router, log *slog.Logger, perms ...auth.Permission) chi.Router {
	names := make([]string, len(perms))
	for i, p := range perms {
		names[i] = string(p)
	}
	return guarded{Router: r.With(requirePermission(log, perms)), set: s, need: "permission " + strings.Join(names, "|")}
}

// scope returns r with a guard that refuses (403) a caller whose token lacks scope sc, and
// records it against every route registered through it.
func (s guardSet) scope(r chi.Router, log *slog.Logger, sc auth.Scope) chi.Router {
	return guarded{Router: r.With(requireScope(log, sc)), set: s, need: "scope " + string(sc)}
}

// guarded is a chi.Router that records each route registered through it, With included.
type guarded struct {
	chi.Router
	set  guardSet
	need string
}

func (g guarded) note(method, pattern string) { g.set.g[method+" "+g.set.prefix+pattern] = g.need }

func (g guarded) With(middlewares ...func(http.Handler) http.Handler) chi.Router {
	return guarded{Router: g.Router.With(middlewares...), set: g.set, need: g.need}
}

func (g guarded) Method(method, pattern string, h http.Handler) {
	g.note(strings.ToUpper(method), pattern)
	g.Router.Method(method, pattern, h)
}

func (g guarded) Get(pattern string, h http.HandlerFunc) { g.Method(http.MethodGet, pattern, h) }
func (g guarded) Post(pattern string, h http.HandlerFunc) {
	g.Method(http.MethodPost, pattern, h)
}
func (g guarded) Put(pattern string, h http.HandlerFunc) { g.Method(http.MethodPut, pattern, h) }
func (g guarded) Patch(pattern string, h http.HandlerFunc) {
	g.Method(http.MethodPatch, pattern, h)
}
func (g guarded) Delete(pattern string, h http.HandlerFunc) {
	g.Method(http.MethodDelete, pattern, h)
}

// requirePermission answers 403, naming what is missing, to a caller whose role holds none of
// perms. It runs before the handler reads anything, so a refusal changes nothing.
func requirePermission(log *slog.Logger, perms []auth.Permission) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principal(r.Context())
			for _, perm := range perms {
				if p.Can(perm) {
					next.ServeHTTP(w, r)
					return
				}
			}
			writeError(r.Context(), log, w, missingPermission(p, perms...))
		})
	}
}

// missingPermission is the refusal of a caller whose role holds none of perms.
func missingPermission(p auth.Principal, perms ...auth.Permission) error {
	names := make([]string, len(perms))
	for i, perm := range perms {
		names[i] = string(perm)
	}
	return fx.Errorf(fx.EFORBIDDEN, "This needs the %s permission, which the %s role does not hold.", strings.Join(names, " or "), p.Role)
}

// requireScope answers 403 to a caller whose token does not carry scope sc.
func requireScope(log *slog.Logger, sc auth.Scope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principal(r.Context())
			if !p.May(sc) {
				msg := "This route needs a token with the %s scope; this one has %q."
				if p.Staff() {
					msg = "This route acts for a trader: it needs a trader's token with the %s scope, not a staff token (%q)."
					writeError(r.Context(), log, w, fx.Errorf(fx.EFORBIDDEN, msg, sc, p.Role))
					return
				}
				writeError(r.Context(), log, w, fx.Errorf(fx.EFORBIDDEN, msg, sc, p.Scopes.String()))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
