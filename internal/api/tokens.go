package api

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
)

// Tokens over the admin API (docs/operations.md, «Tokens over the API»): the superadmin's, like
// the command line's `fxdesk-web token`, and audited the same way by auth.Issue and auth's
// revoke, here with the calling token as the actor.

// tokenView is an issued token as the admin API shows it: never the token, nor its hash.
type tokenView struct {
	ID     int64  `json:"id"`
	UserID int64  `json:"userId"`
	Role   string `json:"role"`
	// Scopes are a trader's token's; a staff token's are empty, its role says what it may do.
	Scopes    []auth.Scope `json:"scopes"`
	Label     string       `json:"label"`
	CreatedAt time.Time    `json:"createdAt"`
	ExpiresAt *time.Time   `json:"expiresAt"`
	RevokedAt *time.Time   `json:"revokedAt"`
	// LastUsedAt and LastUsedFrom (the client address) lag the token's last request by up to
	// auth.FlushEvery; null while it has not been used.
	LastUsedAt   *time.Time `json:"lastUsedAt"`
	LastUsedFrom *string    `json:"lastUsedFrom"`
	// Live: neither revoked nor expired as of the answer.
	Live bool `json:"live"`
}

func viewToken(t auth.Token, now time.Time) tokenView {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	v := tokenView{ID: t.ID, UserID: t.UserID, Role: string(t.Role), Scopes: append([]auth.Scope{}, t.Scopes...), Label: t.Label,
		CreatedAt: t.CreatedAt.UTC(), ExpiresAt: utc(t.ExpiresAt), RevokedAt: utc(t.RevokedAt), LastUsedAt: utc(t.LastUsedAt), Live: t.Live(now)}
	if t.LastUsedFrom != "" {
		from := t.LastUsedFrom
		v.LastUsedFrom = &from
	}
	return v
}

// issuedTokenView answers POST /tokens: the token's text, shown this once, beside its record.
type issuedTokenView struct {
	Token string `json:"token"`
	tokenView
}

// revokedTokenView answers DELETE /tokens/{id}: the record as revoked, and how soon every web
// process refuses the token (each remembers a token it resolved for that long).
type revokedTokenView struct {
	tokenView
	RefusedEverywhereWithinSeconds int `json:"refusedEverywhereWithinSeconds"`
}

// tokenBody is POST /api/admin/fx/tokens's body.
type tokenBody struct {
	UserID *int64   `json:"userId"`
	Role   *string  `json:"role"`
	Scopes []string `json:"scopes"`
	Label  string   `json:"label"`
	// At most one of ExpiresAt (RFC 3339) and ExpiresIn (a Go duration, "720h"); neither gives
	// the longest life, auth.MaxLifetime: a token issued over the API always expires.
	ExpiresAt *string `json:"expiresAt"`
	ExpiresIn *string `json:"expiresIn"`
}

// decodeGrant reads POST /api/admin/fx/tokens into the grant it asks for, as of now. The rules a
// grant must meet (a positive user, a known role, scopes only on a trader's token, the label's
// length, an expiry in the future and within auth.MaxLifetime) are auth.Grant.Check's.
func decodeGrant(r io.Reader, now time.Time) (auth.Grant, error) {
	var b tokenBody
	if err := decodeStrict(r, &b, false); err != nil {
		return auth.Grant{}, err
	}
	if b.UserID == nil {
		return auth.Grant{}, fx.Errorf(fx.EINVALID, "userId (the platform user the token acts for) is required.")
	}
	if b.Role == nil {
		return auth.Grant{}, fx.Errorf(fx.EINVALID, "role is required: trader, viewer, support, dealer, risk, finance or superadmin.")
	}
	role, err := auth.ParseRole(*b.Role)
	if err != nil {
		return auth.Grant{}, err
	}
	g := auth.Grant{UserID: *b.UserID, Role: role, Label: b.Label}
	switch {
	case role != auth.RoleTrader:
		// Kept as given, for Check to refuse: a staff token's permissions are its role's.
		for _, s := range b.Scopes {
			g.Scopes = append(g.Scopes, auth.Scope(s))
		}
	case b.Scopes == nil:
		g.Scopes = auth.AllScopes
	default:
		if g.Scopes, err = auth.ParseScopes(strings.Join(b.Scopes, ",")); err != nil {
			return auth.Grant{}, err
		}
	}
	switch {
	case b.ExpiresAt != nil && b.ExpiresIn != nil:
		return auth.Grant{}, fx.Errorf(fx.EINVALID, "Give expiresAt or expiresIn, not both.")
	case b.ExpiresAt != nil:
		if g.ExpiresAt, err = time.Parse(time.RFC3339Nano, *b.ExpiresAt); err != nil {
			return auth.Grant{}, fx.Errorf(fx.EINVALID, "expiresAt must be an RFC 3339 time such as 2026-01-02T15:04:05Z.")
		}
	case b.ExpiresIn != nil:
		d, err := time.ParseDuration(*b.ExpiresIn)
		if err != nil || d <= 0 {
			return auth.Grant{}, fx.Errorf(fx.EINVALID, "expiresIn must be a positive duration such as 720h or 30m (got %q).", *b.ExpiresIn)
		}
		g.ExpiresAt = now.Add(d)
	default:
		g.ExpiresAt = now.Add(auth.MaxLifetime)
	}
	return g, g.Check(now)
}

// handleCreateToken issues a token (superadmin) and answers 201 with its text, the only time it
// is shown, and its record. The issue's audit row (token.create) names the calling token.
func handleCreateToken(log *slog.Logger, db *sql.DB) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		g, err := decodeGrant(r.Body, time.Now())
		if err != nil {
			return err
		}
		token, id, err := auth.Issue(r.Context(), db, g)
		if err != nil {
			return err
		}
		t, err := auth.Get(r.Context(), db, id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, issuedTokenView{Token: token, tokenView: viewToken(t, time.Now())})
		return nil
	})
}

// tokenParams are the query parameters GET /api/admin/fx/tokens takes.
var tokenParams = []string{"userId", "before", "limit"}

// handleTokens lists the issued tokens, newest first, one user's with ?userId= (superadmin),
// paged like the audit log (pageParams).
func handleTokens(log *slog.Logger, db *sql.DB) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		if err := checkQuery(q, tokenParams, "the token list"); err != nil {
			return err
		}
		var f auth.ListFilter
		var err error
		if f.UserID, err = wholeParam("userId", q.Get("userId"), q.Has("userId"), 1); err != nil {
			return err
		}
		if f.Before, f.Limit, err = pageParams(q); err != nil {
			return err
		}
		ts, err := auth.List(r.Context(), db, f)
		if err != nil {
			return err
		}
		now := time.Now()
		views := make([]tokenView, len(ts))
		for i, t := range ts {
			views[i] = viewToken(t, now)
		}
		next := nextBefore(ts, f.Limit, func(t auth.Token) int64 { return t.ID })
		writeJSON(w, http.StatusOK, map[string]any{"tokens": views, "nextBefore": next})
		return nil
	})
}

// handleRevokeToken revokes a token (superadmin): 404 for no such token, 409 for one already
// revoked, and 409 for the desk's last live superadmin token, which only the command line may
// revoke (auth.RevokeKeepingASuperadmin). The caller may revoke its own token. This process
// refuses the token from its next request on; every other as soon as it hears the revocation
// announced (revoked), and within auth.CacheFor if it does not.
func handleRevokeToken(log *slog.Logger, db *sql.DB, res *auth.Resolver, revoked func(ctx context.Context, id int64)) http.HandlerFunc {
	return handle(log, func(w http.ResponseWriter, r *http.Request) error {
		id, err := tokenID(r)
		if err != nil {
			return err
		}
		if err := decodeNothing(r.Body); err != nil {
			return err
		}
		t, err := auth.RevokeKeepingASuperadmin(r.Context(), db, id)
		if err != nil {
			return err
		}
		res.Forget(id)
		if revoked != nil {
			revoked(context.WithoutCancel(r.Context()), id)
		}
		writeJSON(w, http.StatusOK, revokedTokenView{tokenView: viewToken(t, time.Now()), RefusedEverywhereWithinSeconds: int(auth.CacheFor / time.Second)})
		return nil
	})
}

func tokenID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		return 0, fx.Errorf(fx.ENOTFOUND, "No token %q.", chi.URLParam(r, "id"))
	}
	return id, nil
}
