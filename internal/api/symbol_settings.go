package api

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
)

// The dealer's symbol settings: symbol groups, the account groups' overrides, and an account's
// effective terms for support staff.

type symbolGroupWire struct {
	MarkupPoints       *string `json:"markupPoints"`
	CommissionPerLot   *string `json:"commissionPerLot"`
	CommissionCurrency *string `json:"commissionCurrency"`
	HedgedMarginRate   *string `json:"hedgedMarginRate"`
}

// decodeSymbolGroup reads PUT /api/admin/fx/symbol-groups/{name}.
func decodeSymbolGroup(r io.Reader, name string) (catalog.SymbolGroupPatch, error) {
	var w symbolGroupWire
	if err := decodeStrict(r, &w, false); err != nil {
		return catalog.SymbolGroupPatch{}, err
	}
	p := catalog.SymbolGroupPatch{Name: name, CommissionCurrency: w.CommissionCurrency}
	var err error
	if p.MarkupPoints, err = optDecimal("markupPoints", w.MarkupPoints, volumePlaces); err != nil {
		return p, err
	}
	if p.CommissionPerLot, err = optDecimal("commissionPerLot", w.CommissionPerLot, volumePlaces); err != nil {
		return p, err
	}
	if p.HedgedMarginRate, err = optDecimal("hedgedMarginRate", w.HedgedMarginRate, volumePlaces); err != nil {
		return p, err
	}
	return p, nil
}

type overrideWire struct {
	MarkupPoints       *string `json:"markupPoints"`
	CommissionPerLot   *string `json:"commissionPerLot"`
	CommissionCurrency *string `json:"commissionCurrency"`
	SwapLong           *string `json:"swapLong"`
	SwapShort          *string `json:"swapShort"`
	LeverageMax        *int    `json:"leverageMax"`
	VolumeMin          *string `json:"volumeMin"`
	VolumeMax          *string `json:"volumeMax"`
	TradeMode          *string `json:"tradeMode"`
}

// decodeOverride reads PUT …/overrides/symbols/{symbol} or …/overrides/symbol-groups/{group}:
// the whole override, an absent term not overridden.
func decodeOverride(r io.Reader, o catalog.Override) (catalog.Override, error) {
	var w overrideWire
	if err := decodeStrict(r, &w, false); err != nil {
		return o, err
	}
	o.CommissionCurrency, o.LeverageMax = w.CommissionCurrency, w.LeverageMax
	if w.TradeMode != nil {
		m := catalog.TradeMode(*w.TradeMode)
		o.TradeMode = &m
	}
	for _, f := range []struct {
		name string
		in   *string
		out  **decimal.Decimal
	}{
		{"markupPoints", w.MarkupPoints, &o.MarkupPoints}, {"commissionPerLot", w.CommissionPerLot, &o.CommissionPerLot},
		{"swapLong", w.SwapLong, &o.SwapLong}, {"swapShort", w.SwapShort, &o.SwapShort},
		{"volumeMin", w.VolumeMin, &o.VolumeMin}, {"volumeMax", w.VolumeMax, &o.VolumeMax},
	} {
		d, err := optDecimal(f.name, f.in, volumePlaces)
		if err != nil {
			return o, err
		}
		*f.out = d
	}
	if o.TradeMode == nil && o.MarkupPoints == nil && o.CommissionPerLot == nil && o.CommissionCurrency == nil && o.SwapLong == nil &&
		o.SwapShort == nil && o.LeverageMax == nil && o.VolumeMin == nil && o.VolumeMax == nil {
		return o, fx.Errorf(fx.EINVALID, "An override sets at least one term (markupPoints, commissionPerLot, swapLong, swapShort, leverageMax, volumeMin, volumeMax, tradeMode); DELETE removes one.")
	}
	return o, nil
}

func handleSymbolGroups(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		gs, err := svc.SymbolGroups(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"symbolGroups": gs})
		return nil
	})
}

// handlePutSymbolGroup creates or changes a symbol group (201 when created).
func handlePutSymbolGroup(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		p, err := decodeSymbolGroup(r.Body, chi.URLParam(r, "name"))
		if err != nil {
			return err
		}
		g, created, err := svc.PutSymbolGroup(r.Context(), p)
		if err != nil {
			return err
		}
		writeJSON(w, createdOr(!created), map[string]any{"symbolGroup": g})
		return nil
	})
}

func handleDeleteSymbolGroup(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		if err := svc.DeleteSymbolGroup(r.Context(), chi.URLParam(r, "name")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func handleOverrides(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		os, err := svc.Overrides(r.Context(), chi.URLParam(r, "name"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"overrides": os})
		return nil
	})
}

// overrideTarget is the override a route names: on a symbol (param "symbol") or a symbol
// group (param "group").
func overrideTarget(r *http.Request) catalog.Override {
	return catalog.Override{AccountGroup: chi.URLParam(r, "name"), Symbol: chi.URLParam(r, "symbol"), SymbolGroup: chi.URLParam(r, "group")}
}

// handlePutOverride sets an override whole (201 when created).
func handlePutOverride(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		o, err := decodeOverride(r.Body, overrideTarget(r))
		if err != nil {
			return err
		}
		o, created, err := svc.PutOverride(r.Context(), o)
		if err != nil {
			return err
		}
		writeJSON(w, createdOr(!created), map[string]any{"override": o})
		return nil
	})
}

func handleDeleteOverride(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		o := overrideTarget(r)
		if err := svc.DeleteOverride(r.Context(), o.AccountGroup, o.Symbol, o.SymbolGroup); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// effectiveView is one symbol's effective terms for an account, and where each came from.
type effectiveView struct {
	Symbol             string              `json:"symbol"`
	SymbolGroup        string              `json:"symbolGroup"`
	MarkupPoints       string              `json:"markupPoints"`
	CommissionPerLot   string              `json:"commissionPerLot"`
	CommissionCurrency string              `json:"commissionCurrency"`
	SwapLong           string              `json:"swapLong"`
	SwapShort          string              `json:"swapShort"`
	LeverageMax        int                 `json:"leverageMax"`
	VolumeMin          string              `json:"volumeMin"`
	VolumeMax          string              `json:"volumeMax"`
	TradeMode          catalog.TradeMode   `json:"tradeMode"`
	HedgedMarginRate   string              `json:"hedgedMarginRate"`
	From               map[string]string   `json:"from"`
	InstrumentStatus   fx.InstrumentStatus `json:"instrumentStatus"`
}

func viewEffective(t catalog.Terms) effectiveView {
	f := t.From
	return effectiveView{Symbol: t.Symbol, SymbolGroup: t.SymbolGroup, MarkupPoints: t.Group.MarkupPoints.String(),
		CommissionPerLot: t.Group.CommissionPerLot.String(), CommissionCurrency: t.Group.CommissionCurrency,
		SwapLong: t.SwapLong.String(), SwapShort: t.SwapShort.String(), LeverageMax: t.LeverageMax,
		VolumeMin: t.VolumeMin.String(), VolumeMax: t.VolumeMax.String(), TradeMode: t.TradeMode,
		HedgedMarginRate: t.Group.HedgedMarginRate.String(), InstrumentStatus: t.Status,
		From: map[string]string{"markupPoints": f.Markup, "commissionPerLot": f.Commission, "swapLong": f.SwapLong, "swapShort": f.SwapShort,
			"leverageMax": f.LeverageMax, "volumeMin": f.VolumeMin, "volumeMax": f.VolumeMax, "tradeMode": f.TradeMode}}
}

// handleEffective answers an account's effective terms on ?symbol=, or on every instrument.
func handleEffective(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			return fx.Errorf(fx.ENOTFOUND, "Account %q not found.", chi.URLParam(r, "id"))
		}
		symbol := r.URL.Query().Get("symbol")
		if symbol != "" {
			if err := checkSymbol(symbol); err != nil {
				return err
			}
		}
		at, err := svc.EffectiveFor(r.Context(), id, symbol)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"accountId": at.AccountID, "accountGroup": at.AccountGroup, "terms": mapSlice(at.Terms, viewEffective)})
		return nil
	})
}
