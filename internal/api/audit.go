package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// auditParams are the query parameters GET /api/admin/fx/audit takes; any other is refused.
var auditParams = []string{"entityType", "entityId", "actorUserId", "from", "to", "before", "limit"}

// handleAudit reads the audit log, newest first (admin):
// GET /api/admin/fx/audit?entityType=account&entityId=7&actorUserId=1&from=…&to=…&before=…&limit=…
// Every parameter is optional; from and to are RFC 3339 times ([from, to)); before pages back
// from an id, and the answer's nextBefore is the before of the next page (null on the last).
func handleAudit(log *slog.Logger, db store.Queryer) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		f, err := auditFilter(r)
		if err != nil {
			return err
		}
		es, err := audit.List(r.Context(), db, f)
		if err != nil {
			return err
		}
		if es == nil {
			es = []audit.Entry{}
		}
		next := nextBefore(es, f.Limit, func(e audit.Entry) int64 { return e.ID })
		writeJSON(w, http.StatusOK, map[string]any{"entries": es, "nextBefore": next})
		return nil
	})
}

// auditFilter reads and checks the audit route's query: each bad parameter is refused by name.
func auditFilter(r *http.Request) (audit.Filter, error) {
	q := r.URL.Query()
	if err := checkQuery(q, auditParams, "the audit log"); err != nil {
		return audit.Filter{}, err
	}
	f := audit.Filter{EntityType: q.Get("entityType"), EntityID: q.Get("entityId")}
	for _, p := range []struct {
		name string
		v    string
		max  int
	}{{"entityType", f.EntityType, 32}, {"entityId", f.EntityID, 64}} {
		if q.Has(p.name) && (p.v == "" || len(p.v) > p.max) {
			return audit.Filter{}, fx.Errorf(fx.EINVALID, "%s must be 1 to %d characters.", p.name, p.max)
		}
	}
	var err error
	if f.ActorUser, err = wholeParam("actorUserId", q.Get("actorUserId"), q.Has("actorUserId"), 1); err != nil {
		return audit.Filter{}, err
	}
	if f.Before, f.Limit, err = pageParams(q); err != nil {
		return audit.Filter{}, err
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if !q.Has(p.name) {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, q.Get(p.name))
		if err != nil {
			return audit.Filter{}, fx.Errorf(fx.EINVALID, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got %q).", p.name, q.Get(p.name))
		}
		*p.to = t
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return audit.Filter{}, fx.Errorf(fx.EINVALID, "from must be before to (the range is [from, to)).")
	}
	return f, nil
}

// checkQuery refuses a query parameter the route does not take (what names the route in the
// refusal) and one given more than once, by name.
func checkQuery(q url.Values, allowed []string, what string) error {
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			return fx.Errorf(fx.EINVALID, "Unknown query parameter %q: %s takes %s.", name, what, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return fx.Errorf(fx.EINVALID, "Query parameter %s is given %d times; give it once.", name, len(vs))
		}
	}
	return nil
}
