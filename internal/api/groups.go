package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// The dealer's account groups, account moves and account states (admin).

// accountGroupWire is the body of POST /account-groups (name required) and of PUT or PATCH
// /account-groups/{name} (name refused: a group is not renamed). Every other field is optional;
// maxPendingOrders null gives the cap back to the desk setting, so it is read raw.
type accountGroupWire struct {
	Name                      *string         `json:"name"`
	LeverageMax               *int            `json:"leverageMax"`
	MarginCallLevel           *string         `json:"marginCallLevel"`
	StopOutLevel              *string         `json:"stopOutLevel"`
	ExecutionMode             *string         `json:"executionMode"`
	SwapFreeDefault           *bool           `json:"swapFreeDefault"`
	NegativeBalanceProtection *bool           `json:"negativeBalanceProtection"`
	MaxPendingOrders          json.RawMessage `json:"maxPendingOrders"`
	PositionMode              *string         `json:"positionMode"`
}

// levelPlaces is the decimals fx_account_group's levels keep (DECIMAL(7,2)).
const levelPlaces = 2

// decodeAccountGroup reads a group body into its name (POST) and its terms. The terms' ranges
// are the catalog's checks, made on the group as it will be written.
func decodeAccountGroup(r io.Reader, create bool) (string, catalog.AccountGroupPatch, error) {
	var w accountGroupWire
	var p catalog.AccountGroupPatch
	if err := decodeStrict(r, &w, false); err != nil {
		return "", p, err
	}
	name := ""
	switch {
	case create && w.Name == nil:
		return "", p, fx.Errorf(fx.EINVALID, "name (the group's name, such as \"retail-eu\") is required.")
	case create:
		name = *w.Name
	case w.Name != nil:
		return "", p, fx.Errorf(fx.EINVALID, "name is the path's: an account group cannot be renamed.")
	}
	var err error
	p.LeverageMax, p.SwapFreeDefault, p.NegativeBalanceProtection = w.LeverageMax, w.SwapFreeDefault, w.NegativeBalanceProtection
	if p.MarginCallLevel, err = optDecimal("marginCallLevel", w.MarginCallLevel, levelPlaces); err != nil {
		return "", p, err
	}
	if p.StopOutLevel, err = optDecimal("stopOutLevel", w.StopOutLevel, levelPlaces); err != nil {
		return "", p, err
	}
	if w.ExecutionMode != nil {
		// Any case, as this route always took it.
		m := fx.ExecutionMode(strings.ToUpper(*w.ExecutionMode))
		if m != fx.Internal && m != fx.External {
			return "", p, fx.Errorf(fx.EINVALID, "executionMode must be INTERNAL (the desk fills) or EXTERNAL (the venue fills), not %q.", *w.ExecutionMode)
		}
		p.Execution = &m
	}
	if w.MaxPendingOrders != nil {
		p.SetMaxPendingOrders = true
		if !bytes.Equal(w.MaxPendingOrders, []byte("null")) {
			var n int
			if err := json.Unmarshal(w.MaxPendingOrders, &n); err != nil {
				return "", p, fx.Errorf(fx.EINVALID, "maxPendingOrders must be a whole number such as 42, or null for the desk setting %s.", catalog.SettingMaxPendingOrders)
			}
			p.MaxPendingOrders = &n
		}
	}
	if p.PositionMode, err = decodePositionMode(w.PositionMode); err != nil {
		return "", p, err
	}
	if !create && p == (catalog.AccountGroupPatch{}) {
		return "", p, fx.Errorf(fx.EINVALID, "Nothing to change: send one or more of leverageMax, marginCallLevel, stopOutLevel, executionMode, swapFreeDefault, negativeBalanceProtection, maxPendingOrders, positionMode.")
	}
	return name, p, nil
}

// handleAccountGroup shows one account group (admin).
func handleAccountGroup(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		g, err := svc.AccountGroup(r.Context(), chi.URLParam(r, "name"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"accountGroup": viewAccountGroup(g)})
		return nil
	})
}

// handleCreateAccountGroup creates an account group (admin).
func handleCreateAccountGroup(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		name, p, err := decodeAccountGroup(r.Body, true)
		if err != nil {
			return err
		}
		g, err := svc.CreateAccountGroup(r.Context(), name, p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, map[string]any{"accountGroup": viewAccountGroup(g)})
		return nil
	})
}

// handleUpdateAccountGroup changes some terms of an account group, its execution mode among
// them (admin); PUT and PATCH alike change only the fields sent.
func handleUpdateAccountGroup(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		_, p, err := decodeAccountGroup(r.Body, false)
		if err != nil {
			return err
		}
		g, err := svc.UpdateAccountGroup(r.Context(), chi.URLParam(r, "name"), p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"accountGroup": viewAccountGroup(g)})
		return nil
	})
}

// handleDeleteAccountGroup deletes an empty account group (admin).
func handleDeleteAccountGroup(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		g, err := svc.DeleteAccountGroup(r.Context(), chi.URLParam(r, "name"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"accountGroup": viewAccountGroup(g), "deleted": true})
		return nil
	})
}

// handleMoveAccount puts an account in another account group (admin): {"group": name}.
func handleMoveAccount(log *slog.Logger, admin *catalog.Admin, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		var body struct {
			Group *string `json:"group"`
		}
		if err := decodeStrict(r.Body, &body, false); err != nil {
			return err
		}
		if body.Group == nil || *body.Group == "" {
			return fx.Errorf(fx.EINVALID, "group (the account group's name) is required.")
		}
		if err := admin.MoveAccount(r.Context(), id, *body.Group); err != nil {
			return err
		}
		return writeAdminAccount(log, w, r, svc, id)
	})
}

// handleSetAccountState sets an account's state (admin): {"state": …, "reason": …}.
func handleSetAccountState(log *slog.Logger, admin *catalog.Admin, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		var body struct {
			State  *string `json:"state"`
			Reason string  `json:"reason"`
		}
		if err := decodeStrict(r.Body, &body, false); err != nil {
			return err
		}
		if body.State == nil {
			return fx.Errorf(fx.EINVALID, "state (ACTIVE, CLOSE_ONLY or DISABLED) is required.")
		}
		if err := admin.SetAccountState(r.Context(), id, fx.AccountState(*body.State), body.Reason); err != nil {
			return err
		}
		return writeAdminAccount(log, w, r, svc, id)
	})
}

// writeAdminAccount answers an admin change of account id, already committed, with the account as
// it is now. A read-back that fails (the database went away just after the commit) must not answer
// an error that says nothing was done: the change was made and audited, so the answer is 200 with
// the account left out and a note to read it again (the soak's auditTrail found a 503 whose change
// was in the audit log).
func writeAdminAccount(log *slog.Logger, w http.ResponseWriter, r *http.Request, svc *trading.Service, id int64) error {
	v, err := svc.Accounts().View(r.Context(), 0, id)
	if err != nil {
		log.WarnContext(r.Context(), "admin change made; the account could not be read back", slog.Int64("account_id", id), slog.Any("err", err))
		writeJSON(w, http.StatusOK, map[string]any{"applied": true, "account": nil,
			"note": fmt.Sprintf("The change was made, but the account could not be read back: GET /api/admin/fx/accounts/%d shows it.", id)})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"account": viewAccount(v)})
	return nil
}
