package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/api"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/forward"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/lifecycle"
	"fxdesk/internal/logging"
	"fxdesk/internal/metrics"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
	"fxdesk/internal/trading"
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(config.Web, getenv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
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

func serve(ctx context.Context, cfg config.Config, base *slog.Logger, stdout io.Writer) error {
	log := base.With(slog.String("component", "FX"))
	pid := os.Getpid()
	tag := cfg.Hostname + ":" + strconv.Itoa(pid)
	log.InfoContext(ctx, "fxdesk-web starting", slog.Any("config", cfg), slog.Int("pid", pid))

	db, err := store.OpenMigrated(ctx, cfg.MySQLDSN, log)
	switch {
	case err == nil:
	case store.Unreachable(err):
		// The lease still has an answer without MySQL (Redis, or fail-open), so the desk boots.
		log.WarnContext(ctx, "MySQL unreachable at boot; migrations not applied, the engine lease falls back to Redis", slog.Any("err", err))
		if db, err = store.Connect(cfg.MySQLDSN); err != nil {
			return err
		}
	default:
		return err
	}
	defer db.Close()

	// The holder's own work — the lease renew, and the group commit that carries every fill and
	// every risk close with its fence — has connections HTTP cannot take: a flood of trader
	// requests queues for the main pool, never for these (docs/architecture.md, «The front door»).
	holderDB, err := store.ConnectPool(cfg.MySQLDSN, holderPool)
	if err != nil {
		return err
	}
	defer holderDB.Close()

	rdb, err := store.OpenRedis(cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()

	// The listener is bound before the claim so that the lease row can carry the address this
	// process really answers on (port 0 resolves here); nothing is served until HTTP starts below.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	defer ln.Close() // a startup error before Serve; Serve closes it otherwise
	advertise := cfg.Advertise(ln.Addr())

	var dk *desk.Desk
	quotes := &desk.Quotes{}
	// A standby's TookOver arrives on the keeper's goroutine, which must not block: the role and
	// the price view change there and then, and the holder's parts are started by the loop below.
	promoted := make(chan lease.Event, 1)
	m := metrics.New("web")
	keeper := lease.New(holderDB, rdb, lease.Config{
		Key: lease.Key, Names: cfg.RedisNames, TTL: cfg.LeaseTTL, Fence: cfg.LeaseFence,
		Hostname: cfg.Hostname, PID: pid, AdvertiseURL: advertise, Instances: cfg.WebInstances,
		Standby: cfg.Takeover == config.TakeoverStandby,
		Notify: func(ev lease.Event) {
			dk.Notify(ev)
			if ev.Kind == lease.TookOver {
				// Before the lease is trusted: no desk-priced request is served at the old
				// holder's last published prices.
				quotes.StopFollowing()
				promoted <- ev
			}
		},
		ObserveRenew: m.ObserveRenew,
	}, log)
	m.WatchLease(keeper)
	// Every lease-guarded unit of work in this process passes this one gate.
	g, err := gate.New(gate.Config{Lease: keeper, Log: log, Dropped: m.GateDropped})
	if err != nil {
		return err
	}
	inbox := alert.NewInbox(db, log)
	m.WatchAlerts(inbox)
	if dk, err = desk.NewWeb(db, rdb, keeper, g, desk.Config{Process: "web", CronMode: string(cfg.CronMode), Takeover: string(cfg.Takeover), Tag: tag, RedisNames: cfg.RedisNames}, log); err != nil {
		return err
	}
	claimCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	role, err := dk.Claim(claimCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("claim the engine lease: %w", err)
	}

	// Every long-lived part runs in parts, which reads its error: a part that fails stops the
	// process. The stages stop in this order: guarded work, the price stream (and a follower's
	// view of the holder's), the keeper; then the lease is released.
	parts := lifecycle.New(log)
	guarded, venueStage, commitStage := parts.Stage(), parts.Stage(), parts.Stage()
	streamStage, followStage, keeperStage := parts.Stage(), parts.Stage(), parts.Stage()
	released := false
	var venueParts *venueParts // nil without a venue (and until it is built)
	stopAll := func(shutdownCtx context.Context) {
		guarded.Stop()
		// The venue's executor outlives the guarded work that sends through it, and stops
		// before the in-process venue simulator (the stream stage) does.
		venueStage.Stop()
		// The group commit outlives everything that submits to it (HTTP is drained before
		// stopAll), and answers what is still queued before it returns.
		commitStage.Stop()
		streamStage.Stop()
		followStage.Stop()
		keeperStage.Stop()
		// Role, not the boot role: a standby that took over releases like a boot winner.
		if dk.Role() == desk.Holder && !released {
			released = true
			if err := keeper.Release(shutdownCtx); err != nil {
				log.WarnContext(shutdownCtx, "lease release incomplete", slog.Any("err", err))
			}
		}
	}
	defer stopAll(context.Background()) // a startup error after the claim still releases at once

	settings := catalog.NewSettings(db, log)
	if err := settings.Load(ctx); err != nil {
		log.WarnContext(ctx, "settings unreadable at boot; using defaults until they can be read", slog.Any("err", err))
	}
	// The trading service reports committed changes to the holder's risk engine through relay;
	// the quote mirror reads the engine's exposed symbols through it too.
	relay := &riskRelay{}
	if venueParts, err = newVenue(cfg, m, quotes, g, streamStage, log); err != nil {
		return fmt.Errorf("execution venue: %w", err)
	}
	if venueParts != nil {
		venueStage.Go("venue executor", venueParts.exec.Run)
	}
	// One catalog cache for the trading rules and the admin: an admin change applies at once.
	cache := catalog.NewCache(db, 5*time.Second)
	admin, err := catalog.NewAdmin(catalog.AdminConfig{DB: db, Cache: cache, Log: log, OnChange: relay.apply, Venue: venueParts != nil})
	if err != nil {
		return err
	}
	tc := trading.Config{DB: db, CommitDB: holderDB, Prices: quotes, Lease: keeper, Gate: g, Log: log, OnChange: relay.apply, Commits: m,
		Settings: settings, Catalog: cache}
	var venueView api.VenueView
	if venueParts != nil {
		tc.Venue, venueView = venueParts.sender, venueParts
		// The call's own timeout, then the booking's (the group commit's batch bound).
		tc.VenueBound = cfg.Venue.Timeout + 30*time.Second
	}
	tradingSvc, err := trading.New(tc)
	if err != nil {
		return err
	}
	commitStage.Go("group commit", tradingSvc.Run)
	commitStage.Go("settings reload", settings.Run)
	holder := &holderParts{cfg: cfg, db: db, rdb: rdb, keeper: keeper, gate: g, desk: dk, quotes: quotes, settings: settings,
		trading: tradingSvc, relay: relay, inbox: inbox, metrics: m, venue: venueParts, base: base, guarded: guarded, stream: streamStage}
	// The price stream belongs to the holder alone; it is started before HTTP so the first
	// request already sees quotes arriving, and kept even if the lease is lost later.
	if role == desk.Holder {
		if err := holder.start(ctx, risk.SweepBoot); err != nil {
			return err
		}
	} else if cfg.Forward {
		// A follower of a forwarding web tier shows the holder's prices; it never fills at them.
		if err := followPrices(ctx, followStage, cfg, db, rdb, quotes, log, settings.StaleAfter); err != nil {
			return fmt.Errorf("follow the holder's prices: %w", err)
		}
	}
	// The keeper renews on a holder; on a standby follower it re-contends until it wins (and then
	// renews); on any other follower it only waits. Its own stage outlives guarded work during
	// shutdown: guarded work stops first, then the lease is released.
	keeperStage.Go("lease keeper", keeper.Run)

	var fwd *forward.Forwarder
	if cfg.Forward {
		if fwd, err = newForwarder(cfg, db, keeper, log); err != nil {
			return err
		}
	}
	// One fan-out feeds every markets-rail stream; it ends them all before the server drains.
	rail := api.NewRail(api.RailConfig{Quotes: quotes, Digits: api.InstrumentDigits(admin), PerToken: cfg.Limits.StreamsPerToken,
		PerProcess: cfg.Limits.StreamsPerProcess, Metrics: m})
	railStage := parts.Stage()
	railStage.Go("markets rail", rail.Run)
	handler, err := api.NewServer(api.Deps{Log: log, DB: db, Desk: dk, Quotes: quotes, Metrics: m, Alerts: inbox, Jobs: holder.jobs, Risk: holder.riskStats,
		Settings: settings, Trading: tradingSvc, Catalog: admin, Auth: auth.NewResolver(db), Forward: fwd, Venue: venueView, Rail: rail, Limits: cfg.Limits})
	if err != nil {
		return err
	}
	srv := api.NewHTTPServer(ctx, handler, cfg.Limits, log)
	metricsStage := parts.Stage()
	if err := api.ServeMetrics(ctx, metricsStage, cfg.MetricsAddr, m, log); err != nil {
		return err
	}
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- srv.Serve(api.LimitListener(ln, cfg.Limits.MaxConns, m.Refused.WithLabelValues(metrics.RefusedConnections).Inc))
	}()
	log.InfoContext(ctx, "http server listening", slog.String("addr", ln.Addr().String()), slog.String("advertiseUrl", advertise),
		slog.String("role", string(role)), slog.String("takeover", string(cfg.Takeover)))
	printHowToCall(stdout, ln.Addr().String(), role)
	if cfg.Demo {
		venueControl := ""
		if venueParts != nil && venueParts.sim != nil {
			venueControl = venueParts.sim.ControlURL()
		}
		if err := seedDemo(ctx, db, tradingSvc, admin, stdout, baseURL(ln.Addr().String()), venueControl); err != nil {
			log.WarnContext(ctx, "demo data not seeded", slog.Any("err", err))
		}
	}

	var failure error
wait:
	for {
		select {
		case <-ctx.Done():
			log.InfoContext(ctx, "shutting down")
			break wait
		case err := <-srvErr:
			log.ErrorContext(ctx, "http server stopped", slog.Any("err", err))
			failure = fmt.Errorf("http server: %w", err)
			break wait
		case <-parts.Failed():
			failure = parts.Err()
			log.InfoContext(ctx, "shutting down: a part failed")
			break wait
		case ev := <-promoted:
			// A standby took the lease over: the holder's view of prices replaces the followed one,
			// and the risk engine's first sweep is a lease_restored sweep over what the old holder
			// last watched. Failing to start is a failure of the process, which then releases.
			followStage.Stop()
			if err := holder.start(ctx, risk.SweepLeaseRestored); err != nil {
				failure = fmt.Errorf("take over as holder (term %d): %w", ev.Term, err)
				log.ErrorContext(ctx, "standby takeover failed; stopping", slog.Any("err", err))
				break wait
			}
			log.InfoContext(ctx, "serving as holder after a standby takeover", slog.Int64("term", ev.Term), slog.String("advertiseUrl", advertise))
		}
	}

	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	railStage.Stop() // streams end, so the server drains the requests that do
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.WarnContext(shutdownCtx, "http server did not drain in time", slog.Any("err", err))
	}
	metricsStage.Stop()
	stopAll(shutdownCtx)
	if failure == nil {
		failure = parts.Err() // a part that failed while stopping
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
