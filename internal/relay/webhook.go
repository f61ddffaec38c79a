package relay

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/gate"
	"fxdesk/internal/store"
)

// Sender posts one event to one endpoint. Its zero fields take the defaults of
// FXDESK_WEBHOOK_TIMEOUT, _ATTEMPTS, _BACKOFF and _BACKOFF_MAX.
type Sender struct {
	Client     *http.Client // default: one with Timeout and no redirects
	Timeout    time.Duration
	Attempts   int
	Backoff    time.Duration
	BackoffMax time.Duration
	Now        func() time.Time
}

func (s Sender) withDefaults() Sender {
	if s.Timeout <= 0 {
		s.Timeout = 5 * time.Second
	}
	if s.Attempts <= 0 {
		s.Attempts = 8
	}
	if s.Backoff <= 0 {
		s.Backoff = time.Second
	}
	if s.BackoffMax < s.Backoff {
		s.BackoffMax = max(time.Minute, s.Backoff)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Client == nil {
		s.Client = &http.Client{
			Timeout: s.Timeout,
			// A redirect would send the signed event somewhere the admin did not name.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport:     &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: s.Timeout},
		}
	}
	return s
}

// postError is a post the endpoint did not accept: its status (0: no answer) and why.
type postError struct {
	status int
	err    error
}

func (e *postError) Error() string {
	if e.status != 0 {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return e.err.Error()
}

// post sends body once, signed with secret, bounded by the sender's timeout; any 2xx answer
// accepts it.
func (s Sender) post(ctx context.Context, url, secret string, eventID int64, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &postError{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "fxdesk-webhook/1")
	req.Header.Set(HeaderEventID, strconv.FormatInt(eventID, 10))
	now := s.Now()
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(secret, now, body))
	resp, err := s.Client.Do(req)
	if err != nil {
		return &postError{err: err}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &postError{status: resp.StatusCode}
	}
	return nil
}

// backoff is the wait after the attempt-th failure: Backoff doubled per earlier failure, at most
// BackoffMax.
func (s Sender) backoff(attempt int) time.Duration {
	d := s.Backoff
	for i := 1; i < attempt && d < s.BackoffMax; i++ {
		d *= 2
	}
	return min(d, s.BackoffMax)
}

// Body is the JSON an event is posted as: the events page's entry.
func Body(e events.Entry) ([]byte, error) { return json.Marshal(e) }

// WebhooksConfig builds Webhooks. Every field but Failures and Refresh is required.
type WebhooksConfig struct {
	DB    *sql.DB
	Gate  *gate.Gate
	Lease Lease
	// Interval is how long an endpoint's worker waits after a look that found less than a batch.
	Interval time.Duration
	// Refresh is how often the endpoints are read again (default 2s): a new or re-enabled one
	// starts, a disabled one stops.
	Refresh time.Duration
	Sender  Sender
	// Failures counts failed posts by endpoint id (metrics.Metrics.WebhookFailures).
	Failures *prometheus.CounterVec
	Log      *slog.Logger
}

// Webhooks posts the outbox's events to every enabled endpoint on the lease holder.
type Webhooks struct {
	cfg WebhooksConfig
}

// webhookBatch is how many events an endpoint's worker reads at a time; its cursor moves after
// each batch (and at each dead letter), so a relay stopped mid-batch posts at most this many again.
const webhookBatch = 100

// NewWebhooks returns the webhook relay; it refuses a missing dependency.
func NewWebhooks(cfg WebhooksConfig) (*Webhooks, error) {
	if cfg.DB == nil || cfg.Gate == nil || cfg.Lease == nil || cfg.Log == nil || cfg.Interval <= 0 {
		return nil, errors.New("webhook relay: DB, Gate, Lease, Log and Interval are required")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 2 * time.Second
	}
	cfg.Sender = cfg.Sender.withDefaults()
	return &Webhooks{cfg: cfg}, nil
}

// endpoint is what a worker needs of an enabled fx_webhook row.
type endpoint struct {
	id          int64
	url, secret string
}

// Run keeps one worker per enabled endpoint until ctx ends, then waits for them.
func (w *Webhooks) Run(ctx context.Context) error {
	type running struct {
		ep     endpoint
		cancel context.CancelFunc
	}
	workers := map[int64]running{}
	var wg sync.WaitGroup
	defer func() {
		for _, r := range workers {
			r.cancel()
		}
		wg.Wait()
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		t.Reset(w.cfg.Refresh)
		// Only the holder posts; a follower (or a holder past its trust window) starts nothing.
		if w.cfg.Gate.Admit(ctx, gate.WebhookSend, slog.String("op", "read endpoints")) != nil {
			continue
		}
		eps, err := enabledEndpoints(ctx, w.cfg.DB)
		if err != nil {
			if !failing && ctx.Err() == nil {
				w.cfg.Log.WarnContext(ctx, "webhook endpoints unreadable; the running ones go on", slog.Any("err", err))
			}
			failing = true
			continue
		}
		failing = false
		want := map[int64]endpoint{}
		for _, ep := range eps {
			want[ep.id] = ep
		}
		for id, r := range workers {
			if ep, ok := want[id]; !ok || ep != r.ep {
				r.cancel()
				delete(workers, id)
			}
		}
		for id, ep := range want {
			if _, ok := workers[id]; ok {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			workers[id] = running{ep: ep, cancel: cancel}
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.serve(wctx, ep)
			}()
		}
	}
}

func enabledEndpoints(ctx context.Context, db store.Queryer) ([]endpoint, error) {
	return store.QueryAll(ctx, db, "webhook endpoints", func(sc store.Scanner) (endpoint, error) {
		var e endpoint
		err := sc.Scan(&e.id, &e.url, &e.secret)
		return e, err
	}, "SELECT `id`, `url`, `secret` FROM `fx_webhook` WHERE `enabled` = 1 ORDER BY `id`")
}

// serve is one endpoint's worker: it posts the events after the endpoint's cursor, in order,
// until ctx ends.
func (w *Webhooks) serve(ctx context.Context, ep endpoint) {
	log := w.cfg.Log.With(slog.Int64("webhook", ep.id))
	failing := false
	for ctx.Err() == nil {
		n, err := w.pass(ctx, ep, log)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !errors.Is(err, gate.ErrNotHolder) && !failing:
			failing = true
			log.WarnContext(ctx, "webhook relay failed; retrying from the stored position", slog.Any("err", err))
		case err == nil && failing:
			failing = false
		}
		if err == nil && n == webhookBatch {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.cfg.Interval):
		}
	}
}

// pass posts one batch of events after the endpoint's cursor and moves the cursor past what it
// delivered or dead-lettered. It returns how many events it read.
func (w *Webhooks) pass(ctx context.Context, ep endpoint, log *slog.Logger) (int, error) {
	if err := w.cfg.Gate.Admit(ctx, gate.WebhookSend, slog.Int64("webhook", ep.id)); err != nil {
		return 0, err
	}
	name := webhookCursor(ep.id)
	pos, err := readCursor(ctx, w.cfg.DB, name)
	if err != nil {
		return 0, err
	}
	batch, err := events.List(ctx, w.cfg.DB, events.Filter{After: pos, Limit: webhookBatch})
	if err != nil {
		return 0, err
	}
	done := pos
	// The cursor's last move is written even as ctx ends (the process stopping), so a restart
	// posts again only what was not yet accepted.
	defer func() {
		if done == pos {
			return
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		b := &book.Batch{}
		b.Exec(updateCursorSQL, done, w.cfg.Lease.Term(), name)
		if err := fenced(wctx, w.cfg.DB, w.cfg.Lease, w.cfg.Gate, gate.WebhookSend, b, slog.Int64("webhook", ep.id)); err != nil {
			log.WarnContext(wctx, "webhook position not recorded; those events are posted again", slog.Int64("position", done), slog.Any("err", err))
		}
	}()
	for _, e := range batch {
		body, err := Body(e)
		if err != nil {
			return len(batch), err
		}
		attempts, err := w.deliver(ctx, ep, e.ID, body)
		switch {
		case err == nil:
			done = e.ID
			continue
		case ctx.Err() != nil || errors.Is(err, gate.ErrNotHolder):
			return len(batch), err
		}
		// Every attempt failed: the event goes to the dead letters and the cursor past it, in
		// one fenced transaction, so the endpoint's next events are not held back for ever.
		var pe *postError
		status := any(nil)
		if errors.As(err, &pe) && pe.status != 0 {
			status = pe.status
		}
		b := &book.Batch{}
		b.Exec(deadLetterSQL, ep.id, e.ID, attempts, status, truncate(err.Error(), 512), attempts, status, truncate(err.Error(), 512))
		b.Exec(updateCursorSQL, e.ID, w.cfg.Lease.Term(), name)
		if err := fenced(ctx, w.cfg.DB, w.cfg.Lease, w.cfg.Gate, gate.WebhookSend, b, slog.Int64("webhook", ep.id)); err != nil {
			return len(batch), fmt.Errorf("dead-letter event %d: %w", e.ID, err)
		}
		done = e.ID
		log.WarnContext(ctx, "webhook event dead-lettered after every attempt failed", slog.Int64("event", e.ID),
			slog.Int("attempts", attempts), slog.String("lastError", err.Error()))
	}
	return len(batch), nil
}

// deadLetterSQL records an event an endpoint did not accept; one dead-lettered again (posted
// again after a takeover, or replayed and failed since) is opened again.
const deadLetterSQL = "INSERT INTO `fx_webhook_dead` (`webhookId`, `eventId`, `attempts`, `lastStatus`, `lastError`, `failedAt`) VALUES (?, ?, ?, ?, ?, NOW(3)) " +
	"ON DUPLICATE KEY UPDATE `attempts` = ?, `lastStatus` = ?, `lastError` = ?, `failedAt` = NOW(3), `replayedAt` = NULL"

// deliver posts one event until the endpoint accepts it or every attempt failed, waiting the
// backoff between attempts. It returns the attempts made and the last failure.
func (w *Webhooks) deliver(ctx context.Context, ep endpoint, eventID int64, body []byte) (int, error) {
	s := w.cfg.Sender
	for attempt := 1; ; attempt++ {
		if err := w.cfg.Gate.Admit(ctx, gate.WebhookSend, slog.Int64("webhook", ep.id), slog.Int64("event", eventID)); err != nil {
			return attempt - 1, err
		}
		err := s.post(ctx, ep.url, ep.secret, eventID, body)
		if err == nil {
			return attempt, nil
		}
		if ctx.Err() != nil {
			return attempt, ctx.Err()
		}
		if w.cfg.Failures != nil {
			w.cfg.Failures.WithLabelValues(strconv.FormatInt(ep.id, 10)).Inc()
		}
		if attempt >= s.Attempts {
			return attempt, err
		}
		t := time.NewTimer(s.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, ctx.Err()
		case <-t.C:
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
