package api

import (
	"database/sql"
	"log/slog"
	"net/http"
	"strconv"

	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
)

// eventsParams are the query parameters GET /api/fx/events takes; any other is refused.
var eventsParams = []string{"after", "accountId", "limit"}

// handleEvents reads a page of the caller's events in id order, for clients that poll:
// GET /api/fx/events?after=<id>&accountId=…&limit=… (limit 1..500, default 100). A trader reads
// their own accounts' (another's accountId answers 404); an admin reads every account's. The
// answer's next is the after of the next page: the last id returned, or after itself when the
// page is empty. Ids commit in order (events.Add), so polling from next misses nothing that
// commits later.
func handleEvents(log *slog.Logger, db *sql.DB) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		f, err := eventsFilter(r)
		if err != nil {
			return err
		}
		p := principal(r.Context())
		if !p.Staff() {
			f.UserID = p.UserID
			if f.AccountID != 0 {
				if _, err := book.LoadAccount(r.Context(), db, p.UserID, f.AccountID); err != nil {
					return err
				}
			}
		}
		es, err := events.List(r.Context(), db, f)
		if err != nil {
			return err
		}
		if es == nil {
			es = []events.Entry{}
		}
		next := f.After
		if len(es) > 0 {
			next = es[len(es)-1].ID
		}
		writeJSON(w, http.StatusOK, map[string]any{"events": es, "next": next})
		return nil
	})
}

// eventsFilter reads and checks the events route's query: each bad parameter is refused by name.
func eventsFilter(r *http.Request) (events.Filter, error) {
	q := r.URL.Query()
	if err := checkQuery(q, eventsParams, "the events page"); err != nil {
		return events.Filter{}, err
	}
	num := func(name string, min int64) (int64, error) { return wholeParam(name, q.Get(name), q.Has(name), min) }
	var f events.Filter
	var err error
	if f.After, err = num("after", 0); err != nil {
		return events.Filter{}, err
	}
	if f.AccountID, err = num("accountId", 1); err != nil {
		return events.Filter{}, err
	}
	limit, err := num("limit", 1)
	if err != nil {
		return events.Filter{}, err
	}
	if limit > 500 {
		return events.Filter{}, fx.Errorf(fx.EINVALID, "limit must be at most 500 (got %d).", limit)
	}
	f.Limit = int(limit)
	if f.Limit == 0 {
		f.Limit = 100
	}
	return f, nil
}

// wholeParam reads a whole-number parameter given (0 when not) of at least min (0 or 1), refused
// by name.
func wholeParam(name, raw string, given bool, min int64) (int64, error) {
	if !given {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < min {
		what := "a positive whole number"
		if min == 0 {
			what = "a whole number, 0 or more"
		}
		return 0, fx.Errorf(fx.EINVALID, "%s must be %s (got %q).", name, what, raw)
	}
	return n, nil
}
