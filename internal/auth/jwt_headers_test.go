package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ownHost serves a key set of one P-256 key of its own, so a test can sign tokens with any header.
func ownHost(t *testing.T) (string, *ecdsa.PrivateKey, *atomic.Int64) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	b := func(x []byte) string { return base64.RawURLEncoding.EncodeToString(x) }
	xb, yb := make([]byte, 32), make([]byte, 32)
	key.X.FillBytes(xb)
	key.Y.FillBytes(yb)
	set := fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","x":%q,"y":%q,"kid":"k1","alg":"ES256","use":"sig"}]}`, b(xb), b(yb))
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(set))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/jwks.json", key, &reads
}

// Headers and claims a forged or careless host token may carry: a crit extension is refused, a
// jku or x5u is never fetched, a role claim grants nothing, the audience may be a list holding the
// desk's, the issuer must match exactly, and a kid must name a key the set holds.
func TestHostTokenHeadersAndClaims(t *testing.T) {
	url, key, _ := ownHost(t)
	var fetched atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fetched.Add(1); w.Write([]byte(`{"keys":[]}`)) }))
	defer evil.Close()
	v, _ := newVerifier(t, url, nil)
	ctx := context.Background()
	now := time.Now()
	sign := func(hdr map[string]any, c jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
		tok.Header["kid"] = "k1"
		for k, v := range hdr {
			tok.Header[k] = v
		}
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	with := func(k string, val any) jwt.MapClaims { c := claims(now); c[k] = val; return c }
	for _, tc := range []struct {
		name   string
		token  string
		accept bool
	}{
		{"crit naming an unknown extension", sign(map[string]any{"crit": []string{"x-must-understand"}, "x-must-understand": true}, claims(now)), false},
		{"jku to another host", sign(map[string]any{"jku": evil.URL}, claims(now)), true},
		{"x5u to another host", sign(map[string]any{"x5u": evil.URL}, claims(now)), true},
		{"role claim superadmin", sign(nil, with("role", "superadmin")), true},
		{"aud array with the desk's", sign(nil, with("aud", []string{"other", testAudience})), true},
		{"aud array without the desk's", sign(nil, with("aud", []string{"other"})), false},
		{"issuer with a trailing slash", sign(nil, with("iss", testIssuer+"/")), false},
		{"iat in the future, exp in 10 years", sign(nil, func() jwt.MapClaims {
			c := claims(now)
			c["iat"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(10*365*24*time.Hour).Unix()
			return c
		}()), false},
		{"exp in 10 years", sign(nil, with("exp", now.Add(10*365*24*time.Hour).Unix())), true},
		{"nbf within the leeway", sign(nil, with("nbf", now.Add(10*time.Second).Unix())), true},
		{"sub with whitespace", sign(nil, with("sub", " 42")), false},
		{"sub as the JSON number 10", sign(nil, with("sub", 1e1)), true},
		{"sub as int64 max", sign(nil, with("sub", "9223372036854775807")), true},
		{"kid path traversal", func() string { s := sign(map[string]any{"kid": "../../etc/passwd"}, claims(now)); return s }(), false},
		{"kid of 6 KiB", sign(map[string]any{"kid": strings.Repeat("k", 6000)}, claims(now)), false},
		{"kid a number", sign(map[string]any{"kid": 1}, claims(now)), false},
		{"no kid", sign(map[string]any{"kid": nil}, claims(now)), false},
	} {
		_, err := v.Verify(ctx, tc.token)
		if (err == nil) != tc.accept {
			t.Errorf("%s: accepted=%v, want %v (%v)", tc.name, err == nil, tc.accept, err)
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the desk fetched a URL a token named %d times", n)
	}
}
