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

// Config builds a Forwarder. Every field but MaxAge, Transport and Now is required.
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
	// BodyLimit is the longest body read, here and by Edge on the holder (FXDESK_BODY_LIMIT_BYTES):
	// a longer one answers 413 (fx.TooLarge) before more than the limit is held.
	BodyLimit int64
	// Timeout bounds one forward from its first byte of body to the holder's last byte of answer
	// (FXDESK_FORWARD_TIMEOUT): reading the trader's body, both tries and the answer.
	Timeout time.Duration
	// InFlight is how many forwards may be with the holder at once (FXDESK_FORWARD_INFLIGHT); past
	// it a request answers 503 busy, with Retry-After, and nothing is sent.
	InFlight int
	// Transport carries forwards; a pooled transport sized for a busy holder when nil.
	Transport http.RoundTripper
	Log       *slog.Logger
	Now       func() time.Time
}

// Forwarder sends desk-priced requests from a follower to the lease holder.
type Forwarder struct {
	cfg   Config
	proxy *httputil.ReverseProxy
	slots chan struct{} // one per forward with the holder; InFlight of them
	// busyLoggedAt is when a refusal past InFlight was last logged (UnixNano): once a second is
	// enough to tell an operator, and a flood of refusals must not become a flood of lines.
	busyLoggedAt atomic.Int64

	mu     sync.Mutex
	cached lease.Holder
	haveIt bool
	readAt time.Time
}

// New returns a forwarder; it refuses a missing dependency.
func New(cfg Config) (*Forwarder, error) {
	switch {
	case cfg.Signer == nil:
		return nil, errors.New("forward: Signer is required (FXDESK_CLUSTER_SECRET)")
	case cfg.Self == nil || cfg.Holder == nil:
		return nil, errors.New("forward: Self and Holder are required")
	case cfg.Log == nil:
		return nil, errors.New("forward: Log is required")
	case cfg.BodyLimit <= 0 || cfg.Timeout <= 0 || cfg.InFlight <= 0:
		return nil, errors.New("forward: BodyLimit, Timeout and InFlight are required (FXDESK_BODY_LIMIT_BYTES, FXDESK_FORWARD_TIMEOUT, FXDESK_FORWARD_INFLIGHT)")
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Transport == nil {
		cfg.Transport = &http.Transport{
			Proxy: nil, // node to node, never through an environment proxy
			// A holder that does not accept within the dial timeout is not reached: the forwarder
			// looks at the row again rather than spending the trader's Timeout on it.
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConns:        512,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			// The holder may take long on a desk-priced request (a venue-bound order waits for the
			// venue); the forward's own Timeout is the bound, and the transport keeps it too.
			ResponseHeaderTimeout: cfg.Timeout,
		}
	}
	f := &Forwarder{cfg: cfg, slots: make(chan struct{}, cfg.InFlight)}
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
	body   []byte      // the trader's body, whose digest the node header signs
	wrote  atomic.Bool // the whole request reached the holder's socket
	err    error       // set by errorHandler; nil when the holder's answer was passed on
}

type attemptKey struct{}

func (f *Forwarder) rewrite(pr *httputil.ProxyRequest) {
	a := pr.In.Context().Value(attemptKey{}).(*attempt)
	pr.SetURL(a.target)
	pr.SetXForwarded()
	// Signed as it goes on the wire: the path escaped and the query raw, as the holder reads them.
	pr.Out.Header.Set(Header, f.cfg.Signer.Sign(Request{Method: pr.Out.Method, Path: pr.Out.URL.EscapedPath(), Query: pr.Out.URL.RawQuery, Body: a.body}, a.term))
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

// nodeRefused is the holder's refusal of this process's node header (403 with RefusedHeader),
// turned into an error so that the proxy writes nothing: the trader did nothing wrong, and the
// follower logs why at error level.
type nodeRefused struct{ reason string }

func (e *nodeRefused) Error() string {
	return "forward: the holder refused this process's node header: " + e.reason
}

func modifyResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(NotHolderHeader) != "" {
		return errRefusedTerm
	}
	if reason := resp.Header.Get(RefusedHeader); resp.StatusCode == http.StatusForbidden && reason != "" {
		return &nodeRefused{reason: reason}
	}
	if a, ok := resp.Request.Context().Value(attemptKey{}).(*attempt); ok {
		resp.Header.Set(ForwardedHeader, strconv.FormatInt(a.term, 10))
	}
	return nil
}

func errorHandler(_ http.ResponseWriter, r *http.Request, err error) {
	r.Context().Value(attemptKey{}).(*attempt).err = err
}

// ErrNoHolder answers a desk-priced request that no holder took: the desk's pricing text
// (docs/architecture.md, «Who may quote»), 503, which the API's error table answers with
// Retry-After.
var ErrNoHolder error = &fx.Error{Code: fx.EUNAVAILABLE, Message: fx.MsgPricingUnavailable}

// errForwardBusy answers a request past InFlight forwards: nothing was sent.
var errForwardBusy = fx.Errorf(fx.EUNAVAILABLE, "This web process is busy: it is already waiting on the lease holder for as many requests as it allows; nothing was sent — please retry shortly.")

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
// the holder is elsewhere. It returns an error only when nothing was written. The whole forward,
// the trader's body included, ends by Timeout; at most InFlight forwards are with the holder.
func (f *Forwarder) forward(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), f.cfg.Timeout)
	defer cancel()
	body, err := f.readBody(ctx, w, r)
	if err != nil {
		return err
	}
	// Taken once the body is in: a trader trickling a body holds a connection (bounded by the
	// server's deadlines and this Timeout), never a slot other traders need.
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	default:
		if now := f.cfg.Now().UnixNano(); now-f.busyLoggedAt.Load() > int64(time.Second) {
			f.busyLoggedAt.Store(now)
			f.cfg.Log.WarnContext(r.Context(), "forward: as many requests as allowed are with the holder; answering 503 busy",
				slog.Int("inFlight", f.cfg.InFlight))
		}
		return errForwardBusy
	}
	h, err := f.holder(ctx, time.Time{})
	var last *attempt
tries:
	for try := 0; try < 2; try++ {
		if err != nil {
			f.cfg.Log.WarnContext(r.Context(), "forward: the lease row cannot be read; answering 503", slog.Any("err", err))
			return ErrNoHolder
		}
		if h.term == 0 || h.url == nil {
			break // no live holder advertises itself: nobody to ask
		}
		started := f.cfg.Now()
		a := &attempt{target: h.url, term: h.term, body: body}
		last = a
		in := r.WithContext(context.WithValue(ctx, attemptKey{}, a))
		in.Body = io.NopCloser(bytes.NewReader(body))
		in.ContentLength = int64(len(body))
		f.proxy.ServeHTTP(w, in)
		var refused *nodeRefused
		switch {
		case a.err == nil:
			return nil // the holder answered; its answer was passed on
		case r.Context().Err() != nil:
			return r.Context().Err() // the trader went away
		case errors.As(a.err, &refused):
			// The holder does not trust this process: asking again, here or elsewhere, is refused
			// alike. An operator's problem, and nothing was done.
			f.cfg.Log.ErrorContext(r.Context(), "forward refused by the holder: it did not accept this process's node header; answering 503",
				slog.String("reason", refused.reason), slog.String("fix", refusalFix[refused.reason]),
				slog.String("holder", h.url.String()), slog.Int64("term", h.term), slog.String("path", r.URL.Path))
			return ErrNoHolder
		case !errors.Is(a.err, errRefusedTerm) && a.wrote.Load():
			f.cfg.Log.WarnContext(r.Context(), "forward: the connection to the holder failed after the request was sent; its outcome is unknown",
				slog.String("holder", h.url.String()), slog.Int64("term", h.term), slog.String("path", r.URL.Path), slog.Any("err", a.err))
			return ErrOutcomeUnknown
		case ctx.Err() != nil:
			break tries // out of time before the request was sent: no look again
		}
		if try == 1 {
			break
		}
		// Refused or not reached: read the row again and retry once, only if it changed.
		next, nerr := f.holder(ctx, started)
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

// refusalFix is what an operator does about each reason a holder gives for refusing this
// process's node header.
var refusalFix = map[string]string{
	RefusalSignature: "give every web process the same FXDESK_CLUSTER_SECRET",
	RefusalStale:     "this machine's clock and the holder's differ by more than 30s: run NTP on both",
	RefusalReplayed:  "the holder had already accepted this signature: something between the processes resent the request",
	RefusalOff:       "the holder has forwarding off: set FXDESK_WEB_INSTANCES (or FXDESK_FORWARD=on) and FXDESK_CLUSTER_SECRET on every web process",
	RefusalMalformed: "the holder reads another node header format: run one fxdesk version on every web process",
}

// readBody reads the trader's body under the forward's deadline. A body read does not watch a
// context, so when ctx ends first the connection's read deadline is moved to now, which ends the
// read at once; it is only ever moved earlier, never past the server's own ReadTimeout.
func (f *Forwarder) readBody(ctx context.Context, w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	stop := context.AfterFunc(ctx, func() { rc.SetReadDeadline(time.Now()) })
	body, err := readBody(w, r, f.cfg.BodyLimit)
	stop()
	switch {
	case err == nil:
		return body, nil
	// Before the trader's own context: a read cut by the deadline makes net/http cancel it too.
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && fx.ErrorCode(err) != fx.ETOOLARGE:
		f.cfg.Log.InfoContext(r.Context(), "forward: the request body did not arrive in time; nothing was sent",
			slog.Duration("timeout", f.cfg.Timeout), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
		return nil, fx.Errorf(fx.EINVALID, "The request body did not arrive within %s; nothing was done.", f.cfg.Timeout)
	case r.Context().Err() != nil:
		return nil, r.Context().Err() // the trader went away
	}
	return nil, bodyError(err, f.cfg.BodyLimit)
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
