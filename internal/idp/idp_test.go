package idp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"fxdesk/internal/fx"
	"fxdesk/internal/idp"
)

// publishedKey is one key of the served set as a verifier reads it.
type publishedKey struct {
	Kty, Kid, Alg, Use, Crv string
	D                       string `json:"d"` // a private part: must never appear
}

func serve(t *testing.T, p *idp.Provider) string {
	t.Helper()
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s %s: %d, undecodable body: %v", url, body, resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

func keySet(t *testing.T, base string) []publishedKey {
	t.Helper()
	resp, err := http.Get(base + idp.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("key set: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var set struct{ Keys []publishedKey }
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	return set.Keys
}

// verifyWithSet checks token against the served key set with the libraries alone, as any host
// token verifier would: the provider's tokens and its key set agree.
func verifyWithSet(t *testing.T, base, token string) (jwt.MapClaims, error) {
	t.Helper()
	resp, err := http.Get(base + idp.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	kf, err := keyfunc.NewJWKSetJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(token, c, kf.Keyfunc, jwt.WithExpirationRequired())
	return c, err
}

// A minted token carries the request's claims and verifies with the published key set, for each
// algorithm; the set publishes public keys only, each with its kid, alg and use.
func TestMintedTokensVerifyWithThePublishedSet(t *testing.T) {
	t.Parallel()
	p, err := idp.New("https://host.example", "fxdesk")
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, p)
	for _, alg := range []string{idp.ES256, idp.RS256, idp.EdDSA} {
		if _, err := p.Rotate(alg, true); err != nil {
			t.Fatal(err)
		}
		keys := keySet(t, base)
		if len(keys) != 1 || keys[0].Kid != p.KeyID() || keys[0].Alg != alg || keys[0].Use != "sig" || keys[0].D != "" {
			t.Fatalf("%s: published %+v", alg, keys)
		}
		status, body := post(t, base+"/mint", `{"sub":"42","scope":"read trade","ttl":"90s","nbf":"-5s"}`)
		if status != http.StatusOK {
			t.Fatalf("%s: mint %d %v", alg, status, body)
		}
		tok, _ := body["token"].(string)
		c, err := verifyWithSet(t, base, tok)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		iat, _ := c.GetIssuedAt()
		exp, _ := c.GetExpirationTime()
		nbf, _ := c.GetNotBefore()
		if c["iss"] != "https://host.example" || c["aud"] != "fxdesk" || c["sub"] != "42" || c["scope"] != "read trade" || c["jti"] == "" ||
			exp.Sub(iat.Time) != 90*time.Second || iat.Sub(nbf.Time) != 5*time.Second {
			t.Errorf("%s: claims %v", alg, c)
		}
		if body["kid"] != p.KeyID() || body["expiresAt"] != exp.UTC().Format(time.RFC3339) {
			t.Errorf("%s: answer %v, want kid %s and expiresAt %s", alg, body, p.KeyID(), exp.UTC().Format(time.RFC3339))
		}
	}
	// Overrides, and a token with no scope claim at all.
	m, err := p.Mint(idp.Mint{Subject: "7", Audience: "other", Issuer: "https://other.example"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := verifyWithSet(t, base, m.Token)
	if _, hasScope := c["scope"]; err != nil || c["aud"] != "other" || c["iss"] != "https://other.example" || hasScope {
		t.Errorf("overrides: %v %v", c, err)
	}
}

// A rotation publishes the new key beside the old ones, so tokens of the old key keep verifying,
// and signs with the new one; retire drops the old keys.
func TestRotateKeepsOldKeysPublishedUntilRetired(t *testing.T) {
	t.Parallel()
	p, err := idp.New("https://host.example", "fxdesk")
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, p)
	first := p.KeyID()
	old, err := p.Mint(idp.Mint{Subject: "42"})
	if err != nil {
		t.Fatal(err)
	}
	status, body := post(t, base+"/rotate", `{"alg":"EdDSA"}`)
	if status != http.StatusOK || body["alg"] != idp.EdDSA || body["published"] != 2.0 || body["kid"] == first || body["kid"] != p.KeyID() {
		t.Fatalf("rotate: %d %v", status, body)
	}
	kids := []string{}
	for _, k := range keySet(t, base) {
		kids = append(kids, k.Kid)
	}
	if !slices.Equal(kids, []string{first, p.KeyID()}) && !slices.Equal(kids, []string{p.KeyID(), first}) {
		t.Errorf("published %v, want %s and %s", kids, first, p.KeyID())
	}
	if _, err := verifyWithSet(t, base, old.Token); err != nil {
		t.Errorf("the old key's token after a rotation: %v", err)
	}
	fresh, err := p.Mint(idp.Mint{Subject: "42"})
	if err != nil || fresh.KeyID != p.KeyID() {
		t.Fatalf("after rotation, minted with %s, want %s: %v", fresh.KeyID, p.KeyID(), err)
	}
	// A bare POST keeps the algorithm; retire leaves the new key alone.
	status, body = post(t, base+"/rotate", "")
	if status != http.StatusOK || body["alg"] != idp.EdDSA || body["published"] != 3.0 {
		t.Fatalf("bare rotate: %d %v", status, body)
	}
	status, body = post(t, base+"/rotate", `{"retire":true}`)
	if status != http.StatusOK || body["published"] != 1.0 {
		t.Fatalf("rotate and retire: %d %v", status, body)
	}
	if _, err := verifyWithSet(t, base, old.Token); err == nil {
		t.Error("the retired key's token still verifies")
	}
}

// Bad requests are refused with a message saying what is wrong, and change nothing.
func TestBadRequestsAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	p, err := idp.New("https://host.example", "fxdesk")
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, p)
	kid := p.KeyID()
	for _, tc := range []struct{ path, body, want string }{
		{"/mint", `{"scope":"read"}`, "sub is required"},
		{"/mint", `{"sub":"42","ttl":"forever"}`, "not a duration"},
		{"/mint", `{"sub":"42","ttl":"0.5s"}`, "from 1s"},
		{"/mint", `{"sub":"42","ttl":"48h"}`, "24h"},
		{"/mint", `{"sub":"42","nbf":"soon"}`, "not a duration"},
		{"/mint", `{"sub":"42","scopes":"read"}`, "unknown field"},
		{"/rotate", `{"alg":"HS256"}`, "ES256, RS256 or EdDSA"},
		{"/rotate", `{"alg":"RS256","retier":true}`, "unknown field"},
	} {
		status, body := post(t, base+tc.path, tc.body)
		e, _ := body["error"].(map[string]any)
		if msg, _ := e["message"].(string); status != http.StatusBadRequest || e["code"] != "EINVALID" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %s: %d %v, want 400 EINVALID saying %q", tc.path, tc.body, status, body, tc.want)
		}
	}
	if p.KeyID() != kid || p.Published() != 1 {
		t.Errorf("refused requests changed the keys: %s, %d published", p.KeyID(), p.Published())
	}
	if _, err := p.Mint(idp.Mint{Subject: " "}); fx.ErrorCode(err) != fx.EINVALID {
		t.Errorf("Mint with a blank subject: %v", err)
	}
	if _, err := idp.New("", "fxdesk"); fx.ErrorCode(err) != fx.EINVALID {
		t.Errorf("New without an issuer: %v", err)
	}
}

// Anyone may read the key set; only this machine may mint or rotate.
func TestMintAndRotateAnswerLoopbackOnly(t *testing.T) {
	t.Parallel()
	p, err := idp.New("https://host.example", "fxdesk")
	if err != nil {
		t.Fatal(err)
	}
	h := p.Handler()
	for _, tc := range []struct {
		method, path, remote string
		want                 int
	}{
		{http.MethodGet, idp.JWKSPath, "203.0.113.7:4000", http.StatusOK},
		{http.MethodPost, "/mint", "203.0.113.7:4000", http.StatusForbidden},
		{http.MethodPost, "/rotate", "203.0.113.7:4000", http.StatusForbidden},
		{http.MethodPost, "/mint", "127.0.0.1:4000", http.StatusOK},
		{http.MethodPost, "/rotate", "[::1]:4000", http.StatusOK},
		{http.MethodGet, "/mint", "127.0.0.1:4000", http.StatusMethodNotAllowed},
	} {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(`{"sub":"42"}`))
		if tc.path == "/rotate" {
			req = httptest.NewRequest(tc.method, tc.path, nil)
		}
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s %s from %s: %d, want %d", tc.method, tc.path, tc.remote, rec.Code, tc.want)
		}
	}
	if p.Published() != 2 {
		t.Errorf("%d keys published, want 2: one rotation came from loopback, one from afar", p.Published())
	}
}
