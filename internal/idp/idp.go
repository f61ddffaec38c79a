package idp

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"fxdesk/internal/fx"
)

// The algorithms the provider signs with.
const (
	ES256 = "ES256"
	RS256 = "RS256"
	EdDSA = "EdDSA"
)

// JWKSPath is where the provider publishes its key set.
const JWKSPath = "/.well-known/jwks.json"

// DefaultTTL is a minted token's life when the request names none, and MaxTTL the longest.
const (
	DefaultTTL = 15 * time.Minute
	MaxTTL     = 24 * time.Hour
)

// Provider signs tokens for one issuer and audience and publishes its keys. Its methods are safe
// for concurrent use.
type Provider struct {
	issuer, audience string
	now              func() time.Time

	mu   sync.Mutex
	keys []signingKey // published, oldest first; the last signs
	jwks []byte       // the published set, built at each change
}

type signingKey struct {
	kid    string
	alg    string
	method jwt.SigningMethod
	signer crypto.Signer
}

// New returns a provider for issuer and audience holding one new ES256 key.
func New(issuer, audience string) (*Provider, error) {
	if strings.TrimSpace(issuer) == "" || strings.TrimSpace(audience) == "" {
		return nil, fx.Errorf(fx.EINVALID, "The identity provider needs an issuer and an audience.")
	}
	p := &Provider{issuer: issuer, audience: audience, now: time.Now}
	if _, err := p.Rotate(ES256, false); err != nil {
		return nil, err
	}
	return p, nil
}

// Issuer and Audience are what minted tokens carry by default.
func (p *Provider) Issuer() string   { return p.issuer }
func (p *Provider) Audience() string { return p.audience }

// Rotate makes a new key of alg (ES256, RS256 or EdDSA; "" for the signing key's) the signing
// key and returns its kid. The old keys stay published, so the tokens they signed keep
// verifying, unless retire drops them. An unknown alg is an EINVALID error and changes nothing.
func (p *Provider) Rotate(alg string, retire bool) (string, error) {
	r, err := p.rotate(alg, retire)
	return r.KeyID, err
}

// rotate is Rotate, also saying what the key set then holds.
func (p *Provider) rotate(alg string, retire bool) (rotateAnswer, error) {
	p.mu.Lock()
	if alg == "" && len(p.keys) > 0 {
		alg = p.keys[len(p.keys)-1].alg
	}
	p.mu.Unlock()
	k, err := newKey(alg)
	if err != nil {
		return rotateAnswer{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := append(p.keys[:len(p.keys):len(p.keys)], k)
	if retire {
		keys = []signingKey{k}
	}
	jwks, err := publish(keys)
	if err != nil {
		return rotateAnswer{}, err
	}
	p.keys, p.jwks = keys, jwks
	return rotateAnswer{KeyID: k.kid, Alg: k.alg, Published: len(keys)}, nil
}

// newKey generates a key for alg.
func newKey(alg string) (signingKey, error) {
	k := signingKey{alg: alg}
	var err error
	switch alg {
	case ES256:
		k.method = jwt.SigningMethodES256
		k.signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case RS256:
		k.method = jwt.SigningMethodRS256
		k.signer, err = rsa.GenerateKey(rand.Reader, 2048)
	case EdDSA:
		k.method = jwt.SigningMethodEdDSA
		_, k.signer, err = ed25519.GenerateKey(rand.Reader)
	default:
		return signingKey{}, fx.Errorf(fx.EINVALID, "alg %q: the identity provider signs with ES256, RS256 or EdDSA.", alg)
	}
	if err != nil {
		return signingKey{}, fmt.Errorf("generate %s key: %w", alg, err)
	}
	k.kid = strings.ToLower(alg) + "-" + randomHex(6)
	return k, nil
}

// publish is the key set of keys: their public halves, each with its kid, alg and use.
func publish(keys []signingKey) ([]byte, error) {
	ctx := context.Background()
	set := jwkset.NewMemoryStorage()
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.signer.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.ALG(k.alg), KID: k.kid, USE: jwkset.UseSig},
		})
		if err != nil {
			return nil, fmt.Errorf("publish key %s: %w", k.kid, err)
		}
		if err := set.KeyWrite(ctx, jwk); err != nil {
			return nil, fmt.Errorf("publish key %s: %w", k.kid, err)
		}
	}
	return set.JSONPublic(ctx)
}

// JWKS is the published key set, as GET /.well-known/jwks.json serves it.
func (p *Provider) JWKS() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jwks
}

// KeyID is the signing key's kid.
func (p *Provider) KeyID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[len(p.keys)-1].kid
}

// PublicKey is the signing key's public half, as the key set publishes it.
func (p *Provider) PublicKey() crypto.PublicKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[len(p.keys)-1].signer.Public()
}

// Published is how many keys the key set holds.
func (p *Provider) Published() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

// Sign signs claims, as they are, with the signing key, naming its kid. Mint is the usual way;
// tests use Sign for tokens Mint would not make (no exp, a user id that is not a number).
func (p *Provider) Sign(claims jwt.MapClaims) (string, error) {
	tok, _, err := p.sign(claims)
	return tok, err
}

// sign is Sign, also returning the kid it named: a rotate meanwhile cannot make the two disagree.
func (p *Provider) sign(claims jwt.MapClaims) (string, string, error) {
	p.mu.Lock()
	k := p.keys[len(p.keys)-1]
	p.mu.Unlock()
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.signer)
	if err != nil {
		return "", "", fmt.Errorf("sign with %s: %w", k.kid, err)
	}
	return s, k.kid, nil
}

// Mint is a request for a token.
type Mint struct {
	Subject string // sub, the platform user id; required
	// Scope is the scope claim, a space-separated list; nil leaves the claim out.
	Scope *string
	// TTL is the token's life (default DefaultTTL, at most MaxTTL).
	TTL time.Duration
	// Audience and Issuer override the provider's when set.
	Audience, Issuer string
	// NotBefore, when not zero, adds nbf at now plus it.
	NotBefore time.Duration
}

// Minted is a signed token and what a caller may want to know of it without decoding it, as
// POST /mint answers it.
type Minted struct {
	Token     string    `json:"token"`
	KeyID     string    `json:"kid"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Mint signs a token for m. A request without a subject, or with a ttl out of range, is an
// EINVALID error.
func (p *Provider) Mint(m Mint) (Minted, error) {
	if strings.TrimSpace(m.Subject) == "" {
		return Minted{}, fx.Errorf(fx.EINVALID, "sub is required: the platform user id the token is for, such as \"42\".")
	}
	ttl := m.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < time.Second || ttl > MaxTTL {
		return Minted{}, fx.Errorf(fx.EINVALID, "ttl %s must be from 1s to %s.", ttl, MaxTTL)
	}
	now := p.now()
	exp := now.Add(ttl)
	claims := jwt.MapClaims{
		"iss": cmp.Or(m.Issuer, p.issuer),
		"aud": cmp.Or(m.Audience, p.audience),
		"sub": m.Subject,
		"iat": now.Unix(),
		"exp": exp.Unix(),
		"jti": randomHex(12),
	}
	if m.Scope != nil {
		claims["scope"] = *m.Scope
	}
	if m.NotBefore != 0 {
		claims["nbf"] = now.Add(m.NotBefore).Unix()
	}
	tok, kid, err := p.sign(claims)
	if err != nil {
		return Minted{}, err
	}
	return Minted{Token: tok, KeyID: kid, ExpiresAt: time.Unix(exp.Unix(), 0).UTC()}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b)
}
