package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/lease"
)

// Config builds a Forwarder. Signer, Self and Holder are required.
type Config struct {
	Signer *Signer
	// Self reports whether this process serves desk-priced work itself (it won the lease and has
	// neither lost nor released it) and under which term.
	Self func() (term int64, serving bool)
	// InstanceID is this process's lease identity: a row naming it is never forwarded to.
	InstanceID string
	// Holder reads the lease row (lease.ReadRow); ok is false when there is no row.
	Holder func(ctx context.Context) (h lease.Holder, ok bool, err error)
	// MaxAge is how long one read of the row serves later forwards (default 1 s). A forward that
	// fails reads it again at once, so a new holder is found on the first refused request.
	MaxAge time.Duration
	// Transport carries forwards; a pooled transport sized for a busy holder when nil.
	Transport http.RoundTripper
	Log       *slog.Logger
	Now       func() time.Time
}

// Forwarder sends desk-priced requests from a follower to the lease holder.
type Forwarder struct {
	cfg   Config
	proxy *httputil.ReverseProxy

	mu     sync.Mutex
	cached lease.Holder
	haveIt bool
	readAt time.Time
}

// maxBody bounds a forwarded body: it is held in memory so that the one retry can resend it.
// Every desk-priced body is a small JSON object.
const maxBody = 1 << 20

// New returns a forwarder; it refuses a missing dependency.
func New(cfg Config) (*Forwarder, error) {
	switch {
	case cfg.Signer == nil:
		return nil, errors.New("forward: Signer is required (FXDESK_CLUSTER_SECRET)")
	case cfg.Self == nil || cfg.Holder == nil:
		return nil, errors.New("forward: Self and Holder are required")
	case cfg.Log == nil:
		return nil, errors.New("forward: Log is required")
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Transport == nil {
		cfg.Transport = &http.Transport{
			Proxy:                 nil, // node to node, never through an environment proxy
			DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          512,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 15 * time.Second,
		}
	}
	f := &Forwarder{cfg: cfg}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:        f.rewrite,
		ModifyResponse: modifyResponse,
		ErrorHandler:   errorHandler,
		Transport:      cfg.Transport,
		ErrorLog:       nil,
	}
	return f, nil
}

// attempt is one forward of one request, carried to the proxy's hooks in the request context.
type attempt struct {
	target *url.URL
	term   int64
	wrote  atomic.Bool // the whole request reached the holder's socket
	err    error       // set by errorHandler; nil when the holder's answer was passed on
}

type attemptKey struct{}

func (f *Forwarder) rewrite(pr *httputil.ProxyRequest) {
	a := pr.In.Context().Value(attemptKey{}).(*attempt)
	pr.SetURL(a.target)
	pr.SetXForwarded()
	pr.Out.Header.Set(Header, f.cfg.Signer.Sign(pr.Out.Method, pr.Out.URL.Path, a.term))
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			a.wrote.Store(true)
		}
	}}
	pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), trace))
}

// errRefusedTerm is a holder's (or a non-holder's) "not my term" answer, turned into an error
// so that the proxy writes nothing and the forwarder can look again.
var errRefusedTerm = errors.New("forward: the process at the advertised URL does not hold that term")

func modifyResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(NotHolderHeader) != "" {
		return errRefusedTerm
	}
	if a, ok := resp.Request.Context().Value(attemptKey{}).(*attempt); ok {
		resp.Header.Set(ForwardedHeader, strconv.FormatInt(a.term, 10))
	}
	return nil
}

func errorHandler(_ http.ResponseWriter, r *http.Request, err error) {
	r.Context().Value(attemptKey{}).(*attempt).err = err
}

// ErrNoHolder answers a desk-priced request that no holder took: DESIGN §4's pricing text, 503,
// which the API's error table answers with Retry-After.
var ErrNoHolder error = &fx.Error{Code: fx.EUNAVAILABLE, Message: fx.MsgPricingUnavailable}

// ErrOutcomeUnknown answers a forward whose connection died after the request was sent: the
// holder may have acted on it. Retrying with the same requestNonce is safe.
var ErrOutcomeUnknown error = &fx.Error{Code: fx.EUNKNOWN, Message: fx.MsgOutcomeUnknown}

// Desk wraps the handler of a desk-priced route. On the process that serves the desk the request
// is handled here; a forwarded request for a term this process does not serve is refused (503,
// NotHolderHeader) and never forwarded again, so no request travels more than one hop; anything
// else is forwarded to the holder the lease row advertises. fail writes every error this answers.
func (f *Forwarder) Desk(fail func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			term, serving := f.cfg.Self()
			if fwdTerm, forwarded := ForwardedTerm(r.Context()); forwarded {
				if serving && fwdTerm == term {
					next.ServeHTTP(w, r)
					return
				}
				if !serving {
					term = 0
				}
				f.cfg.Log.InfoContext(r.Context(), "forwarded request refused: this process does not serve that lease term",
					slog.Int64("term", fwdTerm), slog.Int64("ourTerm", term), slog.String("path", r.URL.Path))
				w.Header().Set(NotHolderHeader, strconv.FormatInt(term, 10))
				fail(w, r, ErrNoHolder)
				return
			}
			if serving {
				next.ServeHTTP(w, r)
				return
			}
			if err := f.forward(w, r); err != nil {
				fail(w, r, err)
			}
		})
	}
}

// forward sends r to the holder, looking once more and retrying once when the first answer says
// the holder is elsewhere. It returns an error only when nothing was written.
func (f *Forwarder) forward(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fx.Errorf(fx.EINVALID, "The request body could not be read (at most %d bytes).", maxBody)
	}
	h, err := f.holder(r.Context(), time.Time{})
	var last *attempt
	for try := 0; try < 2; try++ {
		if err != nil {
			f.cfg.Log.WarnContext(r.Context(), "forward: the lease row cannot be read; answering 503", slog.Any("err", err))
			return ErrNoHolder
		}
		if h.term == 0 || h.url == nil {
			break // no live holder advertises itself: nobody to ask
		}
		started := f.cfg.Now()
		a := &attempt{target: h.url, term: h.term}
		last = a
		in := r.WithContext(context.WithValue(r.Context(), attemptKey{}, a))
		in.Body = io.NopCloser(bytes.NewReader(body))
		in.ContentLength = int64(len(body))
		f.proxy.ServeHTTP(w, in)
		switch {
		case a.err == nil:
			return nil // the holder answered; its answer was passed on
		case r.Context().Err() != nil:
			return r.Context().Err() // the trader went away
		case !errors.Is(a.err, errRefusedTerm) && a.wrote.Load():
			f.cfg.Log.WarnContext(r.Context(), "forward: the connection to the holder failed after the request was sent; its outcome is unknown",
				slog.String("holder", h.url.String()), slog.Int64("term", h.term), slog.String("path", r.URL.Path), slog.Any("err", a.err))
			return ErrOutcomeUnknown
		}
		if try == 1 {
			break
		}
		// Refused or not reached: read the row again and retry once, only if it changed.
		next, nerr := f.holder(r.Context(), started)
		if nerr == nil && next.term == h.term && sameURL(next.url, h.url) {
			break
		}
		h, err = next, nerr
	}
	attrs := []slog.Attr{slog.String("path", r.URL.Path)}
	if last != nil {
		attrs = append(attrs, slog.String("holder", last.target.String()), slog.Int64("term", last.term), slog.Any("err", last.err))
	}
	f.cfg.Log.LogAttrs(r.Context(), slog.LevelWarn, "forward: no holder took the request; answering 503", attrs...)
	return ErrNoHolder
}

func sameURL(a, b *url.URL) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && a.String() == b.String())
}

// target is a holder worth forwarding to: live, advertised, and not this process.
type target struct {
	url  *url.URL
	term int64
}

// holder returns the holder to forward to. A read newer than MaxAge is reused; a read made before
// notBefore is not (a failed forward passes its start, so concurrent failures share one re-read).
func (f *Forwarder) holder(ctx context.Context, notBefore time.Time) (target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Now()
	if !f.haveIt || now.Sub(f.readAt) > f.cfg.MaxAge || f.readAt.Before(notBefore) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, ok, err := f.cfg.Holder(rctx)
		cancel()
		if err != nil {
			return target{}, fmt.Errorf("read the lease row: %w", err)
		}
		if !ok {
			h = lease.Holder{}
		}
		f.cached, f.haveIt, f.readAt = h, true, now
	}
	h := f.cached
	if !h.Live || h.AdvertiseURL == "" || h.InstanceID == f.cfg.InstanceID {
		return target{}, nil
	}
	u, err := url.Parse(h.AdvertiseURL)
	if err != nil || u.Host == "" {
		return target{}, nil
	}
	return target{url: u, term: h.Term}, nil
}

// Signer is the forwarder's signer; nil on a nil forwarder (forwarding off), which makes Edge
// refuse every node header.
func (f *Forwarder) Signer() *Signer {
	if f == nil {
		return nil
	}
	return f.cfg.Signer
}
