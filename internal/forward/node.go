package forward

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/fx"
)

// Header is the node-to-node header a follower adds to a forwarded request:
// "term=T;ts=UNIXMS;sig=HEX", sig being HMAC-SHA256 under FXDESK_CLUSTER_SECRET over the method,
// the path, the lease term the follower read and the timestamp. It authenticates the follower, not
// the trader: the trader's own Authorization travels beside it and is checked again by the holder.
const Header = "Fxdesk-Node"

// NotHolderHeader marks the 503 a process answers to a forwarded request for a term it does not
// hold, so the follower can tell "ask someone else" from the holder's own 503s (a halted symbol, a
// lapsed lease), which it passes through. Its value is the answering process's term, 0 for none.
const NotHolderHeader = "Fxdesk-Not-Holder"

// ForwardedHeader is set on the answer a follower passes back from the holder: the lease term the
// forward named, so a client (and the soak) can tell a forwarded answer from a local one.
const ForwardedHeader = "Fxdesk-Forwarded-Term"

// maxSkew bounds how far a node header's timestamp may lie from the receiver's clock. It limits
// how long a captured header could be replayed (for the same method, path and term, and only with
// the trader's own token) and tolerates ordinary clock skew between machines.
const maxSkew = 30 * time.Second

// Signer signs and verifies node headers with the cluster secret.
type Signer struct {
	secret []byte
	now    func() time.Time
}

// NewSigner returns a signer for secret; now is the clock (time.Now when nil).
func NewSigner(secret string, now func() time.Time) (*Signer, error) {
	if len(secret) < 16 {
		return nil, errors.New("forward: the cluster secret must be at least 16 bytes")
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{secret: []byte(secret), now: now}, nil
}

func (s *Signer) mac(method, path string, term, ts int64) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(method + "\n" + path + "\n" + strconv.FormatInt(term, 10) + "\n" + strconv.FormatInt(ts, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign returns the header value naming term for a request of method on path.
func (s *Signer) Sign(method, path string, term int64) string {
	ts := s.now().UnixMilli()
	return "term=" + strconv.FormatInt(term, 10) + ";ts=" + strconv.FormatInt(ts, 10) + ";sig=" + s.mac(method, path, term, ts)
}

// errForged is what a node header that does not verify is answered with.
var errForged = fx.Errorf(fx.EFORBIDDEN, "The %s header is for traffic between fxdesk web processes; this one does not verify.", Header)

// Verify checks a header value for a request of method on path and returns the term it names.
func (s *Signer) Verify(method, path, value string) (int64, error) {
	var term, ts int64
	var sig string
	var haveTerm, haveTS bool
	for part := range strings.SplitSeq(value, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		var err error
		switch k {
		case "term":
			term, err = strconv.ParseInt(v, 10, 64)
			haveTerm = err == nil
		case "ts":
			ts, err = strconv.ParseInt(v, 10, 64)
			haveTS = err == nil
		case "sig":
			sig = v
		}
	}
	if !haveTerm || !haveTS || sig == "" {
		return 0, errForged
	}
	if !hmac.Equal([]byte(sig), []byte(s.mac(method, path, term, ts))) {
		return 0, errForged
	}
	if d := s.now().Sub(time.UnixMilli(ts)); d > maxSkew || d < -maxSkew {
		return 0, errForged
	}
	return term, nil
}

type termKey struct{}

// ForwardedTerm is the lease term a verified node header named, when the request was forwarded
// by another web process.
func ForwardedTerm(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(termKey{}).(int64)
	return t, ok
}

// Edge is the first middleware of every request. It removes the node header, so nothing further in
// reads a client's copy, and records the term of one that verifies (ForwardedTerm). A request whose
// header does not verify — forged, stale, or sent to a process with no cluster secret (s nil) —
// is refused through fail with 403: a client that can set it is not a web process of this desk.
func Edge(s *Signer, fail func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			values := r.Header.Values(Header)
			if len(values) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			r.Header.Del(Header)
			if s == nil || len(values) != 1 {
				fail(w, r, errForged)
				return
			}
			term, err := s.Verify(r.Method, r.URL.Path, values[0])
			if err != nil {
				fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), termKey{}, term)))
		})
	}
}
