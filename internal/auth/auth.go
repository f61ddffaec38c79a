// Package auth owns the desk's bearer tokens: it issues them (for the operator command and the
// demo), stores only their SHA-256, and resolves a presented token to a principal. It must never
// store or log a token in clear, and never decide what a principal may touch: that is the
// trading service's (ownership) and the routes' (admin role) business.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
)

// Principal is who a request acts for: a platform user id, whether it holds the admin role, and
// the token it came with (fx_api_token.id, which the audit log records).
type Principal struct {
	UserID  int64
	Admin   bool
	TokenID int64
}

// tokenPrefix makes a leaked token recognisable to secret scanners and people.
const tokenPrefix = "fxd_"

// Hash is the stored form of a token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Create issues a new token for userID and returns it; only its hash is stored. The issue is one
// audit row (token.create: the token's id, user, role and label, never the token) by ctx's
// actor, in the same transaction; with no actor in ctx it is refused (audit.ErrNoActor).
func Create(ctx context.Context, db *sql.DB, userID int64, admin bool, label string) (string, error) {
	if userID <= 0 {
		return "", fmt.Errorf("issue token: user id must be positive, got %d", userID)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("issue token: %w", err)
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	role := "TRADER"
	if admin {
		role = "ADMIN"
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("issue token for user %d: %w", userID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx,
		"INSERT INTO `fx_api_token` (`tokenHash`, `userId`, `role`, `label`) VALUES (?, ?, ?, ?)",
		Hash(token), userID, role, label)
	if err != nil {
		return "", fmt.Errorf("issue token for user %d: %w", userID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return "", fmt.Errorf("issue token for user %d: %w", userID, err)
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "token.create", EntityType: "token", EntityID: strconv.FormatInt(id, 10),
		After: tokenRecord{UserID: userID, Role: role, Label: label}}); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("issue token for user %d: %w", userID, err)
	}
	return token, nil
}

// tokenRecord is what the audit log records of an issued token: never the token, nor its hash.
type tokenRecord struct {
	UserID int64  `json:"userId"`
	Role   string `json:"role"`
	Label  string `json:"label"`
}

// RevokeLabel revokes every live token carrying label (the demo re-issues its tokens per boot),
// each with its audit row (revoke).
func RevokeLabel(ctx context.Context, db *sql.DB, label string) error {
	_, err := revoke(ctx, db, "`label` = ?", label)
	if err != nil {
		return fmt.Errorf("revoke %q tokens: %w", label, err)
	}
	return nil
}

// Token is an issued token as operators list it: never the token, nor its hash.
type Token struct {
	ID        int64
	UserID    int64
	Role      string // TRADER or ADMIN
	Label     string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// List returns the tokens of userID (every user's when userID is 0), newest first.
func List(ctx context.Context, db *sql.DB, userID int64) ([]Token, error) {
	q := "SELECT `id`, `userId`, `role`, `label`, `createdAt`, `revokedAt` FROM `fx_api_token`"
	var args []any
	if userID != 0 {
		q += " WHERE `userId` = ?"
		args = append(args, userID)
	}
	rows, err := db.QueryContext(ctx, q+" ORDER BY `id` DESC", args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var revoked sql.NullTime
		if err := rows.Scan(&t.ID, &t.UserID, &t.Role, &t.Label, &t.CreatedAt, &revoked); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		if revoked.Valid {
			t.RevokedAt = &revoked.Time
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
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
	n, err := revoke(ctx, db, where, arg)
	if err != nil {
		return false, fmt.Errorf("revoke token: %w", err)
	}
	return n == 1, nil
}

// revoke revokes the live tokens matching where, in one transaction with one audit row each
// (token.revoke: the token's record before, and after with when it was revoked) by ctx's actor;
// with no actor in ctx it is refused (audit.ErrNoActor). It returns how many it revoked.
func revoke(ctx context.Context, db *sql.DB, where string, arg any) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT `id`, `userId`, `role`, `label` FROM `fx_api_token` WHERE "+where+" AND `revokedAt` IS NULL FOR UPDATE", arg)
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
		if err := rows.Scan(&l.id, &l.UserID, &l.Role, &l.Label); err != nil {
			rows.Close()
			return 0, err
		}
		found = append(found, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
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
	return len(found), tx.Commit()
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
		slots: make(chan struct{}, LookupSlots)}
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

// Resolve returns the principal of the Authorization header value. It returns an EUNAUTH error
// when the header is missing, malformed, or names no live token, and an internal error when the
// database cannot answer.
func (r *Resolver) Resolve(ctx context.Context, header string) (Principal, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if header == "" {
		return Principal{}, fx.Errorf(fx.EUNAUTH, "Authentication required: send Authorization: Bearer <token> (issued by `fxdesk-web token create`).")
	}
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Principal{}, fx.Errorf(fx.EUNAUTH, "The Authorization header must read Bearer <token>.")
	}
	if !wellFormed(token) {
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
		return c.p, nil
	}
	if refused && now.Before(refusedUntil) {
		return Principal{}, errBadToken
	}
	select {
	case r.slots <- struct{}{}:
	default:
		// Every slot is taken: a token seen lately is honoured as during an outage; any other
		// waits a moment for a slot (a burst of first requests), and past that is refused
		// rather than queued behind a flood.
		if hit && now.Before(c.until.Add(r.staleFor-r.cacheFor)) {
			return c.p, nil
		}
		wait := time.NewTimer(LookupWait)
		defer wait.Stop()
		select {
		case r.slots <- struct{}{}:
		case <-wait.C:
			return Principal{}, ErrBusy
		case <-ctx.Done():
			return Principal{}, ctx.Err()
		}
	}
	defer func() { <-r.slots }()
	r.lookups.Add(1)
	var p Principal
	var role string
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := r.db.QueryRowContext(qctx,
		"SELECT `id`, `userId`, `role` FROM `fx_api_token` WHERE `tokenHash` = ? AND `revokedAt` IS NULL", h).Scan(&p.TokenID, &p.UserID, &role)
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
		if hit && now.Before(c.until.Add(r.staleFor-r.cacheFor)) {
			return c.p, nil
		}
		return Principal{}, fmt.Errorf("resolve bearer token: %w", err)
	}
	p.Admin = role == "ADMIN"
	r.mu.Lock()
	delete(r.unknown, h)
	if len(r.cache) > cacheKeys {
		clear(r.cache) // bound memory against many distinct tokens; they are re-read on demand
	}
	r.cache[h] = cached{p: p, until: now.Add(r.cacheFor)}
	r.mu.Unlock()
	return p, nil
}
