// Command idp (fxdesk-idp) runs the bundled test identity provider alone, for tests and demos of
// host-issued tokens (docs/identity.md): a key set at http://ADDR/.well-known/jwks.json and, for
// loopback callers, POST /mint and POST /rotate (internal/idp/doc.go), until interrupted. It
// must never stand in for a production identity provider: it mints a token for any user a
// loopback caller names.
//
//	go run ./cmd/idp -addr 127.0.0.1:4010 -issuer https://host.example -audience fxdesk
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"fxdesk/internal/idp"
	"fxdesk/internal/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fxdesk-idp:", err)
		os.Exit(1)
	}
}

// run parses args, starts the provider, prints where its key set is on stdout and serves until
// ctx ends. The address may come from FXDESK_IDP_ADDR, and the log format from LOG_FORMAT (text
// or json), as the desk's own processes read it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fxdesk-idp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", cmp.Or(getenv("FXDESK_IDP_ADDR"), "127.0.0.1:4010"), "listen address (default $FXDESK_IDP_ADDR or 127.0.0.1:4010; mint and rotate answer loopback callers only)")
	issuer := fs.String("issuer", "fxdesk-idp", "the iss of minted tokens (the desk's FXDESK_JWT_ISSUER)")
	audience := fs.String("audience", "fxdesk", "the aud of minted tokens (the desk's FXDESK_JWT_AUDIENCE)")
	alg := fs.String("alg", idp.ES256, "the first signing key's algorithm: ES256, RS256 or EdDSA")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	format := cmp.Or(getenv("LOG_FORMAT"), "text")
	if format != "text" && format != "json" {
		return fmt.Errorf("LOG_FORMAT=%q must be text or json", format)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := logging.New(stderr, format, level).With(slog.String("component", "IDP"))

	p, err := idp.New(*issuer, *audience)
	if err != nil {
		return err
	}
	if *alg != idp.ES256 {
		if _, err := p.Rotate(*alg, true); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.WarnContext(ctx, "the key set is served beyond this machine; mint and rotate still answer loopback callers only", slog.String("addr", ln.Addr().String()))
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	base := "http://" + ln.Addr().String()
	log.InfoContext(ctx, "http server listening", slog.String("addr", ln.Addr().String()), slog.String("jwks", base+idp.JWKSPath),
		slog.String("issuer", *issuer), slog.String("audience", *audience), slog.String("kid", p.KeyID()))
	fmt.Fprintln(stdout, idp.ListeningLine(base, *issuer, *audience))

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}
