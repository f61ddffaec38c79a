package api

import (
	"net/url"
	"strconv"

	"fxdesk/internal/fx"
)

// The admin lists (the audit log, the tokens) page back from the newest by id: a page holds up
// to limit entries (pageLimit unless given, at most pageMaxLimit) with ids below before, and the
// answer's nextBefore is the next page's before, null on the last page.
const (
	pageLimit    = 100
	pageMaxLimit = 500
)

// pageParams reads a list's before and limit query parameters, each bad one refused by name.
func pageParams(q url.Values) (before int64, limit int, err error) {
	if before, err = wholeParam("before", q.Get("before"), q.Has("before"), 1); err != nil {
		return 0, 0, err
	}
	limit = pageLimit
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > pageMaxLimit {
			return 0, 0, fx.Errorf(fx.EINVALID, "limit must be a whole number from 1 to %d (got %q).", pageMaxLimit, q.Get("limit"))
		}
		limit = n
	}
	return before, limit, nil
}

// nextBefore is the before of the page after page, asked for with limit: the id of its last
// entry, or null when the page was not full, so nothing is left below it.
func nextBefore[E any](page []E, limit int, id func(E) int64) *int64 {
	if len(page) == 0 || len(page) < limit {
		return nil
	}
	last := id(page[len(page)-1])
	return &last
}
