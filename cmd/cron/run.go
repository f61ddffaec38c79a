package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/api"
	"fxdesk/internal/auth"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/events"
	"fxdesk/internal/gate"
	"fxdesk/internal/lifecycle"
	"fxdesk/internal/logging"
	"fxdesk/internal/metrics"
	"fxdesk/internal/mirror"
	"fxdesk/internal/schedule"
	"fxdesk/internal/session"
	"fxdesk/internal/store"
	"fxdesk/internal/swaps"
	"fxdesk/internal/tick"
	"fxdesk/internal/trading"
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(config.Cron, getenv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	events.SetOutbox(cfg.Outbox)
	log := logging.New(stderr, cfg.LogFormat, cfg.LogLevel, cfg.Secrets()...).With(slog.String("component", "CRON"))
	store.RouteDriverLogs(log)
	var once *oneOff
	if len(args) > 0 {
		if once, err = parseRun(args); err != nil {
			return err
		}
	}

	pid := os.Getpid()
	tag := cfg.Hostname + ":" + strconv.Itoa(pid)
	// The role is decided here, in code, before any store is consulted: no lease keeper exists in
	// this process, so it cannot appear in the lease row whatever the stores say.
	dkCfg := desk.Config{Process: "cron", CronMode: string(cfg.CronMode), Tag: tag, RedisNames: cfg.RedisNames}
	log.InfoContext(ctx, "fxdesk-cron starting; role: cron — never contends for the engine lease",
		slog.Any("config", cfg), slog.Int("pid", pid))

	db, err := store.OpenMigrated(ctx, cfg.MySQLDSN, log)
	if err != nil {
		return err
	}
	defer db.Close()
	rdb, err := store.OpenRedis(cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	dk := desk.NewCron(db, rdb, dkCfg, log)
	inbox := alert.NewInbox(db, log)

	// The follower reads the lease holder's snapshot: the only prices this process ever has.
	calendarFor, err := calendars(ctx, cfg, db)
	if err != nil {
		return err
	}
	follower, err := mirror.NewSnapshotFollower(mirror.SnapshotFollowerConfig{
		Redis: rdb, Names: cfg.RedisNames, Interval: cfg.MirrorInterval, MaxAge: cfg.MirrorMaxAge,
		CalendarFor: calendarFor, Alerts: inbox,
		HasExposure: func(ctx context.Context) (bool, error) { return book.HasExposure(ctx, db) },
	}, log)
	if err != nil {
		return err
	}
	dk.SetMirror(follower.Status)
	m := metrics.New("cron")
	// This process never holds the lease: its gate admits nothing, so the trading service below
	// serves from the database and refuses every fill and close.
	g, err := gate.New(gate.Config{Lease: gate.NoLease, Log: log, Dropped: m.GateDropped})
	if err != nil {
		return err
	}
	quotes := &desk.Quotes{}
	settings := catalog.NewSettings(db, log)
	cache := catalog.NewCache(db, 5*time.Second)
	admin, err := catalog.NewAdmin(catalog.AdminConfig{DB: db, Cache: cache, Log: log})
	if err != nil {
		return err
	}
	tradingSvc, err := trading.New(trading.Config{DB: db, Prices: quotes, Gate: g, Log: log, Settings: settings, Catalog: cache})
	if err != nil {
		return err
	}
	m.WatchMirror(follower.Status)
	m.WatchAlerts(inbox)

	// The venue jobs are the lease holder's alone (execution.Jobs): two desks over one broker
	// account would replay the same fills, so the scheduler has none.
	prices := func() tick.Prices { return follower }
	money := swaps.MoneyJobs(swaps.MoneyJobsConfig{DB: db, Prices: prices, Pins: follower, Alerts: inbox, Metrics: m, By: tag}, log)
	sched, err := schedule.New(log, schedule.NewYork(), money...)
	if err != nil {
		return err
	}
	if once != nil {
		// A one-off run reads the snapshot once first: its prices are the mirror's as of now.
		if err := follower.PollOnce(ctx); err != nil {
			log.WarnContext(ctx, "quote mirror unreadable; conversions wait for it", slog.Any("err", err))
		}
		res, err := sched.RunOnce(ctx, once.job, once.at)
		if err != nil && !errors.Is(err, schedule.ErrDeclined) {
			return err
		}
		switch {
		case err != nil:
			fmt.Fprintf(stdout, "%s as of %s: %v\n", once.job, once.at.Format(time.RFC3339), err)
		case len(res) == 0:
			fmt.Fprintf(stdout, "%s as of %s: nothing to do\n", once.job, once.at.Format(time.RFC3339))
		default:
			fmt.Fprintf(stdout, "%s as of %s: %v\n", once.job, once.at.Format(time.RFC3339), res)
		}
		return nil
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	handler, err := api.NewServer(api.Deps{Log: log, DB: db, Desk: dk, Quotes: quotes, Metrics: m, Alerts: inbox, Jobs: sched.States,
		Trading: tradingSvc, Catalog: admin, Settings: settings, Auth: auth.NewResolver(db), Limits: cfg.Limits})
	if err != nil {
		ln.Close()
		return err
	}
	// Both parts run in one stage whose errors are read: a part that fails stops the process.
	parts := lifecycle.New(log)
	metricsStage := parts.Stage()
	if err := api.ServeMetrics(ctx, metricsStage, cfg.MetricsAddr, m, log); err != nil {
		ln.Close()
		return err
	}
	srv := api.NewHTTPServer(ctx, handler, cfg.Limits, log)
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- srv.Serve(api.LimitListener(ln, cfg.Limits.MaxConns, m.Refused.WithLabelValues(metrics.RefusedConnections).Inc))
	}()
	log.InfoContext(ctx, "http server listening", slog.String("addr", ln.Addr().String()), slog.String("role", string(desk.Cron)))
	fmt.Fprintf(stdout, "fxdesk-cron is up on %s\n", ln.Addr())

	bg := parts.Stage()
	bg.Go("scheduler", sched.Run)
	// Nothing here fills or closes (the gate never admits on cron), but the service's commit
	// part runs wherever the service does, so a refusal is always the gate's.
	bg.Go("group commit", tradingSvc.Run)
	bg.Go("settings reload", settings.Run)
	bg.Go("quote mirror follower", follower.Run)

	var failure error
	select {
	case <-ctx.Done():
		log.InfoContext(ctx, "shutting down")
	case err := <-srvErr:
		log.ErrorContext(ctx, "http server stopped", slog.Any("err", err))
		failure = fmt.Errorf("http server: %w", err)
	case <-parts.Failed():
		failure = parts.Err()
		log.InfoContext(ctx, "shutting down: a part failed")
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	metricsStage.Stop()
	bg.Stop()
	if failure == nil {
		failure = parts.Err()
	}
	if failure != nil {
		log.ErrorContext(shutdownCtx, "fxdesk-cron stopped after a failure", slog.Any("err", failure))
		return failure
	}
	log.InfoContext(shutdownCtx, "fxdesk-cron stopped")
	return nil
}

// oneOff is "run JOB [--at RFC3339]": one job, once, as if the clock read --at.
type oneOff struct {
	job string
	at  time.Time
}

func parseRun(args []string) (*oneOff, error) {
	if args[0] != "run" {
		return nil, fmt.Errorf("unknown command %q (commands: run JOB [--at RFC3339]; none runs the scheduler)", args[0])
	}
	if len(args) < 2 {
		return nil, errors.New("run needs a job name: fxdesk-cron run JOB [--at RFC3339]")
	}
	o := &oneOff{job: args[1], at: time.Now()}
	rest := args[2:]
	for len(rest) > 0 {
		switch {
		case rest[0] == "--at" && len(rest) > 1:
			t, err := time.Parse(time.RFC3339, rest[1])
			if err != nil {
				return nil, fmt.Errorf("--at %q is not an RFC 3339 instant (example: 2026-11-25T22:00:00Z)", rest[1])
			}
			o.at, rest = t, rest[2:]
		case strings.HasPrefix(rest[0], "--at="):
			t, err := time.Parse(time.RFC3339, strings.TrimPrefix(rest[0], "--at="))
			if err != nil {
				return nil, fmt.Errorf("%s is not an RFC 3339 instant (example: 2026-11-25T22:00:00Z)", rest[0])
			}
			o.at, rest = t, rest[1:]
		default:
			return nil, fmt.Errorf("unexpected argument %q: fxdesk-cron run JOB [--at RFC3339]", rest[0])
		}
	}
	return o, nil
}

// calendars returns each symbol's session calendar from the database (all open with
// FXDESK_CALENDAR=always-open): the follower serves the last mid of a closed session.
func calendars(ctx context.Context, cfg config.Config, db *sql.DB) (func(string) *session.Calendar, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	instruments, err := tick.LoadInstruments(ctx, db)
	if err != nil {
		return nil, err
	}
	reg, err := tick.LoadCalendars(ctx, db)
	if err != nil {
		return nil, err
	}
	if cfg.Calendar == "always-open" {
		reg = reg.OpenAlways()
	}
	return tick.CalendarLookup(instruments, reg), nil
}
