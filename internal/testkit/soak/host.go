package soak

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"fxdesk/internal/idp"
)

// The host platform's sign-in: the bundled test identity provider (internal/idp) runs inside the
// soak on a loopback port of its own, every web process trusts it (FXDESK_JWT_*), and half the
// traders trade with a token it signed instead of a desk token (docs/identity.md, «Host-issued
// tokens»). Their requests are judged by the same invariants as everyone's.

// hostIssuer and hostAudience are what the soak's host signs and the desk requires.
const (
	hostIssuer   = "soak-host"
	hostAudience = "fxdesk-soak"
)

// hostSignIn is the soak's identity provider, served until close.
type hostSignIn struct {
	p   *idp.Provider
	srv *http.Server
	url string // its key set's URL
}

func startHostSignIn() (*hostSignIn, error) {
	p, err := idp.New(hostIssuer, hostAudience)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("host sign-in: %w", err)
	}
	h := &hostSignIn{p: p, srv: &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second},
		url: "http://" + ln.Addr().String() + "/.well-known/jwks.json"}
	go h.srv.Serve(ln)
	return h, nil
}

// env is what a web process needs to trust the host's tokens.
func (h *hostSignIn) env() []string {
	return []string{"FXDESK_JWT_JWKS_URL=" + h.url, "FXDESK_JWT_ISSUER=" + hostIssuer, "FXDESK_JWT_AUDIENCE=" + hostAudience}
}

// token signs in user for ttl, with the host's sign-in scopes (no scope claim: read and trade).
func (h *hostSignIn) token(user int64, ttl time.Duration) (string, error) {
	m, err := h.p.Mint(idp.Mint{Subject: fmt.Sprint(user), TTL: min(ttl, idp.MaxTTL)})
	if err != nil {
		return "", fmt.Errorf("sign user %d in at the host: %w", user, err)
	}
	return m.Token, nil
}

func (h *hostSignIn) close() { h.srv.Close() }
