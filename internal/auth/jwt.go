package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"fxdesk/internal/fx"
)

// JWTConfig is how the desk checks the JSON Web Tokens its host platform signs for its users
// (docs/identity.md). The zero JWKSURL means host tokens are off.
type JWTConfig struct {
	// JWKSURL is the host's JSON Web Key Set, http:// or https:// (FXDESK_JWT_JWKS_URL).
	JWKSURL string
	// Issuer is the iss every host token must carry (FXDESK_JWT_ISSUER), and Audience an aud it
	// must name (FXDESK_JWT_AUDIENCE): a token the host signed for another service is refused.
	Issuer, Audience string
	// UserClaim holds the platform user id, a JSON number or a decimal string of a positive
	// int64 (FXDESK_JWT_USER_CLAIM, default sub).
	UserClaim string
	// ScopeClaim holds the token's scopes, a space-separated string or an array of strings
	// (FXDESK_JWT_SCOPE_CLAIM, default scope). Absent, the token has every scope the desk knows
	// (read and trade: the host's own sign-in token); present, exactly the known ones it lists.
	ScopeClaim string
	// Leeway absorbs clock skew between the host and the desk on exp, nbf and iat
	// (FXDESK_JWT_LEEWAY, default 30s, 1s to 5m).
	Leeway time.Duration
	// Refresh is how often the key set is read again on schedule (FXDESK_JWT_REFRESH, default
	// 5m, 10s to 24h); an unknown kid also reads it, at most once per UnknownKIDEvery.
	Refresh time.Duration
}

// The defaults and bounds of JWTConfig.
const (
	DefaultJWTUserClaim  = "sub"
	DefaultJWTScopeClaim = "scope"
	DefaultJWTLeeway     = 30 * time.Second
	MaxJWTLeeway         = 5 * time.Minute
	DefaultJWKSRefresh   = 5 * time.Minute
	MinJWKSRefresh       = UnknownKIDEvery
	MaxJWKSRefresh       = 24 * time.Hour
)

// UnknownKIDEvery is how often at most a token naming a key the desk does not hold makes it read
// the host's key set; UnknownKIDWait bounds what that read costs the request that made it. A
// flood of made-up kids therefore costs the host one read per UnknownKIDEvery and each request
// at most UnknownKIDWait; every other token of the flood is refused at once.
const (
	UnknownKIDEvery = 10 * time.Second
	UnknownKIDWait  = time.Second
)

// jwksFetchTimeout bounds one read of the key set: the first, in NewJWTVerifier, and each
// scheduled refresh (an unknown kid's is bounded by UnknownKIDWait).
const jwksFetchTimeout = 5 * time.Second

// maxJWTBytes bounds a host token: a longer one is refused before it is decoded.
const maxJWTBytes = 8 << 10

// hostAlgorithms are the signatures the desk accepts: asymmetric only, so a key the desk holds
// can never sign. HS256 is absent on purpose: with it, a token "signed" with the host's public key
// as an HMAC secret would verify (the key-confusion attack).
var hostAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// hostScopes are the scopes the desk knows, in the order HostClaims lists them.
var hostScopes = []string{"read", "trade"}

// Enabled is true when host tokens are accepted.
func (c JWTConfig) Enabled() bool { return c.JWKSURL != "" }

// withDefaults fills the fields left zero.
func (c JWTConfig) withDefaults() JWTConfig {
	if c.UserClaim == "" {
		c.UserClaim = DefaultJWTUserClaim
	}
	if c.ScopeClaim == "" {
		c.ScopeClaim = DefaultJWTScopeClaim
	}
	if c.Leeway == 0 {
		c.Leeway = DefaultJWTLeeway
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultJWKSRefresh
	}
	return c
}

// Check returns every problem of an enabled configuration at once, each naming the setting
// that holds it. It is the one home of these rules: config.Load applies it to the environment
// and NewJWTVerifier to what it is given (after filling defaults). The URL is named without its
// userinfo or query.
func (c JWTConfig) Check() error {
	var errs []error
	u, err := url.Parse(c.JWKSURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Scheme == "http" && !nearby(u.Hostname())) {
		shown := "(unparsable)"
		if err == nil {
			shown = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
		}
		errs = append(errs, fmt.Errorf("FXDESK_JWT_JWKS_URL=%q must be the http:// or https:// URL of the host's JSON Web Key Set, such as https://host.example/.well-known/jwks.json; "+
			"http:// only on localhost or a loopback or private address, as a key set read in clear can be replaced on the way", shown))
	}
	if strings.TrimSpace(c.Issuer) == "" {
		errs = append(errs, errors.New("FXDESK_JWT_ISSUER must be set with FXDESK_JWT_JWKS_URL: the iss the host writes in its tokens"))
	}
	if strings.TrimSpace(c.Audience) == "" {
		errs = append(errs, errors.New("FXDESK_JWT_AUDIENCE must be set with FXDESK_JWT_JWKS_URL: the aud the host writes in the tokens it signs for the desk"))
	}
	if strings.TrimSpace(c.UserClaim) == "" {
		errs = append(errs, errors.New("FXDESK_JWT_USER_CLAIM must name the claim holding the platform user id (default sub)"))
	}
	if strings.TrimSpace(c.ScopeClaim) == "" {
		errs = append(errs, errors.New("FXDESK_JWT_SCOPE_CLAIM must name the claim holding the token's scopes (default scope)"))
	}
	if c.Leeway < time.Second || c.Leeway > MaxJWTLeeway {
		errs = append(errs, fmt.Errorf("FXDESK_JWT_LEEWAY=%s must be from 1s to %s: it only absorbs clock skew between the host and the desk", c.Leeway, MaxJWTLeeway))
	}
	if c.Refresh < MinJWKSRefresh || c.Refresh > MaxJWKSRefresh {
		errs = append(errs, fmt.Errorf("FXDESK_JWT_REFRESH=%s must be from %s to %s", c.Refresh, MinJWKSRefresh, MaxJWKSRefresh))
	}
	return errors.Join(errs...)
}

// nearby reports whether host, a URL's host name, is localhost or a loopback or private address,
// where the key set may be read over plain http://.
func nearby(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && (ip.IsLoopback() || ip.IsPrivate())
}

// HostClaims is what a verified host token says.
type HostClaims struct {
	UserID int64
	// Scopes are the known scopes the token carries, of "read" and "trade", in that order.
	Scopes  []string
	Expires time.Time
	// Subject (sub) and TokenID (jti, "" when the host sets none) are for logs.
	Subject, TokenID string
}

// JWTVerifier checks host tokens against the host's key set, which it holds in memory: a token
// whose key it holds costs no request to the host. The set is read again every Refresh, and
// when a token names a key it does not hold (the host rotated), at most once per
// UnknownKIDEvery and for at most UnknownKIDWait of that token's request. A token it verified
// is remembered, by its hash, until min(exp, CacheFor from now), so a busy trader's repeated
// requests cost a hash rather than a signature check.
type JWTVerifier struct {
	cfg     JWTConfig
	keys    keyfunc.Keyfunc
	parser  *jwt.Parser
	now     func() time.Time
	checks  atomic.Int64
	mu      sync.Mutex
	checked map[string]verifiedToken // Hash(token) → its claims
}

type verifiedToken struct {
	claims HostClaims
	until  time.Time
}

// NewJWTVerifier checks cfg (zero fields take their defaults), reads the host's key set once
// and keeps it fresh in the background until ctx ends. A host that cannot be reached is no
// error: the verifier logs a warning and starts with no keys, which the next refresh or the
// first token's unknown kid brings; NewJWTVerifier waits at most jwksFetchTimeout for it.
func NewJWTVerifier(ctx context.Context, cfg JWTConfig, log *slog.Logger) (*JWTVerifier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("host token verifier: %w", err)
	}
	storage, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
		Client:           &http.Client{Timeout: jwksFetchTimeout},
		HTTPTimeout:      jwksFetchTimeout,
		RefreshInterval:  cfg.Refresh,
		RateLimitWaitMax: UnknownKIDWait,
		// A burst of one: the first unknown kid reads the set at once, the next not before
		// UnknownKIDEvery; one that would have to wait longer than UnknownKIDWait is refused
		// without waiting.
		RefreshUnknownKID: rate.NewLimiter(rate.Every(UnknownKIDEvery), 1),
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				log.WarnContext(ctx, "host key set not read; the keys already held stay in use", slog.String("issuer", cfg.Issuer), slog.Any("error", err))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("host token verifier: %w", err)
	}
	// A key the host marks for encryption never verifies a signature; one with no use is taken
	// for signing, as most hosts publish them.
	keys, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: storage.Storage(), UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return nil, fmt.Errorf("host token verifier: %w", err)
	}
	v := &JWTVerifier{cfg: cfg, keys: keys, now: time.Now, checked: map[string]verifiedToken{}}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(hostAlgorithms),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithJSONNumber(),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	held, err := storage.Storage().KeyReadAll(ctx)
	if err != nil || len(held) == 0 {
		log.WarnContext(ctx, "host token verifier starts with no keys: host tokens are refused until the key set is read",
			slog.String("issuer", cfg.Issuer), slog.Duration("refresh", cfg.Refresh))
	} else {
		log.InfoContext(ctx, "host token verifier ready", slog.String("issuer", cfg.Issuer), slog.String("audience", cfg.Audience),
			slog.Int("keys", len(held)), slog.Duration("refresh", cfg.Refresh))
	}
	return v, nil
}

// SignatureChecks is how many tokens the verifier has checked the signature of, for tests and
// benchmarks that show a remembered token costs none.
func (v *JWTVerifier) SignatureChecks() int64 { return v.checks.Load() }

// LooksLikeJWT reports whether raw has the shape of a signed JWT: three non-empty base64url
// parts separated by dots. It reads no part; the resolver uses it to choose between a host
// token and a desk token (whose shape has no dot).
func LooksLikeJWT(raw string) bool {
	dots, run := 0, 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '.':
			if run == 0 {
				return false
			}
			dots, run = dots+1, 0
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_':
			run++
		default:
			return false
		}
	}
	return dots == 2 && run > 0
}

// The refusals of Verify. None quotes the token or anything read from it.
var (
	errHostTokenMalformed = fx.Errorf(fx.EUNAUTH, "The host token is not a signed JWT the desk can read.")
	errHostTokenAlg       = fx.Errorf(fx.EUNAUTH, "The host token is signed with an algorithm the desk does not accept (it accepts %s).", strings.Join(hostAlgorithms, ", "))
	errHostTokenKey       = fx.Errorf(fx.EUNAUTH, "The host token names a signing key (kid) the host's key set does not hold; if the host has just rotated its keys, retry in a few seconds.")
	errHostTokenSignature = fx.Errorf(fx.EUNAUTH, "The host token's signature does not verify with the host's key.")
	errHostTokenExpired   = fx.Errorf(fx.EUNAUTH, "The host token has expired.")
	errHostTokenEarly     = fx.Errorf(fx.EUNAUTH, "The host token is not valid yet (nbf).")
	errHostTokenFuture    = fx.Errorf(fx.EUNAUTH, "The host token was issued in the future (iat); the host's clock and the desk's disagree.")
	errHostTokenIssuer    = fx.Errorf(fx.EUNAUTH, "The host token was not issued by the desk's host (iss).")
	errHostTokenAudience  = fx.Errorf(fx.EUNAUTH, "The host token is not meant for this desk (aud).")
	errHostTokenNoExp     = fx.Errorf(fx.EUNAUTH, "The host token has no expiry (exp); the desk accepts only tokens that expire.")
	errHostTokenClaims    = fx.Errorf(fx.EUNAUTH, "The host token lacks a claim the desk requires (iss, aud or exp).")
	errHostTokenInvalid   = fx.Errorf(fx.EUNAUTH, "The host token is not valid.")
)

// Verify returns the claims of raw, a host token, after checking its signature against the
// host's key set and its iss, aud, exp, nbf and iat. Every refusal is an EUNAUTH error saying
// why, never quoting the token. ctx bounds the read of the key set a token with an unknown kid
// may cause (at most UnknownKIDWait in any case).
func (v *JWTVerifier) Verify(ctx context.Context, raw string) (HostClaims, error) {
	if len(raw) > maxJWTBytes || !LooksLikeJWT(raw) {
		return HostClaims{}, errHostTokenMalformed
	}
	h := Hash(raw)
	now := v.now()
	v.mu.Lock()
	c, hit := v.checked[h]
	v.mu.Unlock()
	if hit && now.Before(c.until) {
		hc := c.claims
		hc.Scopes = slices.Clone(hc.Scopes) // the caller's to keep; the remembered copy stays as verified
		return hc, nil
	}
	v.checks.Add(1)
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(raw, claims, v.keys.KeyfuncCtx(ctx))
	if err != nil {
		return HostClaims{}, v.refusal(tok, claims, err)
	}
	if _, crit := tok.Header["crit"]; crit {
		// RFC 7515 §4.1.11: a token naming extensions its recipient must understand is refused
		// by one that understands none.
		return HostClaims{}, errHostTokenInvalid
	}
	hc, err := v.hostClaims(claims)
	if err != nil {
		return HostClaims{}, err
	}
	until := now.Add(CacheFor)
	if hc.Expires.Before(until) {
		until = hc.Expires
	}
	v.mu.Lock()
	if len(v.checked) >= cacheKeys {
		clear(v.checked) // bound memory against many distinct tokens; they are checked again on demand
	}
	v.checked[h] = verifiedToken{claims: hc, until: until}
	hc.Scopes = slices.Clone(hc.Scopes)
	v.mu.Unlock()
	return hc, nil
}

// refusal turns a parse error into the refusal that says why. The signature is checked before
// the claims, so a claim is only ever blamed on a token the host did sign.
func (v *JWTVerifier) refusal(tok *jwt.Token, claims jwt.MapClaims, err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errHostTokenMalformed
	case tok != nil && (tok.Method == nil || !slices.Contains(hostAlgorithms, tok.Method.Alg())):
		return errHostTokenAlg
	case errors.Is(err, jwt.ErrTokenUnverifiable) && !v.holdsKey(tok):
		// Not found even after a read of the set, or a read the rate limit refused.
		return errHostTokenKey
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return errHostTokenSignature
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errHostTokenIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errHostTokenAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		if _, ok := claims["exp"]; !ok {
			return errHostTokenNoExp
		}
		return errHostTokenClaims
	case errors.Is(err, jwt.ErrTokenExpired):
		return errHostTokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errHostTokenEarly
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errHostTokenFuture
	}
	return errHostTokenInvalid
}

// holdsKey reports whether the key set in memory holds the key tok names. It reads no more
// than memory: the set is not read again for it.
func (v *JWTVerifier) holdsKey(tok *jwt.Token) bool {
	kid, ok := tok.Header["kid"].(string)
	if !ok {
		return true // no kid: every key was tried, and none verified
	}
	held, err := v.keys.Storage().KeyReadAll(context.Background())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(held, func(k jwkset.JWK) bool { return k.Marshal().KID == kid })
}

// hostClaims reads the desk's claims from a verified token.
func (v *JWTVerifier) hostClaims(claims jwt.MapClaims) (HostClaims, error) {
	var hc HostClaims
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return HostClaims{}, errHostTokenNoExp
	}
	hc.Expires = exp.Time
	hc.Subject, _ = claims["sub"].(string)
	hc.TokenID, _ = claims["jti"].(string)

	var id string
	switch u := claims[v.cfg.UserClaim].(type) {
	case json.Number:
		id = u.String()
	case string:
		id = u
	}
	n, err := strconv.ParseInt(id, 10, 64)
	// Only the canonical spelling: "+42", "042" and "42.0" are refused, not read as 42.
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != id {
		return HostClaims{}, fx.Errorf(fx.EUNAUTH, "The host token's %s claim must hold the platform user id, a positive whole number.", v.cfg.UserClaim)
	}
	hc.UserID = n

	scope, present := claims[v.cfg.ScopeClaim]
	if !present {
		hc.Scopes = slices.Clone(hostScopes)
		return hc, nil
	}
	var listed []string
	switch s := scope.(type) {
	case string:
		listed = strings.Fields(s)
	case []any:
		for _, e := range s {
			name, ok := e.(string)
			if !ok {
				return HostClaims{}, v.badScopes()
			}
			listed = append(listed, name)
		}
	default: // a number, an object, null
		return HostClaims{}, v.badScopes()
	}
	hc.Scopes = []string{}
	for _, known := range hostScopes {
		if slices.Contains(listed, known) {
			hc.Scopes = append(hc.Scopes, known)
		}
	}
	return hc, nil
}

func (v *JWTVerifier) badScopes() error {
	return fx.Errorf(fx.EUNAUTH, "The host token's %s claim must be a space-separated string or an array of strings.", v.cfg.ScopeClaim)
}
