package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
	"fxdesk/internal/idp"
	"fxdesk/internal/testkit/poll"
)

const (
	testIssuer   = "https://host.example"
	testAudience = "fxdesk"
)

// hostIDP is the bundled identity provider served over HTTP on 127.0.0.1, counting the reads of
// its key set so a test can see when the desk asks for it.
type hostIDP struct {
	*idp.Provider
	url   string // the key set's URL
	reads atomic.Int64
	// hang, while set, holds every read of the key set unanswered until the test ends.
	hang atomic.Bool
}

func newHostIDP(t testing.TB) *hostIDP {
	t.Helper()
	p, err := idp.New(testIssuer, testAudience)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostIDP{Provider: p}
	done := make(chan struct{})
	inner := p.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == idp.JWKSPath {
			h.reads.Add(1)
			if h.hang.Load() {
				select {
				case <-done:
				case <-r.Context().Done():
				}
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	h.url = srv.URL + idp.JWKSPath
	return h
}

// mint signs a token for user with the provider's defaults and scope (nil: no scope claim).
func (h *hostIDP) mint(t testing.TB, sub string, scope *string) string {
	t.Helper()
	m, err := h.Mint(idp.Mint{Subject: sub, Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	return m.Token
}

// claims are a valid token's claims at now, for tests that change one.
func claims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "42", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
}

// logBuffer collects a verifier's log lines; its background refresh writes too.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newVerifier(t testing.TB, url string, edit func(*auth.JWTConfig)) (*auth.JWTVerifier, *logBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := auth.JWTConfig{JWKSURL: url, Issuer: testIssuer, Audience: testAudience}
	if edit != nil {
		edit(&cfg)
	}
	logs := &logBuffer{}
	v, err := auth.NewJWTVerifier(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return v, logs
}

func ptr(s string) *string { return &s }

// A token the identity provider mints verifies, and says who it is for and what it may do: the
// scopes it lists that the desk knows, or every scope when it lists none (the host's sign-in
// token). Whatever the key's algorithm.
func TestHostTokenMintedByTheIdentityProviderVerifies(t *testing.T) {
	h := newHostIDP(t)
	v, _ := newVerifier(t, h.url, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		scope *string
		want  []string
	}{
		{ptr("read trade"), []string{"read", "trade"}},
		{ptr("trade  read"), []string{"read", "trade"}},
		{ptr("read"), []string{"read"}},
		{ptr("read admin openid"), []string{"read"}}, // names the desk does not know are ignored
		{ptr(""), []string{}},                        // present and empty: no scope
		{nil, []string{"read", "trade"}},             // absent: the host's sign-in token
	} {
		m, err := h.Mint(idp.Mint{Subject: "42", Scope: tc.scope})
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Verify(ctx, m.Token)
		if err != nil {
			t.Fatalf("scope %v: %v", tc.scope, err)
		}
		if got.UserID != 42 || got.Subject != "42" || got.TokenID == "" || !got.Expires.Equal(m.ExpiresAt) || !slices.Equal(got.Scopes, tc.want) {
			t.Errorf("scope %v: %+v, want user 42, scopes %q, expiry %s", tc.scope, got, tc.want, m.ExpiresAt)
		}
	}
	// The scope claim as an array, and a user id as a JSON number.
	tok, err := h.Sign(func() jwt.MapClaims {
		c := claims(time.Now())
		c["sub"], c["scope"] = 7, []string{"trade", "admin"}
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Verify(ctx, tok); err != nil || got.UserID != 7 || !slices.Equal(got.Scopes, []string{"trade"}) {
		t.Errorf("array scope, numeric sub: %+v %v", got, err)
	}
	for _, alg := range []string{idp.RS256, idp.EdDSA} {
		h := newHostIDP(t)
		if _, err := h.Rotate(alg, true); err != nil {
			t.Fatal(err)
		}
		v, _ := newVerifier(t, h.url, nil)
		if got, err := v.Verify(ctx, h.mint(t, "43", ptr("read"))); err != nil || got.UserID != 43 {
			t.Errorf("%s: %+v %v", alg, got, err)
		}
	}
}

// After the host rotates, a token signed with the new key verifies without restarting the
// verifier: its unknown kid reads the key set once. Tokens of the old key, still published, keep
// verifying, and known keys never cost a read.
func TestRotatedKeyVerifiesWithoutRestart(t *testing.T) {
	h := newHostIDP(t)
	v, _ := newVerifier(t, h.url, nil)
	ctx := context.Background()
	old := h.mint(t, "42", nil)
	if _, err := v.Verify(ctx, old); err != nil {
		t.Fatal(err)
	}
	startReads := h.reads.Load()
	if _, err := h.Rotate("", false); err != nil {
		t.Fatal(err)
	}
	fresh := h.mint(t, "42", nil)
	if _, err := v.Verify(ctx, fresh); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if got := h.reads.Load() - startReads; got != 1 {
		t.Errorf("the new key cost %d reads of the key set, want 1", got)
	}
	for i := range 50 {
		for _, tok := range []string{h.mint(t, fmt.Sprint(100+i), nil), old} {
			if _, err := v.Verify(ctx, tok); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := h.reads.Load() - startReads; got != 1 {
		t.Errorf("known keys cost %d more reads of the key set", got-1)
	}
}

// Each forged, misdirected or malformed token is refused with an EUNAUTH error saying why, and
// the error never quotes the token.
func TestHostTokenAttacksAreRefused(t *testing.T) {
	h := newHostIDP(t)
	v, _ := newVerifier(t, h.url, nil)
	ctx := context.Background()
	now := time.Now()
	sign := func(c jwt.MapClaims) string {
		t.Helper()
		tok, err := h.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// with signs the valid claims with k set to val, or without k when val is absent.
	type absentClaim struct{}
	absent := absentClaim{}
	with := func(k string, val any) string {
		c := claims(now)
		if val == absent {
			delete(c, k)
		} else {
			c[k] = val
		}
		return sign(c)
	}
	mint := func(m idp.Mint) string {
		m.Subject = "42"
		minted, err := h.Mint(m)
		if err != nil {
			t.Fatal(err)
		}
		return minted.Token
	}
	// byHand signs claims with method and key, naming kid.
	byHand := func(method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
		tok := jwt.NewWithClaims(method, c)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	der, err := x509.MarshalPKIXPublicKey(h.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	publicPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(now)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	// A published key of each other type, for tokens whose alg does not match their kid's key.
	rsaKID, err := h.Rotate(idp.RS256, false)
	if err != nil {
		t.Fatal(err)
	}
	edKID, err := h.Rotate(idp.EdDSA, false)
	if err != nil {
		t.Fatal(err)
	}
	esKID, err := h.Rotate(idp.ES256, false)
	if err != nil {
		t.Fatal(err)
	}
	good := sign(claims(now))
	head, payload, _ := strings.Cut(good, ".")
	payload, sig, _ := strings.Cut(payload, ".")
	tampered := claims(now)
	tampered["sub"] = "1"
	tamperedPayload := strings.Split(sign(tampered), ".")[1]

	for _, tc := range []struct {
		name, token, want string
	}{
		{"alg none, empty signature", none, "not a signed JWT"},
		{"alg none, made-up signature", none + "c2ln", "algorithm the desk does not accept"},
		{"HS256 keyed with the public key's PEM", byHand(jwt.SigningMethodHS256, publicPEM, esKID, claims(now)), "algorithm the desk does not accept"},
		{"HS256 keyed with the public key's DER", byHand(jwt.SigningMethodHS256, der, esKID, claims(now)), "algorithm the desk does not accept"},
		{"PS256, not on the list", byHand(jwt.SigningMethodPS256, otherRSA, rsaKID, claims(now)), "algorithm the desk does not accept"},
		{"no alg", base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","kid":"`+esKID+`"}`)) + "." + payload + "." + sig, "algorithm the desk does not accept"},
		{"wrong issuer", mint(idp.Mint{Issuer: "https://other.example"}), "(iss)"},
		{"wrong audience", mint(idp.Mint{Audience: "another-service"}), "(aud)"},
		{"no issuer", with("iss", absent), "lacks a claim"},
		{"no audience", with("aud", absent), "lacks a claim"},
		{"expired beyond the leeway", with("exp", now.Add(-time.Minute).Unix()), "has expired"},
		{"not valid yet beyond the leeway", mint(idp.Mint{NotBefore: 2 * time.Minute}), "not valid yet"},
		{"issued in the future beyond the leeway", with("iat", now.Add(2*time.Minute).Unix()), "issued in the future"},
		{"no exp", with("exp", absent), "no expiry"},
		{"exp not a number", with("exp", "tomorrow"), "not valid"},
		{"user id not a number", with("sub", "alice"), "positive whole number"},
		{"user id zero", with("sub", "0"), "positive whole number"},
		{"user id negative", with("sub", -5), "positive whole number"},
		{"user id a fraction", with("sub", 42.5), "positive whole number"},
		{"user id spelt 42.0", with("sub", "42.0"), "positive whole number"},
		{"user id spelt +42", with("sub", "+42"), "positive whole number"},
		{"user id spelt 042", with("sub", "042"), "positive whole number"},
		{"user id beyond int64", with("sub", "9223372036854775808"), "positive whole number"},
		{"no user id", with("sub", absent), "positive whole number"},
		{"scope a number", with("scope", 3), "space-separated string or an array"},
		{"scope null", with("scope", nil), "space-separated string or an array"},
		{"scope array of numbers", with("scope", []int{1}), "space-separated string or an array"},
		{"signed by a key not in the set, naming one that is", byHand(jwt.SigningMethodES256, otherEC, esKID, claims(now)), "does not verify"},
		{"EdDSA signed by another key, naming the published EdDSA kid", byHand(jwt.SigningMethodEdDSA, otherEd, edKID, claims(now)), "does not verify"},
		{"ES256 naming the RSA key's kid", byHand(jwt.SigningMethodES256, otherEC, rsaKID, claims(now)), "does not verify"},
		{"RS256 naming the EdDSA key's kid", byHand(jwt.SigningMethodRS256, otherRSA, edKID, claims(now)), "does not verify"},
		{"a kid the set does not hold", byHand(jwt.SigningMethodES256, otherEC, "made-up", claims(now)), "does not hold"},
		{"payload changed after signing", head + "." + tamperedPayload + "." + sig, "does not verify"},
		{"signature of another token", head + "." + payload + "." + strings.Split(sign(tampered), ".")[2], "does not verify"},
		{"padded base64", head + "=." + payload + "." + sig, "not a signed JWT"},
		{"two parts", head + "." + payload, "not a signed JWT"},
		{"garbage in three parts", "a.b.c", "not a signed JWT"},
		{"a desk token", "fxd_" + strings.Repeat("A", 43), "not a signed JWT"},
		{"too long", head + "." + strings.Repeat("A", 9000) + "." + sig, "not a signed JWT"},
	} {
		got, err := v.Verify(ctx, tc.token)
		if err == nil {
			t.Errorf("%s: accepted, %+v", tc.name, got)
			continue
		}
		if fx.ErrorCode(err) != fx.EUNAUTH || !strings.Contains(fx.ErrorMessage(err), tc.want) {
			t.Errorf("%s: %v, want an unauthorized error saying %q", tc.name, err, tc.want)
		}
		for _, part := range strings.Split(tc.token, ".") {
			if len(part) > 8 && strings.Contains(err.Error(), part) {
				t.Errorf("%s: the error quotes the token: %v", tc.name, err)
			}
		}
	}
	// The good token, for contrast: the table's refusals are the changes, not the setup.
	if _, err := v.Verify(ctx, good); err != nil {
		t.Fatalf("the untouched token: %v", err)
	}
}

// A host that publishes a symmetric key by mistake publishes its secret: an HS256 token made with
// it must still be refused, because HS256 is not among the accepted algorithms.
func TestSymmetricKeyInTheKeySetNeverVerifies(t *testing.T) {
	secret := []byte("a secret the host should never have published")
	set := fmt.Sprintf(`{"keys":[{"kty":"oct","kid":"shared","k":%q}]}`, base64.RawURLEncoding.EncodeToString(secret))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, set)
	}))
	t.Cleanup(srv.Close)
	v, _ := newVerifier(t, srv.URL, nil)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(time.Now()))
	tok.Header["kid"] = "shared"
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), s); fx.ErrorCode(err) != fx.EUNAUTH || !strings.Contains(fx.ErrorMessage(err), "algorithm the desk does not accept") {
		t.Errorf("HS256 with a published symmetric key: %v, want refused for its algorithm", err)
	}
}

// A key the host marks for encryption never verifies a signature, even a genuine one.
func TestKeyMarkedForEncryptionNeverVerifies(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jwkset.NewMemoryStorage()
	for kid, use := range map[string]jwkset.USE{"enc-key": jwkset.UseEnc, "sig-key": jwkset.UseSig} {
		jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgES256, USE: use}})
		if err != nil {
			t.Fatal(err)
		}
		if err := set.KeyWrite(context.Background(), jwk); err != nil {
			t.Fatal(err)
		}
	}
	published, err := set.JSONPublic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(published) }))
	t.Cleanup(srv.Close)
	v, _ := newVerifier(t, srv.URL, nil)
	for kid, accept := range map[string]bool{"enc-key": false, "sig-key": true} {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims(time.Now()))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(context.Background(), s); (err == nil) != accept {
			t.Errorf("signed with the key published as %s: %v, want accepted %v", kid, err, accept)
		}
	}
}

// The leeway absorbs clock skew and no more: a token expired 10 s ago, or valid 10 s from now,
// is accepted with the default 30 s and refused with 5 s.
func TestLeewayIsHonoured(t *testing.T) {
	h := newHostIDP(t)
	loose, _ := newVerifier(t, h.url, nil)
	strict, _ := newVerifier(t, h.url, func(c *auth.JWTConfig) { c.Leeway = 5 * time.Second })
	now := time.Now()
	expired := claims(now)
	expired["iat"], expired["exp"] = now.Add(-time.Minute).Unix(), now.Add(-10*time.Second).Unix()
	early := claims(now)
	early["nbf"] = now.Add(10 * time.Second).Unix()
	future := claims(now)
	future["iat"] = now.Add(10 * time.Second).Unix()
	for name, c := range map[string]jwt.MapClaims{"expired 10s ago": expired, "valid in 10s": early, "issued in 10s": future} {
		tok, err := h.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := loose.Verify(context.Background(), tok); err != nil {
			t.Errorf("%s, 30s leeway: %v", name, err)
		}
		if _, err := strict.Verify(context.Background(), tok); fx.ErrorCode(err) != fx.EUNAUTH {
			t.Errorf("%s, 5s leeway: %v, want refused", name, err)
		}
	}
}

// A host that cannot be reached at start is no reason not to start: the verifier warns, and a
// token is refused (its kid is unknown) at once rather than hanging on the host.
func TestUnreachableHostAtStartRefusesPromptly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + idp.JWKSPath
	ln.Close()
	v, logs := newVerifier(t, closed, nil)
	if !strings.Contains(logs.String(), "starts with no keys") {
		t.Errorf("no warning of the missing keys: %s", logs)
	}
	h := newHostIDP(t) // signs, but is not the verifier's host
	done := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), h.mint(t, "42", nil))
		done <- err
	}()
	if err, ok := poll.Receive(t, done, 10*time.Second, "refusal with the host unreachable"); ok &&
		(fx.ErrorCode(err) != fx.EUNAUTH || !strings.Contains(fx.ErrorMessage(err), "does not hold")) {
		t.Errorf("with the host unreachable: %v, want an unauthorized unknown-key error", err)
	}
}

// A host that accepts the connection and never answers holds a token of an unknown kid for at
// most UnknownKIDWait, well inside the 5 s a scheduled read may take.
func TestUnknownKIDWithAHangingHostIsBounded(t *testing.T) {
	h := newHostIDP(t)
	v, _ := newVerifier(t, h.url, nil)
	if _, err := h.Rotate("", false); err != nil {
		t.Fatal(err)
	}
	h.hang.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), h.mint(t, "42", nil))
		done <- err
	}()
	if err, ok := poll.Receive(t, done, 4*time.Second, "refusal with the host hanging"); ok && fx.ErrorCode(err) != fx.EUNAUTH {
		t.Errorf("with the host hanging: %v, want unauthorized", err)
	}
}

// A flood of tokens naming made-up kids makes the desk read the host's key set once, not once
// per token: the others are refused without asking.
func TestUnknownKIDFloodReadsTheKeySetOnce(t *testing.T) {
	h := newHostIDP(t)
	v, _ := newVerifier(t, h.url, nil)
	startReads := h.reads.Load()
	forger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for i := range 200 {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims(time.Now()))
		tok.Header["kid"] = fmt.Sprintf("kid-%d", i)
		s, err := tok.SignedString(forger)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), s); err == nil {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 0 {
		t.Fatalf("%d forged tokens accepted", accepted.Load())
	}
	if got := h.reads.Load() - startReads; got != 1 {
		t.Errorf("200 unknown kids cost %d reads of the key set, want 1", got)
	}
}

// A verified token is remembered: checking it again costs no signature check, until CacheFor has
// passed or the token has expired, whichever is first — an expired token is never served from
// memory.
func TestVerifiedTokenIsRememberedUntilItsBound(t *testing.T) {
	h := newHostIDP(t)
	v, _ := newVerifier(t, h.url, nil)
	base := time.Now()
	var offset atomic.Int64
	v.SetClock(func() time.Time { return base.Add(time.Duration(offset.Load())) })
	ctx := context.Background()
	tok := h.mint(t, "42", nil)
	for range 100 {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := v.SignatureChecks(); got != 1 {
		t.Fatalf("100 checks of one token cost %d signature checks, want 1", got)
	}
	offset.Store(int64(auth.CacheFor))
	if _, err := v.Verify(ctx, tok); err != nil || v.SignatureChecks() != 2 {
		t.Fatalf("after CacheFor: %v, %d signature checks, want it checked again", err, v.SignatureChecks())
	}

	// Expiring in 3 s: remembered for 3 s, not 5, and refused once past exp and the leeway.
	c := claims(base)
	c["exp"] = base.Add(3 * time.Second).Unix()
	short, err := h.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	offset.Store(0)
	if _, err := v.Verify(ctx, short); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(4 * time.Second))
	before := v.SignatureChecks()
	if _, err := v.Verify(ctx, short); err != nil || v.SignatureChecks() != before+1 {
		t.Errorf("past exp, inside the leeway: %v, %d signature checks, want it checked again and accepted", err, v.SignatureChecks()-before)
	}
	offset.Store(int64(3*time.Second + auth.DefaultJWTLeeway + time.Second))
	if _, err := v.Verify(ctx, short); fx.ErrorCode(err) != fx.EUNAUTH || !strings.Contains(fx.ErrorMessage(err), "expired") {
		t.Errorf("past exp and the leeway: %v, want expired", err)
	}
	// A caller that changes its scopes changes nobody else's.
	got, _ := v.Verify(ctx, tok)
	got.Scopes[0] = "admin"
	if again, _ := v.Verify(ctx, tok); again.Scopes[0] != "read" {
		t.Errorf("a caller's change reached the remembered claims: %q", again.Scopes)
	}
}

// The shape test the resolver uses to pick the path: three non-empty base64url parts, no more.
func TestLooksLikeJWT(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		"eyJh.eyJz.c2ln":          true,
		"a-_.B0.z":                true,
		"eyJh.eyJz.":              false, // alg none's empty signature
		".eyJz.c2ln":              false,
		"eyJh..c2ln":              false,
		"eyJh.eyJz":               false,
		"eyJh.eyJz.c2ln.ZXh0cmE":  false,
		"eyJh.eyJz.c2ln=":         false,
		"eyJh.eyJz.c2l+":          false,
		"eyJh.eyJz.c2ln ":         false,
		"fxd_" + "A1b2C3d4E5f6G7": false,
		"":                        false,
	} {
		if got := auth.LooksLikeJWT(raw); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", raw, got, want)
		}
	}
}

// A configuration the verifier cannot work with is refused at construction, naming the setting.
func TestJWTConfigIsCheckedAtConstruction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  auth.JWTConfig
		want string
	}{
		{auth.JWTConfig{JWKSURL: "ftp://host/jwks", Issuer: "i", Audience: "a"}, "FXDESK_JWT_JWKS_URL"},
		{auth.JWTConfig{JWKSURL: "host.example/jwks", Issuer: "i", Audience: "a"}, "FXDESK_JWT_JWKS_URL"},
		{auth.JWTConfig{JWKSURL: "https://host/jwks", Audience: "a"}, "FXDESK_JWT_ISSUER"},
		{auth.JWTConfig{JWKSURL: "https://host/jwks", Issuer: "i"}, "FXDESK_JWT_AUDIENCE"},
		{auth.JWTConfig{JWKSURL: "https://host/jwks", Issuer: "i", Audience: "a", Leeway: 10 * time.Minute}, "FXDESK_JWT_LEEWAY"},
		{auth.JWTConfig{JWKSURL: "https://host/jwks", Issuer: "i", Audience: "a", Refresh: time.Second}, "FXDESK_JWT_REFRESH"},
	} {
		_, err := auth.NewJWTVerifier(context.Background(), tc.cfg, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// Verify never panics on any input, never accepts anything but the tokens the provider signed,
// and refuses everything else as unauthorized (never an internal error).
func FuzzVerify(f *testing.F) {
	h := newHostIDP(f)
	v, _ := newVerifier(f, h.url, nil)
	valid := h.mint(f, "42", ptr("read"))
	f.Add(valid)
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiI0MiJ9.")
	f.Add(strings.Replace(valid, ".", "..", 1))
	f.Add(valid[:len(valid)-2])
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := v.Verify(context.Background(), raw)
		if err == nil {
			if raw != valid {
				t.Fatalf("accepted %q as %+v", raw, got)
			}
			return
		}
		if fx.ErrorCode(err) != fx.EUNAUTH {
			t.Fatalf("%q: %v, want unauthorized", raw, err)
		}
	})
}

// Verify of a token seen within CacheFor costs a hash and a map read; of a new token, the
// signature check too.
func BenchmarkVerify(b *testing.B) {
	h := newHostIDP(b)
	v, _ := newVerifier(b, h.url, nil)
	ctx := context.Background()
	tok := h.mint(b, "42", ptr("read trade"))
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			v.ForgetVerified()
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}
