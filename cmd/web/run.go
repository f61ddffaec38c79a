package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/api"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/events"
	"fxdesk/internal/forward"
	"fxdesk/internal/hedge"
	"fxdesk/internal/lease"
	"fxdesk/internal/logging"
	"fxdesk/internal/metrics"
	"fxdesk/internal/pricesource"
	"fxdesk/internal/relay"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
	"fxdesk/internal/trading"

	"github.com/redis/go-redis/v9"
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(config.Web, getenv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	events.SetOutbox(cfg.Outbox)
	base := logging.New(stderr, cfg.LogFormat, cfg.LogLevel, cfg.Secrets()...)
	log := base.With(slog.String("component", "FX"))
	store.RouteDriverLogs(log)

	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "":
		return serve(ctx, cfg, base, stdout)
	case "migrate":
		return migrate(ctx, cfg, log, stdout)
	case "token":
		return tokenCommand(ctx, cfg, log, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q (commands: migrate, token create|list|revoke; none runs the desk)", cmd)
	}
}

func migrate(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer) error {
	db, err := store.OpenMigrated(ctx, cfg.MySQLDSN, log)
	if err != nil {
		return err
	}
	db.Close()
	fmt.Fprintln(stdout, "migrations applied")
	return nil
}

// serve runs the desk until ctx ends or a part fails: stores, listener, the lease claim, the
// desk's services, the role's parts, the front door; then it waits, and shuts down in order.
func serve(ctx context.Context, cfg config.Config, base *slog.Logger, stdout io.Writer) error {
	log := base.With(slog.String("component", "FX"))
	pid := os.Getpid()
	log.InfoContext(ctx, "fxdesk-web starting", slog.Any("config", cfg), slog.Int("pid", pid))

	st, err := openStores(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.close()

	// The listener is bound before the claim so that the lease row can carry the address this
	// process really answers on (port 0 resolves here); nothing is served until HTTP starts.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	defer ln.Close() // a startup error before Serve; Serve closes it otherwise
	advertise := cfg.Advertise(ln.Addr())

	m := metrics.New("web")
	quotes := &desk.Quotes{}
	// The trading service reports committed changes to the holder's risk engine through toRisk,
	// and the gate asks it whether that engine watches the desk yet.
	toRisk := &riskRelay{}
	contention, err := newContender(cfg, st, m, quotes, toRisk, pid, advertise, log)
	if err != nil {
		return err
	}
	inbox := alert.NewInbox(st.db, log)
	m.WatchAlerts(inbox)
	m.WatchRelay(func(ctx context.Context) (relay.Status, error) { return relay.ReadStatus(ctx, st.db) })
	role, err := contention.claim(ctx)
	if err != nil {
		return err
	}

	parts := newWebParts(contention, log)
	defer parts.stop(context.Background()) // a startup error after the claim still releases at once
	svc, err := startServices(ctx, cfg, st, m, quotes, toRisk, contention, inbox, parts, base, log)
	if err != nil {
		return err
	}
	if err := startRole(ctx, role, cfg, st, quotes, svc, parts, log); err != nil {
		return err
	}
	// The keeper renews on a holder; on a standby follower it re-contends until it wins (and then
	// renews); on any other follower it only waits. Its own stage outlives guarded work during
	// shutdown: guarded work stops first, then the lease is released.
	parts.keeper.Go("lease keeper", contention.keeper.Run)

	front, err := openFrontDoor(ctx, cfg, st, m, quotes, contention, inbox, svc, parts, ln, log)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "http server listening", slog.String("addr", ln.Addr().String()), slog.String("advertiseUrl", advertise),
		slog.String("role", string(role)), slog.String("takeover", string(cfg.Takeover)))
	printHowToCall(stdout, ln.Addr().String(), role)
	if cfg.Demo {
		seedDemoDesk(ctx, st, svc, stdout, ln, log)
		printHostSignIn(stdout, cfg.JWT, baseURL(ln.Addr().String()))
	}

	failure := waitForStop(ctx, contention, svc.holder, parts, front, advertise, log)
	return shutdown(front, parts, failure, log)
}

// stores are the process's connections to MySQL and Redis.
type stores struct {
	db *sql.DB
	// holderDB is the holder's own work's pool — the lease renew, and the group commit that
	// carries every fill and every risk close with its fence: connections HTTP cannot take, so
	// a flood of trader requests queues for db, never for these (docs/architecture.md, «The
	// front door»).
	holderDB *sql.DB
	rdb      redis.UniversalClient
}

// openStores opens the stores and migrates MySQL. MySQL unreachable at boot is not fatal: the
// lease still has an answer without it (Redis, or fail-open), so the desk boots.
func openStores(ctx context.Context, cfg config.Config, log *slog.Logger) (*stores, error) {
	db, err := store.OpenMigrated(ctx, cfg.MySQLDSN, log)
	switch {
	case err == nil:
	case store.Unreachable(err):
		log.WarnContext(ctx, "MySQL unreachable at boot; migrations not applied, the engine lease falls back to Redis", slog.Any("err", err))
		if db, err = store.Connect(cfg.MySQLDSN); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	holderDB, err := store.ConnectPool(cfg.MySQLDSN, holderPool)
	if err != nil {
		db.Close()
		return nil, err
	}
	rdb, err := store.OpenRedis(cfg.RedisURL)
	if err != nil {
		holderDB.Close()
		db.Close()
		return nil, err
	}
	return &stores{db: db, holderDB: holderDB, rdb: rdb}, nil
}

// close closes the stores in the reverse order of opening.
func (s *stores) close() {
	s.rdb.Close()
	s.holderDB.Close()
	s.db.Close()
}

// services are what every web process runs, holder or follower: the settings, the trading
// service with its group commit, the venue where one is configured, and the holder's parts,
// built here and started by startRole or a standby's takeover.
type services struct {
	settings *catalog.Settings
	catalog  *catalog.Admin
	trading  *trading.Service
	venue    *venueParts // nil without a venue
	holder   *holderParts
	notices  *termsNotices
}

func startServices(ctx context.Context, cfg config.Config, st *stores, m *metrics.Metrics, quotes *desk.Quotes, relay *riskRelay, contention *contender, inbox *alert.Inbox,
	parts *webParts, base, log *slog.Logger) (*services, error) {
	settings := catalog.NewSettings(st.db, log)
	if err := settings.Load(ctx); err != nil {
		log.WarnContext(ctx, "settings unreadable at boot; using defaults until they can be read", slog.Any("err", err))
	}
	// The quote mirror reads the engine's exposed symbols through relay too.
	venue, err := newVenue(cfg, st.db, m, quotes, contention.gate, inbox, parts.stream, log)
	if err != nil {
		return nil, fmt.Errorf("execution venue: %w", err)
	}
	if venue != nil && venue.exec != nil {
		parts.venue.Go("venue executor", venue.exec.Run)
	}
	if venue != nil {
		if venue.book, err = hedge.NewBook(hedge.Config{DB: st.db, Venue: venue.send, Gate: contention.gate, Fence: contention.keeper, Alerts: inbox,
			Bound: cfg.Venue.Timeout + 30*time.Second, Log: log.With(slog.String("part", "hedge book"))}); err != nil {
			return nil, fmt.Errorf("hedge book: %w", err)
		}
	}
	// One catalog cache for the trading rules and the admin: an admin change applies at once.
	cache := catalog.NewCache(st.db, 5*time.Second)
	admin, err := catalog.NewAdmin(catalog.AdminConfig{DB: st.db, Cache: cache, Log: log, Venue: venue != nil})
	if err != nil {
		return nil, err
	}
	tc := trading.Config{DB: st.db, CommitDB: st.holderDB, Prices: quotes, Lease: contention.keeper, Gate: contention.gate, Log: log, OnChange: relay.apply, Commits: m,
		Settings: settings, Catalog: cache, Alerts: inbox, NBP: m}
	if venue != nil {
		tc.Venue = venue.send
		// The call's own timeout, then the booking's (the group commit's batch bound).
		tc.VenueBound = cfg.Venue.Timeout + 30*time.Second
	}
	svc, err := trading.New(tc)
	if err != nil {
		return nil, err
	}
	parts.commit.Go("group commit", svc.Run)
	parts.commit.Go("settings reload", settings.Run)
	// Admin writes, wherever served, reach the holder's risk engine through the audit log; a
	// notice hastens the holder's read.
	notices := &termsNotices{rdb: st.rdb, channel: cfg.RedisNames.TermsChanged(), log: log}
	holder := &holderParts{cfg: cfg, db: st.db, rdb: st.rdb, keeper: contention.keeper, gate: contention.gate, desk: contention.desk, quotes: quotes, settings: settings,
		trading: svc, catalog: cache, notices: notices, relay: relay, inbox: inbox, metrics: m, venue: venue, base: base, guarded: parts.guarded, stream: parts.stream,
		pins: pricesource.NewPins(st.db, log.With(slog.String("part", "price sources")))}
	return &services{settings: settings, catalog: admin, trading: svc, venue: venue, holder: holder, notices: notices}, nil
}

// startRole starts what the boot role runs before HTTP: the holder's parts (the price stream
// among them, so the first request already sees quotes arriving; kept even if the lease is lost
// later), or, on a follower of a forwarding web tier, its view of the holder's prices.
func startRole(ctx context.Context, role desk.Role, cfg config.Config, st *stores, quotes *desk.Quotes, svc *services, parts *webParts, log *slog.Logger) error {
	if role == desk.Holder {
		return svc.holder.start(ctx, risk.SweepBoot)
	}
	if !cfg.Forward {
		return nil
	}
	// A follower of a forwarding web tier shows the holder's prices; it never fills at them.
	if err := followPrices(ctx, parts.follow, cfg, st.db, st.rdb, quotes, log, svc.settings.StaleAfter); err != nil {
		return fmt.Errorf("follow the holder's prices: %w", err)
	}
	return nil
}

// frontDoor is the API's HTTP server, serving since openFrontDoor returned.
type frontDoor struct {
	srv    *http.Server
	served chan error // Serve's return
}

// openFrontDoor builds the API (with forwarding where the web tier forwards) and starts serving
// it on ln, and the metrics on their own address when one is set.
func openFrontDoor(ctx context.Context, cfg config.Config, st *stores, m *metrics.Metrics, quotes *desk.Quotes, contention *contender, inbox *alert.Inbox,
	svc *services, parts *webParts, ln net.Listener, log *slog.Logger) (*frontDoor, error) {
	var fwd *forward.Forwarder
	if cfg.Forward {
		var err error
		if fwd, err = newForwarder(cfg, st.db, contention.keeper, log); err != nil {
			return nil, err
		}
	}
	var venueView api.VenueView
	var hedgeView api.HedgeBookView
	if svc.venue != nil {
		venueView, hedgeView = svc.venue, svc.venue.book
	}
	// One fan-out feeds every markets-rail stream; it ends them all before the server drains.
	slots := api.NewStreamSlots(cfg.Limits.StreamsPerToken, cfg.Limits.StreamsPerProcess, m)
	rail := api.NewRail(api.RailConfig{Quotes: quotes, Digits: api.InstrumentDigits(svc.catalog), Slots: slots, Metrics: m})
	parts.rail.Go("markets rail", rail.Run)
	// One reader of the events outbox feeds every events stream, on holder and follower alike.
	hub := api.NewEventHub(api.EventHubConfig{DB: st.db, Slots: slots, Poll: cfg.EventsPoll, Buffer: cfg.EventsBuffer, Metrics: m, Log: log})
	parts.rail.Go("events stream", hub.Run)
	// The resolver records the tokens' last uses every few seconds, on holder and follower alike.
	tokens := auth.NewResolver(st.db)
	parts.rail.Go("token last use", func(ctx context.Context) error { return tokens.Run(ctx, log) })
	revoked := &revocations{rdb: st.rdb, channel: cfg.RedisNames.TokensRevoked(), tokens: tokens, log: log}
	parts.rail.Go("token revocations", revoked.listen)
	if cfg.JWT.Enabled() {
		// The host's key set is read now and kept fresh in the background until ctx ends; a
		// host that cannot be reached yet is a warning, not a failure (docs/identity.md).
		host, err := auth.NewJWTVerifier(ctx, cfg.JWT, log)
		if err != nil {
			return nil, fmt.Errorf("host tokens: %w", err)
		}
		tokens.AcceptHostTokens(host)
		log.InfoContext(ctx, "host tokens accepted", slog.String("issuer", cfg.JWT.Issuer), slog.String("audience", cfg.JWT.Audience))
	}
	handler, err := api.NewServer(api.Deps{Log: log, DB: st.db, Desk: contention.desk, Quotes: quotes, Metrics: m, Alerts: inbox, Jobs: svc.holder.jobs, Risk: svc.holder.riskStats, RiskView: svc.holder.relay,
		Settings: svc.settings, Trading: svc.trading, Catalog: svc.catalog, Auth: tokens, Forward: fwd, Venue: venueView, Hedge: hedgeView, Rail: rail, Events: hub, Limits: cfg.Limits,
		Webhooks: relay.NewAdmin(st.db, webhookSender(cfg)), AdminWritten: svc.notices.written, TokenRevoked: revoked.announce,
		PriceSources: svc.holder.pins})
	if err != nil {
		return nil, err
	}
	srv := api.NewHTTPServer(ctx, handler, cfg.Limits, log)
	if err := api.ServeMetrics(ctx, parts.metricsHTTP, cfg.MetricsAddr, m, log); err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(api.LimitListener(ln, cfg.Limits.MaxConns, m.Refused.WithLabelValues(metrics.RefusedConnections).Inc))
	}()
	return &frontDoor{srv: srv, served: served}, nil
}

// seedDemoDesk seeds the demo's traders and positions (FXDESK_DEMO=on); a failure is logged,
// not fatal.
func seedDemoDesk(ctx context.Context, st *stores, svc *services, stdout io.Writer, ln net.Listener, log *slog.Logger) {
	venueControl := ""
	if svc.venue != nil && svc.venue.sim != nil {
		venueControl = svc.venue.sim.ControlURL()
	}
	if svc.venue != nil && svc.venue.fixSim != nil {
		venueControl = svc.venue.fixSim.ControlURL()
	}
	if err := seedDemo(ctx, st.db, svc.trading, svc.catalog, stdout, baseURL(ln.Addr().String()), venueControl, svc.holder.pins.Controls()); err != nil {
		log.WarnContext(ctx, "demo data not seeded", slog.Any("err", err))
	}
}

// waitForStop serves until ctx ends, HTTP stops or a part fails, and starts the holder's parts
// when a standby takes the lease over meanwhile. It returns why the process stops (nil for ctx).
func waitForStop(ctx context.Context, contention *contender, holder *holderParts, parts *webParts, front *frontDoor, advertise string, log *slog.Logger) error {
	for {
		select {
		case <-ctx.Done():
			log.InfoContext(ctx, "shutting down")
			return nil
		case err := <-front.served:
			log.ErrorContext(ctx, "http server stopped", slog.Any("err", err))
			return fmt.Errorf("http server: %w", err)
		case <-parts.group.Failed():
			log.InfoContext(ctx, "shutting down: a part failed")
			return parts.group.Err()
		case ev := <-contention.promoted:
			// A standby took the lease over: the holder's view of prices replaces the followed one,
			// and the risk engine's first sweep is a lease_restored sweep over what the old holder
			// last watched. Failing to start is a failure of the process, which then releases.
			parts.follow.Stop()
			if err := holder.start(ctx, risk.SweepLeaseRestored); err != nil {
				log.ErrorContext(ctx, "standby takeover failed; stopping", slog.Any("err", err))
				return fmt.Errorf("take over as holder (term %d): %w", ev.Term, err)
			}
			log.InfoContext(ctx, "serving as holder after a standby takeover", slog.Int64("term", ev.Term), slog.String("advertiseUrl", advertise))
		}
	}
}

// shutdown stops in order — the markets rail and the events stream (their streams end, so the
// server drains the requests that do), HTTP, the metrics listener, then every stage (webParts.stop) — and returns failure,
// or the failure of a part while stopping.
func shutdown(front *frontDoor, parts *webParts, failure error, log *slog.Logger) error {
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	parts.rail.Stop()
	if err := front.srv.Shutdown(shutdownCtx); err != nil {
		log.WarnContext(shutdownCtx, "http server did not drain in time", slog.Any("err", err))
	}
	parts.metricsHTTP.Stop()
	parts.stop(shutdownCtx)
	if failure == nil {
		failure = parts.group.Err() // a part that failed while stopping
	}
	if failure != nil {
		log.ErrorContext(shutdownCtx, "fxdesk-web stopped after a failure", slog.Any("err", failure))
		return failure
	}
	log.InfoContext(shutdownCtx, "fxdesk-web stopped")
	return nil
}

// newForwarder builds the forwarding of desk-priced requests: this process serves them while it
// holds the lease (won, not lost, not released), and forwards them to the row's holder otherwise.
func newForwarder(cfg config.Config, db *sql.DB, keeper *lease.Keeper, log *slog.Logger) (*forward.Forwarder, error) {
	signer, err := forward.NewSigner(cfg.ClusterSecret, nil)
	if err != nil {
		return nil, err
	}
	return forward.New(forward.Config{
		Signer:     signer,
		Self:       func() (int64, bool) { return keeper.Term(), keeper.Serving() },
		InstanceID: keeper.InstanceID(),
		Holder: func(ctx context.Context) (lease.Holder, bool, error) {
			h, _, ok, err := lease.ReadRow(ctx, db, lease.Key)
			return h, ok, err
		},
		BodyLimit: cfg.Limits.BodyBytes,
		Timeout:   cfg.Limits.ForwardTimeout,
		InFlight:  cfg.Limits.ForwardInFlight,
		Log:       log,
	})
}

func printHowToCall(w io.Writer, addr string, role desk.Role) {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	base := "http://" + net.JoinHostPort(host, port)
	fmt.Fprintf(w, "fxdesk-web is up as %s on %s\n", role, base)
	fmt.Fprintf(w, "  curl %s/healthz\n", base)
	fmt.Fprintf(w, "  curl -H \"Authorization: Bearer $ADMIN\" %s/api/admin/fx/desk   (ADMIN from: fxdesk-web token create --user 1 --admin)\n", base)
}

// holderPool is the size of the holder's own connection pool: the lease keeper's one, and the
// committer's one or two, with room for a takeover's overlap.
const holderPool = 6

// printHostSignIn tells a demo's reader how to sign a trader in as the host platform would,
// when the desk trusts the bundled test identity provider (make run starts one).
func printHostSignIn(w io.Writer, jwt auth.JWTConfig, base string) {
	provider, ok := strings.CutSuffix(jwt.JWKSURL, "/.well-known/jwks.json")
	if !jwt.Enabled() || !ok {
		return
	}
	fmt.Fprintf(w, "\nhost sign-in (the bundled test identity provider at %s; docs/identity.md):\n", provider)
	fmt.Fprintf(w, `  export HOST_TOKEN=$(curl -s --json '{"sub":"%d"}' %s/mint | sed 's/.*"token":"\([^"]*\)".*/\1/')`+"\n", demoTraderUser, provider)
	fmt.Fprintf(w, "  curl -H \"Authorization: Bearer $HOST_TOKEN\" %s/api/fx/accounts\n", base)
}
