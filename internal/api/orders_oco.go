package api

import (
	"io"
	"log/slog"
	"net/http"

	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
	"fxdesk/internal/trading"
)

// ocoWire is POST /api/fx/orders/oco: one account, one requestNonce, two resting legs.
type ocoWire struct {
	AccountID    *int64       `json:"accountId"`
	RequestNonce string       `json:"requestNonce"`
	Legs         []ocoLegWire `json:"legs"`
}

// ocoLegWire is one leg: an order without the account and nonce the pair carries.
type ocoLegWire struct {
	Symbol      string  `json:"symbol"`
	Side        string  `json:"side"`
	Type        string  `json:"type"`
	Volume      *string `json:"volume"`
	Price       *string `json:"price"`
	LimitPrice  *string `json:"limitPrice"`
	SL          *string `json:"sl"`
	TP          *string `json:"tp"`
	TimeInForce string  `json:"timeInForce"`
	ExpiresAt   *string `json:"expiresAt"`
}

// decodeOCO reads POST /api/fx/orders/oco. Which types a leg may be, and every rule that needs
// the instrument, are the trading service's.
func decodeOCO(r io.Reader) (trading.OCORequest, error) {
	var w ocoWire
	if err := decodeStrict(r, &w, false); err != nil {
		return trading.OCORequest{}, err
	}
	var o trading.OCORequest
	if w.AccountID == nil || *w.AccountID <= 0 {
		return o, fx.Errorf(fx.EINVALID, "accountId is required.")
	}
	o.AccountID = *w.AccountID
	if len(w.Legs) != 2 {
		return o, fx.Errorf(fx.EINVALID, "legs must hold exactly two orders (an OCO pair).")
	}
	for i, l := range w.Legs {
		leg, err := orderOfWire(orderWire{Symbol: l.Symbol, Side: l.Side, Type: l.Type, Volume: l.Volume, Price: l.Price, LimitPrice: l.LimitPrice,
			SL: l.SL, TP: l.TP, TimeInForce: l.TimeInForce, ExpiresAt: l.ExpiresAt}, trading.OrderRequest{AccountID: o.AccountID})
		if err != nil {
			return o, fx.Errorf(fx.EINVALID, "legs[%d]: %s", i, fx.ErrorMessage(err))
		}
		o.Legs[i] = leg
	}
	if err := checkNonce(w.RequestNonce); err != nil {
		return o, err
	}
	o.RequestNonce = w.RequestNonce
	return o, nil
}

// handlePlaceOCO places an OCO pair (docs/orders.md «OCO pairs»).
func handlePlaceOCO(log *slog.Logger, svc *trading.Service, m *metrics.Metrics) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		req, err := decodeOCO(r.Body)
		if err == nil {
			var res trading.OCOResult
			if res, err = svc.PlaceOCO(r.Context(), principal(r.Context()).UserID, req); err == nil {
				result := "resting"
				if res.Replayed {
					result = "replayed"
				}
				m.Orders.WithLabelValues(result).Add(2)
				writeJSON(w, createdOr(res.Replayed), map[string]any{"orders": []orderView{viewOrder(res.Orders[0]), viewOrder(res.Orders[1])}, "replayed": res.Replayed})
				return nil
			}
		}
		m.Orders.WithLabelValues(resultOf(r.Context(), err)).Inc()
		return err
	})
}
