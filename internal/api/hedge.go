package api

import (
	"log/slog"
	"net/http"

	"fxdesk/internal/hedge"
)

// hedgeBookView is GET /api/admin/fx/hedge-book: the desk's own positions at the venue
// (docs/routing.md, «Hedge book»), read from the database on any process.
type hedgeBookView struct {
	// Positions are the open hedge positions, by id.
	Positions []hedge.Position `json:"positions"`
	// Sending are the hedge orders whose outcome is unknown until the reconciler resolves them.
	Sending []hedge.Order `json:"sending"`
	// Net is the hedge book's signed venue units per symbol as the hedger reads it: the open
	// positions plus the orders SENDING.
	Net map[string]string `json:"net"`
}

func handleHedgeBook(log *slog.Logger, b HedgeBookView) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := hedgeBookView{Positions: []hedge.Position{}, Sending: []hedge.Order{}, Net: map[string]string{}}
		if b != nil {
			ctx := r.Context()
			ps, err := b.OpenPositions(ctx)
			if err != nil {
				writeError(ctx, log, w, err)
				return
			}
			os, err := b.SendingOrders(ctx)
			if err != nil {
				writeError(ctx, log, w, err)
				return
			}
			net, err := b.Net(ctx)
			if err != nil {
				writeError(ctx, log, w, err)
				return
			}
			v.Positions, v.Sending = append(v.Positions, ps...), append(v.Sending, os...)
			for sym, u := range net {
				v.Net[sym] = u.String()
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"hedgeBook": v})
	}
}
