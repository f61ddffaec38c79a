package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"fxdesk/internal/config"
	"fxdesk/internal/lifecycle"
	"fxdesk/internal/metrics"
)

// NewHTTPServer bounds what one connection can hold (docs/architecture.md, «The front door»): the
// headers and then the whole request must arrive within their deadlines, an idle keep-alive
// connection is closed, and each answer has the route's write deadline (Deps.Limits); streams
// replace their read and write deadlines with their own. net/http's own complaints (a refused
// accept, a bad request line) go to log, through the process's masking handler, at warn.
func NewHTTPServer(ctx context.Context, handler http.Handler, l config.Limits, log *slog.Logger) *http.Server {
	return &http.Server{
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		Handler:           handler,
		ReadHeaderTimeout: min(10*time.Second, l.ReadTimeout),
		ReadTimeout:       l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		// Requests outlive the signal: SIGTERM starts Shutdown, which lets the requests in
		// flight finish (a request's context still ends when its client goes away).
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}

// ServeMetrics serves /metrics without a token on addr (FXDESK_METRICS_ADDR), for a scraper on
// a trusted network; nothing when addr is empty.
func ServeMetrics(ctx context.Context, stage *lifecycle.Stage, addr string, m *metrics.Metrics, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for metrics on %s (FXDESK_METRICS_ADDR): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	log.InfoContext(ctx, "metrics listening (no token)", slog.String("addr", ln.Addr().String()))
	stage.Go("metrics listener", func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			srv.Close()
		}()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return nil
}
