// Package auth owns the desk's bearer tokens: it issues them (for the operator command, the
// admin API and the demo), stores only their SHA-256, and resolves a presented token to a
// principal. It must never store or log a token in clear, and never decide what a principal may
// touch: that is the trading service's (ownership) and the routes' (admin role) business.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Principal is who a request acts for: a platform user id, the role its token carries (with a
// trader's scopes), the token it came with (fx_api_token.id, which the audit log records; 0 for
// a host-issued token) and when that token expires (zero: it does not).
type Principal struct {
	UserID  int64
	Role    Role
	Scopes  Scopes
	TokenID int64
	Expires time.Time
}

// Staff reports whether p acts for the desk's staff (any role but trader's): the admin routes'
// callers, who see every user's accounts.
func (p Principal) Staff() bool { return p.Role.Staff() }

// Can reports whether p's role grants permission perm.
func (p Principal) Can(perm Permission) bool { return p.Role.Grants(perm) }

// May reports whether p may act with scope sc on a trader's route: a trader by its token's
// scopes; staff read (every staff role reads) and never trade on a trader's behalf there.
func (p Principal) May(sc Scope) bool {
	if p.Role == RoleTrader {
		return p.Scopes.Has(sc)
	}
	return sc == ScopeRead && p.Can(PermRead)
}

// tokenPrefix makes a leaked token recognisable to secret scanners and people.
const tokenPrefix = "fxd_"

// Hash is the stored form of a token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Grant is what an issued token carries: the user it acts for, its role (a trader's also its
// scopes), a label, and when it expires (zero: never).
type Grant struct {
	UserID    int64
	Role      Role
	Scopes    Scopes
	Label     string
	ExpiresAt time.Time
}

// Create issues a token for userID with the trader's full scopes, or the superadmin role when
// admin is set: the command line's and the demo's shorthand for Issue.
func Create(ctx context.Context, db *sql.DB, userID int64, admin bool, label string) (string, error) {
	g := Grant{UserID: userID, Role: RoleTrader, Scopes: AllScopes, Label: label}
	if admin {
		g = Grant{UserID: userID, Role: RoleSuperadmin, Label: label}
	}
	token, _, err := Issue(ctx, db, g)
	return token, err
}

// MaxLabel is the longest label a token may carry.
const MaxLabel = 64

// MaxLifetime is the furthest ahead a token's expiry may be set: a token that must outlive it
// never expires and is revoked by hand (only the command line issues those).
const MaxLifetime = 366 * 24 * time.Hour

// Check validates g as Issue takes it, with errors a caller can act on; now is the clock an
// expiry is judged by.
func (g Grant) Check(now time.Time) error {
	switch {
	case g.UserID <= 0:
		return fx.Errorf(fx.EINVALID, "userId must be a positive whole number (got %d).", g.UserID)
	case g.Role != RoleTrader && !g.Role.Staff():
		_, err := ParseRole(string(g.Role))
		return err
	case g.Role == RoleTrader && len(g.Scopes) == 0:
		return fx.Errorf(fx.EINVALID, "A trader's token needs scopes: read, trade or both.")
	case g.Role != RoleTrader && len(g.Scopes) > 0:
		return fx.Errorf(fx.EINVALID, "Scopes are a trader's token's; a %s token's permissions come from its role.", g.Role)
	case len(g.Label) > MaxLabel:
		return fx.Errorf(fx.EINVALID, "label must be at most %d bytes.", MaxLabel)
	case !g.ExpiresAt.IsZero() && !g.ExpiresAt.After(now):
		return fx.Errorf(fx.EINVALID, "The token's expiry must be in the future.")
	case g.ExpiresAt.After(now.Add(MaxLifetime)):
		return fx.Errorf(fx.EINVALID, "The token's expiry must be at most %d days ahead.", int(MaxLifetime/(24*time.Hour)))
	}
	return nil
}

// Issue issues a new token as g describes and returns it with its id; only its hash is stored.
// The issue is one audit row (token.create: the token's id, user, role, scopes, label and
// expiry, never the token) by ctx's actor, in the same transaction; with no actor in ctx it is
// refused (audit.ErrNoActor). A g that does not pass Check is refused (EINVALID).
func Issue(ctx context.Context, db *sql.DB, g Grant) (string, int64, error) {
	// The column keeps milliseconds, and the server would round the rest: the expiry a caller
	// is shown, the audit row's and the one the resolver enforces are the same instant.
	g.ExpiresAt = g.ExpiresAt.Truncate(time.Millisecond)
	if err := g.Check(time.Now()); err != nil {
		return "", 0, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", 0, fmt.Errorf("issue token: %w", err)
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	var expires sql.NullTime
	if !g.ExpiresAt.IsZero() {
		expires = sql.NullTime{Time: g.ExpiresAt.UTC(), Valid: true}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", 0, fmt.Errorf("issue token for user %d: %w", g.UserID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx,
		"INSERT INTO `fx_api_token` (`tokenHash`, `userId`, `role`, `scopes`, `label`, `expiresAt`) VALUES (?, ?, ?, ?, ?, ?)",
		Hash(token), g.UserID, string(g.Role), g.Scopes.String(), g.Label, expires)
	if err != nil {
		return "", 0, fmt.Errorf("issue token for user %d: %w", g.UserID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return "", 0, fmt.Errorf("issue token for user %d: %w", g.UserID, err)
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "token.create", EntityType: "token", EntityID: strconv.FormatInt(id, 10),
		After: recordOf(g)}); err != nil {
		return "", 0, err
	}
	if err := store.Commit(tx); err != nil {
		return "", 0, fmt.Errorf("issue token for user %d: %w", g.UserID, err)
	}
	return token, id, nil
}

// tokenRecord is what the audit log records of an issued token: never the token, nor its hash.
type tokenRecord struct {
	UserID    int64      `json:"userId"`
	Role      string     `json:"role"`
	Scopes    string     `json:"scopes,omitempty"`
	Label     string     `json:"label"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

func recordOf(g Grant) tokenRecord {
	r := tokenRecord{UserID: g.UserID, Role: string(g.Role), Scopes: g.Scopes.String(), Label: g.Label}
	if !g.ExpiresAt.IsZero() {
		t := g.ExpiresAt.UTC()
		r.ExpiresAt = &t
	}
	return r
}

// RevokeLabel revokes every live token carrying label (the demo re-issues its tokens per boot),
// each with its audit row (revoke).
func RevokeLabel(ctx context.Context, db *sql.DB, label string) error {
	_, err := revoke(ctx, db, "`label` = ?", label, false)
	if err != nil {
		return fmt.Errorf("revoke %q tokens: %w", label, err)
	}
	return nil
}

// Token is an issued token as operators list it: never the token, nor its hash.
type Token struct {
	ID           int64
	UserID       int64
	Role         Role
	Scopes       Scopes
	Label        string
	CreatedAt    time.Time
	ExpiresAt    *time.Time
	RevokedAt    *time.Time
	LastUsedAt   *time.Time
	LastUsedFrom string
}

// Live reports whether t still resolves at now: not revoked, not expired.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

// ListFilter narrows List: one token (ID; 0: any), one user's tokens (0: every user's), and at
// most Limit of them, the newest first, below id Before (0: from the newest).
type ListFilter struct {
	ID     int64
	UserID int64
	Before int64
	Limit  int
}

// List returns the tokens f names, newest first.
func List(ctx context.Context, db *sql.DB, f ListFilter) ([]Token, error) {
	q := "SELECT `id`, `userId`, `role`, `scopes`, `label`, `createdAt`, `expiresAt`, `revokedAt`, `lastUsedAt`, `lastUsedFrom` FROM `fx_api_token` WHERE 1 = 1"
	var args []any
	if f.ID != 0 {
		q += " AND `id` = ?"
		args = append(args, f.ID)
	}
	if f.UserID != 0 {
		q += " AND `userId` = ?"
		args = append(args, f.UserID)
	}
	if f.Before > 0 {
		q += " AND `id` < ?"
		args = append(args, f.Before)
	}
	q += " ORDER BY `id` DESC"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var role, scopes string
		var expires, revoked, used sql.NullTime
		if err := rows.Scan(&t.ID, &t.UserID, &role, &scopes, &t.Label, &t.CreatedAt, &expires, &revoked, &used, &t.LastUsedFrom); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.Role, t.Scopes = Role(role), storedScopes(scopes)
		t.ExpiresAt, t.RevokedAt, t.LastUsedAt = timeOrNil(expires), timeOrNil(revoked), timeOrNil(used)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// Get returns the token with id; ENOTFOUND when there is none.
func Get(ctx context.Context, db *sql.DB, id int64) (Token, error) {
	ts, err := List(ctx, db, ListFilter{ID: id})
	if err != nil {
		return Token{}, err
	}
	if len(ts) == 0 {
		return Token{}, fx.Errorf(fx.ENOTFOUND, "No token %d.", id)
	}
	return ts[0], nil
}

func timeOrNil(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// storedScopes reads the scopes column; names the desk does not know are dropped, never granted.
func storedScopes(s string) Scopes {
	var out Scopes
	for _, f := range strings.Fields(s) {
		if sc := Scope(f); sc == ScopeRead || sc == ScopeTrade {
			out = append(out, sc)
		}
	}
	return out
}

// Revoke revokes the live token with id, or the live token whose text is token when id is 0.
// It reports whether a live token was revoked (false: no such token, or already revoked). A
// process that resolved the token within CacheFor keeps accepting it until its cached answer
// expires, and for up to StaleFor while it cannot reach the database.
func Revoke(ctx context.Context, db *sql.DB, id int64, token string) (bool, error) {
	where, arg := "`id` = ?", any(id)
	if id == 0 {
		where, arg = "`tokenHash` = ?", Hash(strings.TrimSpace(token))
	}
	n, err := revoke(ctx, db, where, arg, false)
	if err != nil {
		return false, fmt.Errorf("revoke token: %w", err)
	}
	return n == 1, nil
}

// IDOf is the id of the token whose text is token (0 when no token has that text).
func IDOf(ctx context.Context, db *sql.DB, token string) (int64, error) {
	var id int64
	err := db.QueryRowContext(ctx, "SELECT `id` FROM `fx_api_token` WHERE `tokenHash` = ?", Hash(strings.TrimSpace(token))).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("find token: %w", err)
	}
	return id, nil
}

// RevokeKeepingASuperadmin revokes the token with id, as the admin API does, and returns its
// record as revoked. It refuses to revoke the last live superadmin token, which would leave
// nobody able to issue or revoke tokens over the API (the command line, Revoke, still can). It
// returns ENOTFOUND for no such token, ECONFLICT for one already revoked or the last live
// superadmin token, and audit.ErrNoActor with no actor in ctx. Refusals change nothing.
func RevokeKeepingASuperadmin(ctx context.Context, db *sql.DB, id int64) (Token, error) {
	n, err := revoke(ctx, db, "`id` = ?", id, true)
	if err != nil {
		return Token{}, fmt.Errorf("revoke token %d: %w", id, err)
	}
	t, err := Get(ctx, db, id)
	if err == nil && n == 0 {
		return Token{}, fx.Errorf(fx.ECONFLICT, "Token %d was already revoked at %s.", id, t.RevokedAt.UTC().Format(time.RFC3339))
	}
	return t, err
}

// revoke revokes the live tokens matching where, in one transaction with one audit row each
// (token.revoke: the token's record before, and after with when it was revoked) by ctx's actor;
// with no actor in ctx it is refused (audit.ErrNoActor). It returns how many it revoked. With
// keepSuperadmin it refuses (ECONFLICT) a revoke that would leave no live superadmin token.
func revoke(ctx context.Context, db *sql.DB, where string, arg any, keepSuperadmin bool) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var superadmins []int64
	if keepSuperadmin {
		// Locked before the tokens to revoke, always in this order: two revokes of the last two
		// superadmin tokens queue here, and the second sees the first's revoke, instead of each
		// seeing the other's token still live.
		if superadmins, err = liveSuperadmins(ctx, tx); err != nil {
			return 0, err
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT `id`, `userId`, `role`, `scopes`, `label`, `expiresAt` FROM `fx_api_token` WHERE "+where+" AND `revokedAt` IS NULL FOR UPDATE", arg)
	if err != nil {
		return 0, err
	}
	type live struct {
		id int64
		tokenRecord
	}
	var found []live
	for rows.Next() {
		var l live
		var expires sql.NullTime
		if err := rows.Scan(&l.id, &l.UserID, &l.Role, &l.Scopes, &l.Label, &expires); err != nil {
			rows.Close()
			return 0, err
		}
		l.ExpiresAt = timeOrNil(expires)
		found = append(found, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if keepSuperadmin {
		var revoking int64 // a live superadmin token among found
		left := 0          // live superadmin tokens not among found
		for _, id := range superadmins {
			if slices.ContainsFunc(found, func(l live) bool { return l.id == id }) {
				revoking = id
			} else {
				left++
			}
		}
		if revoking != 0 && left == 0 {
			return 0, fx.Errorf(fx.ECONFLICT, "Token %d is the desk's last live superadmin token: revoked, it would leave nobody able to issue or revoke tokens over the API. "+
				"Issue another superadmin token first, or revoke it from the command line (fxdesk-web token revoke --id %d).", revoking, revoking)
		}
	}
	for _, l := range found {
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_api_token` SET `revokedAt` = NOW(3) WHERE `id` = ?", l.id); err != nil {
			return 0, err
		}
		if err := audit.Record(ctx, tx, audit.Change{Action: "token.revoke", EntityType: "token", EntityID: strconv.FormatInt(l.id, 10),
			Before: l.tokenRecord, After: revokedRecord{l.tokenRecord, true}}); err != nil {
			return 0, err
		}
	}
	return len(found), store.Commit(tx)
}

// liveSuperadmins locks and returns the live superadmin tokens: not revoked, not expired by the
// database's clock.
func liveSuperadmins(ctx context.Context, tx *sql.Tx) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, "SELECT `id` FROM `fx_api_token` WHERE `role` = ? AND `revokedAt` IS NULL AND (`expiresAt` IS NULL OR `expiresAt` > NOW(3)) FOR UPDATE",
		string(RoleSuperadmin))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// revokedRecord is what the audit log records of a token after its revocation.
type revokedRecord struct {
	tokenRecord
	Revoked bool `json:"revoked"`
}

// Resolver turns bearer tokens into principals. A resolved token is remembered for a few
// seconds, so a busy trader costs one lookup per cacheFor instead of one per request; a revoked
// token therefore stops working within cacheFor. While the database cannot answer, a token
// resolved within staleFor is still honoured: the desk status page is what an operator reads
// during a database outage, and it must not lock them out.
type Resolver struct {
	db       *sql.DB
	cacheFor time.Duration
	staleFor time.Duration
	now      func() time.Time

	mu      sync.Mutex
	cache   map[string]cached
	unknown map[string]time.Time // token hash → until when it is refused without a lookup
	// Lookups counts the database lookups made, for tests that show a refusal cost none.
	lookups atomic.Int64
	// slots bounds the lookups in flight: a flood of distinct unknown tokens from many
	// addresses costs the database at most this many queries at a time.
	slots chan struct{}
	// known are the lookup slots of tokens this process has resolved before.
	known chan struct{}

	usedMu sync.Mutex
	used   map[int64]use // token id → its last use since the last flush

	// host verifies the host platform's tokens; nil: only the desk's own are accepted.
	host *JWTVerifier

	// revoked is the tokens this process heard were revoked (Forget), until when it keeps
	// refusing them whatever a lookup that raced the revocation, or a stale cache, would say.
	revoked map[int64]time.Time
}

// AcceptHostTokens makes r accept the tokens the host platform signs, verified by v, beside the
// desk's own (docs/identity.md, «Host-issued tokens»). A host token is always a trader's, with
// the scopes it carries; staff roles come only from the desk's own tokens.
func (r *Resolver) AcceptHostTokens(v *JWTVerifier) { r.host = v }

// use is when and from which client address a token was last presented.
type use struct {
	at   time.Time
	from string
}

// LookupSlots is how many token lookups one process runs against the database at once, and
// LookupWait how long a lookup waits for a slot before it is refused.
const (
	LookupSlots = 4
	LookupWait  = time.Second
)

// ErrBusy refuses a token the resolver could not look up because every lookup slot was taken
// (a flood of unknown tokens): nothing was done, and the caller may retry shortly.
var ErrBusy error = fx.Errorf(fx.EUNAVAILABLE, "The desk is checking as many bearer tokens as it can right now; retry shortly.")

type cached struct {
	p     Principal
	until time.Time
}

// How long a Resolver remembers a resolved token, how long it still honours one while the
// database cannot answer, and how long it refuses an unknown token without asking again.
const (
	CacheFor   = 5 * time.Second
	StaleFor   = 10 * time.Minute
	UnknownFor = 10 * time.Second
)

// cacheKeys bounds each of the resolver's two caches.
const cacheKeys = 100_000

// NewResolver returns a resolver over db.
func NewResolver(db *sql.DB) *Resolver {
	return &Resolver{db: db, cacheFor: CacheFor, staleFor: StaleFor, now: time.Now, cache: map[string]cached{}, unknown: map[string]time.Time{},
		slots: make(chan struct{}, LookupSlots), known: make(chan struct{}, LookupSlots), used: map[int64]use{}, revoked: map[int64]time.Time{}}
}

// Lookups is the number of database lookups the resolver has made.
func (r *Resolver) Lookups() int64 { return r.lookups.Load() }

var errBadToken error = fx.Errorf(fx.EUNAUTH, "The bearer token is not valid.")

// wellFormed reports whether token has the shape Create gives every token: the prefix and 32
// random bytes in unpadded base64url.
func wellFormed(token string) bool {
	body, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok || len(body) != base64.RawURLEncoding.EncodedLen(32) {
		return false
	}
	for _, c := range body {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// BearerToken is the token an Authorization header carries, however the header spells "Bearer"
// and spaces it: the one key of every per-token limit.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// Resolve returns the principal of the Authorization header value. It returns an EUNAUTH error
// when the header is missing, malformed, or names no live token, and an internal error when the
// database cannot answer.
func (r *Resolver) Resolve(ctx context.Context, header string) (Principal, error) {
	if header == "" {
		return Principal{}, fx.Errorf(fx.EUNAUTH, "Authentication required: send Authorization: Bearer <token> (issued by `fxdesk-web token create`).")
	}
	token, ok := BearerToken(header)
	if !ok {
		return Principal{}, fx.Errorf(fx.EUNAUTH, "The Authorization header must read Bearer <token>.")
	}
	if !wellFormed(token) {
		if r.host != nil && LooksLikeJWT(token) {
			return r.hostPrincipal(ctx, token)
		}
		// Not a token this desk ever issued: no lookup can find it.
		return Principal{}, errBadToken
	}
	h := Hash(token)
	now := r.now()
	r.mu.Lock()
	c, hit := r.cache[h]
	refusedUntil, refused := r.unknown[h]
	r.mu.Unlock()
	if hit && now.Before(c.until) {
		return c.p, nil // until is never past the token's expiry
	}
	if refused && now.Before(refusedUntil) {
		return Principal{}, errBadToken
	}
	// A token this process resolved before looks up in slots of its own, which a flood of
	// unknown tokens cannot take; it is never honoured without its lookup while the database
	// answers (a revoked token must be refused within CacheFor).
	slots := r.slots
	if hit {
		slots = r.known
	}
	select {
	case slots <- struct{}{}:
	default:
		// Every slot is taken: wait a moment for one (a burst of first requests), and past that
		// refuse rather than queue behind a flood.
		wait := time.NewTimer(LookupWait)
		defer wait.Stop()
		select {
		case slots <- struct{}{}:
		case <-wait.C:
			return Principal{}, ErrBusy
		case <-ctx.Done():
			return Principal{}, ctx.Err()
		}
	}
	defer func() { <-slots }()
	r.lookups.Add(1)
	var p Principal
	var role, scopes string
	var expires sql.NullTime
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := r.db.QueryRowContext(qctx,
		"SELECT `id`, `userId`, `role`, `scopes`, `expiresAt` FROM `fx_api_token` WHERE `tokenHash` = ? AND `revokedAt` IS NULL", h).Scan(&p.TokenID, &p.UserID, &role, &scopes, &expires)
	if err == nil && expires.Valid && !now.Before(expires.Time) {
		err = sql.ErrNoRows // expired: refused like an unknown token
	}
	if errors.Is(err, sql.ErrNoRows) {
		// Remembered as unknown for a short while, so a flood of one bad token costs one
		// lookup; a flood of distinct ones is the per-address rate limit's to stop.
		r.mu.Lock()
		delete(r.cache, h)
		if len(r.unknown) >= cacheKeys {
			clear(r.unknown)
		}
		r.unknown[h] = now.Add(UnknownFor)
		r.mu.Unlock()
		return Principal{}, errBadToken
	}
	if err != nil {
		if hit && r.honourStale(c, now) {
			return c.p, nil
		}
		return Principal{}, fmt.Errorf("resolve bearer token: %w", err)
	}
	p.Role, p.Scopes = Role(role), storedScopes(scopes)
	r.mu.Lock()
	forgottenUntil, forgotten := r.revoked[p.TokenID]
	r.mu.Unlock()
	if forgotten && now.Before(forgottenUntil) {
		return Principal{}, errBadToken // revoked, though this lookup read it before the revocation committed
	}
	if p.Role != RoleTrader && !p.Role.Staff() {
		// A role this build does not know grants nothing rather than something.
		return Principal{}, fmt.Errorf("resolve bearer token %d: unknown role %q", p.TokenID, role)
	}
	until := now.Add(r.cacheFor)
	if expires.Valid {
		p.Expires = expires.Time
		if p.Expires.Before(until) {
			until = p.Expires
		}
	}
	r.mu.Lock()
	delete(r.unknown, h)
	if len(r.cache) > cacheKeys {
		clear(r.cache) // bound memory against many distinct tokens; they are re-read on demand
	}
	r.cache[h] = cached{p: p, until: until}
	r.mu.Unlock()
	return p, nil
}

// Forget drops what the resolver remembers of token id and refuses it from now on: the process
// that revoked it calls it at once, every other hears of the revocation on the tokens-revoked
// channel (docs/identity.md, «Expiry, revocation and last use»). A lookup that read the token
// before its revocation committed, landing after Forget, is refused too; so is a cached answer
// honoured while the database is away. A process that misses the notice refuses the token
// within CacheFor, from its next lookup.
func (r *Resolver) Forget(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for h, c := range r.cache {
		if c.p.TokenID == id {
			delete(r.cache, h)
		}
	}
	now := r.now()
	if len(r.revoked) >= cacheKeys {
		for id, until := range r.revoked {
			if !now.Before(until) {
				delete(r.revoked, id)
			}
		}
	}
	if len(r.revoked) < cacheKeys {
		r.revoked[id] = now.Add(r.staleFor)
	}
}

// honourStale reports whether c, a token resolved earlier, is still honoured while its lookup
// cannot run: within staleFor of when it was resolved, and never past the token's expiry.
func (r *Resolver) honourStale(c cached, now time.Time) bool {
	if !c.p.Expires.IsZero() && !now.Before(c.p.Expires) {
		return false
	}
	return now.Before(c.until.Add(r.staleFor - r.cacheFor))
}

// FlushEvery is how often Run writes the tokens' last uses: a token's lastUsedAt is behind by at
// most this much, and a busy token costs one UPDATE per interval, never one per request.
const FlushEvery = 5 * time.Second

// Used notes that p's token was just presented from client address from (a host-issued token has
// no row and is not noted). Run writes it down.
func (r *Resolver) Used(p Principal, from string) {
	if p.TokenID == 0 {
		return
	}
	if len(from) > 64 {
		from = from[:64]
	}
	r.usedMu.Lock()
	if len(r.used) < cacheKeys {
		r.used[p.TokenID] = use{at: r.now(), from: from}
	}
	r.usedMu.Unlock()
}

// Run writes the tokens' last uses every FlushEvery until ctx ends, and once more then. A write
// that fails is logged and retried with the next interval's uses: a token's last use is a
// convenience for whoever lists tokens, never a reason to stop serving.
func (r *Resolver) Run(ctx context.Context, log *slog.Logger) error {
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	flush := func(ctx context.Context) {
		if _, err := r.Flush(ctx); err != nil {
			log.WarnContext(ctx, "tokens' last use not recorded", slog.Any("err", err))
		}
	}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			flush(fctx)
			return nil
		case <-t.C:
			flush(ctx)
		}
	}
}

// Flush writes the last uses noted since the previous flush, one UPDATE per token, and reports
// how many it wrote. Uses it could not write are kept for the next flush unless a newer one came.
func (r *Resolver) Flush(ctx context.Context) (int, error) {
	r.usedMu.Lock()
	batch := r.used
	r.used = map[int64]use{}
	r.usedMu.Unlock()
	n := 0
	for id, u := range batch {
		// A later use is never overwritten by an earlier one from a slower process.
		_, err := r.db.ExecContext(ctx, "UPDATE `fx_api_token` SET `lastUsedAt` = ?, `lastUsedFrom` = ? WHERE `id` = ? AND (`lastUsedAt` IS NULL OR `lastUsedAt` < ?)",
			u.at.UTC(), u.from, id, u.at.UTC())
		if err != nil {
			r.usedMu.Lock()
			for id, u := range batch {
				if _, newer := r.used[id]; !newer {
					r.used[id] = u
				}
			}
			r.usedMu.Unlock()
			return n, fmt.Errorf("record tokens' last use: %w", err)
		}
		n++
	}
	return n, nil
}

// hostPrincipal is the principal of a host token: the trader it names, with its scopes, until
// it expires. It costs no database lookup: the host, not the desk, revokes by letting it expire.
func (r *Resolver) hostPrincipal(ctx context.Context, token string) (Principal, error) {
	c, err := r.host.Verify(ctx, token)
	if err != nil {
		return Principal{}, err
	}
	p := Principal{UserID: c.UserID, Role: RoleTrader, Expires: c.Expires}
	for _, s := range c.Scopes {
		p.Scopes = append(p.Scopes, Scope(s))
	}
	if len(p.Scopes) == 0 {
		return Principal{}, fx.Errorf(fx.EUNAUTH, "The host token carries none of the desk's scopes (read, trade).")
	}
	return p, nil
}
