package api

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/fx"
	"fxdesk/internal/relay"
)

// webhookBody is POST /api/admin/fx/webhooks's body and PATCH …/{id}'s: url, secret (creation
// only; left out, one is generated) and enabled (default true at creation).
type webhookBody struct {
	URL     *string `json:"url"`
	Secret  *string `json:"secret"`
	Enabled *bool   `json:"enabled"`
}

// handleWebhooks lists the webhook endpoints (admin), never their secrets.
func handleWebhooks(log *slog.Logger, admin *relay.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		ws, err := admin.List(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"webhooks": ws})
		return nil
	})
}

// handleCreateWebhook adds an endpoint (admin); the answer carries its secret, the only time it
// is shown.
func handleCreateWebhook(log *slog.Logger, admin *relay.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		var b webhookBody
		if err := decodeStrict(r.Body, &b, false); err != nil {
			return err
		}
		if b.URL == nil {
			return fx.Errorf(fx.EINVALID, "url is required.")
		}
		n := relay.NewWebhook{URL: *b.URL, Enabled: true}
		if b.Secret != nil {
			if *b.Secret == "" {
				return fx.Errorf(fx.EINVALID, "secret must not be empty; leave it out to have one generated.")
			}
			n.Secret = *b.Secret
		}
		if b.Enabled != nil {
			n.Enabled = *b.Enabled
		}
		wh, secret, err := admin.Create(r.Context(), n)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, map[string]any{"webhook": wh, "secret": secret})
		return nil
	})
}

// handleUpdateWebhook changes an endpoint's url or enabled (admin); its secret cannot change
// (create another endpoint and disable this one).
func handleUpdateWebhook(log *slog.Logger, admin *relay.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := webhookID(r)
		if err != nil {
			return err
		}
		var b webhookBody
		if err := decodeStrict(r.Body, &b, false); err != nil {
			return err
		}
		if b.Secret != nil {
			return fx.Errorf(fx.EINVALID, "A webhook's secret cannot change; create a new webhook and disable this one.")
		}
		wh, err := admin.Update(r.Context(), id, relay.WebhookChange{URL: b.URL, Enabled: b.Enabled})
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"webhook": wh})
		return nil
	})
}

// deadLetterParams are the query parameters of GET …/dead-letters.
var deadLetterParams = []string{"all"}

// handleDeadLetters lists an endpoint's dead letters (admin): the open ones, or with ?all=true
// the replayed ones too.
func handleDeadLetters(log *slog.Logger, admin *relay.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := webhookID(r)
		if err != nil {
			return err
		}
		q := r.URL.Query()
		if err := checkQuery(q, deadLetterParams, "the dead letters"); err != nil {
			return err
		}
		all := false
		if raw := q.Get("all"); raw != "" {
			if all, err = strconv.ParseBool(raw); err != nil {
				return fx.Errorf(fx.EINVALID, "all must be true or false.")
			}
		}
		ds, err := admin.DeadLetters(r.Context(), id, all)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"deadLetters": ds})
		return nil
	})
}

// handleReplayDeadLetter posts a dead letter's event to its endpoint once more (admin, no body)
// and marks it replayed when the endpoint accepts it; otherwise 503 says what the endpoint
// answered and nothing changes.
func handleReplayDeadLetter(log *slog.Logger, admin *relay.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := webhookID(r)
		if err != nil {
			return err
		}
		eventID, err := strconv.ParseInt(chi.URLParam(r, "eventId"), 10, 64)
		if err != nil || eventID < 1 {
			return fx.Errorf(fx.ENOTFOUND, "No event %q.", chi.URLParam(r, "eventId"))
		}
		if err := decodeStrict(r.Body, &struct{}{}, true); err != nil {
			return err
		}
		d, err := admin.Replay(r.Context(), id, eventID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"deadLetter": d})
		return nil
	})
}

func webhookID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		return 0, fx.Errorf(fx.ENOTFOUND, "No webhook %q.", chi.URLParam(r, "id"))
	}
	return id, nil
}
