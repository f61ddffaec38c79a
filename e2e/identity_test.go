package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"fxdesk/internal/idp"
	"fxdesk/internal/testkit/poll"
)

// hostProvider is the bundled test identity provider, serving its key set on a loopback port
// of its own, and the desk's settings that trust it. The provider listens behind a proxy the
// test can cut, which makes its key set unreachable without stopping the provider.
type hostProvider struct {
	p     *idp.Provider
	proxy *httptest.Server
	env   []string
}

func newHostProvider(t *testing.T) *hostProvider {
	t.Helper()
	p, err := idp.New("https://host.example", "fxdesk-e2e")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)
	return &hostProvider{p: p, proxy: proxy, env: []string{
		"FXDESK_JWT_JWKS_URL=" + proxy.URL + "/.well-known/jwks.json", "FXDESK_JWT_ISSUER=" + p.Issuer(),
		"FXDESK_JWT_AUDIENCE=" + p.Audience(), "FXDESK_JWT_LEEWAY=1s"}}
}

// mint signs a token for user with scope (nil: no scope claim) that lives ttl.
func (h *hostProvider) mint(t *testing.T, user int64, scope *string, ttl time.Duration) idp.Minted {
	t.Helper()
	m, err := h.p.Mint(idp.Mint{Subject: fmt.Sprint(user), Scope: scope, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ptr(s string) *string { return &s }

// The desk accepts the host's tokens beside its own, on the holder and on a follower: a trader
// signed in on the host opens an account, is funded, and trades with nothing but the host's
// token. The host rotates its key and a token signed with the new one works at once, with no
// restart. A host token that expires is refused on both processes from its expiry on (plus the
// 1 s leeway set here), though both accepted it just before.
func TestHostTokensOnTheHolderAndAFollower(t *testing.T) {
	t.Parallel()
	host := newHostProvider(t)
	w := newWebTier(t, host.env...)
	holder, follower, admin := w.d.web, w.follower, w.d.admin
	w.d.setQuote(admin, "EURUSD", "1.10000", "1.10020")
	const user = 5101
	tok := host.mint(t, user, nil, time.Hour).Token // no scope claim: the host's sign-in, read and trade
	var a accountResp
	must(t, holder, tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":100}`, http.StatusCreated, &a)
	must(t, holder, admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", a.Account.ID), `{"amount":"10000.00"}`, http.StatusCreated, nil)
	order := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":"host-1"}`, a.Account.ID)
	// Through the follower, which forwards the order to the holder with the same token.
	must(t, follower, tok, "POST", "/api/fx/orders", order, http.StatusCreated, nil)
	for _, p := range []*proc{holder, follower} {
		var ps struct {
			Positions []struct{ ID int64 } `json:"positions"`
		}
		must(t, p, tok, "GET", "/api/fx/positions", "", http.StatusOK, &ps)
		if len(ps.Positions) != 1 {
			t.Fatalf("%s: the host token's trader has %d positions, want 1", p.name, len(ps.Positions))
		}
	}
	var balance string
	if err := w.d.e.sql.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", a.Account.ID).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	w.d.checkLedger(a.Account.ID, balance) // Σ deals = balance: the deposit and the order's commission

	// Rotation: the new key's first token makes the desk read the key set again.
	if _, err := host.p.Rotate("ES256", false); err != nil {
		t.Fatal(err)
	}
	rotated := host.mint(t, user, ptr("read"), time.Hour)
	for _, p := range []*proc{holder, follower} {
		if code, b := call(t, p, rotated.Token, "GET", "/api/fx/accounts", ""); code != http.StatusOK {
			t.Fatalf("%s: a token of the rotated key (%s): %d %s", p.name, rotated.KeyID, code, b)
		}
	}

	// Expiry: accepted on both, then refused on both from exp + leeway.
	short := host.mint(t, user, nil, 2*time.Second)
	for _, p := range []*proc{holder, follower} {
		if code, b := call(t, p, short.Token, "GET", "/api/fx/accounts", ""); code != http.StatusOK {
			t.Fatalf("%s: a live short token: %d %s", p.name, code, b)
		}
	}
	refusedBy := short.ExpiresAt.Add(time.Second + 2*time.Second) // leeway, and the second exp is rounded to
	poll.Until(t, time.Until(refusedBy)+5*time.Second, 100*time.Millisecond, "the expired host token refused on both processes", func() bool {
		return call2(t, holder, short.Token) == http.StatusUnauthorized && call2(t, follower, short.Token) == http.StatusUnauthorized
	})
	if late := time.Since(refusedBy); late > 0 {
		t.Fatalf("the expired host token was accepted until %s past exp + leeway", late)
	}
}

func call2(t *testing.T, p *proc, token string) int {
	code, _ := call(t, p, token, "GET", "/api/fx/accounts", "")
	return code
}

// The attack list: tokens a host never signed, or signed for something else, each refused with
// 401 and nothing changed; a host token names its own user only; a read-only one cannot trade.
func TestHostTokenAttacksAreRefused(t *testing.T) {
	t.Parallel()
	host := newHostProvider(t)
	d := newTradingDesk(t, host.env...)
	d.setQuote(d.admin, "EURUSD", "1.10000", "1.10020")
	victim, acct := d.newTrader(5201, "USD", "100", "5000.00")
	_ = victim
	before := d.snapshot()
	now := time.Now()
	claims := func(over jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"iss": host.p.Issuer(), "aud": host.p.Audience(), "sub": "5201", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		for k, v := range over {
			if v == nil {
				delete(c, k)
				continue
			}
			c[k] = v
		}
		return c
	}
	signed := func(c jwt.MapClaims) string {
		tok, err := host.p.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil))
	none.Header["kid"] = host.p.KeyID()
	noneTok, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(host.p.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
	hs.Header["kid"] = host.p.KeyID()
	hsTok, err := hs.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	order := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":"attack"}`, acct)
	for _, tc := range []struct{ name, token string }{
		{"alg none", noneTok},
		{"HS256 signed with the public key", hsTok},
		{"wrong issuer", signed(claims(jwt.MapClaims{"iss": "https://evil.example"}))},
		{"wrong audience", signed(claims(jwt.MapClaims{"aud": "another-desk"}))},
		{"expired", signed(claims(jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}))},
		{"not yet valid", signed(claims(jwt.MapClaims{"nbf": now.Add(time.Minute).Unix()}))},
		{"no expiry", signed(claims(jwt.MapClaims{"exp": nil}))},
		{"user id not a number", signed(claims(jwt.MapClaims{"sub": "alice"}))},
		{"no scope the desk knows", signed(claims(jwt.MapClaims{"scope": "admin"}))},
	} {
		if code, b := call(t, d.web, tc.token, "POST", "/api/fx/orders", order); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", tc.name, code, b)
		}
	}
	// Another user's good token on the victim's account: not found, as any other user's account.
	other := host.mint(t, 5202, nil, time.Hour).Token
	if code, b := call(t, d.web, other, "POST", "/api/fx/orders", order); code != http.StatusNotFound {
		t.Errorf("another user's host token on the victim's account: %d %s, want 404", code, b)
	}
	if code, b := call(t, d.web, other, "GET", fmt.Sprintf("/api/fx/accounts/%d", acct), ""); code != http.StatusNotFound {
		t.Errorf("another user's host token reading the victim's account: %d %s, want 404", code, b)
	}
	// The victim's own read-only token reads and cannot trade.
	readOnly := host.mint(t, 5201, ptr("read"), time.Hour).Token
	if code, b := call(t, d.web, readOnly, "POST", "/api/fx/orders", order); code != http.StatusForbidden {
		t.Errorf("a read-only host token placing an order: %d %s, want 403", code, b)
	}
	if code, b := call(t, d.web, readOnly, "GET", fmt.Sprintf("/api/fx/accounts/%d", acct), ""); code != http.StatusOK {
		t.Errorf("a read-only host token reading its own account: %d %s, want 200", code, b)
	}
	// An unknown key id while the host's key set cannot be reached: refused, promptly.
	host.proxy.CloseClientConnections()
	host.proxy.Close()
	if _, err := host.p.Rotate("ES256", true); err != nil {
		t.Fatal(err)
	}
	unknown := host.mint(t, 5201, nil, time.Hour).Token
	start := time.Now()
	if code, b := call(t, d.web, unknown, "POST", "/api/fx/orders", order); code != http.StatusUnauthorized {
		t.Errorf("an unknown key id with the key set unreachable: %d %s, want 401", code, b)
	}
	t.Logf("the unknown key id was refused in %s with the key set unreachable", time.Since(start))
	if after := d.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused host tokens changed the database:\nbefore %v\nafter  %v", before, after)
	}
}
