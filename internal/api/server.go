// Package api is the desk's HTTP surface: chi routes, JSON in and out, and one error adapter that
// turns the desk's error vocabulary into {"error":{"code","message"}} with the right status.
// It holds no business rules; handlers ask for exactly the dependencies they use.
package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/auth"
	"fxdesk/internal/candles"
	"fxdesk/internal/catalog"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/forward"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/metrics"
	"fxdesk/internal/pnl"
	"fxdesk/internal/pricesource"
	"fxdesk/internal/reading"
	"fxdesk/internal/relay"
	"fxdesk/internal/risk"
	"fxdesk/internal/schedule"
	"fxdesk/internal/store"
	"fxdesk/internal/trading"
)

// Deps is everything the routes need.
type Deps struct {
	Log  *slog.Logger
	DB   *sql.DB
	Desk *desk.Desk
	// Quotes is the price view: the tick engine on the holder, empty elsewhere.
	Quotes *desk.Quotes
	// Metrics serves /metrics and counts what the handlers see.
	Metrics *metrics.Metrics
	// Trading applies the trading rules. On a process whose gate never admits (fxdesk-cron) it
	// serves from the database and refuses every fill and close.
	Trading *trading.Service
	// Catalog lists and changes instruments and account groups (admin) and serves the tradable
	// instruments (markets).
	Catalog *catalog.Admin
	// Settings reads and writes fx_setting.
	Settings *catalog.Settings
	// Risk reports the risk engine's counters where it runs (the holder), ok false or nil
	// elsewhere; a standby follower that takes the lease over starts reporting then.
	Risk func() (s risk.Stats, ok bool)
	// RiskView says whether the holder's risk engine watches the desk yet (the gate's Watch):
	// /readyz on the holder is ready only then. nil: no risk view to wait for.
	RiskView gate.Watch
	// Jobs reports the scheduler's jobs where a scheduler runs (fxdesk-cron, inline web); nil
	// elsewhere.
	Jobs func() []schedule.JobState
	// Alerts is the alert inbox.
	Alerts *alert.Inbox
	// Auth resolves bearer tokens.
	Auth *auth.Resolver
	// Forward sends desk-priced requests from a follower to the lease holder and admits the ones
	// forwarded here; nil when forwarding is off (a follower then refuses them itself:
	// docs/architecture.md, «Who may quote»).
	Forward *forward.Forwarder
	// Venue is the execution venue on the lease holder (the dealer's view); nil without one.
	Venue VenueView
	// Hedge is the desk's hedge book, read from the database on every process; nil without a
	// venue.
	Hedge HedgeBookView
	// Rail fans quotes out to the markets-rail streams (run by the process); nil where the
	// process serves no prices (fxdesk-cron), whose stream route then answers 503.
	Rail *Rail
	// Webhooks is the admin side of the host platform's webhooks; nil takes one with the
	// default sender (FXDESK_WEBHOOK_* defaults).
	Webhooks *relay.Admin
	// Events hands the outbox to the trader events streams (run by the process); nil where the
	// process serves none (fxdesk-cron), whose stream route then answers 503.
	Events *EventHub
	// Limits bound the front door (docs/architecture.md, «The front door»). Zero values switch a
	// rate limit off and leave the body bound at its default.
	Limits config.Limits
	// AdminWritten, when set, is called after every admin write (any method but GET and HEAD
	// under /api/admin/fx) has been answered, its change committed, with the method and path:
	// the process tells the lease holder to read the audit log for changes of how accounts are
	// marked (catalog.TermsFollower). Without it the holder still reads the log every
	// catalog.TermsPoll.
	AdminWritten func(ctx context.Context, what string)
	// PriceSources is the dealer's side of the price sources: the pins, and the holder's engine
	// once this process holds the lease (pricesource.Pins.SetEngine); nil answers its routes 503.
	PriceSources *pricesource.Pins
	// Candles reads the price history (docs/candles.md); nil takes one over DB.
	Candles *candles.Reader
	// TokenRevoked, when set, is called after a token is revoked over the API, so that every
	// other web process forgets it at once rather than within auth.CacheFor (docs/identity.md).
	TokenRevoked func(ctx context.Context, id int64)

	// marks is the process's shared marking of the open book for the dealer's P&L (pnl.Marks).
	marks *pnl.Marks
	// exposures is the process's shared reading of the book's exposures for the status page.
	exposures *reading.Shared[exposureReading]
}

// NewServer returns the desk's HTTP handler. Every dependency but Risk and Jobs is required:
// the process builds them (cmd), so a missing one is a wiring defect reported at startup.
func NewServer(d Deps) (http.Handler, error) {
	var missing []string
	for name, absent := range map[string]bool{
		"Log": d.Log == nil, "DB": d.DB == nil, "Desk": d.Desk == nil, "Quotes": d.Quotes == nil, "Metrics": d.Metrics == nil,
		"Trading": d.Trading == nil, "Catalog": d.Catalog == nil, "Settings": d.Settings == nil, "Alerts": d.Alerts == nil, "Auth": d.Auth == nil,
	} {
		if absent {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("http server: missing dependencies: %s", strings.Join(missing, ", "))
	}
	if d.Webhooks == nil {
		d.Webhooks = relay.NewAdmin(d.DB, relay.Sender{})
	}
	if d.Candles == nil {
		r, err := candles.NewReader(d.DB)
		if err != nil {
			return nil, fmt.Errorf("http server: %w", err)
		}
		d.Candles = r
	}
	d.marks = pnl.NewMarks(d.DB)
	d.exposures = &reading.Shared[exposureReading]{Fresh: pageExposuresFresh, Stale: pageExposuresStale, Timeout: time.Second}
	return routes(d), nil
}

var statusOf = map[string]int{
	fx.EINVALID:     http.StatusBadRequest,
	fx.EUNAUTH:      http.StatusUnauthorized,
	fx.EFORBIDDEN:   http.StatusForbidden,
	fx.ENOTFOUND:    http.StatusNotFound,
	fx.ECONFLICT:    http.StatusConflict,
	fx.EUNAVAILABLE: http.StatusServiceUnavailable,
	fx.EUNKNOWN:     http.StatusGatewayTimeout,
	fx.EINTERNAL:    http.StatusInternalServerError,
	fx.EKEYREUSED:   http.StatusUnprocessableEntity,
	fx.ELIMITED:     http.StatusTooManyRequests,
	fx.ETOOLARGE:    http.StatusRequestEntityTooLarge,
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// handle adapts a handler that returns its error to http.HandlerFunc: a handler answers its
// success itself and returns any error, which writeError turns into the response.
func handle(log *slog.Logger, fn func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			writeError(r.Context(), log, w, err)
		}
	}
}

// writeError is the one place an error becomes a response. Only internal errors are logged as
// errors; the others are the client's to fix. A request whose client went away is neither: it
// is logged at info as "client gone" and answered with 499 (nginx's "client closed request"),
// which nobody reads.
func writeError(ctx context.Context, log *slog.Logger, w http.ResponseWriter, err error) {
	if clientGone(ctx, err) {
		log.InfoContext(ctx, "client gone", slog.Any("err", err))
		w.WriteHeader(statusClientGone)
		return
	}
	code := fx.ErrorCode(err)
	if code == fx.EINTERNAL && (store.ConnectionLost(err) || store.NodeNotReady(err)) {
		// An outage, not a defect: nothing was written (a lost COMMIT answers EUNKNOWN instead).
		// A Galera node cut off from its cluster refuses every statement until the load
		// balancer moves the desk's connections to one that serves.
		log.WarnContext(ctx, "request failed: database unreachable", slog.Any("err", err))
		err, code = &fx.Error{Code: fx.EUNAVAILABLE, Message: fx.MsgDatabaseUnavailable}, fx.EUNAVAILABLE
	}
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if code == fx.EINTERNAL {
		log.ErrorContext(ctx, "request failed", slog.Any("err", err))
	}
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && w.Header().Get("Retry-After") == "" {
		// Every 503 and 429 means "try again later"; Retry-After says when. Pricing, a holder
		// being replaced and a dependency coming back are all expected within a second or two;
		// a refusal at a limit sets its own.
		w.Header().Set("Retry-After", retryAfter)
	}
	var body errorBody
	body.Error.Code = code
	body.Error.Message = fx.ErrorMessage(err)
	writeJSON(w, status, body)
}

// retryAfter is the Retry-After of every 503, in seconds.
const retryAfter = "1"

// statusClientGone answers a request whose client went away.
const statusClientGone = 499

// resultCanceled is the metrics result of a request whose client went away (resultOf).
const resultCanceled = "canceled"

// clientGone reports whether err is the request's own context ending because its client went
// away: net/http cancels a request's context when its connection closes. Nothing failed.
func clientGone(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled)
}

// resultOf is the result a failed request is counted under (fxdesk_orders_total,
// fxdesk_closes_total): "canceled" when its client went away, apart from internal errors;
// otherwise the error's code.
func resultOf(ctx context.Context, err error) string {
	if clientGone(ctx, err) {
		return resultCanceled
	}
	if code := fx.ErrorCode(err); code != fx.EINTERNAL || !store.ConnectionLost(err) {
		return code
	}
	return fx.EUNAVAILABLE
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
