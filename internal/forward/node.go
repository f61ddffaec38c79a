package forward

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"fxdesk/internal/config"
	"fxdesk/internal/fx"
)

// Header is the node-to-node header a follower adds to a forwarded request:
// "term=T;ts=UNIXMS;nonce=HEX;sig=HEX", sig being HMAC-SHA256 under FXDESK_CLUSTER_SECRET over
// the method, the path, the raw query, the SHA-256 of the body, the lease term the follower read,
// the timestamp and a random nonce. It authenticates the follower, not the trader: the trader's
// own Authorization travels beside it and is checked again by the holder.
const Header = "Fxdesk-Node"

// NotHolderHeader marks the 503 a process answers to a forwarded request for a term it does not
// hold, so the follower can tell "ask someone else" from the holder's own 503s (a halted symbol, a
// lapsed lease), which it passes through. Its value is the answering process's term, 0 for none.
const NotHolderHeader = "Fxdesk-Not-Holder"

// RefusedHeader marks the 403 a process answers to a node header it does not accept, so that a
// follower can tell "the holder does not trust me" (an operator's problem, logged at error) from a
// trader's own 403. Its value is the reason (Refusal*); it never carries the secret or a signature.
const RefusedHeader = "Fxdesk-Node-Refused"

// Why a node header was refused: the value of RefusedHeader and of the "reason" log attribute.
const (
	RefusalMalformed = "malformed" // not term=…;ts=…;nonce=…;sig=…, or sent twice
	RefusalSignature = "signature" // another secret, or the method, path, query or body differ
	RefusalStale     = "stale"     // timestamp more than maxSkew from this process's clock
	RefusalReplayed  = "replayed"  // this signature was already accepted once
	RefusalOff       = "off"       // this process has no cluster secret (forwarding off)
)

// ForwardedHeader is set on the answer a follower passes back from the holder: the lease term the
// forward named, so a client (and the soak) can tell a forwarded answer from a local one.
const ForwardedHeader = "Fxdesk-Forwarded-Term"

// maxSkew bounds how far a node header's timestamp may lie from the receiver's clock: it tolerates
// ordinary clock skew between machines, and is how long a header's nonce must be remembered.
const maxSkew = 30 * time.Second

// rememberFor is how long an accepted nonce is kept: a header accepted at t carries ts ≤ t+maxSkew,
// so it turns stale by t+2·maxSkew at the latest, on the same clock. Past that the stale check
// refuses it and the nonce need not be remembered.
const rememberFor = 2 * maxSkew

// maxRemembered bounds the nonces a process keeps: 2^18 is about 4,400 forwarded requests a second
// sustained over rememberFor, in under 20 MB. Past it a forwarded request is refused as busy (503)
// rather than a nonce forgotten, since a forgotten nonce could be replayed.
const maxRemembered = 1 << 18

// Signer signs and verifies node headers with the cluster secret, and remembers the nonces it has
// accepted so that each signature is accepted once.
type Signer struct {
	secret []byte
	now    func() time.Time

	mu    sync.Mutex
	seen  map[[nonceLen]byte]int64 // nonce → UnixNano it was accepted at
	order [][nonceLen]byte         // seen's keys in acceptance order; order[head:] are live
	head  int
	limit int
}

const nonceLen = 16

// NewSigner returns a signer for secret, which must be as strong as config.CheckClusterSecret
// demands; now is the clock (time.Now when nil).
func NewSigner(secret string, now func() time.Time) (*Signer, error) {
	if err := config.CheckClusterSecret(secret); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{secret: []byte(secret), now: now, seen: map[[nonceLen]byte]int64{}, limit: maxRemembered}, nil
}

// Request is what a node header's signature covers besides the term: the request as the holder
// receives it. Path is the escaped path and Query the raw query, exactly as sent on the wire.
type Request struct {
	Method, Path, Query string
	Body                []byte
}

func (s *Signer) mac(req Request, term, ts int64, nonce string) string {
	digest := sha256.Sum256(req.Body)
	m := hmac.New(sha256.New, s.secret)
	for _, field := range []string{req.Method, req.Path, req.Query, hex.EncodeToString(digest[:]),
		strconv.FormatInt(term, 10), strconv.FormatInt(ts, 10), nonce} {
		m.Write([]byte(field))
		m.Write([]byte{'\n'}) // no field holds a newline: the method and the wire path and query cannot
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Sign returns a fresh header value naming term for req: every call draws a new nonce, so two
// identical requests carry two signatures, each accepted once.
func (s *Signer) Sign(req Request, term int64) string {
	var n [nonceLen]byte
	rand.Read(n[:]) // never fails (crypto/rand)
	nonce := hex.EncodeToString(n[:])
	ts := s.now().UnixMilli()
	return "term=" + strconv.FormatInt(term, 10) + ";ts=" + strconv.FormatInt(ts, 10) + ";nonce=" + nonce + ";sig=" + s.mac(req, term, ts, nonce)
}

// errForged is what a node header that is not accepted is answered with; the reason is logged by
// the receiver and sent back in RefusedHeader, not in the text.
var errForged = fx.Errorf(fx.EFORBIDDEN, "The %s header is for traffic between fxdesk web processes; this one does not verify or was already used.", Header)

// errBusy answers a forwarded request when the holder remembers as many nonces as it may.
var errBusy = fx.Errorf(fx.EUNAVAILABLE, "The desk is busy: the lease holder is taking as many forwarded requests as it can check right now; nothing was done — please retry shortly.")

// Refusal is a node header not accepted: Reason is one of the Refusal* values. It answers the
// client errForged (403).
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return "node header refused: " + r.Reason }
func (r *Refusal) Unwrap() error { return errForged }

// header is a parsed node header value.
type header struct {
	term, ts   int64
	nonce, sig string
}

func parseHeader(value string) (header, bool) {
	var h header
	var haveTerm, haveTS bool
	for part := range strings.SplitSeq(value, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		var err error
		switch k {
		case "term":
			h.term, err = strconv.ParseInt(v, 10, 64)
			haveTerm = err == nil
		case "ts":
			h.ts, err = strconv.ParseInt(v, 10, 64)
			haveTS = err == nil
		case "nonce":
			h.nonce = v
		case "sig":
			h.sig = v
		}
	}
	if n, err := hex.DecodeString(h.nonce); err != nil || len(n) != nonceLen {
		return header{}, false
	}
	return h, haveTerm && haveTS && h.sig != ""
}

// Verify checks a header value for req and returns the term it names. A value that verifies is
// accepted once: its nonce is remembered for rememberFor, and the same value is refused after.
// It returns a *Refusal (errForged to the client), or errBusy when no more nonces can be kept.
func (s *Signer) Verify(req Request, value string) (int64, error) {
	h, ok := parseHeader(value)
	if !ok {
		return 0, &Refusal{RefusalMalformed}
	}
	if !hmac.Equal([]byte(h.sig), []byte(s.mac(req, h.term, h.ts, h.nonce))) {
		return 0, &Refusal{RefusalSignature}
	}
	now := s.now()
	if d := now.Sub(time.UnixMilli(h.ts)); d > maxSkew || d < -maxSkew {
		return 0, &Refusal{RefusalStale}
	}
	var n [nonceLen]byte
	hex.Decode(n[:], []byte(h.nonce))
	if err := s.remember(n, now.UnixNano()); err != nil {
		return 0, err
	}
	return h.term, nil
}

// remember records nonce as accepted at now, or refuses it as already seen, or as busy when the
// window already holds as many nonces as a process keeps.
func (s *Signer) remember(nonce [nonceLen]byte, now int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.head < len(s.order) && now-s.seen[s.order[s.head]] > int64(rememberFor) {
		delete(s.seen, s.order[s.head])
		s.head++
	}
	if s.head > len(s.order)/2 { // reclaim the consumed front without reallocating each time
		s.order = s.order[:copy(s.order, s.order[s.head:])]
		s.head = 0
	}
	if _, dup := s.seen[nonce]; dup {
		return &Refusal{RefusalReplayed}
	}
	if len(s.seen) >= s.limit {
		return errBusy
	}
	s.seen[nonce] = now
	s.order = append(s.order, nonce)
	return nil
}

type termKey struct{}

// ForwardedTerm is the lease term a verified node header named, when the request was forwarded
// by another web process.
func ForwardedTerm(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(termKey{}).(int64)
	return t, ok
}

// readBody reads r's whole body, at most limit bytes: a longer one is refused with fx.TooLarge
// before more than limit+1 bytes are held. It is how both ends of a forward read a body, so a
// follower and the holder answer an oversized one alike.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		// Announced too long: refused before a byte of it is read, and the connection closed
		// after the answer rather than drained (as MaxBytesReader does past the limit).
		w.Header().Set("Connection", "close")
		return nil, fx.TooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fx.TooLarge(limit)
	case err != nil:
		return nil, err
	}
	return body, nil
}

// Edge is the first middleware of every request. It removes the node header, so nothing further in
// reads a client's copy, and records the term of one that verifies (ForwardedTerm). Verifying reads
// the body (at most the forwarder's BodyLimit, 413 past it) to check its digest, and hands it on.
// A header that is not accepted — forged, altered, stale, replayed, or sent to a process with
// forwarding off (f nil) — is refused through fail with 403 and RefusedHeader, and logged at warn
// with its reason: a client that can set it is not a web process of this desk.
func Edge(f *Forwarder, log *slog.Logger, fail func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			values := r.Header.Values(Header)
			if len(values) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			r.Header.Del(Header)
			refuse := func(reason string) {
				log.WarnContext(r.Context(), "node header refused", slog.String("reason", reason), slog.String("method", r.Method),
					slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
				w.Header().Set(RefusedHeader, reason)
				fail(w, r, errForged)
			}
			switch {
			case f == nil:
				refuse(RefusalOff)
				return
			case len(values) != 1:
				refuse(RefusalMalformed)
				return
			}
			body, err := readBody(w, r, f.cfg.BodyLimit)
			if err != nil {
				fail(w, r, bodyError(err, f.cfg.BodyLimit))
				return
			}
			term, err := f.cfg.Signer.Verify(Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: body}, values[0])
			var refused *Refusal
			switch {
			case errors.As(err, &refused):
				refuse(refused.Reason)
				return
			case err != nil:
				log.WarnContext(r.Context(), "forwarded request refused: too many node headers to remember", slog.Int("remembered", maxRemembered))
				fail(w, r, err)
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), termKey{}, term)))
		})
	}
}

// bodyError is what a body that could not be read answers: fx.TooLarge as it is, any other failure
// (the client went away, or sent less than it announced) as a bad request.
func bodyError(err error, limit int64) error {
	if fx.ErrorCode(err) == fx.ETOOLARGE {
		return err
	}
	return fx.Errorf(fx.EINVALID, "The request body could not be read (at most %d bytes are accepted).", limit)
}
