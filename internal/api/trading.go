package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/auth"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/metrics"
	"fxdesk/internal/trading"
)

// pathID reads the {id} path parameter: a positive integer, or ENOTFOUND (there is no such id).
func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fx.Errorf(fx.ENOTFOUND, "Not found: %q is not an id.", chi.URLParam(r, "id"))
	}
	return id, nil
}

// listQuery reads the optional accountId, status, before and limit query parameters of the
// trader's lists (deals, positions, orders) into the page they ask for. status comes back in its
// canonical spelling, whatever case the caller used; limit is 1 or more, and a page holds at most
// trading.ListLimit entries, trading.DefaultListLimit without one. The answer's nextBefore
// (nextBefore) is the next page's before.
func listQuery(r *http.Request, statuses ...string) (book.ListFilter, error) {
	var f book.ListFilter
	q := r.URL.Query()
	if v := q.Get("accountId"); v != "" {
		var err error
		if f.AccountID, err = strconv.ParseInt(v, 10, 64); err != nil || f.AccountID <= 0 {
			return f, fx.Errorf(fx.EINVALID, "accountId must be a positive whole number.")
		}
	}
	f.Limit = trading.DefaultListLimit
	if v := q.Get("limit"); v != "" {
		var err error
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit <= 0 {
			return f, fx.Errorf(fx.EINVALID, "limit must be a positive whole number.")
		}
	}
	f.Limit = trading.ListLimit(f.Limit)
	var err error
	if f.Before, err = wholeParam("before", q.Get("before"), q.Has("before"), 1); err != nil {
		return f, err
	}
	// Any case is accepted (status=closed); the canonical spelling is what the answer carries.
	if raw := q.Get("status"); raw != "" {
		if len(statuses) == 0 {
			return f, fx.Errorf(fx.EINVALID, "This list has no status filter.")
		}
		for _, s := range statuses {
			if strings.EqualFold(s, strings.TrimSpace(raw)) {
				f.Status = s
			}
		}
		if f.Status == "" {
			return f, fx.Errorf(fx.EINVALID, "status must be one of %s (any case).", strings.Join(statuses, ", "))
		}
	}
	return f, nil
}

// handleCreateAccount creates a trading account for the caller.
func handleCreateAccount(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		ccy, lev, err := decodeAccount(r.Body)
		if err != nil {
			return err
		}
		a, err := svc.Accounts().Open(r.Context(), principal(r.Context()).UserID, ccy, lev)
		if err != nil {
			return err
		}
		vs, err := svc.Accounts().Views(r.Context(), []book.Account{a})
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, map[string]any{"account": viewAccount(vs[0])})
		return nil
	})
}

// handleAccounts lists the caller's accounts, each marked as the single read marks one.
func handleAccounts(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		as, err := svc.Accounts().List(r.Context(), principal(r.Context()).UserID, 0)
		if err != nil {
			return err
		}
		vs, err := svc.Accounts().Views(r.Context(), as)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"accounts": mapSlice(vs, viewAccount)})
		return nil
	})
}

// handleAccount shows one of the caller's accounts with live equity and margin.
func handleAccount(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		v, err := svc.Accounts().View(r.Context(), principal(r.Context()).UserID, id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"account": viewAccount(v)})
		return nil
	})
}

// handleWithdraw withdraws from one of the caller's accounts; a repeated nonce replays.
func handleWithdraw(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		amount, nonce, err := decodeAmount(r.Body)
		if err != nil {
			return err
		}
		d, replayed, err := svc.Accounts().Withdraw(r.Context(), principal(r.Context()).UserID, id, amount, nonce)
		if err != nil {
			return err
		}
		writeJSON(w, createdOr(replayed), map[string]any{"deal": viewDeal(d), "replayed": replayed})
		return nil
	})
}

// handlePlaceOrder places a market or pending order; a repeated nonce replays.
func handlePlaceOrder(log *slog.Logger, svc *trading.Service, m *metrics.Metrics) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		req, err := decodeOrder(r.Body)
		if err != nil {
			m.Orders.WithLabelValues(resultOf(r.Context(), err)).Inc()
			return err
		}
		res, err := svc.PlaceOrder(r.Context(), principal(r.Context()).UserID, req)
		if err != nil {
			m.Orders.WithLabelValues(resultOf(r.Context(), err)).Inc()
			return err
		}
		switch {
		case res.Replayed:
			m.Orders.WithLabelValues("replayed").Inc()
		case res.Position != nil:
			m.Orders.WithLabelValues("filled").Inc()
		default:
			m.Orders.WithLabelValues("resting").Inc()
		}
		body := map[string]any{"order": viewOrder(res.Order), "replayed": res.Replayed}
		if res.Position != nil {
			body["position"] = viewPosition(*res.Position)
		}
		if res.Commission != nil {
			body["commission"] = viewDeal(*res.Commission)
		}
		writeJSON(w, createdOr(res.Replayed), body)
		return nil
	})
}

// handleOrders lists the caller's orders.
func handleOrders(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		f, err := listQuery(r, fx.OrderPending, fx.OrderFilled, fx.OrderCancelled, fx.OrderExpired, fx.OrderRejected, fx.OrderSending, fx.OrderNotSent)
		if err != nil {
			return err
		}
		os, err := svc.Orders(r.Context(), principal(r.Context()).UserID, f)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"orders": mapSlice(os, viewOrder),
			"nextBefore": nextBefore(os, f.Limit, func(o book.Order) int64 { return o.ID })})
		return nil
	})
}

// handleCancelOrder cancels one of the caller's pending orders.
func handleCancelOrder(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		o, err := svc.CancelOrder(r.Context(), principal(r.Context()).UserID, id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"order": viewOrder(o)})
		return nil
	})
}

// handlePositions lists the caller's positions.
func handlePositions(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		f, err := listQuery(r, fx.PositionOpen, fx.PositionClosed)
		if err != nil {
			return err
		}
		ps, err := svc.Positions(r.Context(), principal(r.Context()).UserID, f)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"positions": mapSlice(ps, viewPosition),
			"nextBefore": nextBefore(ps, f.Limit, func(p book.Position) int64 { return p.ID })})
		return nil
	})
}

// handleModifyPosition changes the stop loss and take profit of one of the caller's positions.
func handleModifyPosition(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		sl, tp, trail, err := decodeModifyTrail(r.Body)
		if err != nil {
			return err
		}
		p, err := svc.ModifyPositionTrail(r.Context(), principal(r.Context()).UserID, id, sl, tp, trail)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"position": viewPosition(p)})
		return nil
	})
}

// handleClosePosition closes all or part of one of the caller's positions.
func handleClosePosition(log *slog.Logger, svc *trading.Service, m *metrics.Metrics) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		vol, err := decodeClose(r.Body)
		if err != nil {
			return err
		}
		res, err := svc.ClosePosition(r.Context(), principal(r.Context()).UserID, id, vol, fx.CloseClient)
		if err != nil {
			m.Closes.WithLabelValues(string(fx.CloseClient), resultOf(r.Context(), err)).Inc()
			return err
		}
		m.Closes.WithLabelValues(string(fx.CloseClient), "closed").Inc()
		writeJSON(w, http.StatusOK, map[string]any{"position": viewPosition(res.Position), "deal": viewDeal(res.Deal)})
		return nil
	})
}

// handleDealerClose closes all or part of any trader's position on their behalf (admin): reason
// DEALER, recorded in the audit log with the admin in the close's own transaction.
func handleDealerClose(log *slog.Logger, svc *trading.Service, m *metrics.Metrics) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		vol, err := decodeClose(r.Body)
		if err != nil {
			return err
		}
		res, err := svc.Dealer().ClosePosition(r.Context(), id, vol)
		if err != nil {
			m.Closes.WithLabelValues(string(fx.CloseDealer), resultOf(r.Context(), err)).Inc()
			return err
		}
		m.Closes.WithLabelValues(string(fx.CloseDealer), "closed").Inc()
		body := map[string]any{"position": viewPosition(res.Position), "deal": viewDeal(res.Deal)}
		if res.Adjustment != nil {
			body["adjustment"] = viewDeal(*res.Adjustment)
		}
		writeJSON(w, http.StatusOK, body)
		return nil
	})
}

// handleDealerCancel cancels any trader's pending order on their behalf (admin), recorded in the
// audit log with the admin. The body is empty or {}.
func handleDealerCancel(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		if err := decodeNothing(r.Body); err != nil {
			return err
		}
		o, err := svc.Dealer().CancelOrder(r.Context(), id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"order": viewOrder(o)})
		return nil
	})
}

// handleDeals lists the caller's deals.
func handleDeals(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		f, err := listQuery(r)
		if err != nil {
			return err
		}
		ds, err := svc.Accounts().Deals(r.Context(), principal(r.Context()).UserID, f)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"deals": mapSlice(ds, viewDeal),
			"nextBefore": nextBefore(ds, f.Limit, func(d book.Deal) int64 { return d.ID })})
		return nil
	})
}

// handleAdminAccounts lists a page of every user's accounts, newest first (admin): before and
// limit as the trader's lists take them, and nextBefore the next page's before.
func handleAdminAccounts(log *slog.Logger, svc *trading.Service) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		f, err := listQuery(r)
		if err != nil {
			return err
		}
		if f.AccountID != 0 {
			return fx.Errorf(fx.EINVALID, "accountId is not a filter of this list: GET /api/admin/fx/accounts/{id}/profile reads one account.")
		}
		as, err := svc.Accounts().Page(r.Context(), f.Before, f.Limit)
		if err != nil {
			return err
		}
		ids := make([]int64, 0, len(as))
		for _, a := range as {
			ids = append(ids, a.ID)
		}
		profiles, err := svc.Accounts().Profiles(r.Context(), ids)
		if err != nil {
			return err
		}
		vs, err := svc.Accounts().Views(r.Context(), as)
		if err != nil {
			return err
		}
		// The dealer's list shows each account's trader profile beside it.
		writeJSON(w, http.StatusOK, map[string]any{"accounts": mapSlice(vs, func(v trading.AccountView) adminAccountView {
			return adminAccountView{accountView: viewAccount(v), Profile: viewProfile(v.ID, v.Currency, profiles[v.ID])}
		}), "nextBefore": nextBefore(as, f.Limit, func(a book.Account) int64 { return a.ID })})
		return nil
	})
}

// handleSettings shows every desk setting (admin).
func handleSettings(log *slog.Logger, settings *catalog.Settings) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		all, err := settings.All(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"settings": all})
		return nil
	})
}

// handlePutSettings changes desk settings (admin).
func handlePutSettings(log *slog.Logger, settings *catalog.Settings) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		changes, err := decodeSettings(r.Body)
		if err != nil {
			return err
		}
		p := principal(r.Context())
		for name := range changes {
			if perm := settingPermission(name); !p.Can(perm) {
				return fx.Errorf(fx.EFORBIDDEN, "Setting %s needs the %s permission, which the %s role does not hold; nothing was changed.", name, perm, p.Role)
			}
		}
		all, err := settings.Put(r.Context(), changes)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"settings": all})
		return nil
	})
}

// settingPermission is the permission a change of the named setting needs: the hedger's
// settings are the dealer's, the four-eyes threshold the superadmin's (whoever moves client
// money must not be able to lift it), the rest the risk desk's (docs/identity.md, «Roles»).
func settingPermission(name string) auth.Permission {
	if name == catalog.SettingFourEyesAbove {
		return auth.PermTokens
	}
	if name == catalog.SettingHedgeBand || name == catalog.SettingHedgeMin || strings.HasPrefix(name, catalog.SettingHedgeLimitPrefix) {
		return auth.PermHedge
	}
	return auth.PermLimits
}

// handleInstruments lists the tradable instruments (admin).
func handleInstruments(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		ins, err := svc.Instruments(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"instruments": mapSlice(ins, viewInstrument)})
		return nil
	})
}

// handlePutInstruments changes instrument parameters (admin).
func handlePutInstruments(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		patches, err := decodeInstruments(r.Body)
		if err != nil {
			return err
		}
		ins, err := svc.PutInstruments(r.Context(), patches)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"instruments": mapSlice(ins, viewInstrument)})
		return nil
	})
}

func createdOr(replayed bool) int {
	if replayed {
		return http.StatusOK
	}
	return http.StatusCreated
}

// handleAccountGroups lists the account groups and how each routes its orders (admin).
func handleAccountGroups(log *slog.Logger, svc *catalog.Admin) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		gs, err := svc.AccountGroups(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"accountGroups": mapSlice(gs, viewAccountGroup)})
		return nil
	})
}
