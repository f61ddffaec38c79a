package api

import (
	"context"
	"database/sql"
	"net/http"
	"time"

	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
)

// handleHealthz answers while the process is alive.
func handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// handleReadyz answers 200 when the database is reachable and the role is known, and on the lease
// holder only once its risk view is loaded (riskView "loaded"): until then the holder refuses
// every new order (gate.ErrRiskViewLoading), so a balancer should not count it as serving. A
// follower has no risk view; watch nil counts as loaded.
func handleReadyz(db *sql.DB, dk *desk.Desk, watch gate.Watch) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		body := map[string]any{"role": dk.Role()}
		status := http.StatusOK
		if err := db.PingContext(ctx); err != nil {
			// Served without a token to load balancers: the driver's error (addresses, user
			// names) stays in this process; operators read it on /api/admin/fx/desk and in logs.
			body["database"] = "unreachable"
			status = http.StatusServiceUnavailable
		} else {
			body["database"] = "ok"
		}
		switch dk.Role() {
		case "":
			body["role"] = "unknown"
			status = http.StatusServiceUnavailable
		case desk.Holder:
			body["riskView"] = "loaded"
			if watch != nil && !watch.Watching() {
				body["riskView"] = "loading"
				status = http.StatusServiceUnavailable
			}
		}
		body["ready"] = status == http.StatusOK
		writeJSON(w, status, body)
	}
}
