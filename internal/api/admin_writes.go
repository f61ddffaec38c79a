package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"
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
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				next.ServeHTTP(w, r)
				return
			}
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			// A refusal (a guard's 403, a route that does not exist, a bad body) changed nothing.
			if ww.Status() < 400 {
				written(context.WithoutCancel(r.Context()), r.Method+" "+r.URL.Path)
			}
		})
	}
}
