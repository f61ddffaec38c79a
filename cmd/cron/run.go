package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"fxdesk/internal/api"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/logging"
	"fxdesk/internal/store"
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(config.Cron, getenv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	log := logging.New(stderr, cfg.LogFormat, cfg.LogLevel).With(slog.String("component", "CRON"))
	store.RouteDriverLogs(log)
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q (none runs the scheduler)", args[0])
	}

	pid := os.Getpid()
	tag := cfg.Hostname + ":" + strconv.Itoa(pid)
	// The role is decided here, in code, before any store is consulted: no lease keeper exists in
	// this process, so it cannot appear in the lease row whatever the stores say.
	dkCfg := desk.Config{Process: "cron", CronMode: string(cfg.CronMode), Tag: tag}
	log.InfoContext(ctx, "fxdesk-cron starting; role: cron — never contends for the engine lease",
		slog.Any("config", cfg), slog.Int("pid", pid))

	openCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	db, err := store.Open(openCtx, cfg.MySQLDSN)
	cancel()
	if err != nil {
		return err
	}
	defer db.Close()
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = store.Migrate(mctx, db, log)
	cancel()
	if err != nil {
		return err
	}
	rdb, err := store.OpenRedis(cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	dk := desk.NewCron(db, rdb, dkCfg, log)

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	srv := &http.Server{
		Handler:           api.NewServer(api.Deps{Log: log, DB: db, Desk: dk, Quotes: &desk.Quotes{}}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	log.InfoContext(ctx, "http server listening", slog.String("addr", ln.Addr().String()), slog.String("role", string(desk.Cron)))
	fmt.Fprintf(stdout, "fxdesk-cron is up on %s\n", ln.Addr())

	select {
	case <-ctx.Done():
		log.InfoContext(ctx, "shutting down")
	case err := <-srvErr:
		log.ErrorContext(ctx, "http server stopped", slog.Any("err", err))
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	log.InfoContext(shutdownCtx, "fxdesk-cron stopped")
	return nil
}
