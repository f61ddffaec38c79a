package idp

import (
	"fmt"
	"net/http"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/sim/control"
)

// Handler serves the provider's HTTP API (doc.go): the key set to anyone, minting and rotating
// to loopback callers only.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+JWKSPath, p.serveJWKS)
	mux.Handle("POST /mint", control.LoopbackOnly(http.HandlerFunc(p.serveMint)))
	mux.Handle("POST /rotate", control.LoopbackOnly(http.HandlerFunc(p.serveRotate)))
	return mux
}

func (p *Provider) serveJWKS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(p.JWKS())
}

type mintRequest struct {
	Sub   string  `json:"sub"`
	Scope *string `json:"scope"`
	TTL   string  `json:"ttl"`
	Aud   string  `json:"aud"`
	Iss   string  `json:"iss"`
	NBF   string  `json:"nbf"`
}

func (p *Provider) serveMint(w http.ResponseWriter, r *http.Request) {
	var req mintRequest
	if !control.DecodeBody(w, r, &req) {
		return
	}
	m := Mint{Subject: req.Sub, Scope: req.Scope, Audience: req.Aud, Issuer: req.Iss}
	for _, d := range []struct {
		name, raw string
		into      *time.Duration
	}{{"ttl", req.TTL, &m.TTL}, {"nbf", req.NBF, &m.NotBefore}} {
		if d.raw == "" {
			continue
		}
		v, err := time.ParseDuration(d.raw)
		if err != nil {
			writeError(w, fx.Errorf(fx.EINVALID, "%s %q is not a duration (examples: 15m, 90s, -10s).", d.name, d.raw))
			return
		}
		*d.into = v
	}
	minted, err := p.Mint(m)
	if err != nil {
		writeError(w, err)
		return
	}
	control.WriteJSON(w, http.StatusOK, minted)
}

type rotateRequest struct {
	Alg    string `json:"alg"`
	Retire bool   `json:"retire"`
}

type rotateAnswer struct {
	KeyID     string `json:"kid"`
	Alg       string `json:"alg"`
	Published int    `json:"published"`
}

func (p *Provider) serveRotate(w http.ResponseWriter, r *http.Request) {
	var req rotateRequest
	// The body is optional: a bare POST rotates to a new key of the same algorithm.
	if r.ContentLength != 0 && !control.DecodeBody(w, r, &req) {
		return
	}
	answer, err := p.rotate(req.Alg, req.Retire)
	if err != nil {
		writeError(w, err)
		return
	}
	control.WriteJSON(w, http.StatusOK, answer)
}

// writeError answers an EINVALID error 400 with its message, and anything else 500 without
// its details.
func writeError(w http.ResponseWriter, err error) {
	if fx.ErrorCode(err) == fx.EINVALID {
		control.WriteError(w, http.StatusBadRequest, "EINVALID", fx.ErrorMessage(err))
		return
	}
	control.WriteError(w, http.StatusInternalServerError, "EINTERNAL", fx.ErrorMessage(err))
}

// ListeningLine is the line cmd/idp prints on stdout once it listens (without the newline): where
// its key set is, and what its tokens carry.
func ListeningLine(baseURL, issuer, audience string) string {
	return fmt.Sprintf("idp listening jwks=%s%s issuer=%s audience=%s", baseURL, JWKSPath, issuer, audience)
}
