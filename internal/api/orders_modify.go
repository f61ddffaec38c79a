package api

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// orderModifyWire is the body of PATCH /api/fx/orders/{id} and its dealer's twin
// (docs/orders.md, «Modify a resting order»).
type orderModifyWire struct {
	Price       *string `json:"price"`
	LimitPrice  *string `json:"limitPrice"`
	Volume      *string `json:"volume"`
	SL          *string `json:"sl"`
	TP          *string `json:"tp"`
	TimeInForce string  `json:"timeInForce"`
	ExpiresAt   *string `json:"expiresAt"`
	// RequestNonce is accepted, checked and not stored: a modify sets values, so a retry is
	// naturally idempotent (the second finds nothing to change and changes nothing).
	RequestNonce string `json:"requestNonce"`
}

// decodeOrderModify reads a modify of a resting order: a field left out (or null) stays; "" on
// sl or tp removes it. Rules that need the order or its instrument are the trading service's.
func decodeOrderModify(r io.Reader) (trading.OrderChange, error) {
	var w orderModifyWire
	var c trading.OrderChange
	if err := decodeStrict(r, &w, false); err != nil {
		return c, err
	}
	var err error
	if c.Price, err = positiveDecimal("price", w.Price, pricePlaces); err != nil {
		return c, err
	}
	if c.LimitPrice, err = positiveDecimal("limitPrice", w.LimitPrice, pricePlaces); err != nil {
		return c, err
	}
	if c.Volume, err = positiveDecimal("volume", w.Volume, volumePlaces); err != nil {
		return c, err
	}
	if c.SL, err = stopChange("sl", w.SL); err != nil {
		return c, err
	}
	if c.TP, err = stopChange("tp", w.TP); err != nil {
		return c, err
	}
	switch fx.TimeInForce(w.TimeInForce) {
	case "", fx.GTC, fx.GTD, fx.DAY:
		c.TimeInForce = fx.TimeInForce(w.TimeInForce)
	default:
		return c, fx.Errorf(fx.EINVALID, "timeInForce of a resting order must be GTC, GTD or DAY.")
	}
	if w.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *w.ExpiresAt)
		if err != nil {
			return c, fx.Errorf(fx.EINVALID, "expiresAt must be an RFC 3339 time such as 2026-01-02T15:04:05Z.")
		}
		c.ExpiresAt = &t
	}
	return c, checkNonce(w.RequestNonce)
}

// handleModifyOrder modifies one of the caller's resting orders in place.
func handleModifyOrder(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		c, err := decodeOrderModify(r.Body)
		if err != nil {
			return err
		}
		o, err := svc.ModifyOrder(r.Context(), principal(r.Context()).UserID, id, c)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"order": viewOrder(o)})
		return nil
	})
}

// handleDealerModifyOrder modifies any trader's resting order on their behalf (admin), recorded
// in the audit log with the admin in the modify's own transaction.
func handleDealerModifyOrder(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		c, err := decodeOrderModify(r.Body)
		if err != nil {
			return err
		}
		o, err := svc.Dealer().ModifyOrder(r.Context(), id, c)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"order": viewOrder(o)})
		return nil
	})
}

// positiveDecimal is optDecimal for a value that must be positive.
func positiveDecimal(field string, s *string, places int) (*decimal.Decimal, error) {
	d, err := optDecimal(field, s, places)
	if err == nil && d != nil && !d.IsPositive() {
		return nil, fx.Errorf(fx.EINVALID, "%s must be positive.", field)
	}
	return d, err
}

// stopChange reads sl or tp of a modify: absent or null keeps it, "" removes it.
func stopChange(field string, s *string) (trading.StopChange, error) {
	if s == nil {
		return trading.StopChange{}, nil
	}
	if *s == "" {
		return trading.StopChange{Set: true}, nil
	}
	d, err := positiveDecimal(field, s, pricePlaces)
	if err != nil {
		return trading.StopChange{}, err
	}
	return trading.StopChange{Set: true, Value: d}, nil
}
