package api

import (
	"io"
	"log/slog"
	"net/http"

	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// Close-by (docs/orders.md, «Close-by»): POST /api/fx/positions/{id}/close-by.

// closeByWire is the body of a close-by.
type closeByWire struct {
	OppositeID   *int64 `json:"oppositeId"`
	RequestNonce string `json:"requestNonce"`
}

// decodeCloseBy reads a close-by body: the opposite position (required) and an optional
// requestNonce.
func decodeCloseBy(r io.Reader) (int64, string, error) {
	var w closeByWire
	if err := decodeStrict(r, &w, false); err != nil {
		return 0, "", err
	}
	if w.OppositeID == nil || *w.OppositeID <= 0 {
		return 0, "", fx.Errorf(fx.EINVALID, "oppositeId (the id of the opposite position to close against) is required.")
	}
	if err := checkNonce(w.RequestNonce); err != nil {
		return 0, "", err
	}
	return *w.OppositeID, w.RequestNonce, nil
}

// handleCloseBy closes a trader's position against an opposite one of the same account.
func handleCloseBy(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		opp, nonce, err := decodeCloseBy(r.Body)
		if err != nil {
			return err
		}
		res, err := svc.CloseBy(r.Context(), principal(r.Context()).UserID, id, opp, nonce)
		if err != nil {
			return err
		}
		deals := make([]dealView, 0, len(res.Deals))
		for _, d := range res.Deals {
			deals = append(deals, viewDeal(d))
		}
		writeJSON(w, http.StatusOK, map[string]any{"position": viewPosition(res.Position), "opposite": viewPosition(res.Opposite), "deals": deals,
			"replayed": res.Replayed})
		return nil
	})
}
