package api

import (
	"context"
	"net/http"
)

// tellAdminWrites calls written after every admin write has been answered. Every admin write
// records its audit row in the transaction of its change, committed before the answer, so the
// call comes after the row is readable. It is one middleware over every admin route rather than
// a call in each handler: a route added later cannot forget it (docs/groups.md, "How a change
// reaches the risk engine").
func tellAdminWrites(written func(ctx context.Context, what string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if written == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				written(context.WithoutCancel(r.Context()), r.Method+" "+r.URL.Path)
			}
		})
	}
}
