package auth_test

import (
	"strings"
	"testing"

	"fxdesk/internal/auth"
)

// docs/identity.md: the key set URL is https://, or http:// on loopback or a private network. A
// key set read in clear over the internet lets anyone on the path publish their own key and sign
// any trader's token.
func TestJWKSOverPlainHTTPOnlyOnLoopbackOrAPrivateNetwork(t *testing.T) {
	ok := auth.JWTConfig{Issuer: "i", Audience: "a", UserClaim: "sub", ScopeClaim: "scope", Leeway: auth.DefaultJWTLeeway, Refresh: auth.DefaultJWKSRefresh}
	for url, want := range map[string]bool{
		"https://host.example/jwks":    true,
		"http://127.0.0.1:4010/jwks":   true,
		"http://localhost:4010/jwks":   true,
		"http://10.1.2.3/jwks":         true,
		"http://192.168.0.7/jwks":      true,
		"http://host.example/jwks":     false,
		"http://203.0.113.9/jwks":      false,
		"http://127.0.0.1.nip.io/jwks": false,
	} {
		c := ok
		c.JWKSURL = url
		err := c.Check()
		if (err == nil) != want {
			t.Errorf("%s: accepted=%v, want %v (%v)", url, err == nil, want, err)
		}
		if err != nil && !strings.Contains(err.Error(), "FXDESK_JWT_JWKS_URL") {
			t.Errorf("%s: %v does not name the setting", url, err)
		}
	}
}
