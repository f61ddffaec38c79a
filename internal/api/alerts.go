package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/alert"
	"fxdesk/internal/fx"
)

// handleAlerts lists the execution alert inbox, most recently seen first:
// GET /api/admin/fx/alerts?status=OPEN,ACKNOWLEDGED&code=quote-mirror-unavailable&limit=100.
// Every parameter is optional; status is case-insensitive and may list several.
func handleAlerts(log *slog.Logger, inbox *alert.Inbox) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		var f alert.Filter
		for raw := range strings.SplitSeq(q.Get("status"), ",") {
			if strings.TrimSpace(raw) == "" {
				continue
			}
			st, err := alert.ParseStatus(raw)
			if err != nil {
				return err
			}
			f.Statuses = append(f.Statuses, st)
		}
		f.Code = strings.TrimSpace(q.Get("code"))
		if raw := q.Get("limit"); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 {
				return fx.Errorf(fx.EINVALID, "The limit must be a positive whole number, at most %d.", alert.MaxLimit)
			}
			f.Limit = n
		}
		all, err := inbox.List(r.Context(), f)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"alerts": all})
		return nil
	})
}

// handleAckAlert acknowledges one alert: POST /api/admin/fx/alerts/{id}/ack, no body. actor names
// who is acknowledging (the authenticated admin); nil, or an empty name, records "admin".
// Acknowledging twice answers the alert unchanged; a resolved alert answers 409.
func handleAckAlert(log *slog.Logger, inbox *alert.Inbox, actor func(*http.Request) string) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id < 1 {
			return fx.Errorf(fx.ENOTFOUND, "No alert %q.", chi.URLParam(r, "id"))
		}
		by := ""
		if actor != nil {
			by = actor(r)
		}
		if strings.TrimSpace(by) == "" {
			by = "admin"
		}
		a, err := inbox.Acknowledge(r.Context(), id, by)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"alert": a})
		return nil
	})
}
