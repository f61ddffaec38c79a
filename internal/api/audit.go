package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// auditMaxLimit is the most entries one page of the audit log holds.
const auditMaxLimit = 500

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
		var next *int64
		if len(es) == f.Limit {
			id := es[len(es)-1].ID
			next = &id
		}
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
	f := audit.Filter{EntityType: q.Get("entityType"), EntityID: q.Get("entityId"), Limit: 100}
	for _, p := range []struct {
		name string
		v    string
		max  int
	}{{"entityType", f.EntityType, 32}, {"entityId", f.EntityID, 64}} {
		if q.Has(p.name) && (p.v == "" || len(p.v) > p.max) {
			return audit.Filter{}, fx.Errorf(fx.EINVALID, "%s must be 1 to %d characters.", p.name, p.max)
		}
	}
	positive := func(name string) (int64, error) {
		if !q.Has(name) {
			return 0, nil
		}
		n, err := strconv.ParseInt(q.Get(name), 10, 64)
		if err != nil || n <= 0 {
			return 0, fx.Errorf(fx.EINVALID, "%s must be a positive whole number (got %q).", name, q.Get(name))
		}
		return n, nil
	}
	var err error
	if f.ActorUser, err = positive("actorUserId"); err != nil {
		return audit.Filter{}, err
	}
	if f.Before, err = positive("before"); err != nil {
		return audit.Filter{}, err
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > auditMaxLimit {
			return audit.Filter{}, fx.Errorf(fx.EINVALID, "limit must be a whole number from 1 to %d (got %q).", auditMaxLimit, q.Get("limit"))
		}
		f.Limit = n
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
