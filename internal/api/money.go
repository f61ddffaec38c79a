package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// The finance desk's routes: deposits and withdrawals by desk staff on any account, and the
// money requests four eyes leave pending above the threshold (docs/identity.md, «Four eyes on
// client money»).

// moneyRequestView is a money request as the API shows it.
type moneyRequestView struct {
	ID             int64      `json:"id"`
	AccountID      int64      `json:"accountId"`
	Kind           string     `json:"kind"`
	Amount         string     `json:"amount"`
	Currency       string     `json:"currency"`
	Comment        string     `json:"comment"`
	RequestNonce   *string    `json:"requestNonce"`
	State          string     `json:"state"`
	RequestedBy    int64      `json:"requestedBy"`
	RequestedToken *int64     `json:"requestedToken"`
	DecidedBy      *int64     `json:"decidedBy"`
	DecidedAt      *time.Time `json:"decidedAt"`
	Reason         *string    `json:"reason"`
	ExpiresAt      time.Time  `json:"expiresAt"`
	DealID         *int64     `json:"dealId"`
	CreatedAt      time.Time  `json:"createdAt"`
}

func viewMoneyRequest(r trading.MoneyRequest) moneyRequestView {
	v := moneyRequestView{ID: r.ID, AccountID: r.AccountID, Kind: string(r.Kind), Amount: money(r.Currency, r.Amount), Currency: r.Currency,
		Comment: r.Comment, RequestNonce: r.RequestNonce, State: r.State, RequestedBy: r.RequestedBy, RequestedToken: r.RequestedToken,
		DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, Reason: r.Reason, ExpiresAt: r.ExpiresAt.UTC(), DealID: r.DealID, CreatedAt: r.CreatedAt.UTC()}
	if v.DecidedAt != nil {
		at := v.DecidedAt.UTC()
		v.DecidedAt = &at
	}
	return v
}

// staffMove is a deposit or a withdrawal by desk staff (trading.Finance's Deposit or Withdraw).
type staffMove func(ctx context.Context, id int64, amount decimal.Decimal, nonce, comment string) (trading.StaffMove, error)

// handleStaffMove deposits into or withdraws from any account (admin): {"amount", "requestNonce",
// "comment"}. Made at once it answers the deal (201; 200 when the nonce replays it); above the
// four-eyes threshold, the PENDING money request (202, replayed or not).
func handleStaffMove(log *slog.Logger, move staffMove) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		amount, nonce, comment, err := decodeStaffAmount(r.Body)
		if err != nil {
			return err
		}
		m, err := move(r.Context(), id, amount, nonce, comment)
		if err != nil {
			return err
		}
		if m.Request != nil {
			writeJSON(w, http.StatusAccepted, map[string]any{"moneyRequest": viewMoneyRequest(*m.Request), "replayed": m.Replayed})
			return nil
		}
		writeJSON(w, createdOr(m.Replayed), map[string]any{"deal": viewDeal(*m.Deal), "replayed": m.Replayed})
		return nil
	})
}

// moneyRequestParams are the query parameters GET /api/admin/fx/money-requests takes.
var moneyRequestParams = []string{"state", "accountId", "before", "limit"}

// handleMoneyRequests lists money requests, newest first (admin):
// GET /api/admin/fx/money-requests?state=PENDING&accountId=7&before=…&limit=… (every parameter
// optional, limit 1 to 500, default 100). The answer's nextBefore is the next page's before
// (null on the last). Requests past their expiry are marked EXPIRED before the list is read.
func handleMoneyRequests(log *slog.Logger, fin *trading.Finance) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		if err := checkQuery(q, moneyRequestParams, "the money requests"); err != nil {
			return err
		}
		flt := trading.MoneyRequestFilter{Limit: 100}
		if q.Has("state") {
			for _, s := range []string{fx.MoneyRequestPending, fx.MoneyRequestApproved, fx.MoneyRequestRejected, fx.MoneyRequestExpired} {
				if s == q.Get("state") {
					flt.State = s
				}
			}
			if flt.State == "" {
				return fx.Errorf(fx.EINVALID, "state must be one of PENDING, APPROVED, REJECTED, EXPIRED (got %q).", q.Get("state"))
			}
		}
		for _, p := range []struct {
			name string
			into *int64
		}{{"accountId", &flt.AccountID}, {"before", &flt.Before}} {
			if !q.Has(p.name) {
				continue
			}
			n, err := strconv.ParseInt(q.Get(p.name), 10, 64)
			if err != nil || n <= 0 {
				return fx.Errorf(fx.EINVALID, "%s must be a positive whole number (got %q).", p.name, q.Get(p.name))
			}
			*p.into = n
		}
		if q.Has("limit") {
			n, err := strconv.Atoi(q.Get("limit"))
			if err != nil || n < 1 || n > 500 {
				return fx.Errorf(fx.EINVALID, "limit must be a whole number from 1 to 500 (got %q).", q.Get("limit"))
			}
			flt.Limit = n
		}
		rs, err := fin.Requests(r.Context(), flt)
		if err != nil {
			return err
		}
		var next *int64
		if len(rs) == flt.Limit {
			id := rs[len(rs)-1].ID
			next = &id
		}
		views := mapSlice(rs, viewMoneyRequest)
		if views == nil {
			views = []moneyRequestView{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"moneyRequests": views, "nextBefore": next})
		return nil
	})
}

// handleApproveMoneyRequest approves a PENDING money request (admin), the body empty or {}: the
// deal is made and the request marked APPROVED in one transaction. It answers the request and
// its deal (200), the same with replayed true when the request was approved already; 403 to the
// user who asked for it, 409 when it is rejected or expired.
func handleApproveMoneyRequest(log *slog.Logger, fin *trading.Finance) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		if err := decodeNothing(r.Body); err != nil {
			return err
		}
		req, d, replayed, err := fin.Approve(r.Context(), id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"moneyRequest": viewMoneyRequest(req), "deal": viewDeal(d), "replayed": replayed})
		return nil
	})
}

// handleRejectMoneyRequest rejects a PENDING money request (admin): {"reason": "…"}.
func handleRejectMoneyRequest(log *slog.Logger, fin *trading.Finance) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		var body struct {
			Reason string `json:"reason"`
		}
		if err := decodeStrict(r.Body, &body, false); err != nil {
			return err
		}
		req, err := fin.Reject(r.Context(), id, body.Reason)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"moneyRequest": viewMoneyRequest(req)})
		return nil
	})
}
